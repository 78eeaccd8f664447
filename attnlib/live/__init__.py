"""Explorers that run in the browser: they work in the published book, with no Python kernel.

The arithmetic lives in ``attention.js`` (chapters 01-02) and ``encoder.js`` (chapters 07-09),
ports of :mod:`attnlib.reference` checked against it number for number by ``tests/test_live.py``;
the controls live in ``explorers.js`` and ``encoder_explorers.js``. Each function here returns an
HTML snippet: a root ``<div>`` with a fixed id, its data in ``data-*`` attributes, and an inline
``<script>`` holding every file, so a notebook output carries everything it needs (no network)
and stays the same from run to run.
"""

from __future__ import annotations

import hashlib
import html
import json
from collections.abc import Sequence
from functools import cache
from importlib import resources

import numpy as np
from IPython.display import HTML

from attnlib.reference import MASK_KINDS

SCRIPTS = ("attention.js", "encoder.js", "explorers.js", "encoder_explorers.js")
# Chapter 13's explorer carries its own set (attnlib.live.imdb): the model, not chapters 07-09.
IMDB_SCRIPTS = ("attention.js", "explorers.js", "imdb.js", "imdb_explorer.js")
# Chapter 15's explorer (attnlib.live.flash_explorer): the online softmax of one row.
FLASH_SCRIPTS = ("attention.js", "explorers.js", "flash.js")
# Chapter 16's explorer (attnlib.live.rotary_explorer): rotary positions, pair by pair.
ROTARY_SCRIPTS = ("attention.js", "explorers.js", "rotary.js")
# Chapter 12's explorer (attnlib.live.recipe_explorer): schedules and label smoothing.
RECIPE_SCRIPTS = ("attention.js", "explorers.js", "recipe.js")
# Chapter 19's explorer (attnlib.live.recall_explorer): a growing cache against a fixed state.
RECALL_SCRIPTS = ("attention.js", "explorers.js", "recall.js")
FALLBACK = (
    "This explorer runs in your browser with JavaScript. If you can read this, the script did "
    "not run: in JupyterLab, run the cell (or trust the notebook) to start it."
)


@cache
def script_source(name: str) -> str:
    """The text of one of the package's JavaScript files."""
    folder = resources.files(__name__)
    known = sorted(entry.name for entry in folder.iterdir() if entry.name.endswith(".js"))
    if name not in known:
        raise ValueError(f"unknown script {name!r}; expected one of {tuple(known)}")
    return folder.joinpath(name).read_text(encoding="utf-8")


@cache
def bundle(scripts: tuple[str, ...] = SCRIPTS, prelude: str = "") -> str:
    """Every script in one ``<script>`` body, defined once per page however often it appears.

    ``prelude`` is JavaScript run once before the scripts (chapter 13's kernel bytes).
    """
    sources = [script_source(name) for name in scripts]
    for name, source in zip(scripts, sources, strict=True):
        if "</script" in source.lower() or "<!--" in source:
            raise ValueError(f"{name} contains text that would end an inline <script>")
    body = "\n".join(([prelude] if prelude else []) + sources)
    version = hashlib.sha256(body.encode()).hexdigest()[:12]
    return (
        "(function () {\n"
        '"use strict";\n'
        "var module;  // never a CommonJS module in a page: define window.attnlibLive\n"
        f"var version = {json.dumps(version)};\n"
        "if (!window.attnlibLive || window.attnlibLive.version !== version) {\n"
        f"{body}\n"
        "window.attnlibLive.version = version;\n"
        "}\n"
        "var here = document.currentScript;\n"
        "window.attnlibLive.mountAll(here && here.parentNode ? here.parentNode : document);\n"
        "window.attnlibLive.mountAll(document);\n"
        "})();"
    )


def snippet(
    explorer: str,
    attributes: dict[str, str] | None = None,
    fallback: str | None = None,
    script: str | None = None,
) -> str:
    """The HTML of one explorer: its root element (holding ``fallback``, HTML, until the script
    replaces it), then the script that builds it (default: :func:`bundle`)."""
    extra = "".join(
        f' data-{key}="{html.escape(value, quote=True)}"'
        for key, value in (attributes or {}).items()
    )
    inner = f"<p>{FALLBACK}</p>" if fallback is None else fallback
    return (
        f'<div class="attnlib-live tex2jax_ignore mathjax_ignore" id="attnlib-live-{explorer}" '
        f'data-explorer="{explorer}"{extra}>{inner}</div>\n'
        f"<script>\n{bundle() if script is None else script}\n</script>"
    )


def worked_example_live() -> HTML:
    """Chapter 01's explorer (inputs, W_K, W_Q, W_V, √d_k, temperature) computed in the browser."""
    return HTML(snippet("worked-example"))


