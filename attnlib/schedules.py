"""Learning-rate schedules of chapter 12, and checkpoint averaging.

Each schedule is a function ``step -> value`` with ``step`` counted from 0, the way
``torch.optim.lr_scheduler.LambdaLR`` calls it. ``noam`` returns the learning rate itself (give
the optimizer ``lr=1.0``); the others return a multiplier of the optimizer's base rate, 1.0 at
the peak. Formulas that count from 1 use ``step + 1``. A schedule refuses a step that is not
an int >= 0 (NumPy integers pass): a few Python comparisons per call, no tensors.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Mapping, Sequence

import torch

from attnlib._checks import check_count, check_flag, check_int, check_number

Schedule = Callable[[int], float]


def _check_positive(name: str, value: float) -> None:
    """Require a finite number > 0 (not a bool or a str)."""
    if not check_number(name, value) > 0:
        raise ValueError(f"{name} must be positive, got {value}")


def _check_fraction(name: str, value: float) -> None:
    """Require a number in [0, 1]."""
    if not 0 <= check_number(name, value) <= 1:
        raise ValueError(f"{name} must be in [0, 1] (a fraction of the peak), got {value}")


def _as_list(name: str, items: object) -> list:
    """A list or tuple (or array) of numbers as a list; None, a str or a single number refused."""
    if isinstance(items, (str, bytes, Mapping)) or not isinstance(items, Iterable):
        raise TypeError(f"{name} must be a list of numbers, got {type(items).__name__}")
    return list(items)


def noam(d_model: int, warmup: int, factor: float = 1.0) -> Schedule:
    """factor * d_model^-0.5 * min(s^-0.5, s * warmup^-1.5), s = step + 1: the learning rate.

    It rises linearly for ``warmup`` steps, peaks at d_model^-0.5 * warmup^-0.5, then decays as
    1/sqrt(s).
    """
    check_count("d_model", d_model)
    check_int("warmup", warmup, 1)
    _check_positive("factor", factor)

    def rate(step: int) -> float:
        s = check_int("step", step) + 1
        return factor * d_model**-0.5 * min(s**-0.5, s * warmup**-1.5)

    return rate


def exponential_decay(decay_rate: float, decay_steps: int, staircase: bool = False) -> Schedule:
    """Multiplier decay_rate^(step / decay_steps); floor the exponent with ``staircase``."""
    if not 0 < check_number("decay_rate", decay_rate) <= 1:
        raise ValueError(f"decay_rate must be in (0, 1], got {decay_rate}")
    check_count("decay_steps", decay_steps)
    check_flag("staircase", staircase)

    def multiplier(step: int) -> float:
        exponent = check_int("step", step) / decay_steps
        return decay_rate ** (math.floor(exponent) if staircase else exponent)

    return multiplier


def piecewise_constant(boundaries: Sequence[int], values: Sequence[float]) -> Schedule:
    """values[i] for boundaries[i-1] <= step < boundaries[i]: values[0] before the first."""
    boundaries, values = _as_list("boundaries", boundaries), _as_list("values", values)
    if len(values) != len(boundaries) + 1:
        raise ValueError(
            f"need one more value than boundaries, got {len(boundaries)} boundaries and "
            f"{len(values)} values"
        )
    boundaries = [check_int(f"boundaries[{i}]", b) for i, b in enumerate(boundaries)]
    values = [check_number(f"values[{i}]", value) for i, value in enumerate(values)]
    if any(later <= earlier for earlier, later in zip(boundaries, boundaries[1:], strict=False)):
        raise ValueError(f"boundaries must be strictly increasing, got {boundaries}")

    def multiplier(step: int) -> float:
        check_int("step", step)
        for boundary, value in zip(boundaries, values, strict=False):
            if step < boundary:
                return value
        return values[-1]

    return multiplier


def polynomial_decay(total_steps: int, power: float = 1.0, final: float = 0.0) -> Schedule:
    """Multiplier final + (1 - final) * (1 - step / total_steps)^power, then ``final``."""
    check_count("total_steps", total_steps)
    _check_positive("power", power)
    _check_fraction("final", final)

    def multiplier(step: int) -> float:
        remaining = 1 - min(check_int("step", step), total_steps) / total_steps
        return final + (1 - final) * remaining**power

    return multiplier


def cosine_decay(total_steps: int, warmup: int = 0, final: float = 0.0) -> Schedule:
    """Linear warm-up over ``warmup`` steps to 1, then a half cosine down to ``final``."""
    check_count("total_steps", total_steps)
    check_int("warmup", warmup, 0)
    _check_fraction("final", final)
    if warmup >= total_steps:
        raise ValueError(f"warmup={warmup} leaves no steps to decay in total_steps={total_steps}")

    def multiplier(step: int) -> float:
        if check_int("step", step) < warmup:
            return (step + 1) / warmup
        progress = min(1.0, (step - warmup) / (total_steps - warmup))
        return final + (1 - final) * 0.5 * (1 + math.cos(math.pi * progress))

    return multiplier


def linear_warmup(warmup: int) -> Schedule:
    """Linear rise over ``warmup`` steps to 1, then 1 for good (chapter 17's short runs)."""
    check_count("warmup", warmup)

    def multiplier(step: int) -> float:
        return min(1.0, (check_int("step", step) + 1) / warmup)

    return multiplier


def linear_warmup_decay(warmup: int, total_steps: int, final: float = 0.0) -> Schedule:
    """Linear rise over ``warmup`` steps to 1, then linear fall to ``final`` at ``total_steps``."""
    check_int("warmup", warmup, 1)
    check_count("total_steps", total_steps)
    _check_fraction("final", final)
    if warmup >= total_steps:
        raise ValueError(f"warmup={warmup} leaves no steps to decay in total_steps={total_steps}")

    def multiplier(step: int) -> float:
        if check_int("step", step) < warmup:
            return (step + 1) / warmup
        progress = min(1.0, (step + 1 - warmup) / (total_steps - warmup))
        return 1 - (1 - final) * progress

    return multiplier


def average_checkpoints(
    state_dicts: Sequence[Mapping[str, torch.Tensor]],
) -> dict[str, torch.Tensor]:
    """Entry-wise mean of floating tensors over checkpoints with the same keys, shapes and dtypes.

    Other entries (integer counters, say) are taken from the first checkpoint. The mean is
    accumulated in float32 (float64 for float64 tensors) and cast back to each entry's dtype; a
    NaN or inf in any checkpoint is refused, naming the key and the checkpoint.
    """
    if isinstance(state_dicts, Mapping) or not isinstance(state_dicts, Sequence):
        hint = (
            ": one state dict? pass a list of them"
            if isinstance(state_dicts, Mapping)
            else "; pass list(...) of them"
        )
        raise TypeError(
            f"state_dicts must be a list or tuple of state dicts, got "
            f"{type(state_dicts).__name__}{hint}"
        )
    if len(state_dicts) == 0:
        raise ValueError("average_checkpoints needs at least one state dict")
    first = state_dicts[0]
    for index, other in enumerate(state_dicts):
        _check_alike(first, other, index)
    averaged: dict[str, torch.Tensor] = {}
    for key, tensor in first.items():
        if not tensor.is_floating_point():
            averaged[key] = tensor.clone()
            continue
        wide = torch.float64 if tensor.dtype == torch.float64 else torch.float32
        total = torch.zeros(tensor.shape, dtype=wide, device=tensor.device)
        for state in state_dicts:
            total += state[key].to(device=tensor.device, dtype=wide)
        if not torch.isfinite(total).all():  # one scan per key; the culprit is sought on failure
            _name_non_finite(key, [state[key] for state in state_dicts])
        averaged[key] = (total / len(state_dicts)).to(tensor.dtype)
    return averaged


def _check_alike(first: Mapping[str, torch.Tensor], other: object, index: int) -> None:
    """Checkpoint ``index`` must have the keys of checkpoint 0, each a tensor of its shape and
    dtype: a float entry beside an int one would otherwise be dropped without a word."""
    if not isinstance(other, Mapping):
        raise TypeError(f"checkpoint {index} must be a state dict, got {type(other).__name__}")
    missing = [key for key in first if key not in other]
    extra = [key for key in other if key not in first]
    if missing or extra:
        key, where = (missing[0], "missing from") if missing else (extra[0], "only in")
        raise ValueError(f"key {key!r} is {where} checkpoint {index}")
    for key, tensor in first.items():
        theirs = other[key]
        if not isinstance(theirs, torch.Tensor):
            raise TypeError(f"key {key!r} is a {type(theirs).__name__} in checkpoint {index}")
        if tensor.shape != theirs.shape:
            what, ours, got = "shape", tuple(tensor.shape), tuple(theirs.shape)
        elif tensor.dtype != theirs.dtype:
            what, ours, got = "dtype", tensor.dtype, theirs.dtype
        else:
            continue
        raise ValueError(
            f"key {key!r} has {what} {ours} in checkpoint 0 but {got} in checkpoint {index}"
        )


def _name_non_finite(key: str, tensors: list[torch.Tensor]) -> None:
    """Raise naming the first checkpoint whose ``key`` holds NaN or inf (or an overflowed sum)."""
    for index, tensor in enumerate(tensors):
        bad = int((~torch.isfinite(tensor)).sum())
        if bad:
            raise ValueError(
                f"key {key!r} has NaN or inf in checkpoint {index} ({bad} of {tensor.numel()} "
                "entries): averaging would spread it to the mean"
            )
    raise ValueError(f"key {key!r}: the sum over {len(tensors)} checkpoints overflowed")
