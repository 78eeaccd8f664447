"""Chapter 17's explorer: the trained two-layer model in the browser, its heads switched on and off.

:func:`induction_live` returns the HTML of the explorer: a root element carrying the model's
weights (base64 float32, in the order of a manifest), its configuration, a few example
sequences and every head's scores in ``data-*`` attributes, and, for a page without
JavaScript, a snapshot of the first example's predictions; then an inline script with
``attention.js``, ``explorers.js`` (the DOM helpers), ``transformer_translator.js`` (the
arithmetic it shares with chapter 14's explorer), ``induction_lm.js`` (the forward pass, a port
of :class:`attnlib.lm.DecoderOnlyLM` checked against PyTorch by ``tests/test_live_induction.py``)
and ``induction_explorer.js`` (the controls). It needs no kernel.
"""

from __future__ import annotations

import base64
import html
import json
import math
import re
from collections.abc import Iterable

import numpy as np
import torch
from IPython.display import HTML

from attnlib.live import _json, bundle, snippet
from attnlib.live.transformer_translator import packed_weights
from attnlib.lm import DecoderOnlyLM
from attnlib.model_config import TransformerConfig

SCRIPTS = (
    "attention.js",
    "explorers.js",
    "transformer_translator.js",
    "induction_lm.js",
    "induction_explorer.js",
)
BOS = 0  # every sequence of chapter 17's task starts with it
# The TransformerConfig fields the browser reads (and page_model reads back).
CONFIG_FIELDS = (
    "vocab_size",
    "d_model",
    "num_heads",
    "num_layers",
    "d_ff",
    "max_len",
    "positions",
    "norm_first",
)
MAX_EXAMPLES = 12


def _check_supported(model: object) -> DecoderOnlyLM:
    """The model, if the browser port runs it: table positions, one key/value head per query
    head, no window, relu feed-forwards (or none)."""
    if not isinstance(model, DecoderOnlyLM):
        raise TypeError(f"model must be a DecoderOnlyLM, got {type(model).__name__}")
    c = model.config
    if c.positions not in ("learned", "sinusoidal"):
        raise ValueError(
            f"the browser port runs learned or sinusoidal positions, got {c.positions!r}"
        )
    if c.num_kv_heads not in (None, c.num_heads):
        raise ValueError(
            f"the browser port has one key/value head per query head, got num_kv_heads="
            f"{c.num_kv_heads} for num_heads={c.num_heads}"
        )
    if c.window is not None:
        raise ValueError(f"the browser port attends to every earlier token, got window={c.window}")
    if c.d_ff and c.activation != "relu":
        raise ValueError(f"the browser port runs relu feed-forwards only, got {c.activation!r}")
    return model


def browser_config(model: DecoderOnlyLM) -> dict[str, object]:
    """What ``induction_lm.js`` needs besides the weights."""
    config = {key: getattr(model.config, key) for key in CONFIG_FIELDS}
    config["layer_norm_eps"] = model.layers[0].norm1.eps
    config["tie_weights"] = model.tie_weights
    return config


@torch.no_grad()
def run_with_weights(
    model: DecoderOnlyLM, ids: list[int], off: Iterable[tuple[int, int]] = ()
) -> tuple[np.ndarray, np.ndarray]:
    """What the browser computes, from PyTorch, with the (layer, head) pairs ``off`` switched
    off: logits (n, vocab) and attention weights (layers, heads, n, n) of one sequence."""
    was_training = model.training
    model.eval()
    try:
        with model.ablated(list(off)):
            logits, weights = model.attention_weights(torch.tensor([ids]))
    finally:
        model.train(was_training)
    return logits[0].numpy(), weights[0].numpy()


def _examples(examples: object, model: DecoderOnlyLM) -> list[list[int]]:
    """Rows of token ids (k, n), each starting with BOS, as lists; clear errors otherwise."""
    rows = torch.as_tensor(examples)
    if rows.dim() != 2 or not 1 <= rows.shape[0] <= MAX_EXAMPLES or rows.shape[1] < 2:
        raise ValueError(
            f"examples must be (k, n) token ids with 1 <= k <= {MAX_EXAMPLES} and n >= 2, got "
            f"shape {tuple(rows.shape)}"
        )
    if rows.dtype.is_floating_point or rows.dtype == torch.bool:
        raise TypeError(f"examples must hold integer token ids, got dtype {rows.dtype}")
    if rows.shape[1] > model.config.max_len:
        raise ValueError(
            f"examples have {rows.shape[1]} tokens, more than max_len={model.config.max_len}"
        )
    if bool((rows[:, 0] != BOS).any()):
        raise ValueError(f"every example must start with the start token {BOS}")
    inside = (rows[:, 1:] >= 1) & (rows[:, 1:] < model.config.vocab_size)
    if not bool(inside.all()):
        raise ValueError(f"after the start token, tokens must be 1..{model.config.vocab_size - 1}")
    return rows.tolist()


