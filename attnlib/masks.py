"""Masks and the masked softmax.

One convention everywhere: a mask is a boolean tensor and ``True`` means "may attend".
A query whose row is entirely masked gets zero weights (and so a zero output), never NaN.
"""

from __future__ import annotations

import torch

from attnlib._checks import (
    check_boolean,
    check_count,
    check_flag,
    check_floating,
    check_int,
    check_key_mask,
    check_lengths,
    check_mask,
)


def padding_mask(lengths: torch.Tensor | list[int], max_len: int | None = None) -> torch.Tensor:
    """Keys that are real tokens, True up to each length: lengths (batch,) -> (batch, 1, max_len).

    The middle axis of size 1 lets the mask broadcast against scores of shape
    ``(batch, n_queries, n_keys)``; add ``.unsqueeze(1)`` for ``(batch, heads, ...)``, or
    ``.squeeze(1)`` for the ``key_mask`` of :class:`attnlib.attention.MultiHeadAttention`.
    No lengths give an empty mask of shape (0, 1, max_len).
    """
    lengths = check_lengths(lengths)
    if (lengths < 0).any():
        raise ValueError(f"lengths must be non-negative, got {lengths.tolist()}")
    longest = int(lengths.max()) if lengths.numel() else 0
    if max_len is None:
        max_len = longest
    elif check_int("max_len", max_len) < longest:
        raise ValueError(f"a length of {longest} does not fit in max_len={max_len}")
    return padding_mask_unchecked(lengths, max_len)


def padding_mask_unchecked(lengths: torch.Tensor, max_len: int) -> torch.Tensor:
    """:func:`padding_mask` for checked lengths (batch,): (batch, 1, max_len), no host sync."""
    positions = torch.arange(max_len, device=lengths.device)
    return (positions.unsqueeze(0) < lengths.unsqueeze(1)).unsqueeze(1)


def causal_mask(
    n_queries: int, n_keys: int | None = None, device: torch.device | None = None
) -> torch.Tensor:
    """Each query sees itself and earlier keys: (n_queries, n_keys), lower-triangular True.

    With more keys than queries (a cache of earlier keys), the queries are the last
    ``n_queries`` positions of the key sequence.
    """
    n_queries = check_count("n_queries", n_queries)
    n_keys = n_queries if n_keys is None else check_count("n_keys", n_keys)
    if n_keys < n_queries:
        raise ValueError(f"causal_mask needs n_keys >= n_queries, got {n_keys} < {n_queries}")
    ones = torch.ones(n_queries, n_keys, dtype=torch.bool, device=device)
    return torch.tril(ones, diagonal=n_keys - n_queries)


def sliding_window_mask(
    n_queries: int,
    window: int,
    n_keys: int | None = None,
    causal: bool = True,
    device: torch.device | None = None,
) -> torch.Tensor:
    """Each query sees only the keys within ``window`` positions: (n_queries, n_keys), bool.

    Query i stands at position p = i + n_keys - n_queries (so with n_keys = n_queries, p = i;
    with more keys, the queries are the last positions of the key sequence, as in
    :func:`causal_mask`). True where query i may attend to key j:

    - ``causal=True``: p - window < j <= p, the key itself and the window - 1 before it;
    - ``causal=False``: |p - j| < window, up to window - 1 keys on each side.

    A window as long as the keys gives :func:`causal_mask` (causal) or all True (not causal).
    """
    n_queries, window = check_count("n_queries", n_queries), check_count("window", window)
    n_keys = n_queries if n_keys is None else check_count("n_keys", n_keys)
    check_flag("causal", causal)
    if n_keys < n_queries:
        raise ValueError(
            f"sliding_window_mask needs n_keys >= n_queries, got {n_keys} < {n_queries}"
        )
    query_positions = torch.arange(n_keys - n_queries, n_keys, device=device)
    # How far back each key lies from each query: (n_queries, n_keys), negative = ahead.
    behind = query_positions[:, None] - torch.arange(n_keys, device=device)[None, :]
    if causal:
        return (behind >= 0) & (behind < window)
    return behind.abs() < window


def structure_mask(
    n_queries: int,
    n_keys: int,
    causal: bool,
    window: int | None,
    device: torch.device | None = None,
) -> torch.Tensor | None:
    """Causal order and a sliding window as one (n_queries, n_keys) bool mask, the queries at the
    last key positions; None where every query sees every key (so no mask need be formed).

    Unchecked: callers inside the library pass counts they have checked.
    """
    if window is None:
        if not causal or n_queries == 1:  # the last position sees all that comes before it
            return None
        return causal_mask(n_queries, n_keys, device=device)
    if window >= n_keys:  # no key lies window or more positions from any query
        return structure_mask(n_queries, n_keys, causal, None, device)
    return sliding_window_mask(n_queries, window, n_keys, causal=causal, device=device)


