"""The Python side of the explorers: the matrix text format, and chapter 05's stored answers."""

from __future__ import annotations

import html
import json
import re
import shutil
import subprocess
from functools import cache
from pathlib import Path

import numpy as np
import pytest

import attnlib.live
from attnlib import reference, seed_everything
from attnlib.tasks.dates import DateTaskConfig, new_model, prepare, translate
from attnlib.widgets import (
    alignment_answers,
    alignment_live,
    alignment_script,
    parse_matrix,
)

TINY = DateTaskConfig(n_train=64, n_valid=16, n_test=16, epochs=1, hidden_size=16)
EXAMPLES = {"d mon yyyy": ("21 nov 2026", "2026-11-21"), "d.m.yy": ("3.2.01", None)}
ALIGNMENT_JS = Path(attnlib.live.__file__).with_name("alignment.js")
NODE = shutil.which("node") or ("/usr/bin/node" if Path("/usr/bin/node").is_file() else None)


def test_parse_matrix_reads_rows_separated_by_semicolons_or_lines():
    matrix = parse_matrix("1 0 1 0; 0 2 0 2\n1,1,1,1", (3, 4), "inputs")
    np.testing.assert_array_equal(matrix, reference.WORKED_INPUTS)


def test_parse_matrix_names_the_wrong_shape():
    with pytest.raises(ValueError, match="W_K needs 4 rows of 3 numbers, .* it has 2 rows"):
        parse_matrix("1 2 3; 4 5 6", (4, 3), "W_K")


@cache
def tiny_task():
    """The tiny date task and two untrained models: one with attention, one without."""
    seed_everything(0)
    task = prepare(TINY)
    return task, {kind: new_model(kind, task) for kind in ("luong-dot", "none")}


def vocabs(task):
    """The task's (source, target) vocabularies."""
    return task.source_vocab, task.target_vocab


def answers() -> dict:
    task, models = tiny_task()
    return alignment_answers(models, EXAMPLES, *vocabs(task))


def test_alignment_answers_are_what_translate_says():
    task, models = tiny_task()
    found = answers()
    assert found["models"] == ["luong-dot", "none"]
    assert [e["source"] for e in found["examples"]] == ["21 nov 2026", "3.2.01"]
    assert found["examples"][0] == {
        "label": "d mon yyyy",
        "source": "21 nov 2026",
        "target": "2026-11-21",
    }
    for (source, _), row in zip(EXAMPLES.values(), found["answers"], strict=True):
        prediction, weights = translate(models["luong-dot"], source, *vocabs(task))
        stored = row[0]
        assert stored["prediction"] == prediction
        assert np.array(stored["permille"]).shape == (weights.shape[0], len(source))
        np.testing.assert_allclose(np.array(stored["permille"]) / 1000, weights.numpy(), atol=5e-4)
        assert len(stored["rows"]) == weights.shape[0]
        assert row[1]["permille"] is None  # "none" has no attention
    json.dumps(found, allow_nan=False)  # JSON-ready: plain lists, ints and strings


def test_alignment_answers_refuse_empty_choices_and_dates():
    task, models = tiny_task()
    with pytest.raises(ValueError, match="at least one model and one example"):
        alignment_answers({}, EXAMPLES, *vocabs(task))
    with pytest.raises(ValueError, match="at least one model and one example"):
        alignment_answers(models, {}, *vocabs(task))
    with pytest.raises(ValueError, match="example 'x' needs a non-empty date, got ''"):
        alignment_answers(models, {"x": ("", None)}, *vocabs(task))


def stored_answers(markup: str) -> dict:
    attribute = re.search(r'data-answers="([^"]*)"', markup).group(1)
    return json.loads(html.unescape(attribute))


def test_alignment_live_inlines_the_answers_and_its_script():
    task, models = tiny_task()
    markup = alignment_live(models, EXAMPLES, *vocabs(task), start="d.m.yy").data
    assert 'data-explorer="alignment"' in markup and 'data-start="1"' in markup
    assert stored_answers(markup) == answers()
    assert markup.count("<script>") == 1 and 'src="http' not in markup
    assert alignment_script() in markup
    assert ALIGNMENT_JS.read_text(encoding="utf-8") in markup
    for name in ("attention.js", "explorers.js"):
        assert attnlib.live.script_source(name) in markup
    assert "JavaScript" in markup[: markup.index("<script>")]  # the fallback without it
    again = alignment_live(models, EXAMPLES, *vocabs(task), start="d.m.yy").data
    assert again == markup, "the snippet must be the same every time"


def test_alignment_live_refuses_an_unknown_start():
    task, models = tiny_task()
    with pytest.raises(ValueError, match="start must be one of the examples' labels, got 'x'"):
        alignment_live(models, EXAMPLES, *vocabs(task), start="x")


# alignment.js's checks of the stored answers, run in node: each case is JSON text.
HARNESS = """
const alignment = require(process.argv[1]);
const cases = JSON.parse(require("fs").readFileSync(0, "utf8"));
process.stdout.write(JSON.stringify(cases.map((text) => {
  try {
    const data = alignment.readAnswers(text);
    return { models: data.models, labels: alignment.inputLabels(data.examples[0].source) };
  } catch (error) {
    return { error: error.message };
  }
})));
"""


@pytest.mark.skipif(NODE is None, reason="node is not installed")
def test_alignment_js_reads_the_answers_and_says_what_is_wrong():
    good = answers()
    short = json.loads(json.dumps(good))
    short["answers"][0][0]["permille"][0].pop()
    cases = [
        json.dumps(good),
        "{",
        json.dumps({"models": [], "examples": [], "answers": []}),
        json.dumps({**good, "answers": good["answers"][:1]}),
        json.dumps(short),
    ]
    result = subprocess.run(
        [NODE, "-e", HARNESS, str(ALIGNMENT_JS)],
        input=json.dumps(cases),
        capture_output=True,
        text=True,
        timeout=30,
        check=True,
    )
    read = json.loads(result.stdout)
    assert read[0] == {"models": ["luong-dot", "none"], "labels": list("21␣nov␣2026")}
    prefix = "The explorer's stored answers are unreadable: "
    assert read[1]["error"].startswith(prefix + "they are not JSON (")
    assert read[2] == {"error": prefix + "there is no model or no example to choose."}
    assert read[3] == {"error": prefix + "2 examples but answers for 1."}
    assert read[4] == {
        "error": prefix + "luong-dot on example 1 needs one row of 11 weights (0 to 1000) per "
        "output character."
    }