def _scores(scores: dict[str, object] | None, model: DecoderOnlyLM) -> dict[str, list]:
    """Each named score of every head, (layers, heads), as nested lists of floats."""
    shape = (len(model.layers), model.config.num_heads)
    found = {}
    for name, value in (scores or {}).items():
        array = torch.as_tensor(value, dtype=torch.float64)
        if tuple(array.shape) != shape:
            raise ValueError(
                f"score {name!r} must be (layers, heads) = {shape}, got {tuple(array.shape)}"
            )
        if not bool(torch.isfinite(array).all()):
            raise ValueError(f"score {name!r} must be finite")
        found[str(name)] = [[round(float(x), 4) for x in row] for row in array]
    return found


def page_model(markup: str) -> DecoderOnlyLM:
    """The model an explorer's HTML carries, read back into a DecoderOnlyLM (in eval mode)."""
    found = {
        name: re.search(rf'data-{name}="([^"]*)"', markup)
        for name in ("config", "manifest", "weights")
    }
    if 'data-explorer="induction"' not in markup or not all(found.values()):
        raise ValueError("no induction explorer in this HTML (data-config, manifest and weights)")
    config = json.loads(html.unescape(found["config"].group(1)))
    manifest = json.loads(html.unescape(found["manifest"].group(1)))
    numbers = np.frombuffer(base64.b64decode(found["weights"].group(1)), dtype="<f4")
    model = DecoderOnlyLM(
        TransformerConfig(**{key: config[key] for key in CONFIG_FIELDS}, dropout=0.0, pad_id=BOS),
        tie_weights=config["tie_weights"],
    )
    state, offset = {}, 0
    for name, shape in manifest:
        count = math.prod(shape)
        state[name] = torch.from_numpy(numbers[offset : offset + count].copy()).view(shape)
        offset += count
    if offset != numbers.size:
        raise ValueError(f"the manifest names {offset} numbers, the weights hold {numbers.size}")
    if config["tie_weights"]:
        state["output.weight"] = state["embedding.weight"]
    model.load_state_dict(state)
    return model.eval()


def snapshot(model: DecoderOnlyLM, ids: list[int]) -> str:
    """The explorer as HTML without JavaScript: an example and the model's next-token guesses."""
    logits, _ = run_with_weights(model, ids)
    predicted = logits.argmax(-1).tolist()
    right = sum(guess == token for guess, token in zip(predicted, ids[1:], strict=False))
    return (
        "<p><strong>This explorer runs the trained model in your browser with JavaScript, which "
        "is off or did not run here.</strong> Below is a snapshot stored when the chapter was "
        "executed; with JavaScript on, you can type your own tokens, switch heads off and watch "
        "the predictions change.</p>"
        f"<p>Tokens (the first is the start token): <code>{' '.join(map(str, ids))}</code></p>"
        f"<p>The likeliest next token after each: <code>{' '.join(map(str, predicted))}"
        f"</code></p><p>Right at {right} of {len(ids) - 1} positions.</p>"
    )


def induction_live(
    model: DecoderOnlyLM, examples: object, scores: dict[str, object] | None = None
) -> HTML:
    """Chapter 17's explorer for ``model`` (a DecoderOnlyLM with learned or sinusoidal
    positions): pick one of ``examples`` (k, n) token ids that start with the start token, or
    type tokens; see every head's attention and the likeliest next token at every position;
    switch heads off. ``scores`` names per-head numbers (layers, heads) shown beside each head,
    such as {"previous token": ..., "prefix matching": ...}."""
    model = _check_supported(model)
    rows = _examples(examples, model)
    weights, manifest = packed_weights(model)
    attributes = {
        "config": _json(browser_config(model)),
        "manifest": _json(manifest),
        "weights": weights,
        "examples": _json(rows),
        "scores": _json(_scores(scores, model)),
    }
    fallback = snapshot(model, rows[0])
    return HTML(snippet("induction", attributes, fallback, bundle(SCRIPTS)))
