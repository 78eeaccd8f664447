"""Rehearse chapter 13's GPU run on the CPU: the code paths only a GPU takes, on a tiny model.

Quick mode (CI) trains too, but skips what only the full run does: training the tokenizer, the full
test set (and so the packed per-review answers), compilation, saving the model, the seed budget,
scoring all 25,000 test reviews in section 8. A bug there would surface only in a GPU run, which is
long and costly to repeat. This script copies the working tree to a temporary folder, rewrites
chapter 13 (its next version, in notebooks/next/, while there is one) so that it takes those paths
on the CPU with a one-layer, 32-wide model and 60 pretraining steps, executes it there (about 8
minutes on two cores) and checks what it wrote. Nothing in the working tree changes.

    python scripts/rehearse_gpu_run.py [--finish-within SECONDS] [--keep DIR]

``--finish-within`` stands in for a deadline on the GPU run, to see the skipped-seed path;
``--keep`` copies the executed notebook and the model files to DIR. Needs IMDB (ATTNLIB_DATA, or a
cache: data_cache/ here, made by ``make gpu-bundle``, or ATTNLIB_CACHE).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import nbformat
from execute_notebooks import pinned_kernels  # scripts/ is on the path of a script run

from attnlib.tasks.imdb_train import MODEL_FILES

ROOT = Path(__file__).resolve().parents[1]
NEXT = Path("notebooks/next/13_imdb_encoder.ipynb")
CHAPTER = Path("notebooks/13_imdb_encoder.ipynb")
MODEL = Path("attnlib/assets/imdb")
TINY = (
    "task.ImdbConfig(d_model=32, num_heads=2, num_layers=1, d_ff=64, pretrain_steps=60, "
    "pretrain_batch=8, finetune_epochs=1, finetune_batch=32, pretrain_max_seconds=90)"
)


def rewrites(finish_within: float | None) -> list[tuple[str, str]]:
    """(text in the chapter, what the rehearsal puts there); each must occur exactly once."""
    return [
        ('RETRAIN = device.type == "cuda" or quick_mode()', "RETRAIN = True"),
        ("config = task.ImdbConfig.for_mode()", f"config = {TINY}"),
        ('compile_model=device.type == "cuda"', "compile_model=True"),
        (
            'FINISH_WITHIN_S = 570 if device.type == "cuda" else None',
            f"FINISH_WITHIN_S = {finish_within!r}",
        ),
        (
            'n_eval = None if device.type == "cuda" else (200 if quick_mode() else 2000)',
            "n_eval = None",
        ),
        # The summary's claims need the real model; a tiny one cannot meet them.
        (
            'if not quick_mode():\n    assert results["test_accuracy"]',
            'if False:\n    assert results["test_accuracy"]',
        ),
    ]


def rehearsal_notebook(source: Path, finish_within: float | None) -> nbformat.NotebookNode:
    """The chapter with its GPU-only branches taken on any device, and quick mode off."""
    notebook = nbformat.read(source, as_version=4)
    for old, new in rewrites(finish_within):
        found = sum(cell.source.count(old) for cell in notebook.cells)
        if found != 1:
            raise SystemExit(f"the chapter has {found} copies of {old!r}, not 1: update rewrites()")
        for cell in notebook.cells:
            cell.source = cell.source.replace(old, new)
    for cell in notebook.cells:
        cell.source = cell.source.replace("not quick_mode()", "True").replace(
            "quick_mode()", "False"
        )
    return notebook


def copy_tree(destination: Path) -> None:
    """Git's files of the working tree (tracked, or untracked and not ignored), as they are now."""
    listed = subprocess.run(
        ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
        cwd=ROOT,
        check=True,
        capture_output=True,
    ).stdout.split(b"\0")
    for name in filter(None, (item.decode() for item in listed)):
        if (ROOT / name).is_file():
            (destination / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(ROOT / name, destination / name)


def environment(copy: Path) -> dict[str, str]:
    """The copy's attnlib first, CI's kernels (as gpu_run.sh), IMDB's cache if one is here."""
    env = dict(os.environ, PYTHONPATH=str(copy), PYTHONUNBUFFERED="1", **pinned_kernels())
    env.pop("ATTNLIB_QUICK", None)
    if "ATTNLIB_CACHE" not in env and (ROOT / "data_cache").is_dir():
        env["ATTNLIB_CACHE"] = str(ROOT / "data_cache")
    return env


def check(copy: Path, since: float) -> list[str]:
    """What the full run must leave behind: the model's four files, new, and a complete record."""
    problems = [
        f"{name} not written"
        for name in MODEL_FILES
        if not (copy / MODEL / name).is_file() or (copy / MODEL / name).stat().st_mtime < since
    ]
    if problems:
        return problems
    results = json.loads((copy / MODEL / "results.json").read_text())
    wanted = (
        "device",
        "test_accuracy",
        "scratch_test_accuracy",
        "seed_test_accuracies",
        "mcnemar_nbsvm",
        "pretraining",
        "finetuning",
        "baselines",
        "test_positive",
    )
    problems += [f"results.json has no {key!r}" for key in wanted if key not in results]
    if results.get("test_reviews") != 25_000:
        problems.append(
            f"results.json covers {results.get('test_reviews')} test reviews, not 25,000"
        )
    return problems


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--finish-within", type=float, default=None, help="seconds: the seed budget"
    )
    parser.add_argument("--keep", type=Path, help="copy the executed chapter and the model here")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="gpu-rehearsal-") as folder:
        copy = Path(folder)
        copy_tree(copy)
        source = copy / (NEXT if (copy / NEXT).is_file() else CHAPTER)
        nbformat.write(rehearsal_notebook(source, args.finish_within), copy / CHAPTER)
        since = time.time()
        # The same log as the GPU run's: each cell's time and what it printed.
        runner = [sys.executable, "scripts/execute_notebooks.py", "--log-cells", "--keep-partial"]
        run = subprocess.run([*runner, str(CHAPTER)], cwd=copy, env=environment(copy))
        problems = [] if run.returncode == 0 else [f"the chapter failed (status {run.returncode})"]
        problems += check(copy, since)
        if args.keep:
            args.keep.mkdir(parents=True, exist_ok=True)
            for path in [copy / CHAPTER, *sorted((copy / MODEL).iterdir())]:
                shutil.copy2(path, args.keep / path.name)
    for problem in problems:
        print("PROBLEM:", problem)
    print("rehearsal passed" if not problems else f"rehearsal failed: {len(problems)} problem(s)")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
