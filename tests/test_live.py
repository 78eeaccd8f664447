"""The browser explorers compute what attnlib.reference computes: one source of truth.

attnlib/live/attention.js and encoder.js run in node on the same inputs as the NumPy oracle, and
every number they return must match to 1e-9. All cases go through one node process, so this
stays fast.
"""

from __future__ import annotations

import json
from functools import cache
from pathlib import Path

import numpy as np
import pytest

import attnlib.live
from attnlib import reference
from attnlib.live import (
    example_scores,
    heads_live,
    masks_live,
    positions_live,
    temperature_live,
    worked_example_live,
)
from tests.helpers import node_answers

ATTENTION_JS = Path(attnlib.live.__file__).with_name("attention.js")
ENCODER_JS = Path(attnlib.live.__file__).with_name("encoder.js")
FIELDS = ("keys", "queries", "values", "scores", "weights", "outputs")
TOLERANCE = 1e-9

# Reads a JSON list of cases on stdin, answers a JSON list of results (or {"error": message}).
HARNESS = """
const live = require(process.argv[1]);
const enc = require(process.argv[2]);
const fill = (f) => (f === "-inf" ? -Infinity : f);
const cases = JSON.parse(require("fs").readFileSync(0, "utf8"));
const run = {
  worked: (c) => live.workedExample(c.inputs, c.keyWeights, c.queryWeights, c.valueWeights,
                                    c.options),
  softmax: (c) => live.softmax(c.row, c.temperature),
  parse: (c) => live.parseMatrix(c.text, c.rows, c.cols, c.name),
  scores: (c) => live.parseScores(c.text),
  entropy: (c) => live.entropy(c.row),
  matmul: (c) => live.matmul(c.a, c.b),
  transpose: (c) => live.transpose(c.a),
  defaults: () => [live.WORKED_INPUTS, live.WORKED_KEY_WEIGHTS, live.WORKED_QUERY_WEIGHTS,
                   live.WORKED_VALUE_WEIGHTS],
  heads: (c) => {
    const r = enc.multiHead(c.x, c.wQ, c.wK, c.wV, c.heads, { scaleBy: c.scaleBy });
    return { ...r, summary: enc.headSummary(r.weights), divisors: enc.divisors(c.x[0].length) };
  },
  split: (c) => enc.splitHeads(c.x, c.heads),
  merge: (c) => enc.mergeHeads(c.heads),
  positions: (c) => ({
    frequencies: enc.frequencies(c.d),
    table: enc.sinusoidalEncoding(c.length, c.d),
    at: enc.positionalEncoding(c.pos, c.d),
    rotation: enc.offsetRotation(c.k, c.d),
    blocks: Array.from({ length: Math.floor(c.d / 2) }, (_, i) => enc.rotationBlock(c.k, i, c.d)),
    rotated: enc.rotate(c.k, enc.positionalEncoding(c.pos, c.d), c.d),
    error: enc.rotationError(c.pos, c.k, c.d),
    similarity: enc.encodingSimilarity(c.pos, c.deltas, c.d),
  }),
  masks: (c) => {
    const mask = enc.attentionMask(c.maskKind, c.n, c.length, c.row);
    return { mask, weights: enc.maskedSoftmax(c.scores, mask, fill(c.fill)) };
  },
  padding: (c) => enc.paddingMask(c.lengths, c.maxLen),
  causal: (c) => enc.causalMask(c.nq, c.nk),
  softmaxNoMask: (c) => enc.maskedSoftmax(c.scores, null, fill(c.fill)),
};
const results = cases.map((c) => {
  try {
    return { value: run[c.kind](c) };
  } catch (error) {
    return { error: error.message };
  }
});
process.stdout.write(JSON.stringify(results));
"""

WORKED = {
    "inputs": reference.WORKED_INPUTS,
    "keyWeights": reference.WORKED_KEY_WEIGHTS,
    "queryWeights": reference.WORKED_QUERY_WEIGHTS,
    "valueWeights": reference.WORKED_VALUE_WEIGHTS,
}


