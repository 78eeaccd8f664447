"""Chapter 16's rotary explorer: attnlib/live/rotary.js computes what NumPy (and attnlib) do.

Every case runs through one node process; each number must match the NumPy oracle below, which
is itself checked against :func:`attnlib.positions.apply_rotary`, to 1e-9.
"""

from __future__ import annotations

import json
from functools import cache
from pathlib import Path

import numpy as np
import pytest
import torch

import attnlib.live
from attnlib.live import script_source
from attnlib.live.rotary_explorer import example_vectors, rotary_live
from attnlib.positions import apply_rotary
from tests.helpers import case_harness, node_answers, of_kind

ROTARY_JS = Path(attnlib.live.__file__).with_name("rotary.js")
TOLERANCE = 1e-9

HARNESS = case_harness(
    """
const rotary = require(process.argv[1]);
const cases = JSON.parse(require("fs").readFileSync(0, "utf8"));
const run = {
  frequencies: (c) => rotary.frequencies(c.dim, c.base),
  angles: (c) => rotary.angles(c.position, c.dim, c.base),
  rotate: (c) => rotary.rotate(c.x, c.position, c.base),
  pairs: (c) => rotary.pairDots(c.q, c.k, c.m, c.n, c.base),
  score: (c) => rotary.score(c.q, c.k, c.m, c.n, c.base),
  offsets: (c) => rotary.scoresByOffset(c.q, c.k, c.position, c.offsets, c.base),
  shift: (c) => rotary.shiftError(c.q, c.k, c.m, c.n, c.shifts, c.base),
  parse: (c) => rotary.parseVector(c.text, c.name),
};
"""
)


# --- the NumPy oracle ------------------------------------------------------------------------


def frequencies(dim: int, base: float) -> np.ndarray:
    """base^(-2i/dim) for each pair i: (dim // 2,)."""
    return base ** (-np.arange(0, dim, 2) / dim)


def rotate(x: np.ndarray, position: float, base: float) -> np.ndarray:
    """Pair (x[2i], x[2i+1]) as a complex number, times e^(i position omega_i): (dim,)."""
    pairs = (x[0::2] + 1j * x[1::2]) * np.exp(1j * position * frequencies(len(x), base))
    return np.stack([pairs.real, pairs.imag], axis=-1).reshape(-1)


def pair_dots(q: np.ndarray, k: np.ndarray, m: float, n: float, base: float) -> np.ndarray:
    """Each pair's share of rotate(q, m) . rotate(k, n): (dim // 2,)."""
    return (rotate(q, m, base) * rotate(k, n, base)).reshape(-1, 2).sum(axis=1)


# --- the cases -------------------------------------------------------------------------------

RNG = np.random.default_rng(5)
Q8, K8 = example_vectors()
Q16, K16 = RNG.normal(size=16), RNG.normal(size=16)
BASES = [10000.0, 100.0, 10.0, 2.5]
POSITIONS = [0, 1, 3, 17, 64, 1000, -5, 2.5]
PAIR_CASES = [(Q8, K8, m, n, b) for b in BASES for m, n in [(8, 5), (0, 0), (3, 40), (1000, 997)]]
PAIR_CASES += [(Q16, K16, 70, 2, 10000.0), (Q16, K16, -4, 9, 500.0)]
OFFSETS = list(range(-16, 17))
PARSE_CASES = [
    ("0.5 -1, 2 3", "q"),
    ("1e-3 \u22122 .5 +4", "k"),
    ("1 2 3", "q"),
    ("", "k"),
    ("1 two", "q"),
    ("1 inf", "k"),
]


def cases() -> list[dict]:
    """Every case with its kind; the answers come back in the same order."""
    out = [{"kind": "frequencies", "dim": d, "base": b} for d in (2, 8, 16) for b in BASES]
    out += [{"kind": "frequencies", "dim": 3, "base": 10000.0}]
    out += [{"kind": "frequencies", "dim": 8, "base": 0}]
    out += [{"kind": "angles", "position": p, "dim": 8, "base": 100.0} for p in POSITIONS]
    out += [
        {"kind": "rotate", "x": x.tolist(), "position": p, "base": b}
        for x in (Q8, Q16)
        for p in POSITIONS
        for b in (10000.0, 10.0)
    ]
    out += [{"kind": "rotate", "x": [1.0, 2.0, 3.0], "position": 1, "base": 10.0}]
    for kind in ("pairs", "score"):
        out += [
            {"kind": kind, "q": q.tolist(), "k": k.tolist(), "m": m, "n": n, "base": b}
            for q, k, m, n, b in PAIR_CASES
        ]
    out += [{"kind": "pairs", "q": Q8.tolist(), "k": K16.tolist(), "m": 1, "n": 0, "base": 10.0}]
    out += [
        {
            "kind": "offsets",
            "q": Q8.tolist(),
            "k": K8.tolist(),
            "position": p,
            "offsets": OFFSETS,
            "base": b,
        }
        for p in (0, 5, 64, 5000)
        for b in (10000.0, 10.0)
    ]
    out += [
        {
            "kind": "shift",
            "q": Q8.tolist(),
            "k": K8.tolist(),
            "m": 8,
            "n": 5,
            "shifts": list(range(65)),
            "base": b,
        }
        for b in BASES
    ]
    out += [{"kind": "parse", "text": text, "name": name} for text, name in PARSE_CASES]
    return out


