"""FlashAttention's idea in plain torch: the online softmax, and attention tile by tile.

Shapes: queries ``(batch, heads, n_queries, head_dim)``, keys ``(batch, heads, n_keys,
head_dim)``, values ``(batch, heads, n_keys, d_v)``, or all three without the heads axis;
``key_mask`` is ``(batch, n_keys)``, True at real keys. The loops run in Python over
``(block, block)`` tiles of scores, each for every batch entry and head at once, so the
``(n_queries, n_keys)`` matrix never exists: this shows the idea, not the CUDA kernel's speed.
A query with no key it may attend to gets a zero output, never NaN, as everywhere in attnlib.

Half precision (float16, bfloat16) goes in and comes out, but, as in FlashAttention, each tile
is widened to float32 before its scores are formed, and the running max, the running sum and
the output accumulator stay float32: a float16 score overflows past 65,504, and a bfloat16 sum
of 1s stops growing at 256. float32 and float64 inputs are computed in their own dtype.
"""

from __future__ import annotations

import math
import os
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, replace

import torch
from torch.autograd.function import once_differentiable
from torch.profiler import ProfilerActivity, profile

from attnlib._checks import (
    check_count,
    check_flag,
    check_floating,
    check_key_mask,
    check_same_dtype,
    check_tensor,
)
from attnlib.scores import HALF_DTYPES

NEG_INF = float("-inf")


def state_dtype(dtype: torch.dtype) -> torch.dtype:
    """The dtype of scores, running max, running sum and accumulator for inputs of ``dtype``:
    float32 for float16 and bfloat16 (FlashAttention's choice), else ``dtype`` itself."""
    return torch.float32 if dtype in HALF_DTYPES else dtype


def _shift(running_max: torch.Tensor) -> torch.Tensor:
    """The running max with -inf (no key seen yet) as 0, so exp(-inf - shift) is 0, not NaN."""
    return torch.where(running_max == NEG_INF, torch.zeros_like(running_max), running_max)


def _divide(total: torch.Tensor, norm: torch.Tensor) -> torch.Tensor:
    """total / norm, and 0 where norm is 0 (a row that has seen no key)."""
    return total / torch.where(norm == 0, torch.ones_like(norm), norm)


def _update(running_max: torch.Tensor, running_sum: torch.Tensor, block: torch.Tensor) -> tuple:
    """Fold a (..., b) block of scores into the (...,) state: new max, new sum, rescale, exps."""
    new_max = torch.maximum(running_max, block.amax(dim=-1))
    shift = _shift(new_max)
    # Sums taken against the old maximum are worth exp(old - new) against the new one.
    rescale = torch.exp(running_max - shift)
    exps = torch.exp(block - shift.unsqueeze(-1))  # (..., b)
    return new_max, running_sum * rescale + exps.sum(dim=-1), rescale, exps


def _check_scores(scores: object, block_size: object) -> int:
    """Require (..., n) float scores without NaN or +inf; return the block size as an int."""
    check_floating("scores", scores, min_dims=1)
    if torch.isnan(scores).any() or (scores == float("inf")).any():
        raise ValueError("scores contain NaN or +inf; only -inf (a masked key) is allowed")
    return check_count("block_size", block_size)


def online_softmax(scores: torch.Tensor, block_size: int) -> torch.Tensor:
    """Softmax of (..., n) rows from a running max and sum over blocks of keys: (..., n).

    A row of -inf (every key masked) gets all zeros, never NaN. Half-precision scores are
    folded in float32 (see :func:`state_dtype`) and the weights come back in their dtype.
    """
    block_size = _check_scores(scores, block_size)
    wide = scores.to(state_dtype(scores.dtype))
    running_max = wide.new_full(wide.shape[:-1], NEG_INF)
    running_sum = wide.new_zeros(wide.shape[:-1])
    for start in range(0, wide.shape[-1], block_size):
        block = wide[..., start : start + block_size]
        running_max, running_sum, _, _ = _update(running_max, running_sum, block)
    exps = torch.exp(wide - _shift(running_max).unsqueeze(-1))
    return _divide(exps, running_sum.unsqueeze(-1)).to(scores.dtype)


