"""Re-execute notebooks top to bottom and store their outputs and widget state in place.

This is what `make outputs` runs: stored outputs must come from one clean run of the current
code, with execution counts 1..N and the widget state the book draws its widgets from.

Chapter 13's GPU run (scripts/gpu_run.sh) and its rehearsal add `--log-cells`, so that the log
shows each code cell's time and what it printed, and `--keep-partial`, so that a run that fails or
is stopped (SIGTERM, as `timeout` sends) still stores the cells it ran, the stopped one marked
with an error.
"""

from __future__ import annotations

import argparse
import os
import re
import signal
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


class Stopped(BaseException):
    """The process was told to stop (a BaseException, so that no `except Exception` swallows it)."""


def stop(signum: int, frame: object) -> None:
    """Signal handler: stop the run where it stands."""
    raise Stopped(f"stopped by {signal.Signals(signum).name}")


def last_lines(cell: nbformat.NotebookNode, count: int = 12) -> list[str]:
    """The last `count` lines a cell printed to stdout, each as a terminal would show it."""
    text = "".join(o.text for o in cell.get("outputs", []) if o.get("name") == "stdout")
    return [line.rsplit("\r", 1)[-1] for line in text.rstrip("\n").split("\n")[-count:] if line]


def log_cell(cell: nbformat.NotebookNode, index: int, start: float) -> None:
    """Print a code cell's index, the seconds since the notebook started, and its last lines."""
    print(f"  [{index}] {time.perf_counter() - start:.0f} s", flush=True)
    for line in last_lines(cell):
        print(f"      {line}", flush=True)


def execute(path: Path, timeout: int, log_cells: bool = False, keep_partial: bool = False) -> float:
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
    running = set()  # the index of the code cell that started and has not finished

    def started(cell: nbformat.NotebookNode, cell_index: int, **_: object) -> None:
        running.clear()
        if cell.cell_type == "code" and cell.source.strip():  # nbclient skips the others
            running.add(cell_index)

    def executed(cell: nbformat.NotebookNode, cell_index: int, **_: object) -> None:
        running.discard(cell_index)
        if log_cells:
            log_cell(cell, cell_index, start)

    client.on_cell_start, client.on_cell_executed = started, executed
    try:
        client.execute()
    except BaseException as error:
        if not keep_partial:
            raise
        for index in running:  # stopped mid-cell: say so where the cell's output would be
            outputs = notebook.cells[index].outputs
            if not any(o.output_type == "error" for o in outputs):
                reason = f"{type(error).__name__}: {error}"
                outputs.append(nbformat.v4.new_output("error", ename="Stopped", evalue=reason))
        merge_streams(notebook)
        nbformat.write(notebook, path)
        print(f"  the run stopped early; the cells it ran are stored in {path}", flush=True)
        raise
    elapsed = time.perf_counter() - start
    merge_streams(notebook)
    nbformat.validate(notebook)
    nbformat.write(notebook, path)
    return elapsed


MAKEFILE = Path(__file__).resolve().parents[1] / "Makefile"


KERNEL_SET_NAMES = {"PINNED": "pinned", "OTHER": "other", "ATEN_DEFAULT": "aten-default"}


def kernel_sets() -> dict[str, dict[str, str]]:
    """The Makefile's kernel sets (their one place) by name, and "own": none set."""
    found = re.findall(
        r"^(PINNED|OTHER|ATEN_DEFAULT)_KERNELS := (.+)$", MAKEFILE.read_text(), re.MULTILINE
    )
    sets = {
        KERNEL_SET_NAMES[name]: dict(item.split("=", 1) for item in value.split())
        for name, value in found
    }
    if set(sets) != set(KERNEL_SET_NAMES.values()):
        wanted = ", ".join(f"{name}_KERNELS" for name in KERNEL_SET_NAMES)
        raise SystemExit(f"{MAKEFILE} must define {wanted}")
    return {**sets, "own": {}}


def pinned_kernels() -> dict[str, str]:
    """The Makefile's PINNED_KERNELS, as variable -> value."""
    return kernel_sets()["pinned"]


def main(argv: list[str] | None = None) -> int:
    """Execute each notebook named on the command line, in order."""
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("notebooks", nargs="+", type=Path)
    parser.add_argument("--timeout", type=int, default=1800, help="seconds per cell")
    parser.add_argument(
        "--log-cells", action="store_true", help="print each code cell's time and last lines"
    )
    parser.add_argument(
        "--keep-partial",
        action="store_true",
        help="store the cells run so far when a cell fails or the run is stopped (SIGTERM)",
    )
    args = parser.parse_args(argv)
    if args.keep_partial:
        signal.signal(signal.SIGTERM, stop)
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
        seconds = execute(path, args.timeout, args.log_cells, args.keep_partial)
        print(f"  done in {seconds:.1f} s", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
