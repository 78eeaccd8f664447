"""attend and MultiHeadAttention against the NumPy oracle, SDPA and nn.MultiheadAttention."""

from unittest import mock

import pytest
import torch
import torch.nn.functional as F
from torch import nn

from attnlib import reference
from attnlib.attention import MultiHeadAttention, attend, implementation_for
from attnlib.masks import causal_mask, combine_masks, padding_mask

MASK_KINDS = ["none", "padding", "causal", "both"]


def _randn(*shape: int, seed: int, dtype=torch.float32) -> torch.Tensor:
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed), dtype=dtype)


def _lengths(batch: int, n_keys: int) -> list[int]:
    """Key lengths from n_keys down; the last batch entry has no keys when batch > 2."""
    lengths = [max(n_keys - 2 * i, 1) for i in range(batch)]
    if batch > 2:
        lengths[-1] = 0
    return lengths


def _mask(kind: str, batch: int, n_queries: int, n_keys: int) -> torch.Tensor | None:
    """Our mask (True = may attend), shape (batch, n_queries, n_keys) or None."""
    pad = padding_mask(_lengths(batch, n_keys), n_keys) if kind in ("padding", "both") else None
    causal = causal_mask(n_queries, n_keys) if kind in ("causal", "both") else None
    combined = combine_masks(pad, causal)
    return None if combined is None else combined.expand(batch, n_queries, n_keys)


# --- attend ---------------------------------------------------------------------------------


@pytest.mark.parametrize("shape", [(1, 3, 3, 4, 4), (2, 5, 7, 8, 3), (3, 6, 2, 5, 9)])
def test_attend_equals_numpy_reference_in_float64(shape):
    batch, n_q, n_k, d_k, d_v = shape
    q = _randn(batch, n_q, d_k, seed=0, dtype=torch.float64)
    k = _randn(batch, n_k, d_k, seed=1, dtype=torch.float64)
    v = _randn(batch, n_k, d_v, seed=2, dtype=torch.float64)
    expected_out, expected_w = reference.scaled_dot_product_attention(
        q.numpy(), k.numpy(), v.numpy()
    )
    out, weights = attend(q, k, v)
    torch.testing.assert_close(weights, torch.from_numpy(expected_w), rtol=0, atol=1e-12)
    torch.testing.assert_close(out, torch.from_numpy(expected_out), rtol=0, atol=1e-12)


def test_attend_dot_score_reproduces_worked_example():
    example = reference.worked_example()
    q, k, v = (torch.from_numpy(a) for a in (example.queries, example.keys, example.values))
    out, _ = attend(q, k, v, score="dot")
    torch.testing.assert_close(out, torch.from_numpy(example.outputs), rtol=0, atol=1e-12)


@pytest.mark.parametrize("shape", [(2, 5, 7, 8, 8), (3, 4, 4, 16, 6), (1, 9, 12, 4, 2)])
@pytest.mark.parametrize("kind", MASK_KINDS)
def test_attend_equals_torch_sdpa(shape, kind):
    batch, n_q, n_k, d_k, d_v = shape
    q, k = _randn(batch, n_q, d_k, seed=3), _randn(batch, n_k, d_k, seed=4)
    v = _randn(batch, n_k, d_v, seed=5)
    mask = _mask(kind, batch, n_q, n_k)
    out, _ = attend(q, k, v, mask)
    expected = F.scaled_dot_product_attention(q, k, v, attn_mask=mask)
    rows = torch.ones(batch, n_q, dtype=torch.bool) if mask is None else mask.any(-1)
    torch.testing.assert_close(out[rows], expected[rows], rtol=1e-5, atol=1e-5)


def test_attend_fully_masked_query_gives_zero_output():
    q, k, v = _randn(2, 3, 4, seed=6), _randn(2, 5, 4, seed=7), _randn(2, 5, 2, seed=8)
    out, weights = attend(q, k, v, padding_mask([5, 0], 5))
    assert out[1].abs().sum().item() == 0.0
    assert weights[1].abs().sum().item() == 0.0


# --- MultiHeadAttention against torch.nn.MultiheadAttention ------------------------------------

# (batch, n_queries, n_keys, d_model, heads); n_keys != n_queries is cross-attention.
MHA_SHAPES = [(2, 5, 5, 16, 4), (3, 4, 7, 12, 3), (1, 6, 6, 8, 1), (4, 3, 9, 32, 8)]
CROSS_SHORTER_KEYS = (2, 6, 3, 16, 2)  # fewer keys than queries: no causal mask


