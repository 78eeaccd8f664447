"""Chapter 06's explorer: qkv.js computes what attnlib.reference (and attnlib) computes.

attnlib/live/qkv.js runs in node on the chapter's two sentences (section 3's layer and the
second layer of the tired/narrow story) and on random layers of other shapes, under many
settings of the question strengths, word orders and positions: every projection, score,
weight and output, and the permutation shift, must match the NumPy oracle
:func:`attnlib.reference.sentence_attention` to 1e-12; the oracle must match ``attnlib.attend``
in float64. All cases go through one node process.
"""

from __future__ import annotations

import itertools
import json
import math
import re
from functools import cache
from pathlib import Path

import nbformat
import numpy as np
import pytest
import torch

import attnlib.live
from attnlib import attend, reference
from attnlib.live.qkv_explorer import SCRIPTS, Sentence, qkv_live
from attnlib.transformer import sinusoidal_encoding
from tests.helpers import (
    assert_markup_close,
    case_harness,
    fallback_snapshot,
    node_answers,
    of_kind,
)

QKV_JS = Path(attnlib.live.__file__).with_name("qkv.js")
CHAPTER = Path(__file__).resolve().parents[1] / "notebooks" / "06_self_attention_qkv.ipynb"
TOLERANCE = 1e-12

# Reads a JSON list of cases on stdin, answers a JSON list of results (or {"error": message}).
HARNESS = case_harness(
    """
const qkv = require(process.argv[1]);
const cases = JSON.parse(require("fs").readFileSync(0, "utf8"));
function lcg(seed) {  // a seeded stand-in for Math.random
  let state = seed;
  return () => (state = (state * 1103515245 + 12345) % 2147483648) / 2147483648;
}
const run = {
  attention: (c) => qkv.sentenceAttention(c.x, c.wQ, c.wK, c.wV,
    { strengths: c.strengths, order: c.order, positions: c.positions }),
  shift: (c) => qkv.permutationShift(c.x, c.wQ, c.wK, c.wV, c.order,
    { strengths: c.strengths, positions: c.positions }),
  encoding: (c) => qkv.sinusoidalEncoding(c.length, c.d_model),
  shuffle: (c) => {
    const random = lcg(c.seed);
    return Array.from({ length: c.times }, () => qkv.shuffledOrder(c.n, random, c.avoid));
  },
  softmax: (c) => qkv.softmax(c.row),
};
"""
)


# --- the chapter's data, built as chapter 06 builds it -------------------------------------------

FEATURES = ["noun", "animate", "verb", "pronoun", "function", "adjective", "id 1", "id 2"]
LEXICON = {
    "the": ["function"],
    "cat": ["noun", "animate"],
    "sat": ["verb"],
    "on": ["function"],
    "mat": ["noun"],
    "because": ["function"],
    "it": ["pronoun"],
    "was": ["verb"],
    "tired": ["adjective"],
    "dog": ["noun", "animate"],
    "saw": ["verb"],
}
TOKENS = "the cat sat on the mat because it was tired".split()
STORY_FEATURES = ["noun", "animate", "place", "pronoun", "describes animate", "describes place"]
STORY_LEXICON = {
    "animal": ["noun", "animate"],
    "street": ["noun", "place"],
    "it": ["pronoun"],
    "tired": ["describes animate"],
    "narrow": ["describes place"],
}
STORY = "the animal did not cross the street because it was too tired".split()
CHAPTER_ORDER = [5, 6, 1, 2, 0, 8, 9, 3, 7, 4]  # the chapter's torch.randperm(10, seed 1)


