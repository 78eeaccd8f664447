"""Input checks shared by the public functions: each failure names the shapes or values at fault.

Only public entry points call these; the inner kernels they hand over to trust their callers,
so a tensor is scanned for NaN once per call (on a GPU each scan is a host sync).
"""

from __future__ import annotations

import torch


def check_count(name: str, value: object) -> None:
    """Require a positive int (not a float such as 3.0, nor a bool); the error names ``name``."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"{name} must be an int, got {type(value).__name__} {value!r}")
    if value < 1:
        raise ValueError(f"{name} must be positive, got {value}")


def check_tensor(name: str, tensor: object, min_dims: int = 2) -> torch.Tensor:
    """Require a floating tensor of at least ``min_dims`` dimensions with no NaN in it."""
    if not isinstance(tensor, torch.Tensor):
        raise TypeError(f"{name} must be a torch.Tensor, got {type(tensor).__name__}")
    if tensor.dim() < min_dims:
        raise ValueError(
            f"{name} must have at least {min_dims} dimensions (..., seq, features), "
            f"got shape {tuple(tensor.shape)}"
        )
    if not tensor.is_floating_point():
        raise TypeError(f"{name} must be a floating-point tensor, got dtype {tensor.dtype}")
    if torch.isnan(tensor).any():
        count = int(torch.isnan(tensor).sum())
        raise ValueError(f"{name} contains NaN ({count} of {tensor.numel()} entries)")
    return tensor


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
