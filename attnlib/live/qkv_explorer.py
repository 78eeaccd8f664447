"""Chapter 06's explorer: queries, keys and values of a short sentence, in the browser.

:func:`qkv_live` returns the HTML of the explorer: a root element holding one or more
:class:`Sentence` (words, their vectors and a layer's W_Q, W_K, W_V) in ``data-*`` attributes
and, for a page without JavaScript, a snapshot in words of what it shows; then an inline script
with ``attention.js``, ``explorers.js`` (the DOM helpers), ``qkv.js`` (the arithmetic, a port of
:func:`attnlib.reference.sentence_attention`, checked number for number against it by
``tests/test_live_qkv.py``) and ``qkv_explorer.js`` (the controls). It needs no kernel, so it
works in the published book.
"""

from __future__ import annotations

import html
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from IPython.display import HTML

from attnlib import reference
from attnlib._checks import check_flag
from attnlib.live import FALLBACK, _json, bundle, snippet

SCRIPTS = ("attention.js", "explorers.js", "qkv.js", "qkv_explorer.js")
# Small enough to read: the row of weights is one table line per word, the vectors one per feature.
MAX_WORDS = 24
MAX_WIDTH = 16
# Below this a change is float64 rounding (sums taken in another order), not a change.
ROUNDING = 1e-12


@dataclass(frozen=True)
class Sentence:
    """One sentence for the explorer: its words, their vectors x (n, d_model) and the layer's
    maps W_Q, W_K (d_model, d_k) and W_V (d_model, d_v), with Q = x W_Q as in the chapter.

    ``features`` names the d_model dimensions, ``questions`` the first query dimensions (what
    column c of W_Q asks for), ``query`` the word whose row is shown first (a word or an index).
    """

    name: str
    tokens: Sequence[str]
    x: object
    w_q: object
    w_k: object
    w_v: object
    features: Sequence[str] | None = None
    questions: Sequence[str] | None = None
    query: str | int | None = None


def _array(name: str, value: object) -> np.ndarray:
    """A finite float64 matrix from an array, a list or a torch tensor; errors name the shape."""
    if hasattr(value, "detach"):  # a torch tensor, perhaps needing grad or on a GPU
        value = value.detach().cpu().double().numpy()
    array = np.asarray(value, dtype=np.float64)
    if array.ndim != 2 or 0 in array.shape:
        raise ValueError(f"{name} must be a non-empty matrix, got shape {array.shape}")
    if not np.isfinite(array).all():
        raise ValueError(f"{name} must be finite, got {int((~np.isfinite(array)).sum())} bad")
    return array


def _labels(name: str, labels: Sequence[str] | None, size: int, fill: str, exact: bool) -> list:
    """``labels`` as strings (exactly ``size`` of them, or at most), the rest ``fill`` + index."""
    labels = [] if labels is None else [str(label) for label in labels]
    if len(labels) > size or (exact and labels and len(labels) != size):
        raise ValueError(f"{name} has {len(labels)} labels for {size} dimensions")
    return labels + [f"{fill} {c}" for c in range(len(labels), size)]


def _query(sentence: Sentence, tokens: list[str]) -> int:
    """The index of the first query word: a word (its first place) or an index."""
    query = sentence.query
    if query is None:
        return 0
    if isinstance(query, str):
        if query not in tokens:
            raise ValueError(f"query {query!r} is not a word of {sentence.name!r}")
        return tokens.index(query)
    if not isinstance(query, (int, np.integer)) or isinstance(query, bool):
        raise TypeError(f"query must be a word or an index, got {type(query).__name__}")
    if not 0 <= query < len(tokens):
        raise ValueError(f"query index {query} is outside 0 .. {len(tokens) - 1}")
    return int(query)