@cache
def cat_sentence() -> tuple[np.ndarray, ...]:
    """Section 3: X (10, 8) of 'the cat sat ...' and the hand-made W_Q, W_K, W_V (8, 8)."""
    generator = torch.Generator().manual_seed(0)
    embedding = {}
    for word, features in LEXICON.items():
        vector = torch.zeros(8)
        for feature in features:
            vector[FEATURES.index(feature)] = 1.0
        angle = 2 * math.pi * torch.rand(1, generator=generator)
        vector[6:] = 0.5 * torch.cat([torch.cos(angle), torch.sin(angle)])
        embedding[word] = vector
    x = torch.stack([embedding[word] for word in TOKENS])
    f = FEATURES.index
    w_q, w_k = torch.zeros(8, 8), torch.zeros(8, 8)
    w_q[f("pronoun"), 0], w_k[f("animate"), 0] = 8.0, 1.0
    w_q[f("verb"), 1] = w_q[f("adjective"), 1] = 6.0
    w_k[f("noun"), 1] = 1.0
    w_q[f("noun"), 2], w_k[f("verb"), 2] = 6.0, 1.0
    return tuple(a.double().numpy() for a in (x, w_q, w_k, torch.eye(8)))


@cache
def story_layer_two(adjective: str) -> tuple[np.ndarray, ...]:
    """Section 5: the second layer's input h (12, 6) for '... too <adjective>', W_Q2, W_K2, I."""
    s = STORY_FEATURES.index
    words = [*STORY[:-1], adjective]
    x = torch.zeros(len(words), 6)
    for position, word in enumerate(words):
        for feature in STORY_LEXICON.get(word, []):
            x[position, s(feature)] = 1.0
    w_q1, w_k1, w_q2, w_k2 = (torch.zeros(6, 2) for _ in range(4))
    w_q1[s("pronoun"), 0] = 8.0
    w_k1[s("describes animate"), 0] = w_k1[s("describes place"), 0] = 1.0
    w_q2[s("describes animate"), 0] = w_q2[s("describes place"), 1] = 8.0
    w_k2[s("animate"), 0] = w_k2[s("place"), 1] = 1.0
    h = x + attend(x @ w_q1, x @ w_k1, x)[0]
    return tuple(a.double().numpy() for a in (h, w_q2, w_k2, torch.eye(6)))


def random_layer(seed: int) -> tuple[np.ndarray, ...]:
    """A layer of another shape: n 2..12 words, d_model 1..8, d_k 1..5, d_v 1..6."""
    rng = np.random.default_rng(seed)
    n, d_model, d_k, d_v = rng.integers(2, 13), rng.integers(1, 9), rng.integers(1, 6), 0
    d_v = rng.integers(1, 7)
    x = rng.normal(size=(n, d_model))
    return x, *(rng.normal(scale=2.0, size=(d_model, d)) for d in (d_k, d_k, d_v))


def payload(layer: tuple[np.ndarray, ...]) -> dict:
    return dict(zip(("x", "wQ", "wK", "wV"), (a.tolist() for a in layer), strict=True))


# --- the cases -----------------------------------------------------------------------------------

LAYERS = {
    "cat": cat_sentence(),
    "tired": story_layer_two("tired"),
    "narrow": story_layer_two("narrow"),
    **{f"random {seed}": random_layer(seed) for seed in range(12)},
}


def orders(n: int, seed: int) -> list[list[int] | None]:
    rng = np.random.default_rng(seed)
    found = [None, list(range(n))[::-1], rng.permutation(n).tolist()]
    return found + ([CHAPTER_ORDER] if n == len(CHAPTER_ORDER) else [])


def strength_settings(d_k: int, seed: int) -> list[list[float] | None]:
    """None (all 1), each question switched off or doubled in turn, and random factors."""
    rng = np.random.default_rng(seed)
    found = [None, [0.0] * d_k, [2.0] * d_k]
    found += [[0.0 if c == k else 1.0 for c in range(d_k)] for k in range(min(d_k, 3))]
    found += [[2.0 if c == k else 1.0 for c in range(d_k)] for k in range(min(d_k, 3))]
    return found + [np.round(rng.uniform(0, 2, d_k) / 0.05) * 0.05 for _ in range(2)]


