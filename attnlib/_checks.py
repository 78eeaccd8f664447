"""Input checks shared by the public functions: each failure names the shapes or values at fault.

Only public entry points call these; the inner kernels they hand over to trust their callers,
so a tensor is scanned for NaN and ±inf once per call (on a GPU each scan is a host sync).
"""

from __future__ import annotations

import math
import numbers

import torch


def _described(value: object) -> str:
    """``float 2.5``: the type's name and the value, for messages."""
    return f"{type(value).__name__} {value!r}"


def is_int(value: object) -> bool:
    """True for Python and NumPy integers, False for bools, floats and everything else."""
    return isinstance(value, numbers.Integral) and not isinstance(value, bool)


def check_int(name: str, value: object, least: int = 0) -> int:
    """Require an int (NumPy integers too, not a bool or float) >= ``least``; return it as int."""
    if type(value) is int and value >= least:  # the common case, in two comparisons
        return value
    if not is_int(value):
        raise TypeError(f"{name} must be an int >= {least}, got {_described(value)}")
    if value < least:
        raise ValueError(f"{name} must be an int >= {least}, got {value}")
    return int(value)


def check_count(name: str, value: object) -> int:
    """Require a positive int (NumPy integers too; not a float such as 3.0, nor a bool)."""
    if not is_int(value):
        raise TypeError(f"{name} must be an int, got {_described(value)}")
    if value < 1:
        raise ValueError(f"{name} must be positive, got {value}")
    return int(value)


def check_flag(name: str, value: object) -> bool:
    """Require a real bool: the strings "False" and "no", like 0 or None, are refused."""
    if not isinstance(value, bool):
        raise TypeError(f"{name} must be True or False, got {_described(value)}")
    return value


def check_number(name: str, value: object) -> float:
    """Require a finite real number (int or float, not a bool or str); return it as float."""
    if not isinstance(value, numbers.Real) or isinstance(value, bool):
        raise TypeError(f"{name} must be a number, got {_described(value)}")
    if not isinstance(value, numbers.Integral) and not math.isfinite(value):
        raise ValueError(f"{name} must be finite, got {value}")
    return float(value)


def check_probability(name: str, value: object) -> float:
    """Require a number in [0, 1), such as a dropout rate (1.0 would drop everything)."""
    value = check_number(name, value)
    if not 0.0 <= value < 1.0:
        raise ValueError(f"{name} must be in [0, 1), got {value}")
    return value


def check_lengths(lengths: object) -> torch.Tensor:
    """Lengths (batch,) as an integer tensor, from a tensor, array or list ([] gives (0,))."""
    if lengths is None or isinstance(lengths, (str, bytes)):
        raise TypeError(f"lengths must be a tensor or a list of ints, got {type(lengths).__name__}")
    try:
        lengths = torch.as_tensor(lengths)
    except (TypeError, ValueError, RuntimeError) as error:
        raise TypeError(f"lengths must be a tensor or a list of ints: {error}") from None
    if lengths.dim() != 1:
        raise ValueError(f"lengths must be 1-D (batch,), got shape {tuple(lengths.shape)}")
    if lengths.numel() == 0:
        return lengths.long()  # [] arrives as float32: no values, so no fault in them
    if lengths.dtype.is_floating_point or lengths.dtype.is_complex or lengths.dtype == torch.bool:
        raise TypeError(f"lengths must be integers, got dtype {lengths.dtype}")
    return lengths


def check_floating(name: str, tensor: object, min_dims: int = 2) -> torch.Tensor:
    """Require a floating tensor of at least ``min_dims`` dimensions; no scan of its values."""
    if not isinstance(tensor, torch.Tensor):
        raise TypeError(f"{name} must be a torch.Tensor, got {type(tensor).__name__}")
    if tensor.dim() < min_dims:
        raise ValueError(
            f"{name} must have at least {min_dims} dimensions (..., seq, features), "
            f"got shape {tuple(tensor.shape)}"
        )
    if not tensor.is_floating_point():
        raise TypeError(f"{name} must be a floating-point tensor, got dtype {tensor.dtype}")
    return tensor


