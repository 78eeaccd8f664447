"""Chapter 12's explorer: recipe.js computes what attnlib.reference (and attnlib) computes.

attnlib/live/recipe.js runs in node on a grid of knob values: every schedule's whole curve,
its peak, the smoothed target, the loss floor, the loss of a prediction at a logit gap and the
best gap must match the NumPy oracle of :mod:`attnlib.reference` to 1e-12 (relative), and the
oracle itself must match :mod:`attnlib.schedules` and PyTorch's ``label_smoothing``. All cases go
through one node process.
"""

from __future__ import annotations

import json
import math
from functools import cache
from pathlib import Path

import numpy as np
import pytest
import torch
import torch.nn.functional as F

import attnlib.live
from attnlib import reference
from attnlib.live.recipe_explorer import CLASS_COUNTS, SCHEDULES, recipe_live
from attnlib.schedules import cosine_decay, linear_warmup_decay, noam
from tests.helpers import case_harness, data_attribute, fallback_snapshot, node_answers, of_kind

RECIPE_JS = Path(attnlib.live.__file__).with_name("recipe.js")
RTOL, ATOL = 1e-12, 1e-15

# Reads a JSON list of cases on stdin, answers a JSON list of results (or {"error": message});
# Infinity travels as the string "inf".
HARNESS = case_harness(
    """
const recipe = require(process.argv[1]);
const cases = JSON.parse(require("fs").readFileSync(0, "utf8"));
const knobs = (c) => ({ dModel: c.d_model, warmup: c.warmup, total: c.total, final: c.final });
const run = {
  curve: (c) => {
    const values = recipe.scheduleCurve(c.schedule, knobs(c));
    return { values, peak: recipe.firstPeak(values) };
  },
  at: (c) => c.steps.map((t) => recipe.scheduleValue(c.schedule, t, knobs(c))),
  noam: (c) => recipe.noamRate(c.step, c.d_model, c.warmup),
  cosine: (c) => recipe.cosineMultiplier(c.step, c.total, c.warmup, c.final),
  linear: (c) => recipe.linearMultiplier(c.step, c.warmup, c.total, c.final),
  peak: (c) => recipe.firstPeak(c.values),
  smoothing: (c) => ({
    target: recipe.smoothedTarget(c.k, c.epsilon),
    floor: recipe.smoothingFloor(c.k, c.epsilon),
    best: recipe.bestLogitGap(c.k, c.epsilon),
    probabilities: c.gaps.map((g) => recipe.gapProbabilities(c.k, g)),
    losses: c.gaps.map((g) => recipe.smoothedLoss(c.k, c.epsilon, g)),
  }),
  target: (c) => recipe.smoothedTarget(c.k, c.epsilon),
  loss: (c) => recipe.smoothedLoss(c.k, c.epsilon, c.gap),
  probabilities: (c) => recipe.gapProbabilities(c.k, c.gap),
};
""",
    '(k, v) => (v === Infinity ? "inf" : v)',
)

# --- the cases -------------------------------------------------------------------------------

