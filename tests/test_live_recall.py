"""Chapter 19's recall explorer: attnlib/live/recall.js computes what attnlib's steps do.

Every case runs through one node process. The oracle below builds each memory with attnlib:
softmax attention's read with :func:`attnlib.attend` over the cache, linear attention's state
with :func:`~attnlib.linear_attention.gated_linear_attention_step` (every gate at 1, so nothing
fades: S = Σ k vᵀ) and the delta rule's with :func:`~attnlib.linear_attention.delta_rule_step`
(write strength 1); the explorer's numbers must match to 1e-9, and so must the NumPy reference
(:func:`attnlib.reference.associative_recall`) that the browser test reads the page against.
"""

from __future__ import annotations

import html
import json
from functools import cache
from pathlib import Path

import numpy as np
import pytest
import torch

import attnlib.live
from attnlib import attend, reference
from attnlib.linear_attention import delta_rule_step, gated_linear_attention_step
from attnlib.live import script_source
from attnlib.live.recall_explorer import example_pairs, recall_live
from tests.helpers import case_harness, node_answers, of_kind

RECALL_JS = Path(attnlib.live.__file__).with_name("recall.js")
TOLERANCE = 1e-9
SHARPNESS = 16.0

HARNESS = case_harness(
    """
const recall = require(process.argv[1]);
const cases = JSON.parse(require("fs").readFileSync(0, "utf8"));
const run = {
  unit: (c) => recall.unitRows(c.rows, c.d),
  cache: (c) => recall.cacheRead(c.keys, c.table, c.values, c.written, c.q, c.sharpness),
  linear: (c) => recall.linearMemory(c.keys, c.table, c.values, c.written),
  delta: (c) => recall.deltaMemory(c.keys, c.table, c.values, c.written),
  recall: (c) => recall.recall(c.keys, c.table, c.values, c.written, c.sharpness),
  curve: (c) => recall.recallCurve(c.keys, c.table, c.values, c.sharpness),
  check: (c) => recall.checkPairs(c.keys, c.table, c.values),
};
"""
)


# --- the oracle: attnlib's own steps ---------------------------------------------------------


unit_rows = reference.unit_rows


def cache_read(keys, table, values, written, query) -> np.ndarray:
    """Softmax attention over the cache of the first ``written`` pairs: (d,)."""
    k = torch.tensor(keys[:written])[None]  # (1, written, d)
    v = torch.tensor(table[values[:written]])[None]
    q = torch.tensor(query)[None, None] * SHARPNESS * k.shape[-1] ** 0.5  # attend divides by √d
    return attend(q, k, v)[0][0, 0].numpy()


def linear_memory(keys, table, values, written) -> np.ndarray:
    """S after ``written`` steps of gated linear attention with every gate at 1: (d, d)."""
    d = keys.shape[1]
    state = torch.zeros(1, 1, d, d, dtype=torch.float64)
    for i in range(written):
        key, value = torch.tensor(keys[i])[None, None], torch.tensor(table[values[i]])[None, None]
        _, state = gated_linear_attention_step(key, key, value, torch.zeros_like(key), state)
    return state[0, 0].numpy()


def delta_memory(keys, table, values, written) -> np.ndarray:
    """Sᵀ after ``written`` steps of the delta rule at strength 1: (d, d), key features down."""
    d = keys.shape[1]
    state = torch.zeros(1, 1, d, d, dtype=torch.float64)
    for i in range(written):
        key, value = torch.tensor(keys[i])[None, None], torch.tensor(table[values[i]])[None, None]
        _, state = delta_rule_step(key, key, value, torch.ones(1, 1, dtype=torch.float64), state)
    return state[0, 0].T.numpy()