@dataclass(frozen=True)
class OnlineStep:
    """The state of (...,) rows once keys 0 .. end - 1 are folded in."""

    end: int
    # The state is float32 for half-precision scores (see state_dtype); weights and output
    # come in the scores' dtype.
    running_max: torch.Tensor  # (...,), -inf while every key seen is masked
    running_sum: torch.Tensor  # (...,): Σ exp(s_j - running_max) over the keys seen
    rescale: torch.Tensor  # (...,): exp(previous max - running_max), what the old sum was scaled by
    weights: torch.Tensor  # (..., end): the softmax of the keys seen so far
    output: torch.Tensor | None  # (..., d_v): weights @ values[:end], None without values


def online_softmax_steps(
    scores: torch.Tensor, block_size: int, values: torch.Tensor | None = None
) -> list[OnlineStep]:
    """The state after each block of (..., n) rows; with (..., n, d_v) values, the partial output.

    The last step's weights equal ``softmax(scores)`` and its output ``softmax(scores) @ values``.
    """
    block_size = _check_scores(scores, block_size)
    n, dtype = scores.shape[-1], scores.dtype
    if values is not None:
        check_tensor("values", values)
        if values.shape[-2] != n:
            raise ValueError(f"scores have n={n} keys but values have {values.shape[-2]}")
        values = values.to(state_dtype(values.dtype))
    scores = scores.to(state_dtype(dtype))
    running_max = scores.new_full(scores.shape[:-1], NEG_INF)
    running_sum = scores.new_zeros(scores.shape[:-1])
    total = scores.new_zeros(())  # Σ exp(s_j - running_max) v_j; broadcasts on the first block
    steps = []
    for start in range(0, n, block_size):
        end = min(start + block_size, n)
        running_max, running_sum, rescale, exps = _update(
            running_max, running_sum, scores[..., start:end]
        )
        norm = running_sum.unsqueeze(-1)
        seen = torch.exp(scores[..., :end] - _shift(running_max).unsqueeze(-1))
        output = None
        if values is not None:
            part = (exps.unsqueeze(-2) @ values[..., start:end, :]).squeeze(-2)  # (..., d_v)
            total = total * rescale.unsqueeze(-1) + part
            output = _divide(total, norm).to(dtype)
        weights = _divide(seen, norm).to(dtype)
        steps.append(OnlineStep(end, running_max, running_sum, rescale, weights, output))
    return steps


@dataclass(frozen=True)
class FlashForward:
    """What the tiled forward pass keeps: no (n_queries, n_keys) matrix among it."""

    output: torch.Tensor  # (batch, heads, n_queries, d_v), in the inputs' dtype
    # (batch, heads, n_queries): log Σ_j exp(s_ij), -inf with no key; float32 for half inputs
    logsumexp: torch.Tensor
    tiles_computed: int  # (block, block) score tiles formed (each for all batch and heads)
    tiles_total: int  # tiles in the grid, ceil(n_queries / block) * ceil(n_keys / block)


def _tile_scores(q_tile, k_tile, scale, key_mask, q0, k0, diagonal, window) -> torch.Tensor:
    """A (..., bq, d) query tile's scores against a (..., bk, d) key tile, -inf where masked;
    in the tiles' dtype, which the callers have widened (see :func:`state_dtype`)."""
    scores = (q_tile @ k_tile.transpose(-1, -2)) * scale
    bq, bk = scores.shape[-2:]
    allowed = None if key_mask is None else key_mask[:, None, None, k0 : k0 + bk]
    if diagonal is not None and k0 + bk - 1 > q0 + diagonal:  # the tile crosses the diagonal
        rows = torch.arange(q0, q0 + bq, device=scores.device).unsqueeze(-1) + diagonal
        below = torch.arange(k0, k0 + bk, device=scores.device) <= rows  # (bq, bk)
        allowed = below if allowed is None else allowed & below
    if window is not None and k0 <= q0 + bq - 1 + diagonal - window:  # crosses the window's edge
        rows = torch.arange(q0, q0 + bq, device=scores.device).unsqueeze(-1) + diagonal
        inside = torch.arange(k0, k0 + bk, device=scores.device) > rows - window  # (bq, bk)
        allowed = inside if allowed is None else allowed & inside
    return scores if allowed is None else scores.masked_fill(~allowed, NEG_INF)