def _pair(d_model: int, heads: int) -> tuple[MultiHeadAttention, nn.MultiheadAttention]:
    torch.manual_seed(d_model * 31 + heads)
    theirs = nn.MultiheadAttention(d_model, heads, batch_first=True).eval()
    with torch.no_grad():  # torch starts biases at zero; make them count
        theirs.in_proj_bias.normal_()
        theirs.out_proj.bias.normal_()
    ours = MultiHeadAttention(d_model, heads).eval().load_from_torch(theirs)
    return ours, theirs


def _torch_masks(kind: str, batch: int, n_q: int, n_k: int) -> dict:
    """The same mask in torch's convention, where True means NOT allowed."""
    masks = {}
    if kind in ("padding", "both"):
        masks["key_padding_mask"] = ~padding_mask(_lengths(batch, n_k), n_k).squeeze(1)
    if kind in ("causal", "both"):
        masks["attn_mask"] = ~causal_mask(n_q, n_k)
    return masks


def _our_masks(kind: str, batch: int, n_q: int, n_k: int, via: str) -> dict:
    """Our masks as MultiHeadAttention's arguments: one combined ``mask``, or padding apart."""
    if via == "mask":
        return {"mask": _mask(kind, batch, n_q, n_k)}
    masks = {}
    if kind in ("padding", "both"):
        masks["key_mask"] = padding_mask(_lengths(batch, n_k), n_k).squeeze(1)
    if kind in ("causal", "both"):
        masks["mask"] = causal_mask(n_q, n_k)
    return masks


def _run_both(shape, kind, fused, average=False, via="mask"):
    batch, n_q, n_k, d_model, heads = shape
    ours, theirs = _pair(d_model, heads)
    query, key = _randn(batch, n_q, d_model, seed=10), _randn(batch, n_k, d_model, seed=11)
    value = _randn(batch, n_k, d_model, seed=12)
    mask = _mask(kind, batch, n_q, n_k)
    with torch.no_grad():
        out, weights = ours(
            query, key, value, fused=fused, **_our_masks(kind, batch, n_q, n_k, via)
        )
        expected, expected_w = theirs(
            query,
            key,
            value,
            need_weights=True,
            average_attn_weights=average,
            **_torch_masks(kind, batch, n_q, n_k),
        )
    rows = torch.ones(batch, n_q, dtype=torch.bool) if mask is None else mask.any(-1)
    return out, weights, expected, expected_w, rows


def _cases():
    cases = [(shape, kind) for shape in MHA_SHAPES for kind in MASK_KINDS]
    return cases + [(CROSS_SHORTER_KEYS, "none"), (CROSS_SHORTER_KEYS, "padding")]


