"""Chapter 10's explorers: the residual stream through a stack, and LayerNorm against BatchNorm.

:func:`stack_live` and :func:`norms_live` return the HTML of an explorer: a root element holding
where each control starts (and, for the stack, the chapter's measured profiles) in ``data-*``
attributes, and, for a page without JavaScript, a snapshot in words of what it shows there;
then an inline script with ``attention.js``, ``explorers.js`` (the DOM helpers), ``stack.js``
(the arithmetic, a port of the chapter-10 section of :mod:`attnlib.reference`, checked number
for number by ``tests/test_live_stack.py``) and ``stack_explorer.js`` (the controls). They need
no kernel, so they work in the published book.
"""

from __future__ import annotations

import html
import math
from collections.abc import Mapping

import numpy as np
from IPython.display import HTML

from attnlib import reference
from attnlib._checks import check_int, check_number
from attnlib.live import FALLBACK, _json, bundle, snippet

STACK_SCRIPTS = ("attention.js", "explorers.js", "stack.js", "stack_explorer.js")
ORDERS = ("post-LN", "pre-LN")
MAX_DEPTH = 24  # the depth slider's range, 1 to 24 blocks
SEEDS = 10  # the draw slider's range, 0 to 9
INPUT_STDS = (0.25, 0.5, 1.0, 2.0, 4.0, 8.0, 16.0)  # the input-std slider's values
MAX_SIZE = 8  # the largest batch the normalisation explorer takes: 8 examples of 8 features
# Chapter 10's batch of 3 examples with 6 features on different scales, to 2 decimals.
CHAPTER_BATCH = (
    (-1.13, 1.70, 0.83, 37.94, 1.30, 2.33),
    (-0.34, 7.71, 0.34, 28.42, 0.91, 7.55),
    (1.39, 7.17, 2.73, 21.56, 1.47, 10.78),
)
MEASURED_LABEL = "measured in the chapter's run (24 blocks of width 64, mean of 3 draws)"


def _g(x: float) -> str:
    """4 significant digits, as the explorer prints a number."""
    return f"{x:.4g}"


def _measured(measured: Mapping) -> dict[str, dict[str, list[float]]]:
    """The quantities of :data:`attnlib.reference.STACK_QUANTITIES` found for both orders, per
    block, to 4 significant digits; an error names what does not fit."""
    if not isinstance(measured, Mapping) or set(measured) != set(ORDERS):
        keys = sorted(measured) if isinstance(measured, Mapping) else type(measured).__name__
        raise ValueError(f"measured must map 'post-LN' and 'pre-LN' to profiles, got {keys}")
    found = [name for name in reference.STACK_QUANTITIES if name in measured["post-LN"]]
    if not found:
        raise ValueError(
            f"measured['post-LN'] holds none of the quantities {reference.STACK_QUANTITIES}"
        )
    out: dict[str, dict[str, list[float]]] = {order: {} for order in ORDERS}
    length = None
    for order in ORDERS:
        for name in found:
            if name not in measured[order]:
                raise ValueError(f"measured[{order!r}] has no {name!r}, but 'post-LN' has")
            values = np.asarray(measured[order][name], dtype=np.float64)
            length = len(values) if length is None and values.ndim == 1 else length
            if values.ndim != 1 or len(values) < 1 or len(values) != length:
                raise ValueError(
                    f"measured[{order!r}][{name!r}] must be one number per block, {length} "
                    f"blocks, got shape {values.shape}"
                )
            if not np.isfinite(values).all():
                raise ValueError(f"measured[{order!r}][{name!r}] must be finite")
            out[order][name] = [float(_g(v)) for v in values]
    return out


def stack_snapshot(depth: int, quantity: str, seed: int, input_std: float) -> str:
    """What the stack explorer shows as it opens, in words: the page's text without JavaScript."""
    profiles = {
        order: reference.stack_profile(order == "pre-LN", depth, seed, input_std)[quantity]
        for order in ORDERS
    }
    values = "; ".join(
        f"{order} {_g(p[0])} at block 1 and {_g(p[-1])} at block {depth}"
        for order, p in profiles.items()
    )
    return (
        "<p>With JavaScript it runs a stack of post-LN and of pre-LN blocks (width "
        f"{reference.STACK_WIDTH}, {reference.STACK_HEADS} heads, Xavier weights) forward and "
        "backward in your browser and plots, block by block, the residual stream's size, the "
        "gradient on it, how alike its tokens are, and each weight matrix's gradient, beside "
        f"the profiles the chapter measured. As it opens, {depth} blocks, draw {seed}, input "
        f"standard deviation {input_std:g}, {html.escape(quantity)}: {values}.</p>"
    )