def random_worked(seed: int, n: int = 3, d_in: int = 4, d_k: int = 3, d_v: int = 3) -> dict:
    """Random inputs and weights for a worked-example case, made in Python."""
    rng = np.random.default_rng(seed)
    return {
        "inputs": rng.normal(size=(n, d_in)),
        "keyWeights": rng.normal(size=(d_in, d_k)),
        "queryWeights": rng.normal(size=(d_in, d_k)),
        "valueWeights": rng.normal(size=(d_in, d_v)),
    }


# (name, matrices, scale, temperature): each is run in node and by attnlib.reference.
WORKED_CASES = [
    ("article", WORKED, False, 1.0),
    ("article scaled", WORKED, True, 1.0),
    ("article T=0.1", WORKED, False, 0.1),
    ("article T=7", WORKED, False, 7.0),
    ("article scaled T=0.1", WORKED, True, 0.1),
    ("article slider end", WORKED, True, 10**1.5),
    ("random 1", random_worked(1), False, 1.0),
    ("random 2 scaled", random_worked(2), True, 1.0),
    ("random 3 T=0.1", random_worked(3), False, 0.1),
    ("random 4 scaled T=7", random_worked(4), True, 7.0),
    ("random wide", random_worked(5, n=5, d_in=6, d_k=8, d_v=2), True, 0.5),
    ("random large scores", {k: 40 * v for k, v in random_worked(6).items()}, False, 1.0),
]

SOFTMAX_CASES = [
    ([2.0, 4.0, 4.0, 1.0, -1.0], 1.0),
    ([2.0, 4.0, 4.0, 1.0, -1.0], 0.1),
    ([2.0, 4.0, 4.0, 1.0, -1.0], 7.0),
    ([2.0, 4.0, 4.0, 1.0, -1.0], 10**-1.5),
    ([16.0, 32.0, 32.0, 8.0, -8.0], 8.0),
    ([1000.0, 1001.0, -1000.0], 1.0),  # overflows without the max shift
    ([3.5], 1.0),
    (np.random.default_rng(7).normal(size=12).tolist(), 0.7),
]

PARSE_CASES = [
    ("1 0 1 0; 0 2 0 2\n1,1,1,1", 3, 4, "inputs"),
    ("  1.5e1 -2 .5\n\n3, 4., -0\n", 2, 3, "W_K"),
    ("1 2 3; 4 5 6", 4, 3, "W_K"),
    ("1 2 3 4; 1 2 3; 1 2 3 4", 3, 4, "inputs"),
    ("1 2 x", 1, 3, "W_Q"),
    ("", 4, 3, "W_V"),
]

ENTROPY_ROWS = ([0.25] * 4, [1.0, 0.0], [0.2, 0.8])


def random_heads(seed: int, n: int, d_model: int, factor: float = 1.0) -> dict:
    """Random tokens' inputs and (d_model, d_model) projections for a head-explorer case."""
    rng = np.random.default_rng(seed)
    return {
        "x": factor * rng.normal(size=(n, d_model)),
        "wQ": factor * rng.normal(size=(d_model, d_model)),
        "wK": factor * rng.normal(size=(d_model, d_model)),
        "wV": rng.normal(size=(d_model, d_model)),
    }


