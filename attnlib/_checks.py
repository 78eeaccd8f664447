"""Input checks shared by the public functions: each failure names the shapes or values at fault."""

from __future__ import annotations

import torch


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


def check_mask(mask: object, target_shape: tuple[int, ...], what: str) -> torch.Tensor:
    """Require a boolean mask that broadcasts to ``target_shape`` (True means may attend)."""
    if not isinstance(mask, torch.Tensor):
        raise TypeError(f"mask must be a torch.Tensor, got {type(mask).__name__}")
    if mask.dtype != torch.bool:
        raise TypeError(
            f"mask must be boolean (True = may attend), got dtype {mask.dtype}; "
            "convert with mask.bool() or build it with attnlib.masks"
        )
    try:
        torch.broadcast_shapes(tuple(mask.shape), target_shape)
    except RuntimeError:
        raise ValueError(
            f"mask of shape {tuple(mask.shape)} does not broadcast to the {what} "
            f"shape {target_shape}"
        ) from None
    if torch.broadcast_shapes(tuple(mask.shape), target_shape) != torch.Size(target_shape):
        raise ValueError(
            f"mask of shape {tuple(mask.shape)} would enlarge the {what} shape {target_shape}"
        )
    return mask