def stack_live(
    measured: Mapping | None = None,
    *,
    depth: int = 12,
    quantity: str = "W_2",
    seed: int = 0,
    input_std: float = 1.0,
    measured_label: str = MEASURED_LABEL,
) -> HTML:
    """The residual-stream explorer of chapter 10: post-LN and pre-LN stacks of ``depth`` blocks
    (1 to 24) computed in the browser as :func:`attnlib.reference.stack_profile` computes them,
    showing ``quantity`` (one of :data:`attnlib.reference.STACK_QUANTITIES`) per block for the
    draw ``seed`` (0 to 9) and an input of standard deviation ``input_std`` (one of
    :data:`INPUT_STDS`). ``measured`` maps ``"post-LN"`` and ``"pre-LN"`` to the chapter's own
    profiles, {quantity: one number per block}; the known quantities are shown beside the live
    ones (others are ignored), labelled ``measured_label``."""
    depth = check_int("depth", depth, 1)
    if depth > MAX_DEPTH:
        raise ValueError(f"depth must be from 1 to {MAX_DEPTH} blocks, got {depth}")
    if quantity not in reference.STACK_QUANTITIES:
        raise ValueError(f"quantity must be one of {reference.STACK_QUANTITIES}, got {quantity!r}")
    seed = check_int("seed", seed)
    if seed >= SEEDS:
        raise ValueError(f"seed must be from 0 to {SEEDS - 1}, got {seed}")
    input_std = check_number("input_std", input_std)
    if input_std not in INPUT_STDS:
        raise ValueError(f"input_std must be one of {INPUT_STDS}, got {input_std:g}")
    attributes = {
        "depth": str(depth),
        "quantity": quantity,
        "seed": str(seed),
        "input-std": f"{input_std:g}",
    }
    if measured is not None:
        attributes["measured"] = _json(_measured(measured))
        attributes["measured-label"] = str(measured_label)
    fallback = f"<p>{FALLBACK}</p>" + stack_snapshot(depth, quantity, seed, input_std)
    return HTML(snippet("stack", attributes, fallback, script=bundle(STACK_SCRIPTS)))


def _batch(batch: object) -> np.ndarray:
    """A finite (examples, features) float array of at most 8 x 8; the error names the shape."""
    array = np.asarray(batch, dtype=np.float64)
    if (
        array.ndim != 2
        or not 1 <= array.shape[0] <= MAX_SIZE
        or not 1 <= array.shape[1] <= MAX_SIZE
    ):
        raise ValueError(
            f"batch must be (examples, features), each from 1 to {MAX_SIZE}, got shape "
            f"{array.shape}"
        )
    if not np.isfinite(array).all():
        raise ValueError(f"batch must be finite, got {int((~np.isfinite(array)).sum())} bad")
    return array


def _numbers(values: np.ndarray) -> str:
    """2 decimals, comma-separated, as the explorer prints them."""
    return ", ".join(f"{v + 0.0:.2f}" for v in np.round(values, 2) + 0.0)


def norms_snapshot(batch: np.ndarray, example: int, scale: float) -> str:
    """What the normalisation explorer shows as it opens, in words (the page without JavaScript)."""
    scaled = batch.copy()
    scaled[example] *= scale
    row_mean, row_std = reference.norm_statistics(scaled, axis=1)
    column_mean, column_std = reference.norm_statistics(scaled, axis=0)
    k, f = scaled.shape
    if k == 1:
        batch_norm = (
            "With a batch of one, every feature's std is 0 and BatchNorm's output is all "
            "zeros (PyTorch refuses it in training mode)."
        )
    else:
        batch_norm = (
            f"BatchNorm normalises each feature with the batch's means ({_numbers(column_mean)})"
            f" and standard deviations ({_numbers(column_std)})."
        )
    scaled_note = f" (example x{example + 1} scaled by {scale:.3g})" if scale != 1 else ""
    return (
        "<p>With JavaScript it normalises an editable batch with LayerNorm and with BatchNorm "
        "and shows each one's means and standard deviations. As it opens, on a batch of "
        f"{k} example{'s' if k > 1 else ''} with {f} features{scaled_note}: LayerNorm "
        f"normalises each example with its own mean ({_numbers(row_mean)}) and standard "
        f"deviation ({_numbers(row_std)}). {batch_norm}</p>"
    )


def norms_live(
    batch: object = CHAPTER_BATCH,
    *,
    used: int | None = None,
    example: int = 0,
    scale: float = 1.0,
) -> HTML:
    """The LayerNorm-against-BatchNorm explorer of chapter 10 on ``batch`` (examples, features;
    at most 8 x 8; editable in the page), normalised as :func:`attnlib.reference.layer_norm` and
    :func:`attnlib.reference.batch_norm` (training-mode statistics) compute it, starting with
    the first ``used`` examples (default all) and example ``example`` multiplied by ``scale``,
    10 ** (k / 10) for k from -20 to 20 (0.01 to 100)."""
    array = _batch(batch)
    used = array.shape[0] if used is None else check_int("used", used, 1)
    if used > array.shape[0]:
        raise ValueError(
            f"used must be from 1 to the batch's {array.shape[0]} examples, got {used}"
        )
    example = check_int("example", example)
    if example >= used:
        raise ValueError(f"example must be from 0 to used - 1 = {used - 1}, got {example}")
    scale = check_number("scale", scale)
    tenths = 10 * math.log10(scale) if scale > 0 else math.nan
    if not (math.isfinite(tenths) and abs(tenths - round(tenths)) < 1e-9 and -20 <= tenths <= 20):
        raise ValueError(
            f"scale must be 10 ** (k / 10) for an integer k from -20 to 20 (0.01 to 100), "
            f"got {scale:g}"
        )
    attributes = {
        "batch": _json(array.tolist()),
        "used": str(used),
        "example": str(example),
        "scale": f"{round(tenths) / 10:g}",
    }
    fallback = f"<p>{FALLBACK}</p>" + norms_snapshot(array[:used], example, scale)
    return HTML(snippet("norms", attributes, fallback, script=bundle(STACK_SCRIPTS)))