@cache
def node_results() -> tuple[dict, ...]:
    """Run every case through rotary.js in one node process."""
    return tuple(node_answers(HARNESS, [ROTARY_JS], cases(), timeout=60))


def answers(kind: str) -> list[tuple[dict, dict]]:
    """(case, node's answer) for every case of one kind."""
    return of_kind(kind, cases(), node_results())


# --- the tests -------------------------------------------------------------------------------


def test_oracle_is_attnlib_apply_rotary():
    for x in (Q8, Q16):
        for position in POSITIONS:
            for base in (10000.0, 10.0):
                ours = apply_rotary(torch.tensor(x)[None], torch.tensor([position]), base=base)
                np.testing.assert_allclose(rotate(x, position, base), ours[0].numpy(), atol=1e-12)


def test_frequencies_and_angles_match_numpy():
    found = answers("frequencies")
    assert len(found) == 14
    for case, result in found[:12]:
        np.testing.assert_allclose(
            result["value"], frequencies(case["dim"], case["base"]), rtol=0, atol=TOLERANCE
        )
    assert found[12][1] == {"error": "dim must be an even integer >= 2, got 3"}
    assert found[13][1] == {"error": "base must be a positive number, got 0"}
    for case, result in answers("angles"):
        expected = case["position"] * frequencies(8, 100.0)
        np.testing.assert_allclose(result["value"], expected, rtol=0, atol=TOLERANCE)


def test_rotate_matches_numpy():
    found = answers("rotate")
    assert len(found) == 2 * len(POSITIONS) * 2 + 1
    for case, result in found[:-1]:
        expected = rotate(np.array(case["x"]), case["position"], case["base"])
        np.testing.assert_allclose(result["value"], expected, rtol=0, atol=TOLERANCE)
    assert found[-1][1] == {"error": "x must have an even number of entries (pairs), got 3"}


def test_pair_shares_and_score_match_numpy():
    shares, scores = answers("pairs"), answers("score")
    assert len(scores) == len(PAIR_CASES) and len(shares) == len(PAIR_CASES) + 1
    for (case, share), (_, total) in zip(shares[:-1], scores, strict=True):
        q, k = np.array(case["q"]), np.array(case["k"])
        expected = pair_dots(q, k, case["m"], case["n"], case["base"])
        np.testing.assert_allclose(share["value"], expected, rtol=0, atol=TOLERANCE)
        assert abs(total["value"] - expected.sum()) < TOLERANCE
    assert shares[-1][1] == {"error": "q has 8 entries but k has 16"}


def test_scores_depend_only_on_the_offset_in_javascript_too():
    found = answers("offsets")
    by_base: dict[float, list] = {}
    for case, result in found:
        q, k, position, base = Q8, K8, case["position"], case["base"]
        expected = [pair_dots(q, k, position + o, position, base).sum() for o in OFFSETS]
        np.testing.assert_allclose(result["value"], expected, rtol=0, atol=TOLERANCE)
        by_base.setdefault(base, []).append(np.array(result["value"]))
    for curves in by_base.values():  # positions 0, 5, 64 and 5000: one curve
        assert max(np.abs(curve - curves[0]).max() for curve in curves) < 1e-9
    for case, result in answers("shift"):
        assert 0 <= result["value"] < 1e-12, case["base"]


def test_parse_vector_reads_pairs_and_names_the_problem():
    found = [result for _, result in answers("parse")]
    assert found[0] == {"value": [0.5, -1, 2, 3]}
    assert found[1] == {"value": [0.001, -2, 0.5, 4]}
    assert found[2] == {"error": "q needs an even number of entries (pairs), got 3"}
    assert found[3] == {"error": "k needs an even number of entries (pairs), got 0"}
    assert found[4] == {"error": "q: 'two' is not a number"}
    assert found[5] == {"error": "k: 'inf' is not a number"}


def test_rotary_live_html_carries_its_data_and_scripts():
    html = rotary_live().data
    query, key = example_vectors()
    assert 'id="attnlib-live-rotary" data-explorer="rotary"' in html
    assert f'data-query="{json.dumps(query.tolist(), separators=(",", ":"))}"' in html
    assert 'data-base="10000" data-max-position="64" data-max-offset="16"' in html
    assert script_source("rotary.js") in html and script_source("explorers.js") in html
    assert script_source("encoder.js") not in html  # only the three files it needs
    assert rotary_live().data == html  # the same output from run to run
    assert 'data-base="100"' in rotary_live(base=100.0).data


def test_rotary_live_refusals_name_the_problem():
    with pytest.raises(ValueError, match=r"query must be a vector of an even length .* \(3,\)"):
        rotary_live(query=[1.0, 2.0, 3.0], key=[1.0, 2.0, 3.0])
    with pytest.raises(ValueError, match=r"query has shape \(2,\) but key has shape \(4,\)"):
        rotary_live(query=[1.0, 2.0], key=[1.0, 2.0, 3.0, 4.0])
    with pytest.raises(ValueError, match="key must be finite, got 1 bad"):
        rotary_live(query=[1.0, 2.0], key=[1.0, float("nan")])
    with pytest.raises(ValueError, match="base must be positive"):
        rotary_live(base=0.0)
    with pytest.raises(ValueError, match="max_offset must be positive, got 0"):
        rotary_live(max_offset=0)
