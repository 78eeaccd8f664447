"""The online softmax and tiled attention against softmax, the NumPy oracle, SDPA and autograd."""

import math

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from attnlib import reference
from attnlib.attention import attend
from attnlib.flash import (
    flash_attention,
    flash_forward,
    online_softmax,
    online_softmax_steps,
    peak_allocated_bytes,
)
from attnlib.masks import causal_mask, sliding_window_mask

NEG_INF = float("-inf")
MASK_KINDS = ["none", "padding", "causal", "both"]
# (n_queries, n_keys): none a multiple of the block size 16, and unequal both ways
LENGTHS = [(37, 37), (37, 50), (50, 29)]


def _randn(*shape: int, seed: int, dtype=torch.float32) -> torch.Tensor:
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed), dtype=dtype)


def _key_mask(batch: int, n_keys: int) -> torch.Tensor:
    """(batch, n_keys), True at real keys; the last batch entry has no key at all."""
    lengths = torch.tensor([n_keys, n_keys - 11, 0][:batch])
    return torch.arange(n_keys) < lengths[:, None]


def _masks(kind: str, batch: int, n_q: int, n_k: int) -> tuple:
    """Our key_mask and causal flag, and the same as one 4-D mask for SDPA and attend."""
    key_mask = _key_mask(batch, n_k) if kind in ("padding", "both") else None
    causal = kind in ("causal", "both")
    full = torch.ones(batch, 1, n_q, n_k, dtype=torch.bool)
    if key_mask is not None:
        full = full & key_mask[:, None, None, :]
    if causal:
        # attnlib's bottom-right diagonal: query i stands at position i + n_k - n_q
        full = full & torch.ones(n_q, n_k, dtype=torch.bool).tril(diagonal=n_k - n_q)
    return key_mask, causal, full


def _qkv(batch, heads, n_q, n_k, d=8, d_v=6, seed=0, grad=False):
    q = _randn(batch, heads, n_q, d, seed=seed)
    k = _randn(batch, heads, n_k, d, seed=seed + 1)
    v = _randn(batch, heads, n_k, d_v, seed=seed + 2)
    return tuple(t.requires_grad_(grad) for t in (q, k, v))


# --- the online softmax ---------------------------------------------------------------------


@pytest.mark.parametrize("block_size", [1, 3, 16, 40, 100])
def test_online_softmax_equals_softmax(block_size):
    scores = 3 * _randn(4, 5, 40, seed=0)
    weights = online_softmax(scores, block_size)
    torch.testing.assert_close(weights, torch.softmax(scores, -1), rtol=0, atol=1e-6)


def test_online_softmax_rescales_when_the_maximum_arrives_in_the_last_block():
    scores = torch.cat([torch.linspace(-2, 2, 9), torch.tensor([30.0])]).double()
    steps = online_softmax_steps(scores, block_size=4)
    assert [step.end for step in steps] == [4, 8, 10]
    assert steps[1].running_max.item() == pytest.approx(1.5)
    assert steps[2].running_max.item() == 30.0
    assert steps[2].rescale.item() == pytest.approx(math.exp(1.5 - 30.0), rel=1e-12)
    torch.testing.assert_close(steps[-1].weights, torch.softmax(scores, -1), rtol=0, atol=1e-15)
    torch.testing.assert_close(online_softmax(scores, 4), torch.softmax(scores, -1))


def test_online_softmax_gives_masked_keys_zero_and_a_row_of_minus_inf_zeros():
    scores = _randn(3, 10, seed=1)
    scores[0, [2, 9]] = NEG_INF
    scores[1, :4] = NEG_INF  # the whole first block masked
    scores[2] = NEG_INF
    weights = online_softmax(scores, block_size=4)
    assert not weights.isnan().any()
    assert weights[0, [2, 9]].tolist() == [0.0, 0.0]
    torch.testing.assert_close(weights[:2], torch.softmax(scores[:2], -1), rtol=0, atol=1e-6)
    assert weights[2].abs().sum().item() == 0.0
    first = online_softmax_steps(scores, block_size=4)[0]
    assert first.running_max[1].item() == NEG_INF and first.running_sum[1].item() == 0.0
    assert first.weights[2].abs().sum().item() == 0.0


