"""Chapter 15's explorer: flash.js's online softmax against the NumPy oracle, and its HTML.

attnlib/live/flash.js runs in node on the same rows as attnlib.reference.online_softmax_steps;
every number of every step must match to 1e-9. All cases go through one node process.
"""

from __future__ import annotations

import json
import math
from functools import cache
from pathlib import Path

import numpy as np
import pytest

import attnlib.live
from attnlib import reference
from attnlib.live.flash_explorer import EXAMPLES, example_values, flash_live
from tests.helpers import case_harness, data_attribute, node_answers

FLASH_JS = Path(attnlib.live.__file__).with_name("flash.js")
TOLERANCE = 1e-9

# Reads a JSON list of cases on stdin, answers a JSON list of results (or {"error": message}).
# Scores travel as numbers or the strings "-inf", "inf", "nan"; -Infinity comes back as "-inf".
HARNESS = case_harness(
    """
const flash = require(process.argv[1]);
const special = { "-inf": -Infinity, inf: Infinity, nan: NaN };
const score = (s) => (typeof s === "string" ? special[s] : s);
const cases = JSON.parse(require("fs").readFileSync(0, "utf8"));
const run = {
  steps: (c) => flash.onlineSoftmaxSteps(c.row.map(score), c.block, c.values),
  softmax: (c) => flash.softmaxRow(c.row.map(score)),
  parse: (c) => flash.parseRow(c.text),
};
""",
    '(k, v) => (v === -Infinity ? "-inf" : v)',
)


def _scores(row) -> list:
    return ["-inf" if s == -math.inf else float(s) for s in row]