def temperature_live(scores: tuple[float, ...] = (2, 4, 4, 1, -1)) -> HTML:
    """Chapter 02's temperature explorer, computed in the browser, starting from ``scores``."""
    if len(scores) == 0:
        raise ValueError("temperature_live needs at least one score")
    text = " ".join(f"{float(score):g}" for score in scores)
    return HTML(snippet("temperature", {"scores": text}))


def _matrix(name: str, value: object, shape: tuple[int, int]) -> list[list[float]]:
    """A finite float matrix of exactly ``shape`` as nested lists; the error names the shapes."""
    array = np.asarray(value, dtype=np.float64)
    if array.shape != shape:
        raise ValueError(f"{name} must have shape {shape}, got {array.shape}")
    if not np.isfinite(array).all():
        raise ValueError(f"{name} must be finite, got {int((~np.isfinite(array)).sum())} bad")
    return array.tolist()


def _json(value: object) -> str:
    return json.dumps(value, separators=(",", ":"), allow_nan=False)


def heads_live(
    tokens: Sequence[str],
    x: np.ndarray,
    w_q: np.ndarray,
    w_k: np.ndarray,
    w_v: np.ndarray,
    num_heads: int,
) -> HTML:
    """Chapter 07's head explorer: pick the number of heads and a head, see its weights.

    ``x`` is (n, d_model), one row per token; ``w_q``, ``w_k``, ``w_v`` are (d_model, d_model)
    with Q = x @ w_q (transpose a ``torch.nn.Linear``'s weight to get one). The browser splits
    Q, K, V into heads (head h takes columns h*d_head:(h+1)*d_head) and shows
    softmax(Q_h K_hᵀ / √d_head), or /√d_model with the "common bug" box ticked, as
    :func:`attnlib.reference.multi_head_attention` computes it.
    """
    tokens = [str(token) for token in tokens]
    x = np.asarray(x, dtype=np.float64)
    if x.ndim != 2 or x.shape[0] < 1 or x.shape[1] < 1:
        raise ValueError(f"x must be (n, d_model) with n, d_model >= 1, got shape {x.shape}")
    n, d_model = x.shape
    if len(tokens) != n:
        raise ValueError(f"{len(tokens)} tokens but x has {n} rows")
    if not 1 <= num_heads <= d_model or d_model % num_heads != 0:
        raise ValueError(f"num_heads={num_heads} does not divide d_model={d_model}")
    attributes = {"tokens": _json(tokens), "inputs": _json(_matrix("x", x, (n, d_model)))}
    for name, weight in (("w-q", w_q), ("w-k", w_k), ("w-v", w_v)):
        attributes[name] = _json(_matrix(name.replace("-", "_"), weight, (d_model, d_model)))
    attributes["heads"] = str(int(num_heads))
    return HTML(snippet("heads", attributes))


def positions_live(d_model: int = 64, max_len: int = 100) -> HTML:
    """Chapter 08's explorer: an offset k, a position and a pair i; the rotation M_i(k) with
    PE(pos + k) = M(k) PE(pos), its round-off error, and PE(pos) · PE(pos + Δ) against Δ."""
    if int(d_model) != d_model or d_model < 2:
        raise ValueError(f"d_model must be an integer >= 2 (one sine/cosine pair), got {d_model}")
    if int(max_len) != max_len or max_len < 2:
        raise ValueError(f"max_len must be an integer >= 2, got {max_len}")
    return HTML(snippet("positions", {"d-model": str(int(d_model)), "max-len": str(int(max_len))}))


def example_scores(n: int = 8, seed: int = 0) -> np.ndarray:
    """A fixed (n, n) matrix of scores with two decimals, the mask explorer's default."""
    rng = np.random.default_rng(seed)
    return np.round(rng.normal(scale=2.0, size=(n, n)), 2)


def masks_live(
    n: int = 8,
    scores: np.ndarray | None = None,
    *,
    kind: str = "padding",
    length: int | None = None,
) -> HTML:
    """Chapter 09's mask explorer on (n, n) scores (default :func:`example_scores`): the mask
    kind, the real length (keys beyond it are padding), the fill for masked scores (-inf, -1e9
    or 0) and one fully masked query; weights as :func:`attnlib.reference.masked_softmax` gives.
    ``kind`` and ``length`` (default n - n // 4) are where the controls start.
    """
    if int(n) != n or n < 1:
        raise ValueError(f"n must be a positive integer, got {n}")
    n = int(n)
    scores = example_scores(n) if scores is None else scores
    if kind not in MASK_KINDS:
        raise ValueError(f"kind must be one of {MASK_KINDS}, got {kind!r}")
    length = n - n // 4 if length is None else length
    if not 1 <= length <= n:
        raise ValueError(f"length must be between 1 and n={n}, got {length}")
    attributes = {
        "scores": _json(_matrix("scores", scores, (n, n))),
        "kind": kind,
        "length": str(int(length)),
    }
    return HTML(snippet("masks", attributes))
