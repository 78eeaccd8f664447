"""Re-execute notebooks top to bottom and store their outputs and widget state in place.

This is what `make outputs` runs: stored outputs must come from one clean run of the current
code, with execution counts 1..N and the widget state the book draws its widgets from.
"""

from __future__ import annotations

import argparse
import os
import re
import sys
import time
from pathlib import Path

import nbformat
from nbclient import NotebookClient


def merge_streams(notebook: nbformat.NotebookNode) -> None:
    """Join consecutive stdout (or stderr) outputs of a cell into one, as the book shows them:
    where a print is flushed in two parts decides nothing about what the cell printed."""
    for cell in notebook.cells:
        merged = []
        for output in cell.get("outputs", []):
            previous = merged[-1] if merged else None
            if (
                output.output_type == "stream"
                and previous is not None
                and previous.output_type == "stream"
                and previous.name == output.name
            ):
                previous.text += output.text
            else:
                merged.append(output)
        if "outputs" in cell:
            cell.outputs = merged


def execute(path: Path, timeout: int) -> float:
    """Run one notebook in its own folder with a fresh kernel; return the seconds it took."""
    notebook = nbformat.read(path, as_version=4)
    # Widget state is saved afresh for the widgets this run shows; none left from older runs.
    notebook.metadata.pop("widgets", None)
    client = NotebookClient(
        notebook,
        timeout=timeout,
        kernel_name="python3",
        resources={"metadata": {"path": str(path.parent)}},
        store_widget_state=True,
        record_timing=False,
    )
    start = time.perf_counter()
    client.execute()
    elapsed = time.perf_counter() - start
    merge_streams(notebook)
    nbformat.validate(notebook)
    nbformat.write(notebook, path)
    return elapsed


MAKEFILE = Path(__file__).resolve().parents[1] / "Makefile"


def kernel_sets() -> dict[str, dict[str, str]]:
    """The Makefile's PINNED_KERNELS and OTHER_KERNELS (their one place), and "own": none."""
    found = re.findall(r"^(PINNED|OTHER)_KERNELS := (.+)$", MAKEFILE.read_text(), re.MULTILINE)
    sets = {
        name.lower(): dict(item.split("=", 1) for item in value.split()) for name, value in found
    }
    if set(sets) != {"pinned", "other"}:
        raise SystemExit(f"{MAKEFILE} must define PINNED_KERNELS and OTHER_KERNELS")
    return {**sets, "own": {}}


def pinned_kernels() -> dict[str, str]:
    """The Makefile's PINNED_KERNELS, as variable -> value."""
    return kernel_sets()["pinned"]


def main(argv: list[str] | None = None) -> int:
    """Execute each notebook named on the command line, in order."""
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("notebooks", nargs="+", type=Path)
    parser.add_argument("--timeout", type=int, default=1800, help="seconds per cell")
    args = parser.parse_args(argv)
    # Stored outputs show the default configuration, never quick mode.
    os.environ.pop("ATTNLIB_QUICK", None)
    # Stored outputs reproduce only with CI's pinned CPU kernels: `make outputs` sets them.
    unpinned = [
        f"{name}={value}"
        for name, value in pinned_kernels().items()
        if os.environ.get(name, "").lower() != value.lower()
    ]
    if unpinned:
        print(
            f"warning: not pinned ({', '.join(unpinned)} expected), so strict nbval may not "
            "reproduce these outputs on CI; run `make outputs`, which pins the kernels",
            file=sys.stderr,
        )
    for path in args.notebooks:
        if not path.is_file():
            parser.error(f"no notebook at {path}")
        print(f"executing {path} ...", flush=True)
        print(f"  done in {execute(path, args.timeout):.1f} s", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
