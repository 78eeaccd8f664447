"""The README and CONTRIBUTING.md say what is true of the code.

The README's chapter table against the chapters themselves (one row each, the explorers each one
embeds, the GPU chapters of the Makefile, the running time each states at its top); the make
targets both guides name; CONTRIBUTING.md's module map against the files; what the guides say the
GitHub workflow runs; and no talk of one particular way of borrowing a GPU.
"""

from __future__ import annotations

import re
from functools import cache
from pathlib import Path

import nbformat
import pytest
import yaml

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
CONTRIBUTING = ROOT / "CONTRIBUTING.md"
MAKEFILE = ROOT / "Makefile"
WORKFLOW = ROOT / ".github" / "workflows" / "ci.yml"
CHAPTER_13 = ROOT / "notebooks" / "13_imdb_encoder.ipynb"
ROW = re.compile(r"^\| (\d\d) \|")
NONE = "—"
NUMBER_WORDS = {
    "a": 1, "an": 1, "one": 1, "two": 2, "three": 3, "four": 4, "five": 5,
    "six": 6, "seven": 7, "eight": 8, "nine": 9, "ten": 10, "eleven": 11, "twelve": 12,
    "thirteen": 13, "fourteen": 14, "fifteen": 15, "sixteen": 16, "seventeen": 17,
}  # fmt: skip
FRACTIONS = {"¼": 0.25, "½": 0.5, "¾": 0.75}
QUANTITY = r"half an?|an?|[a-z]+|\d+(?:\.\d+)?[¼½¾]?|[¼½¾]"
# "about 2 minutes", "well under a minute", "about a minute and a half", "under 10 s", "2½ min"
TIME = re.compile(
    rf"\b(about|well under|under)\s+({QUANTITY})\s+(seconds?|minutes?|s|min)\b(\s+and a half)?"
)
# Talk of one lending arrangement, which no guide, script or chapter text should hold.
LENDING = re.compile(
    r"\blent\b|\bloans?\b|device (call|time|tool)|idle machine|per call|\bsessions?\b", re.I
)


def text(path: Path) -> str:
    return path.read_text(encoding="utf-8")


def seconds(quantity: str, unit: str, and_a_half: str | None) -> float:
    """The number of seconds "<quantity> <unit>[ and a half]" stands for."""
    if quantity.startswith("half"):
        value = 0.5
    elif quantity in NUMBER_WORDS:
        value = float(NUMBER_WORDS[quantity])
    elif quantity[-1] in FRACTIONS:
        value = float(quantity[:-1] or 0) + FRACTIONS[quantity[-1]]
    else:
        value = float(quantity)  # raises on a word it does not know
    if and_a_half:
        value += 0.5
    return value * (60 if unit.startswith("m") else 1)


def parse_time(phrase: str) -> tuple[str, float] | None:
    """("about" or "under", seconds) for the first time phrase in ``phrase``; None if none."""
    match = TIME.search(phrase)
    if match is None:
        return None
    kind, quantity, unit, and_a_half = match.groups()
    return ("under" if kind.endswith("under") else "about"), seconds(quantity, unit, and_a_half)


@cache
def toc_chapters() -> tuple[str, ...]:
    """The chapters notebooks/_toc.yml lists, as notebook paths from the repository root.

    A page written in Markdown (the appendix) is not a chapter: it has no row in the README's
    chapter table. Every other entry is a chapter, whose notebook must exist.
    """
    toc = yaml.safe_load(text(ROOT / "notebooks" / "_toc.yml"))
    files = [chapter["file"] for part in toc["parts"] for chapter in part["chapters"]]
    return tuple(f"{name}.ipynb" for name in files if not (ROOT / f"{name}.md").is_file())


@cache
def table() -> tuple[list[str], list[list[str]]]:
    """The README's chapter table: its column names and its chapter rows, cell by cell."""
    lines = text(README).splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("| # | chapter |"))
    header = [cell.strip() for cell in lines[start].strip("|").split("|")]
    rows = []
    for line in lines[start + 2 :]:
        if not line.startswith("|"):
            break
        if ROW.match(line):
            rows.append([cell.strip() for cell in line.strip().strip("|").split("|")])
    assert all(len(row) == len(header) for row in rows), "a row of the chapter table is ragged"
    return header, rows


def column(name: str) -> dict[str, str]:
    """Chapter number ("01") -> the cell of the column whose name starts with ``name``."""
    header, rows = table()
    index = next(i for i, title in enumerate(header) if title.startswith(name))
    return {row[0]: row[index] for row in rows}


