"""Learning-rate schedules against hand-computed values, and checkpoint averaging."""

import math
import re

import numpy as np
import pytest
import torch

from attnlib.schedules import (
    average_checkpoints,
    cosine_decay,
    exponential_decay,
    linear_warmup,
    linear_warmup_decay,
    noam,
    piecewise_constant,
    polynomial_decay,
)


def test_noam_by_hand():
    rate = noam(512, 4000)
    # step 0 is the first step, s = 1: 512^-0.5 * 1 * 4000^-1.5
    assert rate(0) == pytest.approx(512**-0.5 * 4000**-1.5, rel=1e-12)
    # peak at s = warmup (step 3999): d^-0.5 * warmup^-0.5 = 1 / sqrt(2,048,000)
    assert rate(3999) == pytest.approx(6.987712429686844e-04, rel=1e-12)
    assert max(rate(step) for step in range(20_000)) == rate(3999)
    assert rate(15_999) == pytest.approx(512**-0.5 * 16_000**-0.5, rel=1e-12)  # half the peak
    assert rate(15_999) == pytest.approx(rate(3999) / 2, rel=1e-12)
    assert noam(512, 4000, factor=2.0)(3999) == pytest.approx(2 * rate(3999), rel=1e-12)


def test_noam_drives_lambda_lr():
    parameter = torch.nn.Parameter(torch.zeros(1))
    optimizer = torch.optim.SGD([parameter], lr=1.0)  # noam gives the rate itself
    scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, noam(64, 10))
    seen = []
    for _ in range(30):
        seen.append(optimizer.param_groups[0]["lr"])
        optimizer.step()
        scheduler.step()
    assert seen == pytest.approx([noam(64, 10)(step) for step in range(30)], rel=1e-12)
    assert max(seen) == seen[9] == pytest.approx(64**-0.5 * 10**-0.5, rel=1e-12)


def test_exponential_decay_by_hand():
    smooth, stairs = exponential_decay(0.5, 10), exponential_decay(0.5, 10, staircase=True)
    assert [smooth(s) for s in (0, 5, 10, 20)] == pytest.approx([1.0, 0.5**0.5, 0.5, 0.25])
    assert [stairs(s) for s in (0, 9, 10, 15, 20)] == [1.0, 1.0, 0.5, 0.5, 0.25]


def test_piecewise_constant_by_hand():
    schedule = piecewise_constant([10, 20], [1.0, 0.5, 0.1])
    steps = (0, 9, 10, 19, 20, 1000)
    assert [schedule(s) for s in steps] == [1.0, 1.0, 0.5, 0.5, 0.1, 0.1]
    assert piecewise_constant([], [0.3])(50) == 0.3


def test_polynomial_decay_by_hand():
    linear, square = polynomial_decay(100), polynomial_decay(100, power=2.0, final=0.1)
    assert [linear(s) for s in (0, 25, 100, 200)] == pytest.approx([1.0, 0.75, 0.0, 0.0])
    assert [square(s) for s in (0, 50, 100, 200)] == pytest.approx([1.0, 0.325, 0.1, 0.1])


def test_cosine_decay_by_hand():
    schedule = cosine_decay(110, warmup=10, final=0.1)
    # warm-up (step + 1) / 10, then 0.1 + 0.9 * (1 + cos(pi * progress)) / 2
    expected = {0: 0.1, 4: 0.5, 9: 1.0, 10: 1.0, 60: 0.55, 110: 0.1, 500: 0.1}
    assert {s: schedule(s) for s in expected} == pytest.approx(expected)
    plain = cosine_decay(100)
    assert plain(0) == 1.0 and plain(25) == pytest.approx((1 + math.cos(math.pi / 4)) / 2)


def test_linear_warmup_by_hand():
    schedule = linear_warmup(4)
    assert [schedule(step) for step in range(6)] == [0.25, 0.5, 0.75, 1.0, 1.0, 1.0]
    with pytest.raises(ValueError, match="warmup"):
        linear_warmup(0)


def test_linear_warmup_decay_by_hand():
    schedule = linear_warmup_decay(10, 110)
    expected = {0: 0.1, 9: 1.0, 59: 0.5, 109: 0.0, 300: 0.0}
    assert {s: schedule(s) for s in expected} == pytest.approx(expected)
    assert linear_warmup_decay(10, 110, final=0.2)(59) == pytest.approx(0.6)


