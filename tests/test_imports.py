"""attnlib's modules import one another without a circle, type hints included."""

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1] / "attnlib"


def _module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _imports(path: Path, known: set[str]) -> set[str]:
    """The attnlib modules a file imports anywhere in it, under TYPE_CHECKING or in a function."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names = [node.module] + [f"{node.module}.{alias.name}" for alias in node.names]
        elif isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        else:
            continue
        found |= {name for name in names if name in known}
    return found


def _graph() -> dict[str, set[str]]:
    files = {_module_name(path): path for path in PACKAGE.rglob("*.py")}
    known = set(files)
    # a package's __init__ runs before its modules: importing attnlib.x imports attnlib too,
    # which is not an edge of the circle this test looks for
    return {name: _imports(path, known) - {"attnlib"} for name, path in files.items()}


def _cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """One circle of imports as a list of modules, first = last, or None."""
    state: dict[str, str] = {}
    stack: list[str] = []

    def visit(node: str) -> list[str] | None:
        state[node] = "open"
        stack.append(node)
        for target in sorted(graph[node]):
            if state.get(target) == "open":
                return stack[stack.index(target) :] + [target]
            if target not in state and (found := visit(target)):
                return found
        state[node] = "done"
        stack.pop()
        return None

    for node in sorted(graph):
        if node not in state and (found := visit(node)):
            return found
    return None


def test_the_graph_sees_the_imports_that_matter():
    graph = _graph()
    assert {"attnlib.kv_cache", "attnlib.positions", "attnlib.flash"} <= graph["attnlib.attention"]
    assert "attnlib.kv_cache" in graph["attnlib.decoder"]
    assert "attnlib.decoder" in graph["attnlib.generation"]


def test_no_module_imports_itself_back():
    assert _cycle(_graph()) is None


def test_a_circle_is_found_when_there_is_one():
    assert _cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
