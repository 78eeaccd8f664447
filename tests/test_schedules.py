"""Learning-rate schedules against hand-computed values, and checkpoint averaging."""

import math

import pytest
import torch

from attnlib.schedules import (
    average_checkpoints,
    cosine_decay,
    exponential_decay,
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


def test_linear_warmup_decay_by_hand():
    schedule = linear_warmup_decay(10, 110)
    expected = {0: 0.1, 9: 1.0, 59: 0.5, 109: 0.0, 300: 0.0}
    assert {s: schedule(s) for s in expected} == pytest.approx(expected)
    assert linear_warmup_decay(10, 110, final=0.2)(59) == pytest.approx(0.6)


@pytest.mark.parametrize(
    ("make", "message"),
    [
        (lambda: noam(512, 0), "warmup must be an integer >= 1, got 0"),
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
        (lambda: cosine_decay(100, warmup=-1), "warmup must be an integer >= 0, got -1"),
        (lambda: cosine_decay(100, warmup=100), "warmup=100 leaves no steps to decay"),
        (lambda: linear_warmup_decay(0, 100), "warmup must be an integer >= 1, got 0"),
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