# (name, seed, n tokens, d_model, heads, scale by[, factor]): every divisor of 8, odd widths.
HEADS_CASES = [
    ("d8 h1", 1, 5, 8, 1, "head"),
    ("d8 h2", 1, 5, 8, 2, "head"),
    ("d8 h4", 1, 5, 8, 4, "head"),
    ("d8 h8", 1, 5, 8, 8, "head"),
    ("d8 h4 bug", 1, 5, 8, 4, "model"),
    ("d8 h1 bug", 1, 5, 8, 1, "model"),
    ("d12 h3", 2, 4, 12, 3, "head"),
    ("d12 h6 bug", 2, 4, 12, 6, "model"),
    ("d9 h3 odd", 3, 6, 9, 3, "head"),
    ("d7 h7 odd", 4, 3, 7, 7, "model"),
    ("one token", 5, 1, 6, 2, "head"),
    ("large scores", 6, 5, 8, 2, "head", 6.0),
]
# (d_model, pos, k): even and odd widths, k = 0, large positions, fractional ones.
POSITION_CASES = [
    (64, 10, 5),
    (64, 0, 0),
    (64, 99, 99),
    (16, 3, 40),
    (7, 12, 3),
    (2, 5, 1),
    (3, 2.5, 7.25),
    (128, 1000, 37),
]
DELTAS = [0, 1, 2, 5, 17, 50, 99, -3]
MASK_SCORES = example_scores(6, seed=3)
# (kind, n, real length, fully masked row, fill, scores)
MASK_CASES = [
    (kind, 6, length, row, fill, MASK_SCORES)
    for kind in reference.MASK_KINDS
    for length, row in ((6, None), (4, None), (1, None), (3, 2), (6, 0), (5, 5))
    for fill in ("-inf", -1e9, 0.0)
] + [
    ("padding+causal", 1, 1, None, "-inf", np.array([[2.5]])),
    ("padding+causal", 1, 1, 0, "-inf", np.array([[2.5]])),
    ("padding", 7, 5, 6, -1e9, example_scores(7)),
    ("causal", 8, 8, 3, "-inf", 30 * example_scores(8)),
]
PADDING_CASES = [([3, 1, 4], 5), ([2, 2], None), ([0, 3], 3), ([], 4)]
CAUSAL_CASES = [(4, None), (3, 5), (1, 1), (2, 6)]


def to_json(value):
    """NumPy arrays as nested lists of floats, for the harness."""
    if isinstance(value, np.ndarray):
        return value.astype(float).tolist()
    if isinstance(value, dict):
        return {key: to_json(item) for key, item in value.items()}
    return value


@cache
def node_results() -> dict[str, list]:
    """Run every case through attention.js in one node process; results keyed by group."""
    groups = {
        "worked": [
            {"kind": "worked", **to_json(m), "options": {"scale": s, "temperature": t}}
            for _, m, s, t in WORKED_CASES
        ],
        "softmax": [{"kind": "softmax", "row": row, "temperature": t} for row, t in SOFTMAX_CASES],
        "parse": [
            {"kind": "parse", "text": text, "rows": r, "cols": c, "name": name}
            for text, r, c, name in PARSE_CASES
        ],
        "scores": [{"kind": "scores", "text": t} for t in ("2 4 4 1 -1", "1,2, 3", " ", "1 two")],
        "entropy": [{"kind": "entropy", "row": r} for r in ENTROPY_ROWS],
        "matmul": [
            {"kind": "matmul", "a": [[1, 2], [3, 4]], "b": [[5], [6]]},
            {"kind": "matmul", "a": [[1, 2, 3]], "b": [[1, 2]]},
        ],
        "transpose": [{"kind": "transpose", "a": [[1, 2, 3], [4, 5, 6]]}],
        "defaults": [{"kind": "defaults"}],
        "heads": [
            {
                "kind": "heads",
                **to_json(random_heads(*case[1:4], *case[6:])),
                "heads": case[4],
                "scaleBy": case[5],
            }
            for case in HEADS_CASES
        ],
        "split": [
            {"kind": "split", "x": to_json(random_heads(9, 3, 12)["x"]), "heads": h}
            for h in (1, 2, 3, 4, 6, 12, 5)
        ],
        "merge": [
            {
                "kind": "merge",
                "heads": to_json(reference.split_heads(random_heads(9, 3, 12)["x"], 4)),
            }
        ],
        "positions": [
            {"kind": "positions", "d": d, "pos": pos, "k": k, "length": 12, "deltas": DELTAS}
            for d, pos, k in POSITION_CASES
        ],
        "masks": [
            {
                "kind": "masks",
                "maskKind": mask_kind,
                "n": n,
                "length": length,
                "row": row,
                "fill": fill,
                "scores": to_json(scores),
            }
            for mask_kind, n, length, row, fill, scores in MASK_CASES
        ],
        "padding": [
            {"kind": "padding", "lengths": lengths, "maxLen": max_len}
            for lengths, max_len in PADDING_CASES
        ],
        "causal": [{"kind": "causal", "nq": nq, "nk": nk} for nq, nk in CAUSAL_CASES],
        "softmaxNoMask": [
            {"kind": "softmaxNoMask", "scores": to_json(example_scores(5)), "fill": "-inf"}
        ],
    }
    cases = [case for group in groups.values() for case in group]
    results = iter(node_answers(HARNESS, [ATTENTION_JS, ENCODER_JS], cases, timeout=60))
    return {name: [next(results) for _ in group] for name, group in groups.items()}


