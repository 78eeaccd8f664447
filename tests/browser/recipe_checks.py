"""Chapter 12's explorer (schedules and label smoothing), driven as a reader would.

:func:`check_recipe_explorer` takes the explorer's root element (a Playwright locator) wherever
it is: on a page made here, on the chapter's book page, or in JupyterLab's output after the
chapter has run. It reads where the controls start from the ``data-*`` attributes, moves every
control, and after every move compares what is shown with :mod:`attnlib.reference` in float64
(whose schedules ``tests/test_live_recipe.py`` checks against :mod:`attnlib.schedules`).
"""

from __future__ import annotations

import json
import math

import numpy as np

from attnlib import reference

# recipe.js prints a Noam rate with 4 significant digits, |x| < 5e-4 with 2, the rest with 4
# decimals.
SMALL = 5e-4


def control(root, name: str):
    return root.locator(f'[data-control="{name}"]')


def readout(root, name: str):
    return root.locator(f'[data-readout="{name}"]')


def agrees(text: str, want: float, rate: bool = False) -> bool:
    """Whether a readout's text is ``want`` as recipe.js prints it."""
    text = text.strip().replace("\u2212", "-")
    if want == math.inf or text == "\u221e":
        return text == "\u221e" and want == math.inf
    try:
        got = float(text)
    except ValueError:
        return False
    if rate:
        return math.isclose(got, want, rel_tol=5.01e-4)
    if want != 0 and abs(want) < SMALL:
        return math.isclose(got, want, rel_tol=0.06)
    return abs(got - want) <= 5.01e-5 + 1e-12


def wait_for(root, want: dict[str, tuple[float | str, bool]], what: str, timeout=5_000) -> None:
    """Wait until every readout name -> (value, printed as a rate) shows its value (a str: the
    exact text)."""
    page = root.page
    left = timeout
    while True:
        shown = {name: readout(root, name).first.inner_text().strip() for name in want}
        wrong = {
            name: (shown[name], value)
            for name, (value, rate) in want.items()
            if not (
                shown[name] == value if isinstance(value, str) else agrees(shown[name], value, rate)
            )
        }
        if not wrong:
            return
        if left <= 0:
            raise AssertionError(f"{what}: (shown, expected) {wrong}")
        page.wait_for_timeout(100)
        left -= 100


def assert_clean(root, what: str) -> None:
    text = root.inner_text()
    assert "NaN" not in text and "Infinity" not in text, f"{what}: NaN or Infinity shown"
    assert readout(root, "error").is_hidden(), f"{what}: {readout(root, 'error').inner_text()}"


def schedule_values(kind: str, d_model: int, warmup: int, total: int, final: float) -> np.ndarray:
    """The oracle's schedule at every step t = 0 .. total - 1."""
    steps = np.arange(total)
    if kind == "noam":
        return reference.noam_rates(steps, d_model, warmup)
    if kind == "cosine":
        return reference.cosine_multipliers(steps, total, warmup, final)
    return reference.linear_multipliers(steps, warmup, total, final)


def expect_schedule(root, what: str) -> dict:
    """The curve's readouts for the knobs the controls hold now; returns those knobs."""
    kind = control(root, "schedule").input_value()
    knobs = {
        "d_model": int(control(root, "d-model").input_value()),
        "warmup": int(control(root, "warmup").input_value()),
        "total": int(control(root, "total").input_value()),
        "final": float(control(root, "final").input_value()),
    }
    s = int(control(root, "step").input_value())
    what = f"{what}: {kind} {knobs}, s = {s}"
    # the sliders keep the schedule valid: W < T, W >= 1 but for cosine, 1 <= s <= T
    assert (0 if kind == "cosine" else 50) <= knobs["warmup"] <= knobs["total"] - 1000, what
    assert 1 <= s <= knobs["total"], what
    values = schedule_values(kind, **knobs)
    index, peak = reference.first_peak(values)
    noam = kind == "noam"
    wait_for(
        root,
        {
            "peak": (peak, noam),
            "peak-step": (str(index + 1), False),
            "value": (float(values[s - 1]), noam),
            "warmup": (str(knobs["warmup"]), False),
            "total": (str(knobs["total"]), False),
            "step": (str(s), False),
        },
        what,
    )
    if noam:
        assert math.isclose(peak, knobs["d_model"] ** -0.5 * knobs["warmup"] ** -0.5), what
        assert index + 1 == knobs["warmup"], what
    # a knob that does not apply is out of the way
    assert control(root, "d-model").is_visible() == noam, what
    assert control(root, "final").is_visible() != noam, what
    assert readout(root, "curve").locator("polyline").count() == 1, what
    assert_clean(root, what)
    return {"kind": kind, **knobs, "step": s}