@pytest.mark.parametrize(
    ("make", "message"),
    [
        (lambda: noam(512, 0), "warmup must be an int >= 1, got 0"),
        (lambda: noam(0, 4000), "d_model must be positive, got 0"),
        (lambda: noam(512, 4000, factor=-1), "factor must be positive, got -1"),
        (lambda: exponential_decay(0.0, 10), r"decay_rate must be in \(0, 1\], got 0.0"),
        (lambda: exponential_decay(0.5, 0), "decay_steps must be positive, got 0"),
        (
            lambda: piecewise_constant([20, 10], [1, 2, 3]),
            r"boundaries must be strictly increasing, got \[20, 10\]",
        ),
        (
            lambda: piecewise_constant([10, 10], [1, 2, 3]),
            r"boundaries must be strictly increasing, got \[10, 10\]",
        ),
        (
            lambda: piecewise_constant([10, 20], [1, 2]),
            "need one more value than boundaries, got 2 boundaries and 2 values",
        ),
        (lambda: polynomial_decay(0), "total_steps must be positive, got 0"),
        (lambda: polynomial_decay(10, final=1.5), r"final must be in \[0, 1\]"),
        (lambda: cosine_decay(100, warmup=-1), "warmup must be an int >= 0, got -1"),
        (lambda: cosine_decay(100, warmup=100), "warmup=100 leaves no steps to decay"),
        (lambda: linear_warmup_decay(0, 100), "warmup must be an int >= 1, got 0"),
        (lambda: linear_warmup_decay(5, 5), "warmup=5 leaves no steps to decay in total_steps=5"),
    ],
)
def test_schedule_refusals(make, message):
    with pytest.raises(ValueError, match=message):
        make()


# --- checkpoint averaging ---------------------------------------------------------------------


def test_average_checkpoints_means_float_entries():
    states = [
        {
            "w": torch.full((2, 3), float(i)),
            "half": torch.full((2,), float(i), dtype=torch.bfloat16),
            "steps": torch.tensor(10 + i),
        }
        for i in (1, 2, 6)
    ]
    averaged = average_checkpoints(states)
    assert list(averaged) == ["w", "half", "steps"]
    torch.testing.assert_close(averaged["w"], torch.full((2, 3), 3.0))
    assert averaged["half"].dtype == torch.bfloat16 and averaged["half"].tolist() == [3.0, 3.0]
    assert averaged["steps"].item() == 11  # not a float: taken from the first checkpoint
    assert averaged["w"].data_ptr() != states[0]["w"].data_ptr()


def test_average_of_real_model_checkpoints_is_loadable():
    models = [torch.nn.Linear(4, 3) for _ in range(3)]
    averaged = average_checkpoints([m.state_dict() for m in models])
    target = torch.nn.Linear(4, 3)
    target.load_state_dict(averaged)
    expected = sum(m.weight.detach() for m in models) / 3
    torch.testing.assert_close(target.weight.detach(), expected)


def test_average_checkpoints_refusals():
    a = {"x": torch.zeros(2), "y": torch.zeros(3)}
    with pytest.raises(ValueError, match="needs at least one state dict"):
        average_checkpoints([])
    with pytest.raises(ValueError, match="key 'y' is missing from checkpoint 1"):
        average_checkpoints([a, {"x": torch.zeros(2)}])
    with pytest.raises(ValueError, match="key 'z' is only in checkpoint 2"):
        average_checkpoints([a, a, {**a, "z": torch.zeros(1)}])
    with pytest.raises(
        ValueError, match=r"key 'x' has shape \(2,\) in checkpoint 0 but \(4,\) in checkpoint 1"
    ):
        average_checkpoints([a, {"x": torch.zeros(4), "y": torch.zeros(5)}])


# --- steps and settings that are not what a schedule counts ---------------------------------

SCHEDULES = {
    "noam": lambda: noam(64, 10),
    "exponential": lambda: exponential_decay(0.5, 10),
    "piecewise": lambda: piecewise_constant([10], [1.0, 0.5]),
    "polynomial": lambda: polynomial_decay(10),
    "cosine": lambda: cosine_decay(100, warmup=10),
    "linear": lambda: linear_warmup_decay(10, 100),
    "warmup": lambda: linear_warmup(10),
}


