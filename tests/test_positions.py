"""Rotary positions: a rotation per pair, scores that depend only on the offset."""

import math

import pytest
import torch
import torch.nn.functional as F

from attnlib.attention import MultiHeadAttention
from attnlib.encoder import Encoder, TransformerConfig
from attnlib.masks import causal_mask
from attnlib.positions import (
    apply_rotary,
    rotary_angles,
    rotary_frequencies,
)
from attnlib.transformer import offset_rotation


def _randn(*shape: int, seed: int, dtype=torch.float64) -> torch.Tensor:
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed), dtype=dtype)


def _complex_rotary(x: torch.Tensor, positions: torch.Tensor, base: float) -> torch.Tensor:
    """RoFormer's form: pair (x[2i], x[2i+1]) as a complex number times e^(i * angle)."""
    dim = x.shape[-1]
    frequencies = base ** (-torch.arange(0, dim, 2, dtype=torch.float64) / dim)
    angles = positions.to(torch.float64)[:, None] * frequencies  # (seq, dim // 2)
    pairs = torch.view_as_complex(x.reshape(*x.shape[:-1], dim // 2, 2).contiguous())
    return torch.view_as_real(pairs * torch.polar(torch.ones_like(angles), angles)).flatten(-2)


def test_frequencies_and_angles_are_position_times_base_to_minus_2i_over_dim():
    expected = [1.0, 100 ** (-1 / 3), 100 ** (-2 / 3)]
    assert rotary_frequencies(6, base=100.0).tolist() == pytest.approx(expected, rel=1e-15)
    angles = rotary_angles(torch.tensor([0, 1, 5]), 4, base=100.0)
    assert angles.dtype == torch.float64 and angles.shape == (3, 2)
    expected = torch.tensor([[0.0, 0.0], [1.0, 0.1], [5.0, 0.5]], dtype=torch.float64)
    torch.testing.assert_close(angles, expected, rtol=0, atol=1e-15)


def test_rotary_angles_of_batched_positions():
    angles = rotary_angles(torch.tensor([[0.0, 2.0], [3.0, 4.5]]), 2)
    assert angles.shape == (2, 2, 1) and angles[:, :, 0].tolist() == [[0.0, 2.0], [3.0, 4.5]]


def test_rotary_rotates_one_pair_by_its_angle():
    x = torch.tensor([[1.0, 0.0, 1.0, 0.0]], dtype=torch.float64)  # (seq=1, dim=4)
    out = apply_rotary(x, torch.tensor([2]), base=100.0)  # angles 2 and 0.2
    expected = [math.cos(2), math.sin(2), math.cos(0.2), math.sin(0.2)]
    assert out[0].tolist() == pytest.approx(expected, abs=1e-15)


def test_rotary_preserves_the_norm_of_every_pair():
    x = _randn(2, 3, 50, 16, seed=0)
    out = apply_rotary(x, torch.arange(50) * 37)
    pair_norms = x.reshape(2, 3, 50, 8, 2).norm(dim=-1)
    torch.testing.assert_close(out.reshape(2, 3, 50, 8, 2).norm(dim=-1), pair_norms)
    torch.testing.assert_close(out.norm(dim=-1), x.norm(dim=-1), rtol=0, atol=1e-12)


def test_position_zero_is_the_identity_exactly():
    x = _randn(3, 7, 8, seed=1, dtype=torch.float32)
    assert torch.equal(apply_rotary(x, torch.zeros(7, dtype=torch.long)), x)


def test_score_after_rotation_depends_only_on_the_offset():
    q, k = _randn(32, seed=2), _randn(32, seed=3)
    starts = torch.tensor([0, 1, 5, 17, 100, 999, 4096, 12345], dtype=torch.float64)
    for offset in [0, 1, 3, 10, 64, 500, 2.5]:
        queries = apply_rotary(q.expand(len(starts), 32), starts + offset)  # query at m + offset
        keys = apply_rotary(k.expand(len(starts), 32), starts)  # key at m
        scores = (queries * keys).sum(-1)  # (len(starts),): one per start m
        unrotated = apply_rotary(q[None], torch.tensor([float(offset)])) @ k
        torch.testing.assert_close(scores, unrotated.expand(len(starts)), rtol=0, atol=1e-9)


def test_scores_of_different_offsets_differ():
    q, k = _randn(32, seed=4), _randn(32, seed=5)
    scores = (apply_rotary(q.expand(4, 32), torch.tensor([3, 4, 5, 6])) * k).sum(-1)
    assert scores.unique().numel() == 4


def test_rotary_equals_complex_multiplication():
    x, positions = _randn(2, 4, 9, 12, seed=6), torch.arange(9) * 11 + 3
    torch.testing.assert_close(
        apply_rotary(x, positions, base=500.0),
        _complex_rotary(x, positions, base=500.0),
        rtol=0,
        atol=1e-12,
    )


def test_rotary_is_chapter_08_offset_rotation_of_a_row():
    x = _randn(5, 10, seed=7, dtype=torch.float32)
    for k in [1, 7, 40]:
        rotated = apply_rotary(x, torch.full((5,), k))
        torch.testing.assert_close(rotated, x @ offset_rotation(k, 10), rtol=0, atol=1e-5)


def test_rotate_half_convention_is_the_same_rotation_of_permuted_features():
    x, positions = _randn(6, 8, seed=8), torch.arange(6) * 5
    halves = torch.cat((x[:, 0::2], x[:, 1::2]), dim=-1)  # pair i at features i and i + 4
    angles = rotary_angles(positions, 8).repeat(1, 2)  # (6, 8): each angle once per half
    first, second = halves[:, :4], halves[:, 4:]
    rotated_half = halves * torch.cos(angles) + torch.cat((-second, first), -1) * torch.sin(angles)
    ours = apply_rotary(x, positions)
    torch.testing.assert_close(rotated_half, torch.cat((ours[:, 0::2], ours[:, 1::2]), -1))


def test_batched_positions_rotate_each_sequence_by_its_own():
    x = _randn(2, 3, 4, 6, seed=9)  # (batch, heads, seq, dim)
    positions = torch.tensor([[0, 1, 2, 3], [10, 11, 12, 13]])
    out = apply_rotary(x, positions)
    torch.testing.assert_close(out[0], apply_rotary(x[0], positions[0]), rtol=0, atol=0)
    torch.testing.assert_close(out[1], apply_rotary(x[1], positions[1]), rtol=0, atol=0)


def test_rotary_keeps_dtype_and_accepts_float_positions():
    x = _randn(4, 8, seed=10, dtype=torch.bfloat16)
    out = apply_rotary(x, torch.tensor([0.0, 0.5, 1.0, 1.5]))
    assert out.dtype == torch.bfloat16 and out.shape == (4, 8)
    torch.testing.assert_close(out[0], x[0], rtol=0, atol=0)


def test_rotary_errors_name_the_problem():
    x = torch.zeros(2, 5, 6)
    with pytest.raises(ValueError, match="dim must be even: 5"):
        apply_rotary(torch.zeros(3, 5), torch.arange(3))
    with pytest.raises(ValueError, match=r"positions have length 4 but x \(2, 5, 6\) has seq=5"):
        apply_rotary(x, torch.arange(4))
    with pytest.raises(ValueError, match="base must be positive"):
        apply_rotary(x, torch.arange(5), base=0.0)
    with pytest.raises(ValueError, match="base must be positive"):
        rotary_frequencies(4, base=-2.0)
    with pytest.raises(ValueError, match=r"positions \(batch, seq\) = \(3, 5\) need x"):
        apply_rotary(x, torch.zeros(3, 5))
    with pytest.raises(ValueError, match=r"must be \(seq,\) or \(batch, seq\)"):
        apply_rotary(x, torch.zeros(2, 1, 5))
    with pytest.raises(TypeError, match="integers or floats, got dtype torch.bool"):
        apply_rotary(x, torch.ones(5, dtype=torch.bool))
    with pytest.raises(TypeError, match="positions must be a torch.Tensor"):
        apply_rotary(x, [0, 1, 2, 3, 4])
    with pytest.raises(TypeError, match="x must be a floating-point tensor"):
        apply_rotary(torch.zeros(2, 5, 6, dtype=torch.long), torch.arange(5))


# --- rotary attention ------------------------------------------------------------------------


def _rotary(kv_heads: int | None = None) -> MultiHeadAttention:
    torch.manual_seed(11)
    plain = MultiHeadAttention(16, 4, num_kv_heads=kv_heads).eval()
    return plain.rotary(base=100.0)


@pytest.mark.parametrize("kv_heads", [None, 2])
@pytest.mark.parametrize("fused", [False, True])
def test_rotary_attention_rotates_queries_and_keys_after_projection(kv_heads, fused):
    mha = _rotary(kv_heads)
    x = _randn(2, 6, 16, seed=12, dtype=torch.float32)
    mask = causal_mask(6)
    out, weights = mha(x, mask=mask, fused=fused)
    positions = torch.arange(6)
    q = apply_rotary(mha.split_heads(mha.query_projection(x)), positions, base=100.0)
    k = apply_rotary(mha.split_kv_heads(mha.key_projection(x)), positions, base=100.0)
    v = mha.split_kv_heads(mha.value_projection(x))
    k, v = mha.repeat_kv_heads(k), mha.repeat_kv_heads(v)
    heads = F.scaled_dot_product_attention(q, k, v, attn_mask=mask)
    torch.testing.assert_close(out, mha.output_projection(mha.merge_heads(heads)))
    assert (weights is None) == fused
    if not fused:
        assert weights.shape == (2, 4, 6, 6) and weights[0, 0, 0, 1].item() == 0.0


def test_rotary_attention_does_not_see_where_a_sequence_starts():
    """Padding in front moves every token 3 positions on; with the padding masked, the outputs
    of the real tokens stay the same (an added position table would change them)."""
    mha = _rotary()
    x = _randn(1, 5, 16, seed=13, dtype=torch.float32)
    padded = torch.cat([_randn(1, 3, 16, seed=14, dtype=torch.float32), x], dim=1)
    key_mask = torch.tensor([[False] * 3 + [True] * 5])
    out, _ = mha(x)
    shifted, _ = mha(padded, key_mask=key_mask)
    torch.testing.assert_close(shifted[:, 3:], out, rtol=0, atol=1e-5)
    plain = MultiHeadAttention(16, 4).eval()
    plain.load_state_dict(mha.state_dict())
    assert (plain(padded, key_mask=key_mask)[0][:, 3:] - plain(x)[0]).abs().max() < 1e-5
    assert (shifted[:, 3:] - plain(x)[0]).abs().max() > 1e-2  # rotary does change the output


def test_rotary_queries_stand_at_the_last_key_positions():
    mha = _rotary()
    x = _randn(1, 7, 16, seed=15, dtype=torch.float32)
    full, _ = mha(x, mask=causal_mask(7))
    last, _ = mha(x[:, 5:], x, x, mask=causal_mask(2, 7))
    torch.testing.assert_close(last, full[:, 5:])


def test_rotary_copy_keeps_weights_mode_and_sizes_and_refuses_bad_bases():
    torch.manual_seed(0)
    plain = MultiHeadAttention(12, 2, bias=False, dropout=0.25, num_kv_heads=1)
    rotary = plain.rotary()
    assert rotary.training and rotary.dropout_p == 0.25 and rotary.num_kv_heads == 1
    assert rotary.rotary_base == 10000.0 and rotary.query_projection.bias is None
    assert plain.rotary_base is None  # the original is left as it was
    torch.testing.assert_close(rotary.key_projection.weight, plain.key_projection.weight)
    assert rotary.key_projection.weight is not plain.key_projection.weight  # a copy
    with pytest.raises(ValueError, match="dim must be even: 3"):
        MultiHeadAttention(12, 4, rotary_base=10000.0)  # head_dim 3
    with pytest.raises(ValueError, match="base must be positive"):
        plain.rotary(base=-1.0)


def test_encoder_with_rotary_layers_and_no_table_learns_nothing_from_absolute_position():
    torch.manual_seed(0)
    config = TransformerConfig(vocab_size=7, d_model=16, num_heads=2, num_layers=2, d_ff=32)
    encoder = Encoder(config).eval()
    encoder.positions = torch.nn.Identity()
    for layer in encoder.layers:
        layer.attention = layer.attention.rotary()
    ids = torch.tensor([[3, 4, 5, 6]])
    padded = torch.tensor([[0, 0, 3, 4, 5, 6]])
    hidden, weights = encoder(ids, need_weights=True)
    shifted, _ = encoder(padded, key_mask=padded != 0)
    assert weights.shape == (1, 2, 2, 4, 4)
    torch.testing.assert_close(shifted[:, 2:], hidden, rtol=0, atol=1e-5)