ATTENTION_CASES = [
    {
        "kind": "attention",
        "layer": name,
        **payload(layer),
        "strengths": None if s is None else [float(v) for v in s],
        "order": order,
        "positions": positions,
    }
    for index, (name, layer) in enumerate(LAYERS.items())
    for s, order, positions in itertools.product(
        strength_settings(layer[1].shape[1], index), orders(len(layer[0]), index), (False, True)
    )
]
SHIFT_CASES = [
    {**case, "kind": "shift", "order": case["order"] or list(range(len(case["x"])))}
    for case in ATTENTION_CASES[::3]
]
ENCODING_CASES = [
    {"kind": "encoding", "length": length, "d_model": d}
    for length, d in ((1, 1), (10, 8), (12, 6), (24, 16), (7, 5))
]
SHUFFLE_CASES = [
    {"kind": "shuffle", "n": n, "seed": seed, "times": 200, "avoid": avoid}
    for n, seed, avoid in ((2, 1, None), (3, 2, None), (3, 3, [2, 1, 0]), (10, 4, CHAPTER_ORDER))
]
_CAT = payload(cat_sentence())
JS_ERRORS = [
    (
        {"kind": "attention", **_CAT, "order": [0, 0, 1, 2, 3, 4, 5, 6, 7, 8]},
        "order must be a permutation of 0 .. 9, got [0, 0, 1, 2, 3, 4, 5, 6, 7, 8]",
    ),
    (
        {"kind": "shift", **_CAT, "order": [1, 0]},
        "order must be a permutation of 0 .. 9, got [1, 0]",
    ),
    (
        {"kind": "attention", **_CAT, "strengths": [1, 1]},
        "strengths must have d_k=8 entries, got 2",
    ),
    (
        {"kind": "attention", **{**_CAT, "wK": _CAT["wK"][:3]}},
        "x (10, 8), W_Q (8, 8), W_K (3, 8), W_V (8, 8) do not fit (n, d_model), (d_model, d_k),"
        " (d_model, d_k), (d_model, d_v)",
    ),
    (
        {"kind": "attention", **{**_CAT, "x": [[1, 2], [3]]}},
        "x row 1 has 1 numbers, not 2",
    ),
    (
        {"kind": "shuffle", "n": 1, "seed": 1, "times": 1, "avoid": None},
        "a shuffle needs at least 2 words, got 1",
    ),
]


def cases() -> list[dict]:
    """Every case; node's answers come back in the same order."""
    return [
        *ATTENTION_CASES,
        *SHIFT_CASES,
        *ENCODING_CASES,
        *SHUFFLE_CASES,
        *(case for case, _ in JS_ERRORS),
    ]


@cache
def node_results() -> tuple[dict, ...]:
    """Run every case through qkv.js in one node process."""
    return tuple(node_answers(HARNESS, [QKV_JS], cases(), timeout=120))


def answers(kind: str) -> list[tuple[dict, dict]]:
    """(case, node's answer) for every case of one kind."""
    return of_kind(kind, cases(), node_results())


def oracle(case: dict) -> reference.SentenceAttention:
    maps = (np.array(case[key]) for key in ("x", "wQ", "wK", "wV"))
    return reference.sentence_attention(
        *maps, case["strengths"], case["order"], positions=case["positions"]
    )


# --- qkv.js against the oracle -------------------------------------------------------------------


def test_every_step_matches_numpy_on_many_settings():
    found = answers("attention")[: len(ATTENTION_CASES)]
    assert len(found) == len(ATTENTION_CASES) > 900
    for case, result in found:
        assert "value" in result, (case["layer"], result)
        want = oracle(case)
        for field in ("inputs", "queries", "keys", "values", "scores", "weights", "outputs"):
            np.testing.assert_allclose(
                result["value"][field],
                getattr(want, field),
                rtol=TOLERANCE,
                atol=TOLERANCE,
                err_msg=f"{case['layer']} {field}",
            )


def test_the_permutation_shift_matches_numpy():
    found = answers("shift")[: len(SHIFT_CASES)]
    assert len(found) == len(SHIFT_CASES) > 300
    for case, result in found:
        maps = (np.array(case[key]) for key in ("x", "wQ", "wK", "wV"))
        want = reference.permutation_shift(
            *maps, case["order"], case["strengths"], case["positions"]
        )
        got = (result["value"]["outputs"], result["value"]["weights"])
        if case["positions"]:
            np.testing.assert_allclose(got, want, rtol=TOLERANCE, atol=TOLERANCE)
        else:  # equivariance: both are rounding, not necessarily the same rounding
            assert max(got) < TOLERANCE and max(want) < TOLERANCE, (case["layer"], got, want)


