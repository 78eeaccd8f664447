"""The browser explorers compute what attnlib.reference computes: one source of truth.

attnlib/live/attention.js runs in node on the same inputs as the NumPy oracle, and every number
it returns must match to 1e-9. All cases go through one node process, so this stays fast.
"""

from __future__ import annotations

import json
import shutil
import subprocess
from functools import cache
from pathlib import Path

import numpy as np
import pytest

import attnlib.live
from attnlib import reference
from attnlib.live import temperature_live, worked_example_live

ATTENTION_JS = Path(attnlib.live.__file__).with_name("attention.js")
NODE = shutil.which("node") or ("/usr/bin/node" if Path("/usr/bin/node").is_file() else None)
FIELDS = ("keys", "queries", "values", "scores", "weights", "outputs")
TOLERANCE = 1e-9

# Reads a JSON list of cases on stdin, answers a JSON list of results (or {"error": message}).
HARNESS = """
const live = require(process.argv[1]);
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
    if NODE is None:
        pytest.skip("node is not installed: the browser-side arithmetic cannot be checked")
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
    }
    cases = [case for group in groups.values() for case in group]
    finished = subprocess.run(
        [NODE, "-e", HARNESS, str(ATTENTION_JS)],
        input=json.dumps(cases),
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert finished.returncode == 0, finished.stderr
    results = iter(json.loads(finished.stdout))
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
    assert results[2] == {"error": "W_K must be 4x3, got 2 rows of [3]"}
    assert results[3] == {"error": "inputs must be 3x4, got 3 rows of [3, 4]"}
    assert results[4] == {"error": "W_Q: could not convert string to float: 'x'"}
    assert results[5] == {"error": "W_V must be 4x3, got 0 rows of []"}


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
    assert scores[3] == {"error": "scores: could not convert string to float: 'two'"}
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