def test_online_softmax_steps_give_the_partial_output_of_the_keys_seen():
    scores, values = _randn(2, 11, seed=2, dtype=torch.float64), _randn(11, 3, seed=3).double()
    steps = online_softmax_steps(scores, 4, values)
    for step in steps:
        seen = torch.softmax(scores[:, : step.end], -1)
        torch.testing.assert_close(step.weights, seen, rtol=0, atol=1e-14)
        torch.testing.assert_close(step.output, seen @ values[: step.end], rtol=0, atol=1e-14)
        expected_sum = torch.exp(scores[:, : step.end] - step.running_max[:, None]).sum(-1)
        torch.testing.assert_close(step.running_sum, expected_sum, rtol=1e-14, atol=0)
    assert steps[-1].output.shape == (2, 3)


def test_online_softmax_steps_equal_the_numpy_oracle():
    row = np.array([0.5, -1.0, 2.0, -np.inf, 4.0, 1.0, 7.5])
    values = np.arange(14.0).reshape(7, 2)
    ours = online_softmax_steps(torch.from_numpy(row), 3, torch.from_numpy(values))
    oracle = reference.online_softmax_steps(row, 3, values)
    assert [s.end for s in ours] == [s.end for s in oracle] == [3, 6, 7]
    for mine, theirs in zip(ours, oracle, strict=True):
        for field in ("running_max", "running_sum", "rescale"):
            assert getattr(mine, field).item() == pytest.approx(getattr(theirs, field), rel=1e-14)
        np.testing.assert_allclose(mine.weights.numpy(), theirs.weights, rtol=0, atol=1e-15)
        np.testing.assert_allclose(mine.output.numpy(), theirs.output, rtol=0, atol=1e-13)


def test_online_softmax_rejects_bad_input():
    with pytest.raises(ValueError, match=r"NaN or \+inf"):
        online_softmax(torch.tensor([1.0, float("nan")]), 2)
    with pytest.raises(ValueError, match=r"NaN or \+inf"):
        online_softmax(torch.tensor([1.0, float("inf")]), 2)
    with pytest.raises(ValueError, match="block_size must be positive, got 0"):
        online_softmax(torch.zeros(3), 0)
    with pytest.raises(TypeError, match="block_size must be an int, got float 2.0"):
        online_softmax(torch.zeros(3), 2.0)
    with pytest.raises(ValueError, match="scores have n=3 keys but values have 4"):
        online_softmax_steps(torch.zeros(3), 2, torch.zeros(4, 2))


# --- the NumPy oracle -----------------------------------------------------------------------


@pytest.mark.parametrize("block_size", [1, 2, 5, 9])
def test_reference_online_softmax_steps_end_at_softmax(block_size):
    rng = np.random.default_rng(0)
    row, values = rng.normal(size=9) * 3, rng.normal(size=(9, 4))
    row[8] = 12.0  # the maximum arrives last
    steps = reference.online_softmax_steps(row, block_size, values)
    assert len(steps) == math.ceil(9 / block_size)
    np.testing.assert_allclose(steps[-1].weights, reference.softmax(row), rtol=0, atol=1e-15)
    np.testing.assert_allclose(steps[-1].output, reference.softmax(row) @ values, atol=1e-14)
    assert steps[-1].running_max == 12.0
    assert steps[-1].running_sum == pytest.approx(np.exp(row - 12.0).sum(), rel=1e-14)
    for step in steps:
        np.testing.assert_allclose(step.weights, reference.softmax(row[: step.end]), atol=1e-15)


def test_reference_online_softmax_steps_masked_keys_and_a_row_of_minus_inf():
    row = np.array([-np.inf, -np.inf, 1.0, -np.inf, 3.0])
    steps = reference.online_softmax_steps(row, 2)
    assert (steps[0].running_max, steps[0].running_sum, steps[0].rescale) == (-np.inf, 0.0, 0.0)
    assert steps[0].weights.tolist() == [0.0, 0.0]
    expected = reference.masked_softmax(row, np.isfinite(row))
    np.testing.assert_allclose(steps[-1].weights, expected, rtol=0, atol=1e-15)
    empty = reference.online_softmax_steps(np.full(5, -np.inf), 2, np.ones((5, 3)))
    assert empty[-1].weights.tolist() == [0.0] * 5
    assert empty[-1].output.tolist() == [0.0] * 3