def recalled(keys, table, values, written) -> dict[str, list[int]]:
    """Each memory's value id for every key written: the table row best matching its read."""
    linear, delta = (
        linear_memory(keys, table, values, written),
        delta_memory(keys, table, values, written),
    )
    reads = {
        "cache": [cache_read(keys, table, values, written, k) for k in keys[:written]],
        "linear": [k @ linear for k in keys[:written]],
        "delta": [k @ delta for k in keys[:written]],
    }
    return {name: [int(np.argmax(table @ r)) for r in found] for name, found in reads.items()}


# --- the cases -------------------------------------------------------------------------------

KEYS, TABLE, VALUES = example_pairs()
DIMS = (4, 8, 16)


def pairs(d: int) -> dict:
    """The example's unit keys and value vectors of size d, as node takes them."""
    return {
        "keys": unit_rows(KEYS, d).tolist(),
        "table": unit_rows(TABLE, d).tolist(),
        "values": VALUES.tolist(),
    }


def cases() -> list[dict]:
    """Every case with its kind; the answers come back in the same order."""
    out = [{"kind": "unit", "rows": KEYS.tolist(), "d": d} for d in DIMS]
    out += [{"kind": "unit", "rows": KEYS.tolist(), "d": 17}]
    for d in DIMS:
        for written in (1, 3, d, 24):
            out += [
                {"kind": "cache", **pairs(d), "written": written, "q": q, "sharpness": SHARPNESS}
                for q in unit_rows(KEYS, d)[[0, written - 1]].tolist()
            ]
            out += [{"kind": kind, **pairs(d), "written": written} for kind in ("linear", "delta")]
            out += [{"kind": "recall", **pairs(d), "written": written, "sharpness": SHARPNESS}]
        out += [{"kind": "curve", **pairs(d), "sharpness": SHARPNESS}]
    out += [
        {"kind": "check", "keys": [[1.0, 0.0]], "table": [[0.0, 1.0]], "values": [1]},
        {"kind": "check", "keys": [[1.0, 0.0]], "table": [[0.0, 1.0, 2.0]], "values": [0]},
        {"kind": "check", "keys": [[1.0, 0.0]], "table": [[0.0, 1.0]], "values": []},
    ]
    return out


@cache
def node_results() -> tuple[dict, ...]:
    """Run every case through recall.js in one node process."""
    return tuple(node_answers(HARNESS, [RECALL_JS], cases(), timeout=60))


def answers(kind: str) -> list[tuple[dict, dict]]:
    """(case, node's answer) for every case of one kind."""
    return of_kind(kind, cases(), node_results())


def arrays(case: dict) -> tuple[np.ndarray, np.ndarray, np.ndarray, int]:
    return (
        np.array(case["keys"]),
        np.array(case["table"]),
        np.array(case["values"]),
        case["written"],
    )


# --- the tests -------------------------------------------------------------------------------


def test_unit_rows_match_numpy_and_refuse_a_size_too_large():
    found = answers("unit")
    for (_, result), d in zip(found[:3], DIMS, strict=True):
        np.testing.assert_allclose(result["value"], unit_rows(KEYS, d), rtol=0, atol=TOLERANCE)
    assert found[3][1] == {"error": "d must be an integer in 1..16, got 17"}


def test_the_cache_reads_what_softmax_attention_does():
    found = answers("cache")
    assert len(found) == 24
    for case, result in found:
        keys, table, values, written = arrays(case)
        want = cache_read(keys, table, values, written, np.array(case["q"]))
        np.testing.assert_allclose(result["value"], want, rtol=0, atol=TOLERANCE)


@pytest.mark.parametrize(("kind", "oracle"), [("linear", linear_memory), ("delta", delta_memory)])
def test_each_state_is_what_attnlib_s_step_writes(kind, oracle):
    found = answers(kind)
    assert len(found) == 12
    for case, result in found:
        keys, table, values, written = arrays(case)
        want = oracle(keys, table, values, written)
        assert np.asarray(result["value"]).shape == (keys.shape[1],) * 2  # d x d, whatever written
        np.testing.assert_allclose(result["value"], want, rtol=0, atol=TOLERANCE)