def _visible(q0: int, bq: int, k0: int, bk: int, diagonal: int | None, window: int | None) -> bool:
    """Whether any query of the tile may see any of its keys: j <= i + diagonal for some i and,
    with a window, j > i + diagonal - window for some i."""
    if diagonal is None:
        return True
    past_the_window = window is not None and k0 + bk - 1 <= q0 + diagonal - window
    return k0 <= q0 + bq - 1 + diagonal and not past_the_window


def _diagonal(n_q: int, n_k: int, causal: bool) -> int | None:
    """Causal: query i stands at position i + n_k - n_q and sees keys j up to it (tril's
    diagonal); None without a causal mask."""
    return n_k - n_q if causal else None


def _forward(
    q, k, v, key_mask, causal: bool, block: int, window: int | None = None
) -> FlashForward:
    """The tiled forward on checked 4-D tensors: per query tile, fold in every key tile.

    Output and log-sum-exp in :func:`state_dtype`; the callers round the output to q's dtype.
    """
    *batch, n_q, head_dim = q.shape
    n_k, scale = k.shape[-2], 1.0 / math.sqrt(head_dim)
    # Half tiles are widened as they are read, as the kernel does in registers; the state
    # below never holds half precision. For float32 and float64, .to(wide) is a no-op.
    wide = state_dtype(q.dtype)
    output = q.new_empty(*batch, n_q, v.shape[-1], dtype=wide)
    logsumexp = q.new_empty(*batch, n_q, dtype=wide)
    computed, diagonal = 0, _diagonal(n_q, n_k, causal)
    for q0 in range(0, n_q, block):
        q_tile = q[..., q0 : q0 + block, :].to(wide)  # (batch, heads, bq, head_dim)
        bq = q_tile.shape[-2]
        running_max = q_tile.new_full((*batch, bq), NEG_INF)
        running_sum = q_tile.new_zeros(*batch, bq)
        total = q_tile.new_zeros(*batch, bq, v.shape[-1])
        for k0 in range(0, n_k, block):
            if diagonal is not None and k0 > q0 + bq - 1 + diagonal:
                break  # every tile further right is above the diagonal too
            if not _visible(q0, bq, k0, min(block, n_k - k0), diagonal, window):
                continue  # wholly behind the window
            k_tile, v_tile = (t[..., k0 : k0 + block, :].to(wide) for t in (k, v))
            scores = _tile_scores(q_tile, k_tile, scale, key_mask, q0, k0, diagonal, window)
            running_max, running_sum, rescale, exps = _update(running_max, running_sum, scores)
            total = total * rescale.unsqueeze(-1) + exps @ v_tile
            computed += 1
        output[..., q0 : q0 + bq, :] = _divide(total, running_sum.unsqueeze(-1))
        logsumexp[..., q0 : q0 + bq] = running_max + torch.log(running_sum)  # -inf + -inf if empty
    tiles = math.ceil(n_q / block) * math.ceil(n_k / block)
    return FlashForward(output, logsumexp, computed, tiles)