@pytest.mark.parametrize("name", list(SCHEDULES))
@pytest.mark.parametrize("step", [-1, -10])
def test_schedules_refuse_a_negative_step(name, step):
    # Before: exponential_decay(.5, 10)(-10) = 2.0, polynomial_decay(10)(-5) = 1.5,
    # cosine_decay(100, warmup=10)(-5) = -0.4, noam(64, 10)(-1) a ZeroDivisionError.
    with pytest.raises(ValueError, match=f"step must be an int >= 0, got {step}$"):
        SCHEDULES[name]()(step)


@pytest.mark.parametrize("name", list(SCHEDULES))
@pytest.mark.parametrize(
    ("step", "shown"),
    [
        (float("nan"), "float nan"),
        (float("inf"), "float inf"),
        (2.5, "float 2.5"),
        (True, "bool True"),
        ("3", "str '3'"),
        (None, "NoneType None"),
    ],
    ids=["nan", "inf", "float", "bool", "str", "None"],
)
def test_schedules_refuse_a_step_that_is_not_an_int(name, step, shown):
    with pytest.raises(TypeError, match=re.escape(f"step must be an int >= 0, got {shown}")):
        SCHEDULES[name]()(step)


@pytest.mark.parametrize("name", list(SCHEDULES))
def test_schedules_take_numpy_integer_steps(name):
    schedule = SCHEDULES[name]()
    assert [schedule(np.int64(step)) for step in (0, 9, 50)] == [schedule(s) for s in (0, 9, 50)]


@pytest.mark.parametrize(
    ("make", "error", "message"),
    [
        (lambda: noam(64, True), TypeError, "warmup must be an int >= 1, got bool True"),
        (lambda: noam(64.0, 10), TypeError, "d_model must be an int, got float 64.0"),
        (lambda: noam(64, 10, factor=math.inf), ValueError, "factor must be finite, got inf"),
        (lambda: noam(64, 10, factor="2"), TypeError, "factor must be a number, got str '2'"),
        (lambda: exponential_decay(True, 10), TypeError, "decay_rate must be a number, got bool"),
        (lambda: exponential_decay(0.5, 10.0), TypeError, "decay_steps must be an int, got float"),
        (
            lambda: exponential_decay(0.5, 10, staircase="yes"),
            TypeError,
            "staircase must be True or False, got str 'yes'",
        ),
        (lambda: polynomial_decay(True), TypeError, "total_steps must be an int, got bool True"),
        (lambda: polynomial_decay(10, power=math.nan), ValueError, "power must be finite, got nan"),
        (lambda: cosine_decay(100, warmup=2.5), TypeError, "warmup must be an int >= 0, got float"),
        (lambda: cosine_decay(100, final=None), TypeError, "final must be a number, got NoneType"),
        (
            lambda: linear_warmup_decay(10, 100, final=math.nan),
            ValueError,
            "final must be finite, got nan",
        ),
        (
            lambda: piecewise_constant([10.5], [1.0, 0.5]),
            TypeError,
            r"boundaries\[0\] must be an int >= 0, got float 10.5",
        ),
        (
            lambda: piecewise_constant([10], [1.0, "half"]),
            TypeError,
            r"values\[1\] must be a number, got str 'half'",
        ),
    ],
)
def test_schedules_refuse_bad_settings(make, error, message):
    with pytest.raises(error, match=message):
        make()


def test_average_checkpoints_refuses_a_key_whose_dtype_changes():
    # Before: the int64 tensor of checkpoint 0 came back and the float32 one was dropped.
    states = [{"x": torch.ones(2, dtype=torch.int64)}, {"x": torch.ones(2)}]
    message = "key 'x' has dtype torch.int64 in checkpoint 0 but torch.float32 in checkpoint 1"
    with pytest.raises(ValueError, match=re.escape(message)):
        average_checkpoints(states)


@pytest.mark.parametrize("bad", [float("nan"), float("inf"), -float("inf")])
def test_average_checkpoints_refuses_non_finite_entries(bad):
    # Before: NaN and inf were averaged into the mean.
    states = [{"w": torch.ones(3), "b": torch.zeros(1)} for _ in range(3)]
    states[2]["w"] = torch.tensor([1.0, bad, 1.0])
    message = "key 'w' has NaN or inf in checkpoint 2 (1 of 3 entries)"
    with pytest.raises(ValueError, match=re.escape(message)):
        average_checkpoints(states)


def test_average_checkpoints_refuses_an_entry_that_is_not_a_tensor():
    with pytest.raises(TypeError, match="key 'x' is a list in checkpoint 1"):
        average_checkpoints([{"x": torch.ones(2)}, {"x": [1.0, 1.0]}])
