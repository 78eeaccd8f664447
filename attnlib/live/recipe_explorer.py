"""Chapter 12's explorer: the learning-rate schedules and label smoothing, with their knobs.

:func:`recipe_live` returns the HTML of the explorer: a root element holding where each control
starts in ``data-*`` attributes, and, for a page without JavaScript, a snapshot in words of what
it shows there; then an inline script with ``attention.js``, ``explorers.js`` (the DOM helpers)
and ``recipe.js``, whose arithmetic is a port of :mod:`attnlib.schedules` and of the chapter's
label smoothing, checked number for number against the NumPy oracle in :mod:`attnlib.reference`
by ``tests/test_live_recipe.py``. It needs no kernel, so it works in the published book.
"""

from __future__ import annotations

import html
import math

import numpy as np
from IPython.display import HTML

from attnlib import reference
from attnlib._checks import check_count, check_int, check_number
from attnlib.live import FALLBACK, RECIPE_SCRIPTS, _json, bundle, snippet

SCHEDULES = ("noam", "cosine", "linear")
NAMES = {
    "noam": "Noam",
    "cosine": "linear warm-up, then cosine decay",
    "linear": "linear warm-up, then linear decay",
}
# The number of classes K the slider offers: the chapter's 4 up to the paper's 37,000 tokens.
CLASS_COUNTS = (2, 3, 4, 5, 10, 100, 1000, 10_000, 37_000)
# The sliders' grids (recipe.js): (low, high, step); warm-up and step s follow T in the page.
TOTAL_GRID = (2000, 100_000, 1000)
FINAL_GRID = (0.0, 0.5, 0.01)
EPSILON_GRID = (0.0, 1.0, 0.01)
GAP_GRID = (0.0, 20.0, 0.1)
WARMUP_STEP = 50


def _on_grid(name: str, value: float, grid: tuple[float, float, float]) -> float:
    """``value`` if it is one of low, low + step, ..., high; else an error naming the grid."""
    low, high, step = grid
    value = check_number(name, value)
    units = (value - low) / step
    if not low <= value <= high or abs(units - round(units)) > 1e-9:
        raise ValueError(
            f"{name} must be one of {low:g}, {low + step:g}, ..., {high:g}, got {value}"
        )
    return value


def _number(x: float) -> str:
    """As recipe.js prints a multiplier or a loss: 4 decimals, |x| < 5e-4 in two digits."""
    if x == math.inf:
        return "\u221e"
    x += 0.0  # -0.0 (the entropy of a one-hot target) prints as 0, as in JavaScript
    return f"{x:.1e}" if x != 0 and abs(x) < 5e-4 else f"{x:.4f}"


def _rate(x: float) -> str:
    """As recipe.js prints a Noam rate (JavaScript's toExponential(3)): 6.988e-4."""
    mantissa, exponent = f"{x:.3e}".split("e")
    return f"{mantissa}e{int(exponent)}"


def snapshot(
    schedule: str,
    d_model: int,
    warmup: int,
    total_steps: int,
    final: float,
    epsilon: float,
    num_classes: int,
) -> str:
    """What the explorer shows as it opens, in words: the page's text without JavaScript."""
    steps = np.arange(total_steps)
    if schedule == "noam":
        values = reference.noam_rates(steps, d_model, warmup)
        setting = f"Noam with d_model = {d_model} and warm-up W = {warmup}"
    elif schedule == "cosine":
        values = reference.cosine_multipliers(steps, total_steps, warmup, final)
        setting = f"a linear warm-up over W = {warmup} steps, then cosine decay to f = {final:g}"
    else:
        values = reference.linear_multipliers(steps, warmup, total_steps, final)
        setting = f"a linear warm-up over W = {warmup} steps, then linear decay to f = {final:g}"
    index, peak = reference.first_peak(values)
    shown = _rate(peak) if schedule == "noam" else _number(peak)
    what = "the learning rate" if schedule == "noam" else "the multiplier of the base rate"
    target = reference.smoothed_target(num_classes, epsilon)
    floor = reference.smoothing_floor(num_classes, epsilon)
    gap = reference.best_logit_gap(num_classes, epsilon)
    return (
        "<p>With JavaScript it draws chapter 12's learning-rate schedules (Noam; a linear "
        "warm-up, then cosine or linear decay) and label smoothing's target as you move their "
        f"knobs. As it opens: {html.escape(setting)}, over {total_steps} steps, {what} peaks at "
        f"{shown} at step s = {index + 1}; label smoothing with \u03b5 = {epsilon:.2f} and "
        f"K = {num_classes} puts {_number(target[0])} on the true class and "
        f"{_number(target[1])} on each other one, and no prediction's loss can go below "
        f"H(q') = {_number(floor)} nats, reached at a logit gap of {_number(gap)}.</p>"
    )


def recipe_live(
    schedule: str = "noam",
    d_model: int = 512,
    warmup: int = 4000,
    total_steps: int = 20_000,
    final: float = 0.0,
    epsilon: float = 0.1,
    num_classes: int = 4,
    gap: float = 6.0,
) -> HTML:
    """The explorer of chapter 12, starting at ``schedule`` (``"noam"``, ``"cosine"`` or
    ``"linear"``, as :func:`attnlib.schedules.noam`, ``cosine_decay`` and
    ``linear_warmup_decay``) with its knobs, over ``total_steps`` steps (2000 to 100,000, in
    thousands), and at label smoothing ``epsilon`` (0 to 1, in hundredths) for ``num_classes``
    classes, a prediction's logit gap ``gap`` (0 to 20, in tenths) marked on its loss curve."""
    if schedule not in SCHEDULES:
        raise ValueError(f"schedule must be one of {SCHEDULES}, got {schedule!r}")
    check_count("d_model", d_model)
    check_int("total_steps", total_steps)
    check_int("warmup", warmup)
    _on_grid("total_steps", total_steps, TOTAL_GRID)
    least = 0 if schedule == "cosine" else WARMUP_STEP
    if not least <= warmup <= total_steps - 1000 or warmup % WARMUP_STEP:
        raise ValueError(
            f"warmup must be a multiple of {WARMUP_STEP} from {least} to total_steps - 1000 = "
            f"{total_steps - 1000} for the {schedule} schedule, got {warmup}"
        )
    final = _on_grid("final", final, FINAL_GRID)
    epsilon = _on_grid("epsilon", epsilon, EPSILON_GRID)
    gap = _on_grid("gap", gap, GAP_GRID)
    check_int("num_classes", num_classes, 2)
    classes = sorted(set(CLASS_COUNTS) | {int(num_classes)})
    attributes = {
        "schedule": schedule,
        "d-model": str(int(d_model)),
        "warmup": str(int(warmup)),
        "total": str(int(total_steps)),
        "final": f"{final:g}",
        "epsilon": f"{epsilon:g}",
        "classes": _json(classes),
        "k": str(int(num_classes)),
        "gap": f"{gap:g}",
    }
    fallback = f"<p>{FALLBACK}</p>" + snapshot(
        schedule, int(d_model), int(warmup), int(total_steps), final, epsilon, int(num_classes)
    )
    return HTML(snippet("recipe", attributes, fallback, script=bundle(RECIPE_SCRIPTS)))