@pytest.mark.parametrize("index", range(len(WORKED_CASES)), ids=[case[0] for case in WORKED_CASES])
def test_worked_example_matches_reference(index: int):
    _, matrices, scale, temperature = WORKED_CASES[index]
    result = node_results()["worked"][index]
    assert "error" not in result, result
    expected = reference.worked_example(
        matrices["inputs"],
        matrices["keyWeights"],
        matrices["queryWeights"],
        matrices["valueWeights"],
        scale=scale,
        temperature=temperature,
    )
    for field in FIELDS:
        shown = np.array(result["value"][field])
        want = getattr(expected, field)
        assert shown.shape == want.shape, field
        np.testing.assert_allclose(shown, want, rtol=TOLERANCE, atol=TOLERANCE, err_msg=field)


def test_worked_example_article_numbers():
    weights = np.array(node_results()["worked"][0]["value"]["weights"])
    outputs = np.array(node_results()["worked"][0]["value"]["outputs"])
    assert np.round(weights[0], 4).tolist() == [0.0634, 0.4683, 0.4683]
    assert np.round(outputs[0], 4).tolist() == [1.9366, 6.6831, 1.5951]


def test_browser_defaults_are_the_reference_example():
    inputs, key_weights, query_weights, value_weights = node_results()["defaults"][0]["value"]
    np.testing.assert_array_equal(inputs, reference.WORKED_INPUTS)
    np.testing.assert_array_equal(key_weights, reference.WORKED_KEY_WEIGHTS)
    np.testing.assert_array_equal(query_weights, reference.WORKED_QUERY_WEIGHTS)
    np.testing.assert_array_equal(value_weights, reference.WORKED_VALUE_WEIGHTS)


@pytest.mark.parametrize("index", range(len(SOFTMAX_CASES)))
def test_softmax_matches_reference(index: int):
    row, temperature = SOFTMAX_CASES[index]
    result = node_results()["softmax"][index]
    assert "error" not in result, result
    expected = reference.softmax(np.array(row), temperature=temperature)
    np.testing.assert_allclose(result["value"], expected, rtol=TOLERANCE, atol=TOLERANCE)


def test_parse_matrix_reads_the_widget_format():
    results = node_results()["parse"]
    np.testing.assert_array_equal(results[0]["value"], reference.WORKED_INPUTS)
    assert results[1]["value"] == [[15.0, -2.0, 0.5], [3.0, 4.0, 0.0]]


def test_parse_matrix_errors_name_the_shape():
    results = node_results()["parse"]
    assert results[2] == {"error": "W_K needs 4 rows of 3 numbers, one row per line; it has 2 rows"}
    assert results[3] == {"error": "inputs needs 4 numbers in each row; row 2 has 3"}
    assert results[4] == {"error": "W_Q: 'x' is not a number"}
    assert results[5] == {"error": "W_V needs 4 rows of 3 numbers, one row per line; it has 0 rows"}


def test_parse_matrix_errors_match_python():
    from attnlib.widgets import parse_matrix

    for (text, rows, cols, name), result in zip(PARSE_CASES, node_results()["parse"], strict=True):
        try:
            expected = {"value": parse_matrix(text, (rows, cols), name).tolist()}
        except ValueError as error:
            expected = {"error": str(error)}
        assert result == expected


def test_scores_parse_and_entropy():
    scores = node_results()["scores"]
    assert scores[0] == {"value": [2, 4, 4, 1, -1]}
    assert scores[1] == {"value": [1, 2, 3]}
    assert "at least one score" in scores[2]["error"]
    assert scores[3] == {"error": "scores: 'two' is not a number"}
    for result, row in zip(node_results()["entropy"], ENTROPY_ROWS, strict=True):
        w = np.array(row)
        expected = float(-(w * np.log(np.clip(w, 1e-300, None))).sum())
        assert result["value"] == pytest.approx(expected, abs=TOLERANCE)