def _random_row(seed: int, n: int, masked: int = 0, scale: float = 3.0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    row = scale * rng.normal(size=n)
    row[rng.choice(n, size=masked, replace=False)] = -np.inf
    return row


late = np.array(EXAMPLES["late maximum"])
# (name, row, block size, with values): random rows, -inf entries, a late maximum, huge scores
STEP_CASES = (
    [
        (f"random n={n} seed={seed} block={block}", _random_row(seed, n), block, True)
        for seed, n in ((0, 12), (1, 7), (2, 20))
        for block in (1, 3, 4, 5, n, n + 3)
    ]
    + [
        ("one score", np.array([0.7]), 1, True),
        ("scattered -inf", _random_row(3, 12, masked=4), 3, True),
        ("first block -inf", np.r_[np.full(4, -np.inf), _random_row(4, 8)], 4, True),
        ("last block -inf", np.r_[_random_row(5, 9), np.full(3, -np.inf)], 3, True),
        ("every key -inf", np.full(10, -np.inf), 4, True),
        ("late maximum block 4", late, 4, True),
        ("late maximum block 5", late, 5, False),
        ("rising", np.array(EXAMPLES["rising"]), 2, True),
        ("huge scores", np.array([1000.0, -1000.0, 1001.0, 999.5, -np.inf, 1003.0]), 2, True),
    ]
    + [(f"example {name}", np.array(row), 4, True) for name, row in EXAMPLES.items()]
)
ERROR_CASES = [
    ({"row": [1.0, 2.0], "block": 0}, "block size must be a positive integer, got 0"),
    ({"row": [1.0, 2.0], "block": 1.5}, "block size must be a positive integer, got 1.5"),
    ({"row": [], "block": 1}, "row must be a non-empty list of scores"),
    ({"row": [1.0, "nan"], "block": 1}, "score 2 is NaN: only numbers and -inf are allowed"),
    ({"row": ["inf"], "block": 1}, "score 1 is Infinity: only numbers and -inf are allowed"),
    (
        {"row": [1.0, 2.0], "block": 1, "values": [[1.0]]},
        "values have 1 rows but the row has 2 scores",
    ),
]
PARSE_CASES = [
    ("1 -inf, 2.5", [1.0, "-inf", 2.5]),
    ("\u22121.5 \u2212inf -Infinity -\u221e", [-1.5, "-inf", "-inf", "-inf"]),
    ("  1e-3 .5 -2. +4 ", [1e-3, 0.5, -2.0, 4.0]),
    ("", "type at least one score"),
    ("1 two", "'two' is not a number or -inf"),
    ("inf", "'inf' is not a number or -inf"),
    ("nan 1", "'nan' is not a number or -inf"),
    ("0x10", "'0x10' is not a number or -inf"),
]


@cache
def node_results() -> dict[str, list]:
    """Every case through flash.js in one node process; results keyed by group."""
    values = example_values(20, 3, seed=1).tolist()
    groups = {
        "steps": [
            {"kind": "steps", "row": _scores(row), "block": block}
            | ({"values": values[: len(row)]} if with_values else {})
            for _, row, block, with_values in STEP_CASES
        ],
        "softmax": [{"kind": "softmax", "row": _scores(row)} for _, row, _, _ in STEP_CASES],
        "errors": [{"kind": "steps", **case} for case, _ in ERROR_CASES],
        "parse": [{"kind": "parse", "text": text} for text, _ in PARSE_CASES],
    }
    cases = [case for group in groups.values() for case in group]
    results = iter(node_answers(HARNESS, [FLASH_JS], cases, timeout=60))
    return {name: [next(results) for _ in group] for name, group in groups.items()}


def _number(x) -> float:
    return -math.inf if x == "-inf" else x


@pytest.mark.parametrize("index", range(len(STEP_CASES)), ids=[c[0] for c in STEP_CASES])
def test_steps_match_the_numpy_oracle(index: int):
    _, row, block, with_values = STEP_CASES[index]
    result = node_results()["steps"][index]
    assert "error" not in result, result
    values = example_values(20, 3, seed=1)[: len(row)] if with_values else None
    oracle = reference.online_softmax_steps(row, block, values)
    assert [s["end"] for s in result["value"]] == [s.end for s in oracle]
    assert [s["start"] for s in result["value"]] == list(range(0, len(row), block))
    for mine, theirs in zip(result["value"], oracle, strict=True):
        assert _number(mine["runningMax"]) == theirs.running_max
        assert mine["runningSum"] == pytest.approx(theirs.running_sum, rel=TOLERANCE, abs=0)
        assert mine["rescale"] == pytest.approx(theirs.rescale, rel=TOLERANCE, abs=0)
        block_max = row[mine["start"] : mine["end"]].max()
        assert _number(mine["blockMax"]) == block_max
        np.testing.assert_allclose(mine["weights"], theirs.weights, rtol=TOLERANCE, atol=1e-15)
        if with_values:
            np.testing.assert_allclose(mine["output"], theirs.output, rtol=TOLERANCE, atol=1e-14)
        else:
            assert mine["output"] is None


@pytest.mark.parametrize("index", range(len(STEP_CASES)), ids=[c[0] for c in STEP_CASES])
def test_softmax_row_matches_the_oracle_and_the_last_step(index: int):
    row = STEP_CASES[index][1]
    weights = np.array(node_results()["softmax"][index]["value"])
    expected = reference.masked_softmax(row, np.isfinite(row))  # zeros for a row of -inf
    np.testing.assert_allclose(weights, expected, rtol=TOLERANCE, atol=1e-15)
    last = node_results()["steps"][index]["value"][-1]["weights"]
    np.testing.assert_allclose(last, weights, rtol=0, atol=1e-15)


def _steps(name: str) -> list[dict]:
    """The node result of the step case called ``name``."""
    return node_results()["steps"][[case[0] for case in STEP_CASES].index(name)]["value"]


def test_late_maximum_rescales_the_old_sum_by_exp_of_the_jump():
    steps = _steps("late maximum block 4")
    assert [s["runningMax"] for s in steps] == [2.0, 2.0, 6.0]
    assert [s["rescale"] for s in steps[1:]] == [1.0, pytest.approx(math.exp(2.0 - 6.0), rel=1e-15)]


def test_masked_keys_keep_the_state_empty_until_a_real_key_arrives():
    first = _steps("first block -inf")[0]
    assert (first["runningMax"], first["runningSum"], first["output"]) == ("-inf", 0, [0, 0, 0])
    empty = _steps("every key -inf")[-1]
    assert empty["weights"] == [0] * 10 and empty["output"] == [0] * 3


@pytest.mark.parametrize("index", range(len(ERROR_CASES)))
def test_steps_reject_bad_input(index: int):
    result = node_results()["errors"][index]
    assert result == {"error": ERROR_CASES[index][1]}


@pytest.mark.parametrize("index", range(len(PARSE_CASES)), ids=[c[0] for c in PARSE_CASES])
def test_parse_row(index: int):
    expected = PARSE_CASES[index][1]
    result = node_results()["parse"][index]
    if isinstance(expected, str):
        assert result == {"error": expected}
    else:
        assert result == {"value": expected}


# --- the HTML ---------------------------------------------------------------------------------


def test_flash_live_html_is_self_contained_and_stable():
    markup = flash_live().data
    assert (
        'data-explorer="online-softmax"' in markup and 'id="attnlib-live-online-softmax"' in markup
    )
    assert attnlib.live.FALLBACK in markup
    for name in attnlib.live.FLASH_SCRIPTS:
        assert attnlib.live.script_source(name) in markup
    assert markup.count("<script>") == markup.count("</script>") == 1
    assert "src=" not in markup
    assert flash_live().data == markup, (
        "the snippet must be the same every time (nbval compares it)"
    )
    examples = json.loads(data_attribute(markup, "examples"))
    assert list(examples) == list(EXAMPLES)
    assert examples["masked keys"][:5] == ["-inf", "-inf", "-inf", "-inf", 0.5]
    np.testing.assert_array_equal(json.loads(data_attribute(markup, "values")), example_values())
    assert data_attribute(markup, "block") == "4"


def test_flash_live_custom_rows_values_and_bad_input():
    markup = flash_live({"mine": [3.0, -math.inf, 1.0]}, np.ones((5, 2)), block_size=2).data
    assert json.loads(data_attribute(markup, "examples")) == {"mine": [3.0, "-inf", 1.0]}
    with pytest.raises(ValueError, match="example 'long' has 6 scores; the values allow 1 to 5"):
        flash_live({"long": [0.0] * 6}, np.ones((5, 2)))
    with pytest.raises(ValueError, match=r"example 'bad' contains NaN or \+inf"):
        flash_live({"bad": [0.0, math.inf]})
    with pytest.raises(
        ValueError, match=r"values must be \(n, d_v\) with n, d_v >= 1, got shape \(4,\)"
    ):
        flash_live(values=np.ones(4))
    with pytest.raises(ValueError, match="values must be finite"):
        flash_live(values=np.array([[np.nan, 1.0]] * 12))
    with pytest.raises(
        ValueError, match=r"block_size must be between 1 and 12 \(the first row\), got 13"
    ):
        flash_live(block_size=13)
    with pytest.raises(TypeError, match="block_size must be an int, got float"):
        flash_live(block_size=2.0)
    with pytest.raises(ValueError, match="at least one example row"):
        flash_live({})