def test_every_memory_recalls_what_the_oracle_does():
    found = answers("recall")
    assert len(found) == 12
    for case, result in found:
        assert result["value"] == recalled(*arrays(case))


def test_the_curve_shows_a_fixed_state_running_out_and_the_cache_not():
    curves = {}
    for (case, result), d in zip(answers("curve"), DIMS, strict=True):
        keys, table, values = (np.array(case[name]) for name in ("keys", "table", "values"))
        for name, shares in result["value"].items():
            want = [
                np.mean(np.array(recalled(keys, table, values, n)[name]) == values[:n])
                for n in range(1, 25)
            ]
            np.testing.assert_allclose(shares, want, rtol=0, atol=1e-12)
        curves[d] = result["value"]
    assert all(share == 1.0 for d in DIMS for share in curves[d]["cache"])
    # a state of 4 x 4 fails once the pairs are many more than 4; one of 16 x 16 holds longer
    assert curves[4]["linear"][-1] < 0.25 < curves[16]["linear"][-1]


def test_bad_pairs_are_named():
    found = [result for _, result in answers("check")]
    assert found[0] == {"error": "value 1 is 1, not an id in 0..0"}
    assert found[1] == {
        "error": "every key and value vector must have 2 entries; row 1 of the table and keys "
        "does not"
    }
    assert found[2]["error"].startswith("keys and values must be lists of the same length >= 1")


# --- the HTML and its Python checks ----------------------------------------------------------


def test_recall_live_html_is_self_contained_and_stable():
    markup = recall_live().data
    assert 'id="attnlib-live-recall" data-explorer="recall"' in markup
    assert script_source("recall.js") in markup and script_source("explorers.js") in markup
    assert markup.count("<script>") == markup.count("</script>") == 1 and "src=" not in markup
    assert recall_live().data == markup, "the snippet must be the same every time"
    found = {
        name: json.loads(html.unescape(value))
        for name, value in (
            (n, markup.split(f'data-{n}="')[1].split('"')[0]) for n in ("keys", "values", "dims")
        )
    }
    assert np.array(found["keys"]).shape == (24, 16) and sorted(found["values"]) == list(range(24))
    assert found["dims"] == [4, 8, 16] and 'data-sharpness="16"' in markup


@pytest.mark.parametrize(
    ("arguments", "message"),
    [
        (
            {"keys": np.zeros((0, 4))},
            "keys must be \\(rows, d\\) with rows >= 1, got shape \\(0, 4\\)",
        ),
        ({"table": np.full((24, 16), np.nan)}, "table must be finite, got 384 bad"),
        ({"table": np.ones((24, 8))}, "table has vectors of 8 but keys of 16"),
        ({"values": np.arange(23)}, "values must be 24 integer value ids"),
        ({"values": np.arange(1, 25)}, "value ids must be rows of the table, 0..23, got 1..24"),
        ({"sharpness": 0.0}, "sharpness must be positive, got 0.0"),
        ({"dims": (4, 32)}, "dims must be key sizes in 1..16, got \\(4, 32\\)"),
    ],
)
def test_recall_live_names_bad_arguments(arguments, message):
    with pytest.raises(ValueError, match=message):
        recall_live(**arguments)


@pytest.mark.parametrize("d", DIMS)
def test_the_numpy_reference_is_attnlib_s_steps(d):
    keys, table = unit_rows(KEYS, d), unit_rows(TABLE, d)
    for written in (1, 3, d, 24):
        memories = reference.associative_memories(keys, table, VALUES, written)
        want = (
            linear_memory(keys, table, VALUES, written),
            delta_memory(keys, table, VALUES, written),
        )
        np.testing.assert_allclose(memories["linear"], want[0], rtol=0, atol=1e-12)
        np.testing.assert_allclose(memories["delta"], want[1], rtol=0, atol=1e-12)
        found = reference.associative_recall(keys, table, VALUES, written, SHARPNESS)
        assert found == recalled(keys, table, VALUES, written)
