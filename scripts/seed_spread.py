"""Run a chapter over more seeds, under a chosen CPU kernel set, to measure its claims' spread.

A chapter's asserts about trained models must hold on a learner's machine, whose CPU kernels
round differently and so send training down another path, much as another seed does. This
script re-executes a chapter with its ``SEEDS = ...`` line replaced (say seeds 0 to 7), in a
kernel started with the kernel set asked for, lets every cell run even where an assert fails,
and writes the executed copy, whose printed tables are the measurements; it lists the cells that
failed. Nothing in ``notebooks/`` is changed.

    python scripts/seed_spread.py notebooks/12_training_recipe.ipynb --seeds 0-7 \
        --kernels other --out /tmp/12_other.ipynb
"""

from __future__ import annotations

import argparse
import os
import re
import sys
import time
from pathlib import Path

import nbformat
from execute_notebooks import kernel_sets  # scripts/ is on the path of a script run
from nbclient import NotebookClient

SEEDS_LINE = re.compile(r"^SEEDS = .*$", re.MULTILINE)


def parse_seeds(text: str) -> list[int]:
    """``'0-4'`` or ``'0,3,5'`` -> the list of seeds."""
    if re.fullmatch(r"\d+-\d+", text):
        first, last = map(int, text.split("-"))
        if first > last:
            raise argparse.ArgumentTypeError(f"seed range {text} runs backwards")
        return list(range(first, last + 1))
    if re.fullmatch(r"\d+(,\d+)*", text):
        return [int(seed) for seed in text.split(",")]
    raise argparse.ArgumentTypeError(f"seeds must look like 0-7 or 0,3,5, got {text!r}")


def with_seeds(notebook: nbformat.NotebookNode, seeds: list[int]) -> int:
    """Replace the chapter's one ``SEEDS = ...`` line; return the index of the cell changed."""
    found = [i for i, cell in enumerate(notebook.cells) if SEEDS_LINE.search(cell.source)]
    if len(found) != 1:
        raise SystemExit(f"expected one cell with a line 'SEEDS = ...', found {len(found)}")
    cell = notebook.cells[found[0]]
    cell.source = SEEDS_LINE.sub(f"SEEDS = {seeds!r}", cell.source, count=1)
    return found[0]


def main(argv: list[str] | None = None) -> int:
    """Execute the chapter with the seeds and kernels asked for; list the cells that failed."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("notebook", type=Path)
    parser.add_argument("--seeds", type=parse_seeds, required=True, help="e.g. 0-7 or 0,3,5")
    parser.add_argument("--kernels", choices=("other", "own", "pinned"), default="own")
    parser.add_argument("--out", type=Path, required=True, help="where the executed copy goes")
    args = parser.parse_args(argv)
    if not args.notebook.is_file():
        parser.error(f"no notebook at {args.notebook}")
    notebook = nbformat.read(args.notebook, as_version=4)
    with_seeds(notebook, args.seeds)
    os.environ.pop("ATTNLIB_QUICK", None)
    os.environ.update(kernel_sets()[args.kernels])  # the kernel process inherits them
    client = NotebookClient(
        notebook,
        timeout=3600,
        kernel_name="python3",
        allow_errors=True,
        resources={"metadata": {"path": str(args.notebook.parent.resolve())}},
    )
    start = time.perf_counter()
    client.execute()
    nbformat.write(notebook, args.out)
    print(
        f"{args.notebook.name}, seeds {args.seeds}, kernels {args.kernels}: "
        f"{time.perf_counter() - start:.0f} s; executed copy in {args.out}"
    )
    failed = 0
    for index, cell in enumerate(notebook.cells):
        for output in cell.get("outputs", []):
            if output.get("output_type") == "error":
                failed += 1
                print(f"  cell {index}: {output['ename']}: {output['evalue'][:200]}")
    print(f"  {failed} cell(s) failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