def check_tensor(name: str, tensor: object, min_dims: int = 2) -> torch.Tensor:
    """Require a floating tensor of at least ``min_dims`` dimensions, every entry finite."""
    check_floating(name, tensor, min_dims)
    # One reduction, not a mask of the tensor's size: a NaN or an inf anywhere makes the sum
    # NaN or inf. A sum that overflows on finite entries is told apart by the exact scan.
    wide = torch.float64 if tensor.dtype == torch.float64 else torch.float32
    if not torch.isfinite(tensor.sum(dtype=wide)) and not torch.isfinite(tensor).all():
        counts = {"NaN": int(torch.isnan(tensor).sum()), "±inf": int(torch.isinf(tensor).sum())}
        found = [f"{what} ({n} of {tensor.numel()} entries)" for what, n in counts.items() if n]
        raise ValueError(f"{name} contains {' and '.join(found)}")
    return tensor


def check_same_dtype(**tensors: torch.Tensor) -> None:
    """Require one dtype for all the named tensors; the message names each tensor's dtype."""
    dtypes = {tensor.dtype for tensor in tensors.values()}
    if len(dtypes) > 1:
        described = ", ".join(f"{name} {tensor.dtype}" for name, tensor in tensors.items())
        raise TypeError(f"dtypes differ: {described}; convert them to one dtype first")


def _autocasting(device_type: str) -> bool:
    """Whether autocast is on for ``device_type`` (torch < 2.4 takes no device type)."""
    try:
        return torch.is_autocast_enabled(device_type)
    except TypeError:
        return torch.is_autocast_enabled() or torch.is_autocast_cpu_enabled()


def check_matches_weights(name: str, tensor: torch.Tensor, weight: torch.Tensor) -> None:
    """Require ``tensor`` in the dtype of a module's ``weight``, unless autocast converts both."""
    if tensor.dtype != weight.dtype and not _autocasting(tensor.device.type):
        raise TypeError(
            f"{name} is {tensor.dtype} but the module's weights are {weight.dtype}: convert "
            f"the input with .to({weight.dtype}) or the module with .to({tensor.dtype})"
        )


def check_boolean(mask: object, name: str = "mask", meaning: str = "may attend") -> torch.Tensor:
    """Require a boolean tensor; ``meaning`` says what True stands for in the message."""
    if not isinstance(mask, torch.Tensor):
        raise TypeError(f"{name} must be a torch.Tensor, got {type(mask).__name__}")
    if mask.dtype != torch.bool:
        raise TypeError(
            f"{name} must be boolean (True = {meaning}), got dtype {mask.dtype}; "
            "convert with .bool() or build it with attnlib.masks"
        )
    return mask


def check_key_mask(
    key_mask: object, batch: int, n_keys: int, name: str = "key_mask", keys: str = "n_keys"
) -> torch.Tensor:
    """Require a boolean (batch, n_keys) key mask, True at real keys; ``name`` is the argument
    that holds it and ``keys`` what its second axis counts (src, tgt), both for the message."""
    check_boolean(key_mask, name, "a real key that may be attended")
    if tuple(key_mask.shape) != (batch, n_keys):
        raise ValueError(
            f"{name} must be (batch, {keys}) = {(batch, n_keys)}, got shape {tuple(key_mask.shape)}"
        )
    return key_mask


def check_mask(mask: object, target_shape: tuple[int, ...], what: str) -> torch.Tensor:
    """Require a boolean mask that broadcasts to ``target_shape`` (True means may attend)."""
    check_boolean(mask)
    try:
        shape = torch.broadcast_shapes(tuple(mask.shape), target_shape)
    except RuntimeError:
        raise ValueError(
            f"mask of shape {tuple(mask.shape)} does not broadcast to the {what} "
            f"shape {target_shape}"
        ) from None
    if shape != torch.Size(target_shape):
        raise ValueError(
            f"mask of shape {tuple(mask.shape)} would enlarge the {what} shape {target_shape}"
        )
    return mask
