"""Run a chapter over more seeds and CPU kernel sets, to set its claims' bounds and confirm them.

A chapter's claims about trained models must hold on seeds it was not fitted to and on a
learner's machine, whose CPU kernels round differently and so send training down another path,
much as another seed does. This script re-executes a chapter with its ``SEEDS = ...`` line
replaced, in a kernel started with the kernel set asked for, lets every cell run even where a
claim fails, and reads back every value that the chapter's ``attnlib.claims.claim`` calls
measured. Nothing in ``notebooks/`` is changed.

Set a bound from the fitting seeds, then confirm it, unchanged, on held-out seeds that were not
looked at while choosing it:

    python scripts/seed_spread.py notebooks/12_training_recipe.ipynb --fit 0-7 \
        --held-out 100-107 --kernels pinned,other --out /tmp/spread12

The table printed at the end (and written to ``claims.md`` in the output folder) gives, for each
claim, its bound and the range measured on the fitting and on the held-out seeds; the executed
copies hold the chapter's own tables. A single run, as before: ``--seeds 0-7``. A chapter that
trains one model per run (its ``SEEDS[0]``) takes ``--each``: one execution per seed.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
import time
from pathlib import Path

import nbformat
from execute_notebooks import kernel_sets  # scripts/ is on the path of a script run
from nbclient import NotebookClient

from attnlib.claims import Measurement

SEEDS_LINE = re.compile(r"^SEEDS = .*$", re.MULTILINE)
CLAIMS_MARK = "ATTNLIB-CLAIMS "
READ_CLAIMS = (
    "import json\nimport attnlib.claims\n"
    f"print({CLAIMS_MARK!r} + json.dumps(attnlib.claims.measurements()))"
)


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


def parse_kernels(text: str) -> list[str]:
    """``'pinned,other'`` -> the kernel sets' names, each one the Makefile defines (or own)."""
    names = text.split(",")
    known = kernel_sets()
    unknown = [name for name in names if name not in known]
    if unknown or not names:
        raise argparse.ArgumentTypeError(
            f"unknown kernel set(s) {unknown}; choose from {', '.join(known)}"
        )
    return names


def with_seeds(notebook: nbformat.NotebookNode, seeds: list[int]) -> int:
    """Replace the chapter's one ``SEEDS = ...`` line; return the index of the cell changed."""
    found = [i for i, cell in enumerate(notebook.cells) if SEEDS_LINE.search(cell.source)]
    if len(found) != 1:
        raise SystemExit(f"expected one cell with a line 'SEEDS = ...', found {len(found)}")
    cell = notebook.cells[found[0]]
    cell.source = SEEDS_LINE.sub(f"SEEDS = {seeds!r}", cell.source, count=1)
    return found[0]


def read_claims(notebook: nbformat.NotebookNode) -> list[dict]:
    """The claims the executed chapter recorded, from the output of the cell this script added."""
    for output in notebook.cells[-1].get("outputs", []):
        for line in output.get("text", "").splitlines():
            if line.startswith(CLAIMS_MARK):
                return json.loads(line[len(CLAIMS_MARK) :])
    return []


def failed_cells(notebook: nbformat.NotebookNode) -> list[str]:
    """One line per cell that raised: its index, the error and the first of its message."""
    return [
        f"cell {index}: {output['ename']}: {output['evalue'][:200]}"
        for index, cell in enumerate(notebook.cells)
        for output in cell.get("outputs", [])
        if output.get("output_type") == "error"
    ]


def execute(path: Path, seeds: list[int], kernels: str, out: Path) -> list[dict]:
    """Run the chapter with these seeds and kernels, save the copy to ``out``; its claims."""
    notebook = nbformat.read(path, as_version=4)
    with_seeds(notebook, seeds)
    notebook.cells.append(nbformat.v4.new_code_cell(READ_CLAIMS))
    saved = dict(os.environ)
    os.environ.pop("ATTNLIB_QUICK", None)
    os.environ.update(kernel_sets()[kernels])  # the kernel process inherits them
    os.environ["ATTNLIB_CLAIMS_RECORD_ONLY"] = "1"
    client = NotebookClient(
        notebook,
        timeout=3600,
        kernel_name="python3",
        allow_errors=True,
        resources={"metadata": {"path": str(path.parent.resolve())}},
    )
    start = time.perf_counter()
    try:
        client.execute()
    finally:
        os.environ.clear()
        os.environ.update(saved)
    nbformat.write(notebook, out)
    errors = failed_cells(notebook)
    print(f"{path.name}, seeds {seeds}, kernels {kernels}: {time.perf_counter() - start:.0f} s")
    print(f"  executed copy in {out}; {len(errors)} cell(s) raised")
    for line in errors:
        print("  " + line)
    return read_claims(notebook)