def test_reference_online_softmax_steps_reject_bad_input():
    with pytest.raises(ValueError, match=r"row must be 1-D \(n,\), got shape \(2, 2\)"):
        reference.online_softmax_steps(np.zeros((2, 2)), 1)
    with pytest.raises(ValueError, match="block_size must be a positive int, got 0"):
        reference.online_softmax_steps(np.zeros(3), 0)
    with pytest.raises(ValueError, match=r"NaN or \+inf"):
        reference.online_softmax_steps(np.array([np.inf]), 1)
    with pytest.raises(ValueError, match=r"values must be \(n, d_v\) with n=3, got \(2, 1\)"):
        reference.online_softmax_steps(np.zeros(3), 1, np.zeros((2, 1)))


# --- flash_attention ------------------------------------------------------------------------


@pytest.mark.parametrize(("n_q", "n_k"), LENGTHS)
@pytest.mark.parametrize("kind", MASK_KINDS)
def test_flash_attention_equals_sdpa(n_q, n_k, kind):
    q, k, v = _qkv(3, 2, n_q, n_k)
    key_mask, causal, full = _masks(kind, 3, n_q, n_k)
    out = flash_attention(q, k, v, key_mask, causal, block_size=16)
    expected = F.scaled_dot_product_attention(q, k, v, attn_mask=full)
    rows = full.any(-1).expand(3, 2, n_q)  # older PyTorch's SDPA gives NaN where a query has no key
    torch.testing.assert_close(out[rows], expected[rows], rtol=0, atol=1e-5)
    assert out[~rows].abs().sum().item() == 0.0
    # rows without a key: the padded-out batch entry, and causal queries before the first key
    assert bool((~rows).any()) == (kind in ("padding", "both") or (causal and n_q > n_k))


@pytest.mark.parametrize(("n_q", "n_k"), [(37, 37), (37, 50), (1, 50), (16, 64)])
def test_flash_causal_aligns_bottom_right_like_causal_mask(n_q, n_k):
    q, k, v = _qkv(2, 2, n_q, n_k, seed=4)
    out = flash_attention(q, k, v, causal=True, block_size=16)
    expected = F.scaled_dot_product_attention(q, k, v, attn_mask=causal_mask(n_q, n_k))
    torch.testing.assert_close(out, expected, rtol=0, atol=1e-5)
    if n_q == n_k:
        is_causal = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        torch.testing.assert_close(out, is_causal, rtol=0, atol=1e-5)
    if n_q == 1:  # one new query after a cache of keys sees every key
        unmasked = F.scaled_dot_product_attention(q, k, v)
        torch.testing.assert_close(out, unmasked, rtol=0, atol=1e-5)


def test_flash_causal_with_more_queries_than_keys_gives_the_first_ones_zeros():
    q, k, v = _qkv(1, 2, 50, 29, seed=12)
    out = flash_attention(q, k, v, causal=True, block_size=16)
    assert out[:, :, :21].abs().sum().item() == 0.0  # positions -21 .. -1: no key yet
    expected = F.scaled_dot_product_attention(q[:, :, 21:], k, v, attn_mask=causal_mask(29))
    torch.testing.assert_close(out[:, :, 21:], expected, rtol=0, atol=1e-5)


@pytest.mark.parametrize("block_size", [1, 7, 64])
def test_flash_attention_3d_inputs_and_any_block_size(block_size):
    q, k, v = (t[:, 0] for t in _qkv(2, 1, 21, 19, seed=5))
    out = flash_attention(q, k, v, block_size=block_size)
    assert out.shape == (2, 21, 6)
    torch.testing.assert_close(out, F.scaled_dot_product_attention(q, k, v), rtol=0, atol=1e-5)