TOTALS = (2000, 20_000)
NOAM_CASES = [
    {"schedule": "noam", "d_model": d, "warmup": w, "total": total, "final": 0.0}
    for d in (64, 512, 1024)
    for w in (1, 50, 4000)
    for total in TOTALS
]
DECAY_CASES = [
    {"schedule": kind, "d_model": 512, "warmup": w, "total": total, "final": f}
    for kind in ("cosine", "linear")
    for total in TOTALS
    for w in (0, 1, 50, 1000, total - 1000, total - 1)
    for f in (0.0, 0.1, 0.37, 1.0)
    if not (kind == "linear" and w == 0)
]
# Knobs off the explorer's grid, and tiny horizons: the formulas, not the sliders.
ODD_CASES = [
    {"schedule": "noam", "d_model": 3, "warmup": 7, "total": 5, "final": 0.0},
    {"schedule": "cosine", "d_model": 1, "warmup": 3, "total": 7, "final": 0.25},
    {"schedule": "linear", "d_model": 1, "warmup": 1, "total": 2, "final": 0.5},
    {"schedule": "cosine", "d_model": 1, "warmup": 0, "total": 1, "final": 0.0},
]
CURVE_CASES = NOAM_CASES + DECAY_CASES + ODD_CASES
# Single steps, beyond the horizon too: a decay holds its floor after T.
AT_CASES = [
    {
        **case,
        "steps": sorted(
            {
                0,
                max(case["warmup"] - 1, 0),
                case["warmup"],
                case["warmup"] + 1,
                case["total"] - 1,
                case["total"],
                case["total"] + 5,
                10**6,
            }
        ),
    }
    for case in CURVE_CASES[::5]
]
SCHEDULE_ERRORS = [
    (
        {"kind": "noam", "step": 0, "d_model": 512, "warmup": 0},
        "warmup must be an integer >= 1, got 0",
    ),
    (
        {"kind": "noam", "step": -1, "d_model": 512, "warmup": 10},
        "step must be an integer >= 0, got -1",
    ),
    (
        {"kind": "noam", "step": 2.5, "d_model": 512, "warmup": 10},
        "step must be an integer >= 0, got 2.5",
    ),
    (
        {"kind": "noam", "step": 0, "d_model": 0, "warmup": 10},
        "d_model must be an integer >= 1, got 0",
    ),
    (
        {"kind": "cosine", "step": 0, "total": 100, "warmup": 100, "final": 0.0},
        "warmup=100 leaves no steps to decay in total_steps=100",
    ),
    (
        {"kind": "cosine", "step": 0, "total": 100, "warmup": 10, "final": 1.5},
        "final must be in [0, 1], got 1.5",
    ),
    (
        {"kind": "linear", "step": 0, "total": 100, "warmup": 0, "final": 0.0},
        "warmup must be an integer >= 1, got 0",
    ),
    (
        {"kind": "curve", "schedule": "step", "d_model": 1, "warmup": 1, "total": 10, "final": 0.0},
        "schedule must be one of noam, cosine, linear, got step",
    ),
    ({"kind": "peak", "values": []}, "values must not be empty"),
]
EPSILONS = (0.0, 0.01, 0.1, 0.25, 0.5, 0.99, 1.0)
GAPS = (0.0, 0.5, math.log(37), 6.0, 12.3, 20.0)
SMOOTHING_CASES = [
    {"kind": "smoothing", "k": k, "epsilon": eps, "gaps": list(GAPS)}
    for k in (*CLASS_COUNTS, 7)
    for eps in EPSILONS
]
SMOOTHING_ERRORS = [
    ({"kind": "target", "k": 1, "epsilon": 0.1}, "K must be an integer >= 2, got 1"),
    ({"kind": "target", "k": 4, "epsilon": 1.5}, "epsilon must be in [0, 1], got 1.5"),
    ({"kind": "target", "k": 4, "epsilon": -0.1}, "epsilon must be in [0, 1], got -0.1"),
    (
        {"kind": "loss", "k": 4, "epsilon": 0.1, "gap": -1},
        "gap must be a finite number >= 0, got -1",
    ),
    ({"kind": "probabilities", "k": 4.5, "gap": 1}, "K must be an integer >= 2, got 4.5"),
]


def cases() -> list[dict]:
    """Every case with its kind; the answers come back in the same order."""
    out = [{"kind": "curve", **case} for case in CURVE_CASES]
    out += [{"kind": "at", **case} for case in AT_CASES]
    out += [case for case, _ in SCHEDULE_ERRORS]
    out += SMOOTHING_CASES
    out += [case for case, _ in SMOOTHING_ERRORS]
    return out


@cache
def node_results() -> tuple[dict, ...]:
    """Run every case through recipe.js in one node process."""
    return tuple(node_answers(HARNESS, [RECIPE_JS], cases(), timeout=120))


def answers(kind: str) -> list[tuple[dict, dict]]:
    """(case, node's answer) for every case of one kind."""
    return of_kind(kind, cases(), node_results())


def oracle(case: dict, steps: np.ndarray) -> np.ndarray:
    """The NumPy oracle's schedule for one case's knobs at ``steps`` (t = 0, 1, ...)."""
    if case["schedule"] == "noam":
        return reference.noam_rates(steps, case["d_model"], case["warmup"])
    if case["schedule"] == "cosine":
        return reference.cosine_multipliers(steps, case["total"], case["warmup"], case["final"])
    return reference.linear_multipliers(steps, case["warmup"], case["total"], case["final"])


def library(case: dict):
    """attnlib.schedules' schedule for one case's knobs."""
    if case["schedule"] == "noam":
        return noam(case["d_model"], case["warmup"])
    if case["schedule"] == "cosine":
        return cosine_decay(case["total"], case["warmup"], case["final"])
    return linear_warmup_decay(case["warmup"], case["total"], case["final"])


def number(value) -> float:
    return math.inf if value == "inf" else float(value)


# --- the oracle against attnlib and PyTorch ------------------------------------------------------


@pytest.mark.parametrize("index", range(0, len(CURVE_CASES), 3))
def test_the_oracle_is_attnlib_schedules(index: int):
    case = CURVE_CASES[index]
    total = min(case["total"], 2000)  # every step of the first 2000: enough to meet each piece
    steps = np.arange(total + 3)
    ours = [library(case)(int(t)) for t in steps]
    np.testing.assert_allclose(oracle(case, steps), ours, rtol=RTOL, atol=ATOL)


