"""Laws that hold for any input: softmax sums to one, self-attention is permutation-equivariant."""

import numpy as np
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra.numpy import array_shapes, arrays

from attnlib.attention import MultiHeadAttention
from attnlib.masks import masked_softmax
from attnlib.reference import softmax

SETTINGS = settings(max_examples=50, deadline=None)
FINITE64 = st.floats(allow_nan=False, allow_infinity=False)
FINITE32 = st.floats(allow_nan=False, allow_infinity=False, width=32)


@SETTINGS
@given(arrays(np.float64, array_shapes(min_dims=1, max_dims=3, max_side=6), elements=FINITE64))
def test_softmax_rows_sum_to_one_for_any_finite_array(scores):
    np.testing.assert_allclose(softmax(scores).sum(axis=-1), 1.0, atol=1e-12)


@SETTINGS
@given(st.data(), array_shapes(min_dims=2, max_dims=3, max_side=6))
def test_masked_softmax_rows_sum_to_one_or_zero(data, shape):
    scores = torch.from_numpy(data.draw(arrays(np.float32, shape, elements=FINITE32)))
    mask = torch.from_numpy(data.draw(arrays(np.bool_, shape)))
    sums = masked_softmax(scores, mask).sum(dim=-1)
    expected = mask.any(dim=-1).to(sums.dtype)
    torch.testing.assert_close(sums, expected, rtol=0, atol=1e-5)


@SETTINGS
@given(
    batch=st.integers(1, 3),
    seq=st.integers(1, 8),
    heads=st.integers(1, 4),
    head_dim=st.integers(1, 4),
    fused=st.booleans(),
    data=st.data(),
)
def test_self_attention_is_permutation_equivariant(batch, seq, heads, head_dim, fused, data):
    order = torch.tensor(data.draw(st.permutations(range(seq))))
    torch.manual_seed(data.draw(st.integers(0, 2**16)))
    mha = MultiHeadAttention(heads * head_dim, heads).double().eval()
    x = torch.randn(batch, seq, heads * head_dim, dtype=torch.float64)
    with torch.no_grad():
        out, weights = mha(x, fused=fused)
        out_permuted, weights_permuted = mha(x[:, order], fused=fused)
    torch.testing.assert_close(out_permuted, out[:, order], rtol=1e-10, atol=1e-10)
    if weights is not None:
        expected = weights[:, :, order][:, :, :, order]
        torch.testing.assert_close(weights_permuted, expected, rtol=1e-10, atol=1e-10)