def test_flash_forward_logsumexp_and_tile_counts():
    q, k, v = _qkv(3, 2, 50, 50, seed=6)
    key_mask, _, full = _masks("padding", 3, 50, 50)
    result = flash_forward(q, k, v, key_mask, block_size=16)
    scores = (q @ k.transpose(-1, -2) / math.sqrt(8)).masked_fill(~full, NEG_INF)
    torch.testing.assert_close(result.logsumexp, scores.logsumexp(-1), rtol=0, atol=1e-5)
    assert result.logsumexp[2].eq(NEG_INF).all()  # the batch entry without keys
    assert (result.tiles_computed, result.tiles_total) == (16, 16)


@pytest.mark.parametrize(
    ("n_q", "n_k", "block_size", "computed", "total"),
    [
        (256, 256, 64, 10, 16),
        (50, 50, 16, 10, 16),
        (40, 40, 64, 1, 1),
        (16, 64, 16, 4, 4),  # one tile of queries at positions 48 .. 63: every key tile
        (32, 64, 16, 7, 8),
        (64, 16, 16, 1, 4),  # only the last tile of queries has a key at or before it
    ],
)
def test_causal_skips_the_tiles_above_the_diagonal(n_q, n_k, block_size, computed, total):
    q, k, v = _qkv(1, 1, n_q, n_k, d=4, d_v=4, seed=7)
    result = flash_forward(q, k, v, causal=True, block_size=block_size)
    assert (result.tiles_computed, result.tiles_total) == (computed, total)


@pytest.mark.parametrize(("n_q", "n_k"), LENGTHS)
@pytest.mark.parametrize("kind", MASK_KINDS)
def test_flash_gradients_equal_autograd_through_naive_attention(n_q, n_k, kind):
    q, k, v = _qkv(3, 2, n_q, n_k, seed=8, grad=True)
    key_mask, causal, full = _masks(kind, 3, n_q, n_k)
    d_out = _randn(3, 2, n_q, 6, seed=9)
    ours = torch.autograd.grad(flash_attention(q, k, v, key_mask, causal, 16), (q, k, v), d_out)
    naive = torch.autograd.grad(attend(q, k, v, full)[0], (q, k, v), d_out)
    for mine, theirs in zip(ours, naive, strict=True):
        torch.testing.assert_close(mine, theirs, rtol=0, atol=1e-5)
    if kind in ("padding", "both"):
        assert ours[0][2].abs().sum().item() == 0.0  # queries with no key get no gradient


def test_flash_backward_saves_no_query_by_key_matrix():
    q, k, v = _qkv(2, 2, 40, 33, seed=10, grad=True)
    out = flash_attention(q, k, v, _key_mask(2, 33), causal=True, block_size=16)
    saved = [tuple(t.shape) for t in out.grad_fn.saved_tensors]
    # queries, keys, values, output, log-sum-exp, key_mask
    assert saved == [
        (2, 2, 40, 8),
        (2, 2, 33, 8),
        (2, 2, 33, 6),
        (2, 2, 40, 6),
        (2, 2, 40),
        (2, 33),
    ]
    # its inputs are the leaves q, k, v themselves: no other node holds anything for backward
    inputs = [type(node).__name__ for node, _ in out.grad_fn.next_functions[:3]]
    assert inputs == ["AccumulateGrad"] * 3


def test_peak_memory_naive_holds_two_score_matrices_flash_only_tiles():
    n, d = 512, 16
    q, k, v = _qkv(1, 1, n, n, d=d, d_v=d, seed=11)
    matrix = n * n * 4  # bytes of one float32 (n, n) matrix
    assert peak_allocated_bytes(lambda: torch.empty(1000)) == 4000
    assert peak_allocated_bytes(lambda: attend(q, k, v)) >= 2 * matrix  # scores and weights
    assert peak_allocated_bytes(lambda: flash_attention(q, k, v, block_size=64)) < matrix / 4


