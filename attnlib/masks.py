"""Masks and the masked softmax.

One convention everywhere: a mask is a boolean tensor and ``True`` means "may attend".
A query whose row is entirely masked gets zero weights (and so a zero output), never NaN.
"""

from __future__ import annotations

import torch

from attnlib._checks import check_mask


def padding_mask(lengths: torch.Tensor | list[int], max_len: int | None = None) -> torch.Tensor:
    """Keys that are real tokens, True up to each length: lengths (batch,) -> (batch, 1, max_len).

    The middle axis of size 1 lets the mask broadcast against scores of shape
    ``(batch, n_queries, n_keys)``; add ``.unsqueeze(1)`` for ``(batch, heads, ...)``.
    """
    lengths = torch.as_tensor(lengths)
    if lengths.dim() != 1:
        raise ValueError(f"lengths must be 1-D (batch,), got shape {tuple(lengths.shape)}")
    if lengths.dtype.is_floating_point or lengths.dtype == torch.bool:
        raise TypeError(f"lengths must be integers, got dtype {lengths.dtype}")
    if (lengths < 0).any():
        raise ValueError(f"lengths must be non-negative, got {lengths.tolist()}")
    longest = int(lengths.max()) if lengths.numel() else 0
    if max_len is None:
        max_len = longest
    elif longest > max_len:
        raise ValueError(f"a length of {longest} does not fit in max_len={max_len}")
    positions = torch.arange(max_len, device=lengths.device)
    return (positions.unsqueeze(0) < lengths.unsqueeze(1)).unsqueeze(1)


def causal_mask(
    n_queries: int, n_keys: int | None = None, device: torch.device | None = None
) -> torch.Tensor:
    """Each query sees itself and earlier keys: (n_queries, n_keys), lower-triangular True.

    With more keys than queries (a cache of earlier keys), the queries are the last
    ``n_queries`` positions of the key sequence.
    """
    n_keys = n_queries if n_keys is None else n_keys
    if n_queries < 1 or n_keys < 1:
        raise ValueError(f"causal_mask needs positive sizes, got {n_queries}x{n_keys}")
    if n_keys < n_queries:
        raise ValueError(f"causal_mask needs n_keys >= n_queries, got {n_keys} < {n_queries}")
    ones = torch.ones(n_queries, n_keys, dtype=torch.bool, device=device)
    return torch.tril(ones, diagonal=n_keys - n_queries)


def combine_masks(*masks: torch.Tensor | None) -> torch.Tensor | None:
    """AND of the masks, broadcast together (allowed only where all allow); None is skipped."""
    present = [mask for mask in masks if mask is not None]
    if not present:
        return None
    for mask in present:
        if mask.dtype != torch.bool:
            raise TypeError(f"masks must be boolean (True = may attend), got dtype {mask.dtype}")
    try:
        shape = torch.broadcast_shapes(*(tuple(m.shape) for m in present))
    except RuntimeError:
        shapes = ", ".join(str(tuple(m.shape)) for m in present)
        raise ValueError(f"masks of shapes {shapes} do not broadcast together") from None
    combined = torch.ones(shape, dtype=torch.bool, device=present[0].device)
    for mask in present:
        combined = combined & mask
    return combined


def masked_softmax(
    scores: torch.Tensor, mask: torch.Tensor | None = None, dim: int = -1
) -> torch.Tensor:
    """Softmax of (..., n_queries, n_keys) scores over keys where mask is True; same shape.

    Masked keys get exactly zero weight, and a fully masked row gets all zeros instead of the
    NaN that ``softmax`` of a row of ``-inf`` would give.
    """
    if mask is None:
        return torch.softmax(scores, dim=dim)
    check_mask(mask, tuple(scores.shape), "scores")
    filled = scores.masked_fill(~mask, float("-inf"))
    row_has_key = mask.any(dim=dim, keepdim=True)
    # A row of -inf has no maximum to subtract; give it zeros so softmax stays finite,
    # then zero it out below.
    filled = torch.where(row_has_key, filled, torch.zeros_like(filled))
    weights = torch.softmax(filled, dim=dim)
    return torch.where(row_has_key & mask, weights, torch.zeros_like(weights))