def test_the_sinusoidal_table_matches_numpy():
    for case, result in answers("encoding"):
        want = reference.sinusoidal_encoding(case["length"], case["d_model"])
        np.testing.assert_allclose(result["value"], want, rtol=TOLERANCE, atol=TOLERANCE)


def test_a_shuffle_is_a_new_order_and_reaches_every_order():
    for case, result in answers("shuffle")[: len(SHUFFLE_CASES)]:
        n, avoid = case["n"], case["avoid"] or list(range(case["n"]))
        drawn = result["value"]
        assert len(drawn) == 200
        assert all(sorted(order) == list(range(n)) and order != avoid for order in drawn)
        if n == 3:  # all 3! - 1 = 5 orders other than the one avoided
            assert len({tuple(order) for order in drawn}) == 5


@pytest.mark.parametrize("index", range(len(JS_ERRORS)))
def test_qkv_js_refuses_bad_input_with_a_message(index: int):
    case, message = JS_ERRORS[index]
    found = [result for c, result in answers(case["kind"]) if c is case]
    assert found == [{"error": message}]


# --- the oracle against attnlib and the chapter ------------------------------------------------


@pytest.mark.parametrize("name", list(LAYERS)[:6])
def test_the_oracle_is_attnlibs_attend_in_float64(name: str):
    x, w_q, w_k, w_v = (torch.from_numpy(a) for a in LAYERS[name])
    n = x.shape[0]
    strengths = torch.linspace(0.0, 2.0, w_q.shape[1], dtype=torch.float64)
    order = torch.randperm(n, generator=torch.Generator().manual_seed(n))
    for positions in (False, True):
        words = x[order] + (sinusoidal_encoding(n, x.shape[1]).double() if positions else 0)
        output, weights = attend(words @ (w_q * strengths), words @ w_k, words @ w_v)
        ours = reference.sentence_attention(
            *LAYERS[name], strengths.numpy(), order.numpy(), positions
        )
        # attnlib's table is float32, the oracle's float64: they agree to float32 rounding
        tolerance = 1e-6 if positions else TOLERANCE
        np.testing.assert_allclose(ours.weights, weights.numpy(), rtol=tolerance, atol=tolerance)
        np.testing.assert_allclose(ours.outputs, output.numpy(), rtol=tolerance, atol=tolerance)


def test_the_oracle_gives_the_chapters_numbers():
    """Section 3: 'it' puts 0.6528 on 'cat', 0.0386 on itself; section 5: 0.9562 on the referent."""
    cat = reference.sentence_attention(*cat_sentence())
    it = TOKENS.index("it")
    assert round(cat.weights[it, 1], 4) == 0.6528 and round(cat.weights[it, it], 4) == 0.0386
    np.testing.assert_allclose(
        cat.outputs[it],
        [0.6913, 0.6528, 0.0772, 0.0386, 0.1543, 0.0386, -0.0140, -0.3004],
        atol=5e-5,
    )
    it = STORY.index("it")
    tired = reference.sentence_attention(*story_layer_two("tired")).weights[it]
    narrow = reference.sentence_attention(*story_layer_two("narrow")).weights[it]
    assert round(tired[STORY.index("animal")], 4) == round(narrow[STORY.index("street")], 4)
    assert round(tired[STORY.index("animal")], 4) == 0.9562
    # the chapter's explorer prose: the question doubled, 'sat' split between the two nouns
    doubled = reference.sentence_attention(*cat_sentence(), strengths=[2.0] + [1.0] * 7)
    assert round(doubled.weights[TOKENS.index("it"), 1], 4) == 0.9695
    sat = cat.weights[TOKENS.index("sat")]
    assert sat[1] == sat[5] == sat.max() and round(sat[1], 4) == 0.3380
    # switching the question off: 'it' reads every word alike
    off = reference.sentence_attention(*story_layer_two("tired"), strengths=[0.0, 0.0])
    np.testing.assert_allclose(off.weights[it], np.full(12, 1 / 12), rtol=1e-15)
    # the chapter's shuffle: outputs follow the words; with positions they do not
    assert max(reference.permutation_shift(*cat_sentence(), CHAPTER_ORDER)) < TOLERANCE
    moved = reference.permutation_shift(*cat_sentence(), CHAPTER_ORDER, positions=True)
    assert min(moved) > 0.1