@pytest.mark.parametrize(
    ("change", "error", "message"),
    [
        ({"k": (2, 2, 9, 5)}, ValueError, "keys have d_k=5 but queries have d_k=4"),
        ({"v": (2, 2, 8, 3)}, ValueError, "keys have n_keys=9 but values have n_keys=8"),
        ({"k": (2, 3, 9, 4)}, ValueError, r"same batch and heads: got queries \(2, 2, 7, 4\)"),
        ({"q": (2, 1, 2, 7, 4)}, ValueError, r"must all be \(batch, heads, seq, dim\) or all"),
        ({"q": (7, 4)}, ValueError, "queries must have at least 3 dimensions"),
        ({"block_size": 0}, ValueError, "block_size must be positive, got 0"),
        ({"block_size": 16.0}, TypeError, "block_size must be an int, got float 16.0"),
        ({"causal": 1}, TypeError, "causal must be True or False, got int 1"),
        ({"key_mask": torch.ones(2, 7, dtype=torch.bool)}, ValueError, r"= \(2, 9\), got"),
        ({"key_mask": torch.ones(2, 9)}, TypeError, "key_mask must be boolean"),
        ({"dtype": torch.float64}, TypeError, "dtypes differ: queries torch.float64, keys"),
    ],
)
def test_flash_attention_rejects_bad_input(change, error, message):
    shapes = {"q": (2, 2, 7, 4), "k": (2, 2, 9, 4), "v": (2, 2, 9, 3)}
    shapes.update({name: shape for name, shape in change.items() if name in shapes})
    q, k, v = (torch.zeros(shapes[name]) for name in ("q", "k", "v"))
    q = q.to(change.get("dtype", torch.float32))
    options = {name: value for name, value in change.items() if name in ("block_size", "causal")}
    with pytest.raises(error, match=message):
        flash_attention(q, k, v, key_mask=change.get("key_mask"), **options)


def test_flash_attention_rejects_nan():
    q = torch.zeros(1, 3, 4)
    q[0, 1, 2] = float("nan")
    with pytest.raises(ValueError, match=r"queries contains NaN \(1 of 12 entries\)"):
        flash_attention(q, torch.zeros(1, 3, 4), torch.zeros(1, 3, 4))


# --- half precision: float32 scores, running max, running sum and accumulator ----------------


def _outputs_and_grads(attention, q, k, v, d_out) -> tuple:
    """attention(q, k, v) and the gradients of (output * d_out).sum() for q, k and v."""
    q, k, v = (t.detach().clone().requires_grad_(True) for t in (q, k, v))
    output = attention(q, k, v)
    return (output, *torch.autograd.grad(output, (q, k, v), d_out.to(output.dtype)))


def _half_errors(dtype, scale: float, causal: bool, n: int, seed: int = 0) -> list:
    """For output, dq, dk and dv: (flash's max error, SDPA's max error, largest reference entry),
    both against float64 SDPA on the same half inputs (1, 2, n, 64), each scaled by ``scale``."""
    q, k, v = (scale * _randn(1, 2, n, 64, seed=seed + i) for i in range(3))
    q, k, v = (t.to(dtype) for t in (q, k, v))
    d_out = _randn(1, 2, n, 64, seed=seed + 3)

    def sdpa(*qkv):
        return F.scaled_dot_product_attention(*qkv, is_causal=causal)

    exact = _outputs_and_grads(sdpa, *(t.double() for t in (q, k, v)), d_out.double())
    flash = _outputs_and_grads(lambda *qkv: flash_attention(*qkv, causal=causal), q, k, v, d_out)
    fused = _outputs_and_grads(sdpa, q, k, v, d_out)
    assert [t.dtype for t in flash] == [dtype] * 4  # output and gradients in the inputs' dtype
    return [
        ((ours.double() - ref).abs().max().item(), (theirs.double() - ref).abs().max().item(), ref)
        for ours, theirs, ref in zip(flash, fused, exact, strict=True)
    ]


@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("scale", [1, 30, 300])
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
def test_half_flash_is_as_accurate_as_sdpa_forward_and_backward(dtype, scale, causal):
    # n = 200: the last tile of 64 is partial. At scale 30 the scores reach thousands (a
    # bfloat16 running sum then loses everything); at 300 they pass float16's 65,504.
    for name, (ours, theirs, exact) in zip(
        ("output", "dq", "dk", "dv"), _half_errors(dtype, scale, causal, n=200), strict=True
    ):
        floor = 1e-6 * exact.abs().max().item()  # SDPA is exact at scale 300's output
        assert ours <= 2 * theirs + floor, f"{name}: flash {ours:.3g}, SDPA {theirs:.3g}"


