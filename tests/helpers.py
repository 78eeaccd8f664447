"""Helpers that more than one test module needs."""

from __future__ import annotations

import importlib.util
import json
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from attnlib.data.imdb import IMDB, Reviews
from attnlib.tasks import imdb as task
from attnlib.tasks.imdb_train import prepare

SCRIPTS = Path(__file__).resolve().parents[1] / "scripts"
NODE = shutil.which("node") or ("/usr/bin/node" if Path("/usr/bin/node").is_file() else None)


def script_module(name: str):
    """scripts/<name>.py, imported as a script would see it (scripts/ on the path)."""
    sys.path.insert(0, str(SCRIPTS))
    try:
        spec = importlib.util.spec_from_file_location(name, SCRIPTS / f"{name}.py")
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
    finally:
        sys.path.remove(str(SCRIPTS))
    return module


def node_answers(
    harness: str, scripts: list[Path], cases: list[dict], timeout: float = 120
) -> list:
    """Every case through ``harness`` (run with the scripts' paths) in one node process; its
    answers, in the cases' order. Skips the test where node is not installed."""
    if NODE is None:
        pytest.skip("node is not installed: the browser-side arithmetic cannot be checked")
    finished = subprocess.run(
        [NODE, "-e", harness, *map(str, scripts)],
        input=json.dumps(cases),
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )
    assert finished.returncode == 0, finished.stderr
    return json.loads(finished.stdout)


# Chapter 13's task on a tiny corpus (tests/test_imdb_task.py, tests/test_imdb_memory.py).
CORPUS = [
    "a great film with a great cast",
    "a terrible film, a waste of time",
    "the plot was thin but the acting was great",
    "i loved it and i would watch it again",
] * 5


def reviews(texts: list[str], labels) -> Reviews:
    """A split of ``texts`` with one label for all (an int) or one each (a sequence)."""
    n = len(texts)
    labels = np.broadcast_to(np.asarray(labels, np.int8), (n,)).copy()
    return Reviews(texts, labels, np.zeros(n, np.int8), [*map(str, range(n))])


def small_config(**changes) -> task.ImdbConfig:
    sizes = dict(vocab_size=60, max_len=32, head_tokens=8, d_model=16, num_heads=2)
    return task.ImdbConfig(**{**sizes, "num_layers": 1, "d_ff": 32, **changes})


def finetuning_setup(tokenizer) -> tuple[task.ImdbConfig, object]:
    """A small fine-tuning run's config and prepared data: CORPUS as alternating labels."""
    data = IMDB(
        train=reviews(CORPUS, np.arange(len(CORPUS)) % 2),
        test=reviews(CORPUS[:4], 0),
        unlabelled=reviews(CORPUS[:4], -1),
        digest="0" * 64,
    )
    config = small_config(max_len=64, n_valid=4, seed=0, finetune_batch=2, finetune_epochs=1)
    return config, prepare(data, tokenizer, config)