def test_the_oracle_refuses_bad_orders_and_strengths():
    with pytest.raises(ValueError, match=r"order must be a permutation of 0 \.\. 9, got \[0, 1\]"):
        reference.sentence_attention(*cat_sentence(), order=[0, 1])
    with pytest.raises(ValueError, match=r"strengths must have d_k=8 entries, got \(3,\)"):
        reference.sentence_attention(*cat_sentence(), strengths=[1.0, 1.0, 1.0])
    x, w_q, w_k, w_v = cat_sentence()
    with pytest.raises(ValueError, match=r"W_K \(8, 3\).* do not fit"):
        reference.sentence_attention(x, w_q, w_k[:, :3], w_v)


QUESTIONS = [
    "a pronoun asks for an animate noun",
    "a verb or adjective asks for a noun",
    "a noun asks for a verb",
]
STORY_QUESTIONS = ["tired things ask for an animate noun", "narrow things ask for a place"]


def chapter_sentences() -> list[Sentence]:
    """The explorer's sentences as chapter 06 passes them."""
    found = [Sentence(" ".join(TOKENS), TOKENS, *cat_sentence(), FEATURES, QUESTIONS, query="it")]
    for adjective in ("tired", "narrow"):
        words = [*STORY[:-1], adjective]
        name = f"the animal ... too {adjective} (second layer)"
        maps = story_layer_two(adjective)
        found.append(Sentence(name, words, *maps, STORY_FEATURES, STORY_QUESTIONS, query="it"))
    return found


def stored_explorer() -> str:
    """The explorer's HTML in chapter 06's stored outputs."""
    notebook = nbformat.read(CHAPTER, as_version=4)
    for cell in notebook.cells:
        for output in cell.get("outputs", []):
            markup = output.get("data", {}).get("text/html", "")
            if 'data-explorer="qkv"' in markup:
                return markup
    pytest.fail(f"no qkv explorer in the stored outputs of {CHAPTER.name}")


def attribute(markup: str, name: str) -> str:
    found = re.search(f'data-{name}="([^"]*)"', markup)
    assert found, name
    return found.group(1).replace("&quot;", '"')


def test_the_chapter_stores_the_explorer_on_its_own_data():
    examples = json.loads(attribute(stored_explorer(), "examples"))
    assert [len(example["tokens"]) for example in examples] == [10, 12, 12]
    assert examples[0]["tokens"] == TOKENS and examples[0]["features"] == FEATURES
    assert [example["tokens"][-1] for example in examples[1:]] == ["tired", "narrow"]
    # the same data, names and snapshot as the explorer built here
    fresh = qkv_live(*chapter_sentences()).data
    assert_markup_close(stored_explorer().split("<script>")[0], fresh.split("<script>")[0])
    built = [cat_sentence(), story_layer_two("tired"), story_layer_two("narrow")]
    for example, layer in zip(examples, built, strict=True):
        assert example["tokens"][example["query"]] == "it"
        for key, want in zip(("x", "wQ", "wK", "wV"), layer, strict=True):
            np.testing.assert_allclose(example[key], want, rtol=1e-6, atol=1e-7)  # any kernels


# --- the HTML and its Python checks ----------------------------------------------------------