def number(chapter: str) -> str:
    return Path(chapter).name[:2]


@cache
def notebook(chapter: str) -> nbformat.NotebookNode:
    return nbformat.read(ROOT / chapter, as_version=4)


def embedded_explorers(chapter: str) -> set[str]:
    """The explorers a chapter's code cells call (``attnlib``'s ``*_live`` functions)."""
    code = "\n".join(c.source for c in notebook(chapter).cells if c.cell_type == "code")
    return set(re.findall(r"\b([a-z][a-z0-9_]*_live)\(", code))


def stated_time(chapter: str) -> tuple[str, float] | None:
    """The running time a chapter states at its top ("**Running time:** about 2 minutes ...")."""
    for cell in notebook(chapter).cells[:4]:
        if cell.cell_type != "markdown":
            continue
        for paragraph in cell.source.split("\n\n"):
            if re.match(r"\*\*(Running time|How long it runs)", paragraph):
                return parse_time(paragraph.replace("\n", " "))
    return None


def makefile_gpu_chapters() -> set[str]:
    """The notebooks the Makefile's GPU_NOTEBOOKS names (its `$(wildcard ...)` patterns)."""
    found = re.search(r"^GPU_NOTEBOOKS := \$\(wildcard ([^)]+)\)$", text(MAKEFILE), re.M)
    assert found, "the Makefile no longer defines GPU_NOTEBOOKS as a $(wildcard ...)"
    return {
        str(path.relative_to(ROOT)) for pattern in found[1].split() for path in ROOT.glob(pattern)
    }


# --- the README -------------------------------------------------------------------------------


def test_the_readme_stays_short():
    lines = len(text(README).splitlines())
    assert lines <= 200, f"README.md has {lines} lines; the workshop belongs in CONTRIBUTING.md"


def test_every_chapter_of_the_toc_has_exactly_one_row_linking_to_it():
    _, rows = table()
    numbers = [row[0] for row in rows]
    assert sorted(numbers) == sorted(number(chapter) for chapter in toc_chapters())
    assert len(numbers) == len(set(numbers)), "a chapter has two rows"
    for chapter in toc_chapters():
        row = next(row for row in rows if row[0] == number(chapter))
        assert f"]({chapter})" in row[1], f"the row of chapter {number(chapter)} links elsewhere"


@pytest.mark.parametrize("chapter", toc_chapters(), ids=number)
def test_the_explorer_column_names_what_the_chapter_embeds(chapter):
    cell = column("explorer")[number(chapter)]
    embedded = embedded_explorers(chapter)
    named = set(re.findall(r"`([a-z][a-z0-9_]*_live)`", cell))
    assert named == embedded, f"chapter {number(chapter)} embeds {sorted(embedded) or NONE}"
    if not embedded:
        assert cell == NONE


def test_the_count_of_chapters_with_an_explorer():
    with_one = sum(bool(embedded_explorers(chapter)) for chapter in toc_chapters())
    if "Every chapter also has an explorer" in text(README):
        assert with_one == len(toc_chapters()), "the README says every chapter has an explorer"
        return
    found = re.search(r"\b([A-Za-z]+|\d+) chapters also have an explorer", text(README))
    assert found, "the README no longer says how many chapters have an explorer"
    said = found[1].lower()
    count = NUMBER_WORDS[said] if said in NUMBER_WORDS else int(said)
    assert count == with_one


def test_the_gpu_column_is_the_makefiles_gpu_notebooks():
    gpu = column("GPU")
    assert makefile_gpu_chapters(), "GPU_NOTEBOOKS matches no notebook"
    for chapter in toc_chapters():
        wants_gpu = chapter in makefile_gpu_chapters()
        assert (gpu[number(chapter)] != NONE) == wants_gpu, f"chapter {number(chapter)}"


@pytest.mark.parametrize("chapter", toc_chapters(), ids=number)
def test_the_time_column_is_what_the_chapter_states(chapter):
    cell = column("time")[number(chapter)]
    listed = parse_time(cell)
    assert listed is not None, f"{cell!r} is not a time like 'about 2 min' or 'under 10 s'"
    stated = stated_time(chapter)
    if stated is None:  # a chapter that states no time: the README's stands alone
        return
    assert listed[0] == stated[0] and abs(listed[1] - stated[1]) <= 0.1 * stated[1], (
        f"chapter {number(chapter)} says {stated[0]} {stated[1]:g} s, the README {cell!r}"
    )