def test_matmul_and_transpose():
    product, mismatch = node_results()["matmul"]
    assert product == {"value": [[17], [39]]}
    assert mismatch == {"error": "cannot multiply (1, 3) by (1, 2)"}
    assert node_results()["transpose"][0] == {"value": [[1, 4], [2, 5], [3, 6]]}


@pytest.mark.parametrize(
    ("make", "explorer"),
    [(worked_example_live, "worked-example"), (temperature_live, "temperature")],
)
def test_live_html_has_root_and_inlined_script(make, explorer):
    markup = make().data
    assert f'data-explorer="{explorer}"' in markup
    assert f'id="attnlib-live-{explorer}"' in markup
    assert 'class="attnlib-live' in markup
    assert "<script>" in markup and "src=" not in markup
    for name in attnlib.live.SCRIPTS:
        assert attnlib.live.script_source(name) in markup
    assert markup.count("</script>") == 1
    assert make().data == markup, "the snippet must be the same every time (nbval compares it)"


def test_temperature_live_passes_its_scores():
    assert 'data-scores="16 32 32 8 -8"' in temperature_live((16, 32, 32, 8, -8)).data
    assert 'data-scores="2 4 4 1 -1"' in temperature_live().data
    with pytest.raises(ValueError, match="at least one score"):
        temperature_live(())


def test_live_html_mentions_no_external_host():
    for markup in (worked_example_live().data, temperature_live().data):
        for host in ("cdn.jsdelivr", "unpkg.com", "cdnjs", "mathjax.org", "googleapis.com"):
            assert host not in markup


# --- chapters 07-09: heads, positions, masks (attnlib/live/encoder.js) ---


@pytest.mark.parametrize("index", range(len(HEADS_CASES)), ids=[case[0] for case in HEADS_CASES])
def test_multi_head_matches_reference(index: int):
    _, seed, n, d_model, heads, scale_by, *factor = HEADS_CASES[index]
    matrices = random_heads(seed, n, d_model, *factor)
    result = node_results()["heads"][index]
    assert "error" not in result, result
    got = result["value"]
    want = reference.multi_head_attention(
        matrices["x"], matrices["wQ"], matrices["wK"], matrices["wV"], heads, scale_by
    )
    for field in ("queries", "keys", "values", "scores", "weights", "outputs"):
        shown = np.array(got[field])
        assert shown.shape == getattr(want, field).shape, field
        np.testing.assert_allclose(
            shown, getattr(want, field), rtol=TOLERANCE, atol=TOLERANCE, err_msg=field
        )
    d_head = d_model // heads
    assert got["scale"] == pytest.approx(np.sqrt(d_head if scale_by == "head" else d_model))
    entropies = [s["entropy"] for s in got["summary"]]
    largest = [s["largest"] for s in got["summary"]]
    np.testing.assert_allclose(entropies, reference.entropy(want.weights).mean(axis=-1), atol=1e-9)
    np.testing.assert_allclose(largest, want.weights.max(axis=(-2, -1)), atol=1e-12)
    assert got["divisors"] == [k for k in range(1, d_model + 1) if d_model % k == 0]


def test_split_and_merge_heads_match_reference():
    x = random_heads(9, 3, 12)["x"]
    for result, heads in zip(node_results()["split"], (1, 2, 3, 4, 6, 12, 5), strict=True):
        if heads == 5:
            assert result == {"error": "num_heads=5 does not divide d_model=12"}
            with pytest.raises(ValueError, match="num_heads=5 does not divide d_model=12"):
                reference.split_heads(x, 5)
            continue
        np.testing.assert_array_equal(result["value"], reference.split_heads(x, heads))
    np.testing.assert_array_equal(node_results()["merge"][0]["value"], x)