def _backward(
    q, k, v, output, logsumexp, d_output, key_mask, causal: bool, block: int, window=None
) -> tuple:
    """FlashAttention-2's backward: each tile's weights recomputed from the log-sum-exp.

    As in the forward, half tiles are widened as they are read and the gradients accumulate in
    float32 (see :func:`state_dtype`); they come back in the inputs' dtype.
    """
    n_q, n_k = q.shape[-2], k.shape[-2]
    scale, diagonal = 1.0 / math.sqrt(q.shape[-1]), _diagonal(n_q, n_k, causal)
    wide = state_dtype(q.dtype)
    # Σ_j P_ij dP_ij = dO_i · O_i: the softmax's backward needs only this per-row number.
    d_rows = (d_output.to(wide) * output.to(wide)).sum(dim=-1)  # (batch, heads, n_queries)
    lse = _shift(logsumexp)  # a query with no key has all scores -inf: exp(-inf - 0) = 0
    d_q, d_k, d_v = (torch.zeros_like(t, dtype=wide) for t in (q, k, v))
    for k0 in range(0, n_k, block):
        k_tile, v_tile = (t[..., k0 : k0 + block, :].to(wide) for t in (k, v))
        for q0 in range(0, n_q, block):
            q1 = min(q0 + block, n_q)
            if not _visible(q0, q1 - q0, k0, k_tile.shape[-2], diagonal, window):
                continue
            q_tile, d_out_tile = (t[..., q0:q1, :].to(wide) for t in (q, d_output))
            scores = _tile_scores(q_tile, k_tile, scale, key_mask, q0, k0, diagonal, window)
            weights = torch.exp(scores - lse[..., q0:q1, None])  # (batch, heads, bq, bk)
            d_v[..., k0 : k0 + block, :] += weights.transpose(-1, -2) @ d_out_tile
            d_weights = d_out_tile @ v_tile.transpose(-1, -2)
            # dS = P * (dP - D), times the scale that multiplied q . k
            d_scores = weights * (d_weights - d_rows[..., q0:q1, None]) * scale
            d_q[..., q0:q1, :] += d_scores @ k_tile
            d_k[..., k0 : k0 + block, :] += d_scores.transpose(-1, -2) @ q_tile
    return d_q.to(q.dtype), d_k.to(k.dtype), d_v.to(v.dtype)


class FlashAttentionFunction(torch.autograd.Function):
    """Saves queries, keys, values, output and the per-row log-sum-exp; no weights matrix.

    For half inputs the saved output is the float32 one, before rounding: the backward's
    dP - dO·O cancels where a row's softmax is nearly one-hot, and with a rounded output
    what remains is mostly its rounding error.
    """

    @staticmethod
    def forward(ctx, q, k, v, key_mask, causal, block_size, window=None):
        result = _forward(q, k, v, key_mask, causal, block_size, window)
        ctx.save_for_backward(q, k, v, result.output, result.logsumexp, key_mask)
        ctx.causal, ctx.block_size, ctx.window = causal, block_size, window
        return result.output.to(q.dtype)

    @staticmethod
    @once_differentiable
    def backward(ctx, d_output):
        q, k, v, output, logsumexp, key_mask = ctx.saved_tensors
        grads = _backward(
            q, k, v, output, logsumexp, d_output, key_mask, ctx.causal, ctx.block_size, ctx.window
        )
        return (*grads, None, None, None, None)


def _checked(queries, keys, values, key_mask, causal, block_size, window=None) -> tuple:
    """Check the inputs once; return them 4-D, the block size, and whether heads were added."""
    named = {"queries": queries, "keys": keys, "values": values}
    for name, tensor in named.items():
        check_tensor(name, tensor, min_dims=3)
    check_same_dtype(**named)
    if queries.dim() > 4 or len({tuple(t.shape[:-2]) for t in named.values()}) > 1:
        described = ", ".join(f"{name} {tuple(t.shape)}" for name, t in named.items())
        raise ValueError(
            f"queries, keys and values must all be (batch, heads, seq, dim) or all "
            f"(batch, seq, dim), with the same batch and heads: got {described}"
        )
    if keys.shape[-1] != queries.shape[-1]:
        raise ValueError(f"keys have d_k={keys.shape[-1]} but queries have d_k={queries.shape[-1]}")
    if queries.shape[-1] == 0:
        raise ValueError("queries and keys have d_k=0 features: scores q·k/√d_k need d_k >= 1")
    if keys.shape[-2] != values.shape[-2]:
        raise ValueError(
            f"keys have n_keys={keys.shape[-2]} but values have n_keys={values.shape[-2]}"
        )
    check_flag("causal", causal)
    block_size = check_count("block_size", block_size)
    if window is not None:
        check_count("window", window)
        if not causal:
            raise ValueError("a window needs causal=True: the tiles keep the last window keys")
    if key_mask is not None:
        check_key_mask(key_mask, queries.shape[0], keys.shape[-2])
    added = queries.dim() == 3
    if added:
        queries, keys, values = (t.unsqueeze(1) for t in (queries, keys, values))
    return queries, keys, values, block_size, added