def _checked(sentence: Sentence) -> dict:
    """The sentence as qkv_explorer.js reads it, after checking every shape against x's."""
    if not isinstance(sentence, Sentence):
        raise TypeError(f"expected a Sentence, got {type(sentence).__name__}")
    tokens = [str(token) for token in sentence.tokens]
    x = _array("x", sentence.x)
    n, d_model = x.shape
    if len(tokens) != n:
        raise ValueError(f"{len(tokens)} tokens but x has {n} rows")
    if not 2 <= n <= MAX_WORDS or d_model > MAX_WIDTH:
        raise ValueError(
            f"x must have 2 to {MAX_WORDS} words of at most {MAX_WIDTH} numbers, got {x.shape}"
        )
    w_q, w_k, w_v = (
        _array(name, w)
        for name, w in (("W_Q", sentence.w_q), ("W_K", sentence.w_k), ("W_V", sentence.w_v))
    )
    if w_q.shape != w_k.shape or w_q.shape[0] != d_model or w_v.shape[0] != d_model:
        raise ValueError(
            f"x {x.shape}, W_Q {w_q.shape}, W_K {w_k.shape}, W_V {w_v.shape} do not fit "
            "(n, d_model), (d_model, d_k), (d_model, d_k), (d_model, d_v)"
        )
    if max(w_q.shape[1], w_v.shape[1]) > MAX_WIDTH:
        raise ValueError(
            f"d_k and d_v must be at most {MAX_WIDTH}, got {w_q.shape[1]}, {w_v.shape[1]}"
        )
    return {
        "name": str(sentence.name),
        "tokens": tokens,
        "features": _labels("features", sentence.features, d_model, "feature", exact=True),
        "questions": _labels("questions", sentence.questions, w_q.shape[1], "dimension", False),
        "x": x.tolist(),
        "wQ": w_q.tolist(),
        "wK": w_k.tolist(),
        "wV": w_v.tolist(),
        "query": _query(sentence, tokens),
    }


def _shift(x: float) -> str:
    """As qkv_explorer.js prints a shift: 4 decimals, |x| < 5e-4 as JavaScript's 1.1e-16."""
    if x == 0 or abs(x) >= 5e-4:
        return f"{x + 0.0:.4f}"
    mantissa, exponent = f"{x:.1e}".split("e")
    return f"{mantissa}e{int(exponent)}"


def _maps(example: dict) -> tuple[np.ndarray, ...]:
    return tuple(np.array(example[key]) for key in ("x", "wQ", "wK", "wV"))


def snapshot(examples: list[dict]) -> str:
    """What the explorer shows as it opens, in words: the page's text without JavaScript."""
    lines = []
    for example in examples:
        i = example["query"]
        weights = reference.sentence_attention(*_maps(example)).weights[i]
        top = int(np.argmax(weights))
        lines.append(
            f"in \u201c{html.escape(example['name'])}\u201d the query of "
            f"\u201c{html.escape(example['tokens'][i])}\u201d puts its largest weight, "
            f"{weights[top]:.4f}, on \u201c{html.escape(example['tokens'][top])}\u201d"
        )
    first = examples[0]
    reverse = np.arange(len(first["tokens"]))[::-1]
    plain = max(reference.permutation_shift(*_maps(first), reverse))
    placed = reference.permutation_shift(*_maps(first), reverse, positions=True)[0]
    stays = (
        "stays the same, to rounding (it moves by less than 1e-12)"
        if plain < ROUNDING
        else f"moves by up to {_shift(plain)}"
    )
    return (
        "<p>With JavaScript it recomputes one self-attention layer as you pick the query word, "
        "change how strongly each question of W_Q is asked and shuffle the words. As it opens: "
        + "; ".join(lines)
        + f". With the first sentence reversed, every word's output {stays}; with positions "
        f"added as well, it moves by up to {_shift(placed)}.</p>"
    )


def qkv_live(*sentences: Sentence, positions: bool = False) -> HTML:
    """The explorer of chapter 06 on one or more :class:`Sentence` (picked from a list), the
    first shown first, with positions added from the start if ``positions``."""
    if not sentences:
        raise ValueError("qkv_live needs at least one Sentence")
    examples = [_checked(sentence) for sentence in sentences]
    names = [example["name"] for example in examples]
    if len(set(names)) != len(names) or "" in names:
        raise ValueError(f"the sentences need different, non-empty names, got {names}")
    attributes = {
        "examples": _json(examples),
        "positions": "true" if check_flag("positions", positions) else "false",
    }
    fallback = f"<p>{FALLBACK}</p>" + snapshot(examples)
    return HTML(snippet("qkv", attributes, fallback, script=bundle(SCRIPTS)))