@pytest.mark.parametrize("index", range(len(POSITION_CASES)))
def test_positions_match_reference(index: int):
    d_model, pos, offset = POSITION_CASES[index]
    result = node_results()["positions"][index]
    assert "error" not in result, result
    got = result["value"]
    pairs = d_model // 2
    rotation = reference.offset_rotation(offset, d_model)
    expected = {
        "frequencies": reference.frequencies(d_model),
        "table": reference.sinusoidal_encoding(12, d_model),
        "at": reference.positional_encoding(pos, d_model),
        "rotation": rotation,
        "blocks": [rotation[2 * i : 2 * i + 2, 2 * i : 2 * i + 2] for i in range(pairs)],
        "rotated": rotation @ reference.positional_encoding(pos, d_model)[: 2 * pairs],
        "similarity": reference.encoding_similarity(pos, DELTAS, d_model),
    }
    for field, want in expected.items():
        shown = np.array(got[field])
        assert shown.shape == np.shape(want), field
        np.testing.assert_allclose(shown, want, rtol=TOLERANCE, atol=TOLERANCE, err_msg=field)
    assert got["error"] < 1e-12
    assert got["error"] == pytest.approx(reference.rotation_error(pos, offset, d_model), abs=1e-13)


def test_rotation_block_orientation():
    """Block i is [[cos kω, sin kω], [-sin kω, cos kω]] acting on the (sin, cos) pair."""
    d_model, pos, offset = POSITION_CASES[0]
    block = np.array(node_results()["positions"][0]["value"]["blocks"][1])
    angle = offset * 10000 ** (-2 / d_model)
    np.testing.assert_allclose(
        block, [[np.cos(angle), np.sin(angle)], [-np.sin(angle), np.cos(angle)]], atol=1e-15
    )
    here = reference.positional_encoding(pos, d_model)[2:4]
    there = reference.positional_encoding(pos + offset, d_model)[2:4]
    np.testing.assert_allclose(block @ here, there, atol=1e-12)


@pytest.mark.parametrize(
    "index",
    range(len(MASK_CASES)),
    ids=[f"{c[0]} n={c[1]} len={c[2]} row={c[3]} fill={c[4]}" for c in MASK_CASES],
)
def test_masks_match_reference(index: int):
    kind, n, length, row, fill, scores = MASK_CASES[index]
    result = node_results()["masks"][index]
    assert "error" not in result, result
    mask = reference.attention_mask(kind, n, length, row)
    np.testing.assert_array_equal(result["value"]["mask"], mask)
    fill_value = -np.inf if fill == "-inf" else fill
    weights = np.array(result["value"]["weights"])
    assert not np.isnan(weights).any()
    want = reference.masked_softmax(scores, mask, fill=fill_value)
    np.testing.assert_allclose(weights, want, rtol=TOLERANCE, atol=TOLERANCE)
    if row is not None and fill == "-inf":
        assert (weights[row] == 0).all(), "a fully masked row gives zeros"


def test_minus_1e9_equals_minus_inf_where_a_row_has_a_key():
    by_case = {
        (c[0], c[2], c[3], c[4]): np.array(r["value"]["weights"])
        for c, r in zip(MASK_CASES, node_results()["masks"], strict=True)
        if c[1] == 6
    }
    for kind in reference.MASK_KINDS:
        exact, large = by_case[(kind, 4, None, "-inf")], by_case[(kind, 4, None, -1e9)]
        np.testing.assert_array_equal(np.round(large, 4), np.round(exact, 4))
    zero = by_case[("padding", 4, None, 0.0)]
    assert zero[:, 4:].sum() > 0.01, "filling with 0 leaves weight on the padding"


def test_padding_and_causal_masks_match_reference():
    for (lengths, max_len), result in zip(PADDING_CASES, node_results()["padding"], strict=True):
        want = reference.padding_mask(np.array(lengths, dtype=np.int64), max_len)
        np.testing.assert_array_equal(
            np.array(result["value"], dtype=bool).reshape(want.shape), want
        )
    for (nq, nk), result in zip(CAUSAL_CASES, node_results()["causal"], strict=True):
        np.testing.assert_array_equal(result["value"], reference.causal_mask(nq, nk))
    np.testing.assert_allclose(
        node_results()["softmaxNoMask"][0]["value"],
        reference.softmax(example_scores(5)),
        atol=TOLERANCE,
    )