@pytest.mark.parametrize("via", ["mask", "key_mask"])
@pytest.mark.parametrize("fused", [False, True], ids=["scratch", "fused"])
@pytest.mark.parametrize(("shape", "kind"), _cases())
def test_mha_output_equals_torch(shape, kind, fused, via):
    out, _, expected, _, rows = _run_both(shape, kind, fused, via=via)
    assert out.shape == expected.shape
    torch.testing.assert_close(out[rows], expected[rows], rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("via", ["mask", "key_mask"])
@pytest.mark.parametrize(("shape", "kind"), _cases())
def test_mha_per_head_weights_equal_torch(shape, kind, via):
    _, weights, _, expected_w, rows = _run_both(shape, kind, fused=False, via=via)
    assert weights.shape == expected_w.shape == (shape[0], shape[4], shape[1], shape[2])
    head_rows = rows.unsqueeze(1).expand(-1, shape[4], -1)
    torch.testing.assert_close(weights[head_rows], expected_w[head_rows], rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("kind", MASK_KINDS)
def test_mha_head_averaged_weights_equal_torch(kind):
    shape = MHA_SHAPES[3]
    _, weights, _, expected_w, rows = _run_both(shape, kind, fused=False, average=True)
    averaged = weights.mean(dim=1)
    torch.testing.assert_close(averaged[rows], expected_w[rows], rtol=1e-5, atol=1e-5)


def test_mha_fused_path_returns_no_weights():
    mha = MultiHeadAttention(8, 2)
    assert mha(_randn(1, 3, 8, seed=0), fused=True)[1] is None


@pytest.mark.parametrize("fused", [False, True], ids=["scratch", "fused"])
def test_mha_fully_masked_row_outputs_projection_bias(fused):
    torch.manual_seed(0)
    mha = MultiHeadAttention(8, 2).eval()
    with torch.no_grad():
        mha.output_projection.bias.normal_()
        out, _ = mha(_randn(3, 4, 8, seed=1), mask=padding_mask([4, 0, 2], 4), fused=fused)
    assert not out.isnan().any()
    torch.testing.assert_close(out[1], mha.output_projection.bias.expand(4, 8))


def test_mha_fully_masked_row_has_all_zero_weights():
    mha = MultiHeadAttention(8, 2).eval()
    with torch.no_grad():
        _, weights = mha(_randn(3, 4, 8, seed=1), mask=padding_mask([4, 0, 2], 4))
    assert weights[1].abs().sum().item() == 0.0


@pytest.mark.parametrize("fused", [False, True], ids=["scratch", "fused"])
def test_mha_gradient_has_no_nan_with_fully_masked_row(fused):
    mha = MultiHeadAttention(8, 2)
    x = _randn(2, 4, 8, seed=2).requires_grad_(True)
    out, _ = mha(x, mask=padding_mask([0, 3], 4), fused=fused)
    out.sum().backward()
    assert torch.isfinite(x.grad).all()


@pytest.mark.parametrize("fused", [False, True], ids=["scratch", "fused"])
def test_mha_without_bias_equals_torch(fused):
    torch.manual_seed(1)
    theirs = nn.MultiheadAttention(16, 4, bias=False, batch_first=True).eval()
    ours = MultiHeadAttention(16, 4, bias=False).eval().load_from_torch(theirs)
    x = _randn(2, 5, 16, seed=13)
    with torch.no_grad():
        out, expected = ours(x, fused=fused)[0], theirs(x, x, x, need_weights=False)[0]
    torch.testing.assert_close(out, expected, rtol=1e-5, atol=1e-5)


# --- MultiHeadAttention's masks: one way in for padding, the same masks on both paths ---------


def test_prepare_mask_gives_one_four_dimensional_boolean_mask():
    mha = MultiHeadAttention(8, 2)
    key_mask = padding_mask([3, 1], 3).squeeze(1)  # (batch=2, n_keys=3)
    prepared = mha.prepare_mask(causal_mask(3), key_mask, batch=2, n_queries=3, n_keys=3)
    assert prepared.shape == (2, 1, 3, 3) and prepared.dtype == torch.bool
    # Query 2 of the second sequence sees key 0 only: causal AND padding.
    assert prepared[1, 0, 2].tolist() == [True, False, False]
    assert mha.prepare_mask(None, None, 2, 3, 3) is None


@pytest.mark.parametrize("fused", [False, True], ids=["scratch", "fused"])
def test_forward_prepared_equals_forward(fused):
    mha = MultiHeadAttention(8, 2).eval()
    x, key_mask = _randn(2, 4, 8, seed=20), padding_mask([4, 2], 4).squeeze(1)
    prepared = mha.prepare_mask(None, key_mask, 2, 4, 4)
    with torch.no_grad():
        expected = mha(x, key_mask=key_mask, fused=fused)[0]
        out = mha.forward_prepared(x, x, x, prepared, implementation_for(fused))[0]
    torch.testing.assert_close(out, expected, rtol=0, atol=0)


def test_key_mask_equals_the_same_padding_as_a_three_dimensional_mask():
    mha = MultiHeadAttention(8, 2).eval()
    x, lengths = _randn(3, 5, 8, seed=21), [5, 2, 4]
    with torch.no_grad():
        by_key = mha(x, key_mask=padding_mask(lengths, 5).squeeze(1))
        by_mask = mha(x, mask=padding_mask(lengths, 5))
    torch.testing.assert_close(by_key[1], by_mask[1], rtol=0, atol=0)
    assert by_key[1][1, :, :, 2:].abs().sum().item() == 0.0


def test_two_dimensional_mask_is_always_queries_by_keys():
    # batch == n_queries: a (batch, n_keys) padding mask would fit, but is not guessed at.
    mha = MultiHeadAttention(8, 2).eval()
    x = _randn(3, 3, 8, seed=22)
    mask = torch.tensor([[True, False, False], [True, True, False], [True, True, True]])
    with torch.no_grad():
        _, weights = mha(x, mask=mask)
    assert weights[0, 0, 0].tolist() == pytest.approx([1.0, 0.0, 0.0])  # row 0 of the mask
    assert weights[2, 1, 0].tolist() == pytest.approx([1.0, 0.0, 0.0])  # same row, batch 2


# Masks of every dimensionality (and broadcast axes) that both paths must accept alike.
ACCEPTED_MASKS = {
    "2-D (n_q, n_k)": torch.ones(4, 5, dtype=torch.bool).tril(),
    "2-D (1, n_k)": torch.tensor([[True, True, False, True, False]]),
    "3-D (batch, 1, n_k)": padding_mask([5, 2], 5),
    "3-D (batch, n_q, n_k)": padding_mask([5, 0], 5).expand(2, 4, 5),
    "4-D (batch, heads, n_q, n_k)": torch.rand(
        2, 2, 4, 5, generator=torch.Generator().manual_seed(0)
    )
    > 0.3,
    "4-D (1, 1, 1, 1)": torch.ones(1, 1, 1, 1, dtype=torch.bool),
}


@pytest.mark.parametrize("name", list(ACCEPTED_MASKS))
def test_both_paths_accept_the_same_masks_and_agree(name):
    torch.manual_seed(2)
    mha = MultiHeadAttention(8, 2).eval()
    query, key = _randn(2, 4, 8, seed=23), _randn(2, 5, 8, seed=24)
    with torch.no_grad():
        scratch = mha(query, key, mask=ACCEPTED_MASKS[name])[0]
        fused = mha(query, key, mask=ACCEPTED_MASKS[name], fused=True)[0]
    assert not fused.isnan().any()
    torch.testing.assert_close(fused, scratch, rtol=1e-5, atol=1e-5)


# --- inputs are checked once, at the public entry ---------------------------------------------


def _scans(call) -> int:
    """How many times ``call()`` scans a tensor for NaN and inf (each is a host sync on a GPU)."""
    real, calls = torch.isfinite, []

    def counting(*args, **kwargs):
        calls.append(1)
        return real(*args, **kwargs)

    with mock.patch("torch.isfinite", counting), torch.no_grad():
        call()
    return len(calls)


@pytest.mark.parametrize("fused", [False, True], ids=["scratch", "fused"])
def test_mha_scans_each_distinct_input_once(fused):
    mha = MultiHeadAttention(8, 2).eval()
    x, y = _randn(2, 4, 8, seed=30), _randn(2, 5, 8, seed=31)
    key_mask = padding_mask([5, 3], 5).squeeze(1)
    assert _scans(lambda: mha(x, mask=padding_mask([4, 2], 4), fused=fused)) == 1
    assert _scans(lambda: mha(x, y, key_mask=key_mask, fused=fused)) == 2  # query, key=value
    prepared = mha.prepare_mask(None, key_mask, 2, 4, 5)
    assert _scans(lambda: mha.forward_prepared(x, y, y, prepared, implementation_for(fused))) == 0


def test_attend_scans_queries_keys_values_once_each():
    q, k, v = _randn(2, 3, 4, seed=32), _randn(2, 5, 4, seed=33), _randn(2, 5, 2, seed=34)
    assert _scans(lambda: attend(q, k, v, padding_mask([5, 2], 5))) == 3
    assert _scans(lambda: attend(q, k, v, score="dot")) == 3


# --- half precision -------------------------------------------------------------------------

HALF = [torch.float16, torch.bfloat16]
# Rounding of half-precision inputs and outputs: float16 has an 11-bit, bfloat16 an 8-bit mantissa.
HALF_TOLERANCE = {torch.float16: 2e-3, torch.bfloat16: 2e-2}


def _large_qkv(dtype: torch.dtype) -> tuple[torch.Tensor, ...]:
    """Queries and keys of norm 320, d_k 64: raw q·k reach ~1e5, past float16's 65,504."""
    q = _randn(2, 2, 5, 64, seed=40)
    q = 320 * q / q.norm(dim=-1, keepdim=True)
    k = q + 0.05 * _randn(2, 2, 5, 64, seed=41)
    return q.to(dtype), k.to(dtype), _randn(2, 2, 5, 64, seed=42).to(dtype)


@pytest.mark.parametrize("dtype", HALF, ids=["float16", "bfloat16"])
def test_attend_in_half_precision_is_finite_and_matches_sdpa(dtype):
    q, k, v = _large_qkv(dtype)
    assert (q.float() @ k.float().transpose(-2, -1)).abs().max() > torch.finfo(torch.float16).max
    output, weights = attend(q, k, v, mask=causal_mask(5))
    expected = F.scaled_dot_product_attention(q, k, v, is_causal=True)
    assert output.dtype == weights.dtype == dtype
    assert torch.isfinite(output).all() and torch.isfinite(weights).all()
    tolerance = HALF_TOLERANCE[dtype]
    torch.testing.assert_close(output.float(), expected.float(), rtol=tolerance, atol=tolerance)


@pytest.mark.parametrize("dtype", HALF, ids=["float16", "bfloat16"])
def test_from_scratch_mha_in_half_precision_matches_the_fused_path(dtype):
    mha = MultiHeadAttention(64, 2).eval()
    with torch.no_grad():
        mha.query_projection.weight.mul_(80)  # per-head q·k up to ~1e5 from inputs of norm ~8
        mha.key_projection.weight.mul_(80)
    mha = mha.to(dtype)
    x = _randn(2, 6, 64, seed=43).to(dtype)
    with torch.no_grad():
        queries = mha.split_heads(mha.query_projection(x)).float()  # (2, heads, 6, head_dim)
        keys = mha.split_heads(mha.key_projection(x)).float()
        assert (queries @ keys.mT).abs().max() > torch.finfo(torch.float16).max
        scratch, weights = mha(x, mask=causal_mask(6))
        fused, _ = mha(x, mask=causal_mask(6), fused=True)
    assert torch.isfinite(scratch).all() and torch.isfinite(weights).all()
    tolerance = HALF_TOLERANCE[dtype]
    torch.testing.assert_close(scratch.float(), fused.float(), rtol=tolerance, atol=tolerance)


def test_float32_scores_keep_their_order_of_operations():
    # Half precision scales first in float32; float32 keeps q·k then / √d_k, as before.
    q, k, v = _randn(2, 4, 3, seed=44), _randn(2, 5, 3, seed=45), _randn(2, 5, 2, seed=46)
    weights = torch.softmax(q @ k.transpose(-2, -1) / 3**0.5, dim=-1)
    output, ours = attend(q, k, v)
    assert torch.equal(ours, weights) and torch.equal(output, weights @ v)


# --- grouped-query and multi-query attention ------------------------------------------------


def _gqa_expected(mha, query, key, mask4d, repeat: bool) -> torch.Tensor:
    """SDPA on the module's own projections: enable_gqa, or every key/value head repeated."""
    batch, n_q, n_k = query.shape[0], query.shape[1], key.shape[1]
    heads, kv_heads, head_dim = mha.num_heads, mha.num_kv_heads, mha.head_dim
    q = mha.query_projection(query).view(batch, n_q, heads, head_dim).transpose(1, 2)
    k = mha.key_projection(key).view(batch, n_k, kv_heads, head_dim).transpose(1, 2)
    v = mha.value_projection(key).view(batch, n_k, kv_heads, head_dim).transpose(1, 2)
    if repeat:
        k, v = k.repeat_interleave(heads // kv_heads, 1), v.repeat_interleave(heads // kv_heads, 1)
        out = F.scaled_dot_product_attention(q, k, v, attn_mask=mask4d)
    else:
        out = F.scaled_dot_product_attention(q, k, v, attn_mask=mask4d, enable_gqa=True)
    return mha.output_projection(out.transpose(1, 2).reshape(batch, n_q, mha.d_model))


@pytest.mark.parametrize("repeat", [False, True], ids=["enable_gqa", "repeated"])
@pytest.mark.parametrize("fused", [False, True], ids=["scratch", "fused"])
@pytest.mark.parametrize("kind", MASK_KINDS)
@pytest.mark.parametrize("num_kv_heads", [1, 2])
def test_grouped_query_attention_equals_sdpa(num_kv_heads, kind, fused, repeat):
    torch.manual_seed(num_kv_heads)
    mha = MultiHeadAttention(16, 4, num_kv_heads=num_kv_heads).eval()
    query, key = _randn(2, 5, 16, seed=50), _randn(2, 7, 16, seed=51)
    mask = _mask(kind, 2, 5, 7)
    with torch.no_grad():
        out, weights = mha(query, key, mask=mask, fused=fused)
        mask4d = None if mask is None else mask[:, None]
        expected = _gqa_expected(mha, query, key, mask4d, repeat)
    assert out.shape == (2, 5, 16)
    assert weights is None if fused else weights.shape == (2, 4, 5, 7)
    torch.testing.assert_close(out, expected, rtol=1e-6, atol=1e-6)


def test_query_heads_of_one_group_share_keys_and_values():
    torch.manual_seed(3)
    mha = MultiHeadAttention(8, 4, num_kv_heads=2).eval()  # heads 0, 1 read kv head 0; 2, 3 kv 1
    with torch.no_grad():
        rows = mha.query_projection.weight.view(4, 2, 8)
        rows[1], rows[2] = rows[0], rows[0]  # heads 0, 1 and 2 ask the same questions
        mha.query_projection.bias.view(4, 2)[1:3] = mha.query_projection.bias.view(4, 2)[0]
        _, weights = mha(_randn(1, 5, 8, seed=52))
    assert torch.equal(weights[0, 0], weights[0, 1])  # same group: same keys, same weights
    assert (weights[0, 0] - weights[0, 2]).abs().max() > 1e-3  # other group: other keys


def test_split_and_repeat_kv_heads_shapes():
    mha = MultiHeadAttention(12, 6, num_kv_heads=2)
    kv = mha.split_kv_heads(_randn(3, 5, 4, seed=53))  # 2 kv heads of head_dim 2
    assert kv.shape == (3, 2, 5, 2)
    repeated = mha.repeat_kv_heads(kv)
    assert repeated.shape == (3, 6, 5, 2)
    assert torch.equal(repeated[:, 2], kv[:, 0]) and torch.equal(repeated[:, 3], kv[:, 1])


@pytest.mark.parametrize("fused", [False, True], ids=["scratch", "fused"])
def test_grouped_heads_accept_a_mask_per_query_head(fused):
    torch.manual_seed(4)
    mha = MultiHeadAttention(8, 4, num_kv_heads=1).eval()
    x = _randn(2, 4, 8, seed=54)
    mask = torch.rand(2, 4, 4, 4, generator=torch.Generator().manual_seed(5)) > 0.3
    mask[..., 0] = True  # every row keeps a key, so SDPA's rows are all defined
    with torch.no_grad():
        out, _ = mha(x, mask=mask, fused=fused)
        expected = _gqa_expected(mha, x, x, mask, repeat=True)
    torch.testing.assert_close(out, expected, rtol=1e-6, atol=1e-6)


def test_fused_grouped_path_repeats_heads_where_sdpa_has_no_enable_gqa():
    torch.manual_seed(6)
    mha = MultiHeadAttention(16, 4, num_kv_heads=2).eval()
    x, mask = _randn(2, 5, 16, seed=55), causal_mask(5)
    with torch.no_grad():
        with_gqa = mha(x, mask=mask, fused=True)[0]
        with mock.patch("attnlib.attention.SDPA_HAS_GQA", False):
            repeated = mha(x, mask=mask, fused=True)[0]
    torch.testing.assert_close(repeated, with_gqa, rtol=1e-6, atol=1e-6)


def test_num_kv_heads_equal_to_num_heads_is_ordinary_attention_bit_for_bit():
    torch.manual_seed(7)
    default = MultiHeadAttention(16, 4).eval()
    torch.manual_seed(7)
    explicit = MultiHeadAttention(16, 4, num_kv_heads=4).eval()
    ours, theirs = default.state_dict(), explicit.state_dict()
    assert list(ours) == list(theirs)
    assert all(torch.equal(ours[name], theirs[name]) for name in ours)
    assert default.key_projection.weight.shape == (16, 16)
    x, mask = _randn(2, 5, 16, seed=56), causal_mask(5)
    with torch.no_grad():
        # The formula before grouped heads existed: keys split like queries, SDPA as before.
        q, k, v = (
            default.split_heads(projection(x))
            for projection in (
                default.query_projection,
                default.key_projection,
                default.value_projection,
            )
        )
        scratch = default.output_projection(default.merge_heads(attend(q, k, v, mask)[0]))
        fused = F.scaled_dot_product_attention(q, k, v, attn_mask=mask)
        fused = default.output_projection(default.merge_heads(fused))
        assert torch.equal(explicit(x, mask=mask)[0], scratch)
        assert torch.equal(explicit(x, mask=mask, fused=True)[0], fused)


@pytest.mark.parametrize(("num_kv_heads", "expected"), [(4, 1088), (2, 816), (1, 680)])
def test_grouped_heads_shrink_the_key_and_value_projections(num_kv_heads, expected):
    # d_model 16, 4 heads of 4: query and output 16*16 + 16 each, key and value 16*kv*4 + kv*4.
    mha = MultiHeadAttention(16, 4, num_kv_heads=num_kv_heads)
    assert sum(p.numel() for p in mha.parameters()) == expected
    assert mha.key_projection.weight.shape == mha.value_projection.weight.shape
    assert mha.key_projection.weight.shape == (num_kv_heads * 4, 16)


def test_grouped_heads_errors_name_the_problem():
    with pytest.raises(ValueError, match="num_kv_heads=3 does not divide num_heads=4"):
        MultiHeadAttention(16, 4, num_kv_heads=3)
    with pytest.raises(ValueError, match="num_kv_heads=8 does not divide num_heads=4"):
        MultiHeadAttention(16, 4, num_kv_heads=8)
    with pytest.raises(ValueError, match="num_kv_heads must be positive, got 0"):
        MultiHeadAttention(16, 4, num_kv_heads=0)
    with pytest.raises(TypeError, match="num_kv_heads must be an int, got float 2.0"):
        MultiHeadAttention(16, 4, num_kv_heads=2.0)
    torch_module = nn.MultiheadAttention(16, 4, batch_first=True)
    with pytest.raises(
        ValueError, match="no grouped key/value heads.*num_kv_heads=2 < num_heads=4"
    ):
        MultiHeadAttention(16, 4, num_kv_heads=2).load_from_torch(torch_module)


def _with_equal_heads_in_groups(mha: MultiHeadAttention, groups: int) -> MultiHeadAttention:
    """``mha`` with every key/value head equal to the first head of its group (in place)."""
    per_group = mha.num_kv_heads // groups
    with torch.no_grad():
        for projection in (mha.key_projection, mha.value_projection):
            weight = projection.weight.view(groups, per_group, mha.head_dim, mha.d_model)
            bias = projection.bias.view(groups, per_group, mha.head_dim)
            weight[:] = weight[:, :1].clone()
            bias[:] = bias[:, :1].clone()
    return mha


@pytest.mark.parametrize("groups", [1, 2, 4])
@pytest.mark.parametrize("fused", [False, True])
def test_grouped_equals_the_original_when_each_groups_heads_agree(groups, fused):
    torch.manual_seed(0)
    mha = _with_equal_heads_in_groups(MultiHeadAttention(32, 8, num_kv_heads=4).eval(), groups)
    grouped = mha.grouped(groups)
    x = _randn(3, 6, 32, seed=1)
    mask = causal_mask(6)
    assert grouped.num_kv_heads == groups and not grouped.training
    assert grouped.key_projection.weight.shape == (groups * 4, 32)
    expected, _ = mha(x, x, x, mask=mask, fused=fused)
    actual, _ = grouped(x, x, x, mask=mask, fused=fused)
    torch.testing.assert_close(actual, expected, rtol=0, atol=1e-6)


def test_grouped_heads_are_the_means_of_their_groups():
    torch.manual_seed(0)
    mha = MultiHeadAttention(16, 4)
    grouped = mha.grouped(2)
    rows = mha.value_projection.weight.view(4, 4, 16)  # (kv heads, head_dim, d_model)
    torch.testing.assert_close(grouped.value_projection.weight[4:8], rows[2:4].mean(0))
    torch.testing.assert_close(
        grouped.key_projection.bias[:4], mha.key_projection.bias[:8].view(2, 4).mean(0)
    )
    assert torch.equal(grouped.query_projection.weight, mha.query_projection.weight)
    assert grouped.training  # the copy keeps the original's mode


def test_grouped_refuses_a_count_that_does_not_divide_the_kv_heads():
    mha = MultiHeadAttention(32, 8, num_kv_heads=4)
    with pytest.raises(ValueError, match="num_kv_heads=8 must divide the 4 key/value heads"):
        mha.grouped(8)
    with pytest.raises(ValueError, match="num_kv_heads=3 does not divide num_heads=8"):
        mha.grouped(3)
    with pytest.raises(ValueError, match="num_kv_heads must be positive, got 0"):
        mha.grouped(0)