def flash_attention(
    queries: torch.Tensor,
    keys: torch.Tensor,
    values: torch.Tensor,
    key_mask: torch.Tensor | None = None,
    causal: bool = False,
    block_size: int = 64,
    window: int | None = None,
) -> torch.Tensor:
    """softmax(Q Kᵀ / √d) V tile by tile: (batch, heads, n_queries, d_v), or 3-D for 3-D inputs.

    Equal to ``F.scaled_dot_product_attention`` with the same masks; a query with no key gives
    zeros (as SDPA in recent PyTorch; older versions give NaN). ``causal`` aligns at the bottom
    right, as :func:`attnlib.masks.causal_mask`: query i stands at position
    i + n_keys - n_queries and sees the keys up to it, so one new query after a cache of keys
    sees them all (and with more queries than keys, the first ones see none). For
    n_queries == n_keys this is SDPA's ``is_causal=True``. A causal ``window`` keeps each query
    to its last ``window`` keys, itself included (:func:`attnlib.masks.sliding_window_mask`),
    and skips the tiles wholly behind it. The backward pass recomputes each tile's weights from
    the saved log-sum-exp of every row.
    """
    q, k, v, block_size, added = _checked(
        queries, keys, values, key_mask, causal, block_size, window
    )
    output = FlashAttentionFunction.apply(q, k, v, key_mask, causal, block_size, window)
    return output.squeeze(1) if added else output


@torch.no_grad()
def flash_forward(
    queries: torch.Tensor,
    keys: torch.Tensor,
    values: torch.Tensor,
    key_mask: torch.Tensor | None = None,
    causal: bool = False,
    block_size: int = 64,
    window: int | None = None,
) -> FlashForward:
    """:func:`flash_attention`'s forward pass alone (no gradients), with its log-sum-exp and
    tile counts; output and log-sum-exp lose the heads axis for 3-D inputs.
    """
    q, k, v, block_size, added = _checked(
        queries, keys, values, key_mask, causal, block_size, window
    )
    result = _forward(q, k, v, key_mask, causal, block_size, window)
    result = replace(result, output=result.output.to(q.dtype))
    if added:
        return replace(result, output=result.output.squeeze(1), logsumexp=result.logsumexp[:, 0])
    return result


@contextmanager
def _quiet_fd2() -> Iterator[None]:
    """Send file descriptor 2 to the null device: Kineto prints timestamped profiler_start and
    profiler_stop lines there, which a notebook would show (and nbval compare) as stderr."""
    sys.stderr.flush()
    saved, null = os.dup(2), os.open(os.devnull, os.O_WRONLY)
    os.dup2(null, 2)
    try:
        yield
    finally:
        os.dup2(saved, 2)
        os.close(saved)
        os.close(null)


def peak_allocated_bytes(fn: Callable[[], object]) -> int:
    """Measured peak of CPU tensor bytes allocated while ``fn()`` runs, above those held before.

    Replays ``torch.profiler``'s record of every allocation and free in the order they
    happened; memory that ``fn`` returns counts, memory on other devices does not.
    """
    prof = profile(activities=[ProfilerActivity.CPU], profile_memory=True)
    with _quiet_fd2():
        prof.start()
    try:
        fn()
    finally:
        with _quiet_fd2():
            prof.stop()
    # EventList folds frees into the enclosing operator; the raw events keep their times.
    changes = [e for e in prof.profiler.kineto_results.events() if e.name() == "[memory]"]
    held = peak = 0
    for event in sorted(changes, key=lambda event: event.start_ns()):
        held += event.nbytes()
        peak = max(peak, held)
    return peak