NEW_EXPLORERS = [
    (
        lambda: heads_live(
            ["a", "b", "c"], *[random_heads(0, 3, 4)[k] for k in ("x", "wQ", "wK", "wV")], 2
        ),
        "heads",
    ),
    (positions_live, "positions"),
    (masks_live, "masks"),
]


@pytest.mark.parametrize(("make", "explorer"), NEW_EXPLORERS, ids=["heads", "positions", "masks"])
def test_new_explorers_html_is_self_contained(make, explorer):
    markup = make().data
    assert f'data-explorer="{explorer}"' in markup
    assert f'id="attnlib-live-{explorer}"' in markup
    assert attnlib.live.FALLBACK in markup
    assert "<script>" in markup and "src=" not in markup
    for name in attnlib.live.SCRIPTS:
        assert attnlib.live.script_source(name) in markup
    assert markup.count("</script>") == 1
    assert make().data == markup, "the snippet must be the same every time (nbval compares it)"
    for host in ("cdn.jsdelivr", "unpkg.com", "cdnjs", "mathjax.org", "googleapis.com"):
        assert host not in markup


def attribute(markup: str, name: str) -> str:
    import html
    import re

    found = re.search(f'data-{name}="([^"]*)"', markup)
    assert found, name
    return html.unescape(found.group(1))


def test_heads_live_embeds_its_data_exactly():
    data = random_heads(4, 3, 6)
    markup = heads_live(
        ["the", "cat", '"sat"'], data["x"], data["wQ"], data["wK"], data["wV"], 3
    ).data
    assert json.loads(attribute(markup, "tokens")) == ["the", "cat", '"sat"']
    np.testing.assert_array_equal(json.loads(attribute(markup, "inputs")), data["x"])
    np.testing.assert_array_equal(json.loads(attribute(markup, "w-k")), data["wK"])
    assert attribute(markup, "heads") == "3"


@pytest.mark.parametrize(
    ("args", "message"),
    [
        ((["a", "b"], np.zeros((3, 4)), 2), "2 tokens but x has 3 rows"),
        ((["a", "b", "c"], np.zeros((3, 4)), 3), "num_heads=3 does not divide d_model=4"),
        ((["a"], np.zeros(4), 1), r"x must be \(n, d_model\)"),
    ],
)
def test_heads_live_refuses_bad_input(args, message):
    tokens, x, heads = args
    w = np.eye(x.shape[-1])
    with pytest.raises(ValueError, match=message):
        heads_live(tokens, x, w, w, w, heads)
    with pytest.raises(ValueError, match=r"w_v must have shape \(4, 4\), got \(4, 3\)"):
        heads_live(["a"], np.zeros((1, 4)), np.eye(4), np.eye(4), np.zeros((4, 3)), 2)


def test_masks_live_embeds_default_scores_and_refuses_bad_input():
    markup = masks_live().data
    np.testing.assert_array_equal(json.loads(attribute(markup, "scores")), example_scores(8))
    assert attribute(markup, "kind") == "padding" and attribute(markup, "length") == "6"
    scores = np.arange(9.0).reshape(3, 3)
    custom = masks_live(3, scores, kind="causal", length=2).data
    np.testing.assert_array_equal(json.loads(attribute(custom, "scores")), scores)
    with pytest.raises(ValueError, match=r"scores must have shape \(4, 4\), got \(3, 3\)"):
        masks_live(4, scores)
    with pytest.raises(ValueError, match="kind must be one of"):
        masks_live(3, kind="diagonal")
    with pytest.raises(ValueError, match="scores must be finite"):
        masks_live(2, np.array([[0.0, np.inf], [0.0, 0.0]]))
    with pytest.raises(ValueError, match="length must be between 1 and n=3"):
        masks_live(3, length=0)


def test_positions_live_attributes_and_checks():
    markup = positions_live(16, 40).data
    assert attribute(markup, "d-model") == "16" and attribute(markup, "max-len") == "40"
    with pytest.raises(ValueError, match="d_model must be an integer >= 2"):
        positions_live(1)
    with pytest.raises(ValueError, match="max_len must be an integer >= 2"):
        positions_live(8, 1)