def combine_masks(*masks: torch.Tensor | None) -> torch.Tensor | None:
    """AND of the masks, broadcast together (allowed only where all allow); None is skipped."""
    present = [mask for mask in masks if mask is not None]
    if not present:
        return None
    for mask in present:
        check_boolean(mask, "masks")
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
    NaN that ``softmax`` of a row of ``-inf`` would give. A NaN or ``+inf`` score at a key the
    mask allows is refused (it would make its whole row NaN); masked keys may hold anything.
    """
    check_floating("scores", scores, min_dims=1)
    if mask is not None:
        check_mask(mask, tuple(scores.shape), "scores")
    _check_allowed_scores(scores, mask)
    return masked_softmax_unchecked(scores, mask, dim)


def _check_allowed_scores(scores: torch.Tensor, mask: torch.Tensor | None) -> None:
    """Refuse NaN and +inf scores at allowed keys; one scan (a host sync), details on failure."""
    bad = torch.isnan(scores) | (scores == float("inf"))
    if mask is not None:
        bad = bad & mask  # masked keys are filled with -inf: whatever they held is dropped
    if not bad.any():
        return
    counts = {"NaN": int((bad & torch.isnan(scores)).sum())}
    counts["+inf"] = int(bad.sum()) - counts["NaN"]
    found = " and ".join(
        f"{what} ({n} of {scores.numel()} entries)" for what, n in counts.items() if n
    )
    first = tuple(bad.nonzero()[0].tolist())
    where = "at keys the mask allows" if mask is not None else "with no mask (every key allowed)"
    raise ValueError(
        f"scores contains {found} {where}, the first at index {first}: such a score makes its "
        "whole row of weights NaN. Fix what computed the scores, or call "
        "masked_softmax_unchecked to let the NaN propagate"
    )


def masked_softmax_unchecked(
    scores: torch.Tensor, mask: torch.Tensor | None = None, dim: int = -1
) -> torch.Tensor:
    """:func:`masked_softmax` without its checks nor their scan (a host sync): NaN propagates.

    For callers that checked the mask already, such as attention's forward pass in training.
    """
    if mask is None:
        return torch.softmax(scores, dim=dim)
    filled = scores.masked_fill(~mask, float("-inf"))
    row_has_key = mask.any(dim=dim, keepdim=True)
    # A row of -inf has no maximum to subtract; give it zeros so softmax stays finite,
    # then zero it out below.
    filled = torch.where(row_has_key, filled, torch.zeros_like(filled))
    weights = torch.softmax(filled, dim=dim)
    return torch.where(row_has_key & mask, weights, torch.zeros_like(weights))


def prepare_attention_mask(
    mask: torch.Tensor | None, key_mask: torch.Tensor | None, target: tuple[int, int, int, int]
) -> torch.Tensor | None:
    """Check a general ``mask`` and a padding ``key_mask`` once; their AND as one 4-D bool mask
    that broadcasts to ``target`` = (batch, heads, n_queries, n_keys), or None if both are None.

    ``mask`` is (n_queries, n_keys), (batch, n_queries, n_keys) or (batch, heads, n_queries,
    n_keys), any axis possibly 1; ``key_mask`` is (batch, n_keys), True at real keys.
    """
    parts = []
    if mask is not None:
        parts.append(_mask_4d(mask, target))
    if key_mask is not None:
        parts.append(_key_mask_4d(key_mask, target[0], target[3]))
    if not parts:
        return None
    return parts[0] if len(parts) == 1 else parts[0] & parts[1]


# Axis names of a mask by its number of dimensions; a mask never has its axes guessed.
_MASK_AXES = {
    2: ("n_queries", "n_keys"),
    3: ("batch", "n_queries", "n_keys"),
    4: ("batch", "heads", "n_queries", "n_keys"),
}


def _mask_4d(mask: object, target: tuple[int, ...]) -> torch.Tensor:
    """A 2-, 3- or 4-D mask, checked against (batch, heads, n_queries, n_keys), made 4-D."""
    mask = check_boolean(mask)
    if mask.dim() not in _MASK_AXES:
        raise ValueError(
            f"mask must be (n_queries, n_keys), (batch, n_queries, n_keys) or (batch, heads, "
            f"n_queries, n_keys), got shape {tuple(mask.shape)}; a padding mask of shape "
            "(batch, n_keys) goes in key_mask"
        )
    axes = _MASK_AXES[mask.dim()]
    sizes = dict(zip(("batch", "heads", "n_queries", "n_keys"), target, strict=True))
    expected = tuple(sizes[axis] for axis in axes)
    if any(got not in (1, want) for got, want in zip(mask.shape, expected, strict=True)):
        hint = (
            "; a 2-D mask is always (n_queries, n_keys): pass a (batch, n_keys) padding mask "
            "as key_mask"
            if mask.dim() == 2
            else ""
        )
        named = f"({', '.join(axes)}) = {expected}"
        raise ValueError(f"mask of shape {tuple(mask.shape)} does not fit {named}{hint}")
    if mask.dim() == 2:
        return mask[None, None]  # (1, 1, n_queries, n_keys)
    if mask.dim() == 3:
        return mask[:, None]  # (batch, 1, n_queries, n_keys)
    return mask


def _key_mask_4d(key_mask: object, batch: int, n_keys: int) -> torch.Tensor:
    """A (batch, n_keys) key mask, True at real keys, as (batch, 1, 1, n_keys)."""
    return check_key_mask(key_mask, batch, n_keys)[:, None, None, :]