def test_qkv_live_html_is_self_contained_and_stable():
    markup = qkv_live(*chapter_sentences()).data
    assert 'id="attnlib-live-qkv" data-explorer="qkv"' in markup
    for name in SCRIPTS:
        assert attnlib.live.script_source(name) in markup
    assert attnlib.live.script_source("encoder.js") not in markup
    assert markup.count("<script>") == markup.count("</script>") == 1 and "src=" not in markup
    assert qkv_live(*chapter_sentences()).data == markup, "the snippet must be the same every time"
    examples = json.loads(attribute(markup, "examples"))
    assert [example["name"] for example in examples] == [
        "the cat sat on the mat because it was tired",
        "the animal ... too tired (second layer)",
        "the animal ... too narrow (second layer)",
    ]
    assert examples[0]["questions"] == [*QUESTIONS, *(f"dimension {c}" for c in range(3, 8))]
    assert [example["query"] for example in examples] == [7, 8, 8]
    # without labels or a query word: numbered dimensions, the first word
    x, w_q, w_k, w_v = cat_sentence()
    plain = json.loads(
        attribute(qkv_live(Sentence("s", TOKENS, x, w_q, w_k, w_v)).data, "examples")
    )
    assert plain[0]["features"][-1] == "feature 7" and plain[0]["questions"][0] == "dimension 0"
    assert plain[0]["query"] == 0
    assert attribute(markup, "positions") == "false"
    assert attribute(qkv_live(*chapter_sentences(), positions=True).data, "positions") == "true"


def test_without_javascript_the_page_says_what_it_would_show():
    snapshot = fallback_snapshot(qkv_live(*chapter_sentences()).data)
    assert (
        "the query of \u201cit\u201d puts its largest weight, 0.6528, on \u201ccat\u201d"
        in snapshot
    )
    narrow = "(second layer)\u201d the query of \u201cit\u201d puts its largest weight, 0.9562"
    assert f"{narrow}, on \u201cstreet\u201d" in snapshot
    moved = reference.permutation_shift(*cat_sentence(), np.arange(10)[::-1], positions=True)[0]
    assert "to rounding (it moves by less than 1e-12)" in snapshot
    assert f"with positions added as well, it moves by up to {moved:.4f}" in snapshot


def test_qkv_live_refusals_name_the_problem():
    x, w_q, w_k, w_v = cat_sentence()
    good = {"name": "s", "tokens": TOKENS, "x": x, "w_q": w_q, "w_k": w_k, "w_v": w_v}
    refusals = [
        ({"tokens": TOKENS[:-1]}, ValueError, "9 tokens but x has 10 rows"),
        ({"x": x[:, :3]}, ValueError, r"x \(10, 3\), W_Q \(8, 8\).* do not fit"),
        ({"w_v": w_v[:3]}, ValueError, r"W_V \(3, 8\) do not fit"),
        ({"x": x[0]}, ValueError, r"x must be a non-empty matrix, got shape \(8,\)"),
        ({"w_q": np.full((8, 8), np.nan)}, ValueError, "W_Q must be finite, got 64 bad"),
        ({"tokens": ["it"], "x": x[:1]}, ValueError, "x must have 2 to 24 words"),
        ({"features": ["a", "b"]}, ValueError, "features has 2 labels for 8 dimensions"),
        ({"questions": ["q"] * 9}, ValueError, "questions has 9 labels for 8 dimensions"),
        ({"query": "dog"}, ValueError, "query 'dog' is not a word of 's'"),
        ({"query": 10}, ValueError, r"query index 10 is outside 0 \.\. 9"),
        ({"query": 1.5}, TypeError, "query must be a word or an index, got float"),
    ]
    for change, kind, message in refusals:
        with pytest.raises(kind, match=message):
            qkv_live(Sentence(**{**good, **change}))
    with pytest.raises(ValueError, match="qkv_live needs at least one Sentence"):
        qkv_live()
    with pytest.raises(TypeError, match="expected a Sentence, got dict"):
        qkv_live(good)
    with pytest.raises(ValueError, match=r"different, non-empty names, got \['s', 's'\]"):
        qkv_live(Sentence(**good), Sentence(**good))
    with pytest.raises(TypeError, match="positions must be True or False, got str 'yes'"):
        qkv_live(Sentence(**good), positions="yes")
    # a tensor that needs grad is read without complaint
    tensor = torch.tensor(x, requires_grad=True)
    assert 'data-explorer="qkv"' in qkv_live(Sentence(**{**good, "x": tensor})).data