def test_the_oracle_peaks_where_the_chapter_says():
    for d_model, warmup in ((512, 4000), (512, 8000), (256, 4000)):
        index, peak = reference.first_peak(reference.noam_rates(np.arange(20_000), d_model, warmup))
        assert index + 1 == warmup and math.isclose(peak, d_model**-0.5 * warmup**-0.5)
    for warmup in (1, 100, 999):
        for values in (
            reference.cosine_multipliers(np.arange(1000), 1000, warmup, 0.37),
            reference.linear_multipliers(np.arange(1000), warmup, 1000, 0.37),
        ):
            assert reference.first_peak(values) == (warmup - 1, 1.0)
    assert reference.first_peak(reference.cosine_multipliers(np.arange(10), 10)) == (0, 1.0)
    with pytest.raises(ValueError, match="steps must be integers >= 0"):
        reference.noam_rates(np.array([0.5]), 512, 10)


@pytest.mark.parametrize("k", (*CLASS_COUNTS, 7))
def test_the_oracle_is_pytorchs_label_smoothing(k: int):
    generator = torch.Generator().manual_seed(k)
    for eps in EPSILONS:
        target = reference.smoothed_target(k, eps, label=1)
        expected = (1 - eps) * F.one_hot(torch.tensor(1), k).double() + eps / k
        np.testing.assert_allclose(target, expected.numpy(), rtol=1e-15, atol=1e-17)
        logits = 3 * torch.randn(k, generator=generator, dtype=torch.float64)
        torch_loss = F.cross_entropy(logits[None], torch.tensor([1]), label_smoothing=eps)
        assert math.isclose(
            reference.cross_entropy(logits.numpy(), 1, eps), torch_loss.item(), rel_tol=1e-10
        )
        # the floor is the loss at p = q', the best gap makes softmax equal q'
        floor = reference.smoothing_floor(k, eps)
        if eps > 0:
            best = torch.tensor(reference.gap_logits(k, reference.best_logit_gap(k, eps)))
            np.testing.assert_allclose(
                torch.softmax(best, dim=0).numpy(), reference.smoothed_target(k, eps), rtol=1e-12
            )
            at_best = F.cross_entropy(best[None], torch.tensor([0]), label_smoothing=eps)
            assert math.isclose(at_best.item(), floor, rel_tol=1e-10)  # torch sums K terms
        else:
            assert floor == 0 and reference.best_logit_gap(k, eps) == math.inf
        # no prediction does better than the floor
        others = 5 * torch.randn(200, k, generator=generator, dtype=torch.float64)
        losses = F.cross_entropy(
            others, torch.zeros(200, dtype=torch.long), label_smoothing=eps, reduction="none"
        )
        assert losses.min().item() >= floor - 1e-12


def test_the_chapters_numbers():
    """Section 5: K = 4, ε = 0.1 gives q' = (0.925, 0.025, ...), a floor of 0.3488, gap ln 37."""
    np.testing.assert_allclose(reference.smoothed_target(4, 0.1), [0.925, 0.025, 0.025, 0.025])
    assert round(reference.smoothing_floor(4, 0.1), 4) == 0.3488
    assert math.isclose(reference.best_logit_gap(4, 0.1), math.log(37))


# --- recipe.js against the oracle ----------------------------------------------------------------


def test_every_curve_and_its_peak_match_numpy():
    found = [(case, result) for case, result in answers("curve") if case["schedule"] in SCHEDULES]
    assert len(found) == len(CURVE_CASES) > 60
    for case, result in found:
        assert "value" in result, (case, result)
        want = oracle(case, np.arange(case["total"]))
        np.testing.assert_allclose(result["value"]["values"], want, rtol=RTOL, atol=ATOL)
        index, peak = reference.first_peak(want)
        assert result["value"]["peak"]["index"] == index, case
        assert math.isclose(result["value"]["peak"]["value"], peak, rel_tol=RTOL)
        if case["schedule"] == "noam" and case["warmup"] <= case["total"]:
            assert index + 1 == case["warmup"], "Noam peaks at s = W"


def test_single_steps_match_numpy_beyond_the_horizon_too():
    found = answers("at")
    assert len(found) == len(AT_CASES)
    for case, result in found:
        want = oracle(case, np.array(case["steps"]))
        np.testing.assert_allclose(result["value"], want, rtol=RTOL, atol=ATOL)
        if case["schedule"] != "noam":
            assert result["value"][-1] == pytest.approx(case["final"], abs=1e-15)


@pytest.mark.parametrize("index", range(len(SCHEDULE_ERRORS)))
def test_schedules_refuse_what_attnlib_refuses(index: int):
    case, message = SCHEDULE_ERRORS[index]
    found = [result for c, result in answers(case["kind"]) if c is case]
    assert found == [{"error": message}]