@pytest.mark.parametrize(
    "phrase, expected",
    [
        ("about 2.5 minutes on 2 CPU cores", ("about", 150)),
        ("about 2½ min", ("about", 150)),
        ("well under a minute on 2 CPU cores", ("under", 60)),
        ("about a minute and a half on 2 CPU cores", ("about", 90)),
        ("about half a minute", ("about", 30)),
        ("in about three minutes on two CPU cores", ("about", 180)),
        ("under 10 s", ("under", 10)),
        ("it took 144 s", None),
    ],
)
def test_times_are_read_as_written(phrase, expected):
    assert parse_time(phrase) == expected


# --- both guides ------------------------------------------------------------------------------


def test_every_make_target_the_guides_name_exists():
    targets = set(re.findall(r"^([A-Za-z][\w-]*):", text(MAKEFILE), re.M))
    for guide in (README, CONTRIBUTING):
        named = set(re.findall(r"(?:`|^)make ([a-z][\w-]*)", text(guide), re.M))
        assert named, f"{guide.name} names no make target"
        assert named <= targets, f"{guide.name} names {sorted(named - targets)}"


def test_the_module_map_names_every_file():
    guide = text(CONTRIBUTING)
    layout = guide[guide.index("## Layout") :]
    layout = layout[: layout.index("\n## ", 1)]
    files = [
        *(p for p in (ROOT / "attnlib").rglob("*") if p.is_file() and "__pycache__" not in p.parts),
        *(p for p in (ROOT / "scripts").iterdir() if p.is_file()),
        *(ROOT / "benchmarks").glob("*.py"),
        ROOT / "tests" / "helpers.py",
        ROOT / "tests" / "conftest.py",
        ROOT / "notebooks" / "conftest.py",
        ROOT / "notebooks" / "nbval_sanitize.cfg",
    ]
    missing = sorted(str(p.relative_to(ROOT)) for p in files if p.name not in layout)
    assert not missing, f"CONTRIBUTING.md's layout does not mention {missing}"


def test_no_text_speaks_of_one_way_of_borrowing_a_gpu():
    sources = {
        "README.md": text(README),
        "CONTRIBUTING.md": text(CONTRIBUTING),
        "scripts/gpu_run.sh": text(ROOT / "scripts" / "gpu_run.sh"),
        "chapter 13's text": "\n".join(
            c.source for c in notebook(str(CHAPTER_13.relative_to(ROOT))).cells
            if c.cell_type == "markdown"
        ),
    }  # fmt: skip
    for name, source in sources.items():
        found = [m.group(0) for m in LENDING.finditer(source)]
        assert not found, f"{name} speaks of {found}"


# --- what CONTRIBUTING.md says the workflow runs ------------------------------------------------


def workflow_jobs() -> dict:
    return yaml.safe_load(text(WORKFLOW))["jobs"]


def runs(job: dict) -> str:
    return "\n".join(step.get("run", "") for step in job["steps"])


def test_the_browser_tests_get_the_browser_the_workflow_installs():
    test_job = runs(workflow_jobs()["test"])
    assert "playwright install --with-deps chromium" in test_job
    assert re.search(r'echo "CHROMIUM=.*>> "\$GITHUB_ENV"', test_job)
    assert 'os.environ.get("CHROMIUM")' in text(ROOT / "tests" / "browser" / "conftest.py")
    browser_rule = re.search(r"^browser:.*?(?=^\S)", text(MAKEFILE), re.M | re.S)
    assert browser_rule and "CHROMIUM" in browser_rule[0], (
        "the Makefile's `browser` rule looks only at /usr/bin/chromium: let CHROMIUM name it"
    )


def test_the_workflow_checks_macos_and_windows_and_lints_itself():
    jobs = workflow_jobs()
    other = jobs["other-systems"]
    systems = {entry["os"]: entry["chapter"] for entry in other["strategy"]["matrix"]["include"]}
    assert {"macos-latest", "windows-latest"} <= set(systems)
    for chapter in systems.values():
        assert chapter in toc_chapters()
    steps = runs(other)
    assert "python -m pytest tests" in steps and "--nbval-lax" in steps
    assert "make" not in steps.split(), "the other systems install without make, as the README"
    assert "actionlint" in runs(jobs["actionlint"])
