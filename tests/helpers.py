"""Helpers that more than one test module needs."""

from __future__ import annotations

import html
import importlib.util
import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import nbformat
import numpy as np
import pytest

import attnlib.live
from attnlib.data.imdb import IMDB, Reviews
from attnlib.tasks import imdb as task
from attnlib.tasks.imdb_train import prepare

SCRIPTS = Path(__file__).resolve().parents[1] / "scripts"
NODE = shutil.which("node") or ("/usr/bin/node" if Path("/usr/bin/node").is_file() else None)
# The end of a case harness: each case through run[c.kind], answered as {value} or {error}.
ANSWER_EACH_CASE = """
const answers = cases.map((c) => {
  try {
    return { value: run[c.kind](c) };
  } catch (error) {
    return { error: error.message };
  }
});
process.stdout.write(JSON.stringify(answers, REPLACER));
"""


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


def case_harness(setup: str, replacer: str = "null") -> str:
    """A node harness: ``setup`` defines ``cases`` and ``run``; JSON.stringify uses ``replacer``."""
    return setup + ANSWER_EACH_CASE.replace("REPLACER", replacer)


def of_kind(kind: str, cases: list[dict], answers: list | tuple) -> list[tuple[dict, dict]]:
    """(case, answer) for every case of one kind, the answers given in the cases' order."""
    pairs = zip(cases, answers, strict=True)
    return [(case, answer) for case, answer in pairs if case["kind"] == kind]


NUMBER = re.compile(r"-?\d+\.\d+(?:e-?\d+)?")


def assert_markup_close(stored: str, fresh: str, rtol: float = 1e-5, atol: float = 1e-7) -> None:
    """Two pieces of markup alike but for their decimals, which may differ in the last bits:
    those of a notebook's stored output come from the pinned CPU kernels, a test's from any."""
    assert NUMBER.sub("#", stored) == NUMBER.sub("#", fresh)
    found = [np.array([float(n) for n in NUMBER.findall(markup)]) for markup in (stored, fresh)]
    np.testing.assert_allclose(found[0], found[1], rtol=rtol, atol=atol)


def data_attribute(markup: str, name: str) -> str:
    """The value of the first ``data-<name>`` attribute in ``markup``, HTML-unescaped."""
    found = re.search(f'data-{name}="([^"]*)"', markup)
    assert found, name
    return html.unescape(found.group(1))


def fallback_snapshot(markup: str) -> str:
    """What an explorer's ``markup`` shows before its script runs; it holds the fallback text."""
    snapshot = markup.split("<script>")[0]
    assert attnlib.live.FALLBACK in snapshot
    return snapshot


# Reviews a tokenizer must cut as `tokenizers` does: accents, special tokens typed as text,
# punctuation runs, digits, underscores, scripts and symbols the vocabulary never saw, and
# whitespace other than spaces (tests/test_live_bpe.py, tests/test_live_imdb.py).
TOKENIZER_TEXTS = [
    "Café, naïve, résumé: Amélie (2001) is très charmant — a 10/10 <br/>film",
    "I typed [CLS] and [MASK] and [SEP]x[PAD] into my review [UNK]",
    "snake_case_words and CamelCase and ALLCAPS don't, won't, can't... ?!?! ;-)",
    "ΟΔΟΣ ΟΔΟΣ ΟΔΟΣ İstanbul straße ﬁne ½ ² ① Ⅻ",
    "Emoji 😀👍🏽 and snowmen ☃☃ and 漢字かなカナ and \u200d joiners \u0301 alone",
    "tabs\tand\nnewlines\r\nand\u00a0non-breaking\u2003spaces",
]


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


def stored_explorer(notebook: Path, explorer: str) -> str:
    """The HTML of the ``explorer`` (its data-explorer name) in a chapter's stored outputs."""
    for cell in nbformat.read(notebook, as_version=4).cells:
        for output in cell.get("outputs", []):
            markup = output.get("data", {}).get("text/html", "")
            if f'data-explorer="{explorer}"' in markup:
                return markup
    raise AssertionError(f"{notebook.name} stores no {explorer} explorer")