def test_label_smoothing_matches_numpy():
    found = answers("smoothing")
    assert len(found) == len(SMOOTHING_CASES)
    for case, result in found:
        k, eps, value = case["k"], case["epsilon"], result["value"]
        target = reference.smoothed_target(k, eps)
        assert value["target"]["trueClass"] == target[0] and value["target"]["other"] == target[1]
        assert math.isclose(value["floor"], reference.smoothing_floor(k, eps), rel_tol=RTOL)
        assert math.isclose(
            number(value["best"]), reference.best_logit_gap(k, eps), rel_tol=RTOL, abs_tol=ATOL
        )
        for gap, p, loss in zip(case["gaps"], value["probabilities"], value["losses"], strict=True):
            logits = reference.gap_logits(k, gap)
            softmax = reference.softmax(logits)
            assert math.isclose(p["trueClass"], softmax[0], rel_tol=RTOL)
            assert math.isclose(p["other"], softmax[1], rel_tol=RTOL)
            want = reference.cross_entropy(logits, 0, eps)
            assert math.isclose(loss, want, rel_tol=RTOL, abs_tol=1e-14), (k, eps, gap)
            assert loss >= value["floor"] - 1e-12


@pytest.mark.parametrize("index", range(len(SMOOTHING_ERRORS)))
def test_label_smoothing_refuses_bad_knobs(index: int):
    case, message = SMOOTHING_ERRORS[index]
    found = [result for c, result in answers(case["kind"]) if c is case]
    assert found == [{"error": message}]


# --- the HTML ----------------------------------------------------------------------------------


def test_recipe_live_html_is_self_contained_and_stable():
    markup = recipe_live().data
    assert 'id="attnlib-live-recipe" data-explorer="recipe"' in markup
    for name in attnlib.live.RECIPE_SCRIPTS:
        assert attnlib.live.script_source(name) in markup
    assert attnlib.live.script_source("encoder.js") not in markup  # only the three it needs
    assert markup.count("<script>") == markup.count("</script>") == 1 and "src=" not in markup
    assert recipe_live().data == markup, "the snippet must be the same every time"
    starts = {
        name: data_attribute(markup, name) for name in ("schedule", "d-model", "warmup", "total")
    }
    assert starts == {"schedule": "noam", "d-model": "512", "warmup": "4000", "total": "20000"}
    assert json.loads(data_attribute(markup, "classes")) == list(CLASS_COUNTS)
    assert (data_attribute(markup, "k"), data_attribute(markup, "epsilon")) == ("4", "0.1")


def test_without_javascript_the_page_says_what_it_would_show():
    snapshot = fallback_snapshot(recipe_live().data)
    # the chapter's numbers: Noam's peak d^-0.5 w^-0.5 at s = w, q' and H(q') for K = 4
    assert "peaks at 6.988e-4 at step s = 4000" in snapshot
    assert "puts 0.9250 on the true class and 0.0250 on each other one" in snapshot
    assert "H(q') = 0.3488 nats, reached at a logit gap of 3.6109" in snapshot
    other = recipe_live("linear", warmup=1000, total_steps=10_000, epsilon=0.0, num_classes=7)
    text = other.data.split("<script>")[0]
    assert "linear decay to f = 0" in text and "peaks at 1.0000 at step s = 1000" in text
    assert "H(q') = 0.0000 nats, reached at a logit gap of \u221e" in text
    assert json.loads(data_attribute(other.data, "classes")) == sorted({*CLASS_COUNTS, 7})


def test_recipe_live_refusals_name_the_problem():
    with pytest.raises(ValueError, match="schedule must be one of"):
        recipe_live("step")
    with pytest.raises(ValueError, match=r"warmup must be a multiple of 50 from 50 to .* 19000"):
        recipe_live(warmup=0)
    recipe_live("cosine", warmup=0)  # cosine needs no warm-up
    with pytest.raises(ValueError, match="warmup must be a multiple of 50"):
        recipe_live(warmup=19_500)
    with pytest.raises(ValueError, match=r"total_steps must be one of 2000, 3000, \.\.\., 100000"):
        recipe_live(total_steps=2500)
    with pytest.raises(ValueError, match=r"epsilon must be one of 0, 0\.01, \.\.\., 1, got 0\.125"):
        recipe_live(epsilon=0.125)
    with pytest.raises(ValueError, match="final must be one of"):
        recipe_live("cosine", final=0.6)
    with pytest.raises(ValueError, match="gap must be one of"):
        recipe_live(gap=25.0)
    with pytest.raises(TypeError, match="num_classes must be an int >= 2"):
        recipe_live(num_classes=2.5)
    with pytest.raises(ValueError, match="num_classes must be an int >= 2"):
        recipe_live(num_classes=1)