def claim_table(runs: dict[str, list[dict]]) -> str:
    """A Markdown table: each claim, its bound, its range per split, how many values broke it."""
    names: dict[tuple[str, str], dict[str, list[dict]]] = {}
    for split, measured in runs.items():
        for item in measured:
            bound = as_measurement(item).bound()
            names.setdefault((item["name"], bound), {}).setdefault(split, []).append(item)
    splits = list(runs)
    lines = [
        "| claim | bound | " + " | ".join(splits) + " | broken |",
        "|---|---|" + "---|" * len(splits) + "---|",
    ]
    for (name, bound), by_split in names.items():
        cells, broken = [], 0
        for split in splits:
            items = by_split.get(split, [])
            values = [item["value"] for item in items]
            broken += sum(not as_measurement(item).held for item in items)
            cells.append(
                f"{min(values):.3g} to {max(values):.3g} ({len(values)})" if values else ""
            )
        lines.append(f"| {name} | {bound} | " + " | ".join(cells) + f" | {broken} |")
    return "\n".join(lines)


def as_measurement(item: dict) -> Measurement:
    """A recorded claim, read back from its JSON form."""
    return Measurement(item["name"], item["value"], item["at_least"], item["at_most"])


def main(argv: list[str] | None = None) -> int:
    """Execute the chapter for each split and kernel set asked for; print the claims' table."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("notebook", type=Path)
    parser.add_argument("--seeds", type=parse_seeds, help="one run: e.g. 0-7 or 0,3,5")
    parser.add_argument("--fit", type=parse_seeds, help="the seeds bounds are set from")
    parser.add_argument("--held-out", type=parse_seeds, help="seeds that confirm the bounds")
    parser.add_argument("--kernels", type=parse_kernels, default=["own"], help="e.g. pinned,other")
    parser.add_argument("--out", type=Path, required=True, help="a folder for the executed copies")
    parser.add_argument(
        "--each", action="store_true", help="run each seed alone (chapters that read SEEDS[0])"
    )
    args = parser.parse_args(argv)
    if not args.notebook.is_file():
        parser.error(f"no notebook at {args.notebook}")
    splits = {"seeds": args.seeds, "fitting": args.fit, "held-out": args.held_out}
    splits = {name: seeds for name, seeds in splits.items() if seeds is not None}
    if not splits or ("seeds" in splits and len(splits) > 1):
        parser.error("give --seeds, or --fit and/or --held-out")
    shared = sorted(set(args.fit or ()) & set(args.held_out or ()))
    if shared:
        parser.error(f"held-out seeds must not be fitting seeds: {shared}")
    args.out.mkdir(parents=True, exist_ok=True)
    runs: dict[str, list[dict]] = {}
    for split, seeds in splits.items():
        for kernels in args.kernels:
            for run_seeds in [[seed] for seed in seeds] if args.each else [seeds]:
                label = f"_seed{run_seeds[0]}" if args.each else ""
                copy = args.out / f"{args.notebook.stem}_{split}_{kernels}{label}.ipynb"
                measured = execute(args.notebook, run_seeds, kernels, copy)
                runs.setdefault(split, []).extend({**item, "kernels": kernels} for item in measured)
    table = claim_table(runs)
    (args.out / "claims.json").write_text(json.dumps(runs, indent=1))
    (args.out / "claims.md").write_text(table + "\n")
    print(table)
    broken = sum(not as_measurement(item).held for measured in runs.values() for item in measured)
    print(f"{broken} claim value(s) outside their bounds")
    return 1 if broken else 0


if __name__ == "__main__":
    sys.exit(main())