def test_bfloat16_flash_over_1024_keys_is_as_accurate_as_sdpa():
    # Scale 1 and a long row: a bfloat16 running sum of ~1024 terms of ~1 rounds at every add.
    for name, (ours, theirs, exact) in zip(
        ("output", "dq", "dk", "dv"), _half_errors(torch.bfloat16, 1, False, n=1024), strict=True
    ):
        assert ours <= 2 * theirs + 1e-6 * exact.abs().max().item(), name


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
def test_half_online_softmax_sums_in_float32(dtype):
    # 1024 equal scores: each weight is 2^-10, exact in both dtypes. A bfloat16 running sum
    # stops growing at 256 (256 + 1 rounds to 256), which would give 2^-8.
    weights = online_softmax(torch.zeros(3, 1024, dtype=dtype), block_size=64)
    assert weights.dtype == dtype
    assert weights.float().unique().tolist() == [2.0**-10]
    last = online_softmax_steps(torch.zeros(1024, dtype=dtype), 64, torch.ones(1024, 2))[-1]
    assert last.running_sum.dtype == torch.float32 and last.running_sum.item() == 1024.0
    assert last.weights.dtype == dtype and last.output.tolist() == [1.0, 1.0]


def test_half_flash_forward_keeps_the_logsumexp_in_float32():
    q = torch.full((1, 1, 3, 4), 200.0, dtype=torch.float16)  # scores of 80,000: past 65,504
    result = flash_forward(q, q, q)
    assert result.output.dtype == torch.float16 and result.logsumexp.dtype == torch.float32
    assert result.output.tolist() == q.tolist()  # equal keys: the average of equal values
    assert result.logsumexp.flatten().tolist() == pytest.approx([80_000 + math.log(3)] * 3)


# --- sliding windows ----------------------------------------------------------------------------


@pytest.mark.parametrize(("n_q", "n_k"), [(37, 37), (20, 50), (1, 40)])
@pytest.mark.parametrize("window", [1, 5, 16, 40])
def test_flash_window_equals_attend_with_sliding_window_mask_and_its_gradients(n_q, n_k, window):
    q, k, v = _qkv(2, 2, n_q, n_k, seed=11, grad=True)
    key_mask = _key_mask(2, n_k)
    full = sliding_window_mask(n_q, window, n_k)[None, None] & key_mask[:, None, None, :]
    d_out = _randn(2, 2, n_q, 6, seed=12)
    ours = flash_attention(q, k, v, key_mask, causal=True, block_size=16, window=window)
    naive = attend(q, k, v, full)[0]
    torch.testing.assert_close(ours, naive, rtol=0, atol=1e-5)
    for mine, theirs in zip(
        torch.autograd.grad(ours, (q, k, v), d_out),
        torch.autograd.grad(naive, (q, k, v), d_out),
        strict=True,
    ):
        torch.testing.assert_close(mine, theirs, rtol=0, atol=1e-5)


@pytest.mark.parametrize(
    ("n, window, computed"),
    [
        (64, 64, 10),  # the whole causal triangle: 4 + 3 + 2 + 1 tiles
        (64, 16, 7),  # the diagonal tiles and the one to the left of each but the first
        (64, 1, 4),  # the diagonal alone
    ],
)
def test_a_window_skips_the_tiles_wholly_behind_it(n, window, computed):
    q, k, v = _qkv(1, 1, n, n, d=4, d_v=4, seed=13)
    result = flash_forward(q, k, v, causal=True, block_size=16, window=window)
    assert (result.tiles_computed, result.tiles_total) == (computed, 16)


def test_flash_window_needs_causal_order_and_a_positive_width():
    q, k, v = _qkv(1, 1, 8, 8, seed=14)
    with pytest.raises(ValueError, match="a window needs causal=True"):
        flash_attention(q, k, v, window=3)
    with pytest.raises(ValueError, match="window must be positive, got 0"):
        flash_attention(q, k, v, causal=True, window=0)