def expect_smoothing(root, what: str) -> None:
    """The target, the floor and the loss at the gap, for the knobs the controls hold now."""
    classes = json.loads(root.get_attribute("data-classes"))
    eps = float(control(root, "epsilon").input_value())
    k = classes[int(control(root, "classes").input_value())]
    gap = float(control(root, "gap").input_value())
    what = f"{what}: eps = {eps}, K = {k}, g = {gap}"
    target = reference.smoothed_target(k, eps)
    floor = reference.smoothing_floor(k, eps)
    logits = reference.gap_logits(k, gap)
    loss = reference.cross_entropy(logits, 0, eps)
    wait_for(
        root,
        {
            "target-true": (float(target[0]), False),
            "target-other": (float(target[1]), False),
            "floor": (floor, False),
            "best-gap": (reference.best_logit_gap(k, eps), False),
            "best-confidence": (float(target[0]), False),
            "confidence": (float(reference.softmax(logits)[0]), False),
            "loss": (loss, False),
            "excess": (max(0.0, loss - floor), False),
            "loss-plain": (reference.cross_entropy(logits, 0, 0.0), False),
            "epsilon": (f"{eps:.2f}", False),
            "classes": (str(k), False),
            "gap": (f"{gap:.1f}", False),
        },
        what,
    )
    bars = readout(root, "bars").locator("rect[fill]:not([fill=none])")
    assert bars.count() == min(k, 7), what
    assert_clean(root, what)


def set_classes(root, k: int) -> None:
    classes = json.loads(root.get_attribute("data-classes"))
    control(root, "classes").fill(str(classes.index(k)))


def check_recipe_explorer(root) -> None:
    """Move every control: each schedule and its knobs, the step, ε, K and the gap."""
    start = expect_schedule(root, "as it opens")
    assert start["kind"] == root.get_attribute("data-schedule")
    assert start["step"] == int(root.get_attribute("data-warmup")), "s starts at the peak"
    expect_smoothing(root, "as it opens")

    # Noam: d_model, the warm-up, the horizon, the step
    for d_model in ("64", "1024"):
        control(root, "schedule").select_option("noam")
        control(root, "d-model").select_option(d_model)
        expect_schedule(root, f"d_model {d_model}")
    for name, value in (
        ("warmup", "8000"),
        ("step", "1"),
        ("step", "8000"),
        ("total", "50000"),
        ("step", "50000"),
        ("warmup", "50"),
    ):
        control(root, name).fill(value)
        expect_schedule(root, f"{name} set to {value}")
    # a shorter horizon pulls W and s back inside it
    control(root, "warmup").fill("30000")
    control(root, "total").fill("2000")
    knobs = expect_schedule(root, "T set to 2000")
    assert (knobs["warmup"], knobs["step"]) == (1000, 2000), knobs
    control(root, "total").fill("20000")
    control(root, "warmup").fill("4000")
    control(root, "step").fill("10000")
    expect_schedule(root, "back to T = 20000")

    # cosine: no warm-up at all, then one, and the floor
    control(root, "schedule").select_option("cosine")
    expect_schedule(root, "cosine")
    control(root, "warmup").fill("0")
    knobs = expect_schedule(root, "cosine without a warm-up")
    assert readout(root, "peak-step").inner_text().strip() == "1", knobs
    for name, value in (("warmup", "2000"), ("final", "0.1"), ("final", "0.5"), ("step", "20000")):
        control(root, name).fill(value)
        expect_schedule(root, f"cosine, {name} set to {value}")

    # linear: its warm-up is at least one step (50 on the slider)
    control(root, "schedule").select_option("linear")
    expect_schedule(root, "linear")
    control(root, "warmup").fill("0")
    assert expect_schedule(root, "linear, warm-up at its least")["warmup"] == 50
    for name, value in (("final", "0"), ("step", "20000"), ("step", "1"), ("warmup", "19000")):
        control(root, name).fill(value)
        expect_schedule(root, f"linear, {name} set to {value}")

    # label smoothing: ε, K and the gap, to their ends
    classes = json.loads(root.get_attribute("data-classes"))
    for eps in ("0", "0.25", "1", "0.1"):
        control(root, "epsilon").fill(eps)
        expect_smoothing(root, f"eps {eps}")
    for k in (classes[0], classes[-1], 4):
        set_classes(root, k)
        expect_smoothing(root, f"K {k}")
    for gap in ("0", "3.6", "20", "6"):
        control(root, "gap").fill(gap)
        expect_smoothing(root, f"gap {gap}")
    control(root, "epsilon").fill("0")
    expect_smoothing(root, "no smoothing: the floor is 0, the best gap infinite")
    assert readout(root, "best-gap").inner_text().strip() == "\u221e"
    control(root, "epsilon").fill("0.1")
    set_classes(root, classes[-1])
    expect_smoothing(root, "the paper's vocabulary")
    # the schedule part did not move while smoothing did
    expect_schedule(root, "after the smoothing moves")
