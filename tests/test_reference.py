"""The NumPy oracle: the worked example's numbers and the laws of softmax."""

import math

import numpy as np
import pytest

from attnlib import reference
from attnlib.reference import scaled_dot_product_attention, softmax, worked_example

KEYS = np.array([[0, 1, 1], [4, 4, 0], [2, 3, 1]], dtype=float)
VALUES = np.array([[1, 2, 3], [2, 8, 0], [2, 6, 3]], dtype=float)
QUERIES = np.array([[1, 0, 2], [2, 2, 2], [2, 1, 3]], dtype=float)


def exact_weights_of_input_1() -> np.ndarray:
    """softmax([2, 4, 4]) from its formula: [e^2, e^4, e^4] / (e^2 + 2 e^4)."""
    total = math.exp(2) + 2 * math.exp(4)
    return np.array([math.exp(2), math.exp(4), math.exp(4)]) / total


@pytest.mark.parametrize(
    ("field", "expected"), [("keys", KEYS), ("values", VALUES), ("queries", QUERIES)]
)
def test_worked_example_projections(field, expected):
    np.testing.assert_array_equal(getattr(worked_example(), field), expected)


def test_worked_example_scores_of_input_1():
    np.testing.assert_array_equal(worked_example().scores[0], [2, 4, 4])


def test_exact_softmax_of_input_1_is_known():
    np.testing.assert_allclose(exact_weights_of_input_1(), [0.0634, 0.4683, 0.4683], atol=5e-5)


def test_worked_example_weights_of_input_1_match_formula():
    np.testing.assert_allclose(worked_example().weights[0], exact_weights_of_input_1(), atol=1e-12)


def test_worked_example_output_1_matches_formula():
    expected = exact_weights_of_input_1() @ VALUES
    np.testing.assert_allclose(expected, [1.9366, 6.6831, 1.5951], atol=5e-5)
    np.testing.assert_allclose(worked_example().outputs[0], expected, atol=5e-5)


def test_worked_example_output_1_is_not_the_rounded_article_value():
    assert not np.allclose(worked_example().outputs[0], [2.0, 7.0, 1.5], atol=1e-2)


def test_worked_example_is_dot_product_attention():
    output, weights = reference.dot_product_attention(QUERIES, KEYS, VALUES)
    np.testing.assert_allclose(output, worked_example().outputs, atol=1e-12)
    np.testing.assert_allclose(weights, worked_example().weights, atol=1e-12)


def test_softmax_rows_sum_to_one():
    rows = np.random.default_rng(0).normal(size=(6, 9)) * 5
    np.testing.assert_allclose(softmax(rows).sum(axis=-1), np.ones(6), atol=1e-12)


def test_softmax_invariant_to_adding_a_constant():
    row = np.array([0.5, -1.0, 3.0, 2.0])
    np.testing.assert_allclose(softmax(row + 100.0), softmax(row), atol=1e-12)


def test_softmax_small_temperature_approaches_one_hot_argmax():
    weights = softmax(np.array([1.0, 3.0, 2.9, -2.0]), temperature=1e-3)
    np.testing.assert_allclose(weights, [0.0, 1.0, 0.0, 0.0], atol=1e-12)


def test_softmax_large_temperature_approaches_uniform():
    weights = softmax(np.array([1.0, 3.0, 2.0, -2.0]), temperature=1e6)
    np.testing.assert_allclose(weights, np.full(4, 0.25), atol=1e-5)


def test_softmax_of_large_inputs_does_not_overflow():
    weights = softmax(np.array([1000.0, 1000.0, 999.0]))
    e = math.exp(-1.0)
    np.testing.assert_allclose(weights, np.array([1.0, 1.0, e]) / (2 + e), atol=1e-12)


@pytest.mark.parametrize("temperature", [0.0, -1.0, float("nan")])
def test_softmax_rejects_non_positive_temperature(temperature):
    with pytest.raises(ValueError, match="temperature must be positive"):
        softmax(np.array([1.0, 2.0]), temperature=temperature)


def test_scaled_dot_product_attention_equals_formula():
    rng = np.random.default_rng(1)
    q, k, v = rng.normal(size=(4, 5)), rng.normal(size=(6, 5)), rng.normal(size=(6, 3))
    scores = q @ k.T / np.sqrt(5)
    weights = np.exp(scores) / np.exp(scores).sum(axis=1, keepdims=True)
    output, got_weights = scaled_dot_product_attention(q, k, v)
    np.testing.assert_allclose(got_weights, weights, atol=1e-12)
    np.testing.assert_allclose(output, weights @ v, atol=1e-12)


# --- chapters 07-09: the oracles agree with attnlib's torch code ---


def test_split_heads_takes_column_blocks_and_merge_undoes_it():
    x = np.arange(24.0).reshape(2, 12)
    heads = reference.split_heads(x, 3)
    assert heads.shape == (3, 2, 4)
    np.testing.assert_array_equal(heads[1], x[:, 4:8])
    np.testing.assert_array_equal(reference.merge_heads(heads), x)
    batched = np.stack([x, -x])
    assert reference.split_heads(batched, 4).shape == (2, 4, 2, 3)
    with pytest.raises(ValueError, match="num_heads=5 does not divide d_model=12"):
        reference.split_heads(x, 5)


@pytest.mark.parametrize(("d_model", "num_heads"), [(8, 1), (8, 2), (8, 4), (12, 3), (6, 6)])
def test_multi_head_weights_match_attnlib_multi_head_attention(d_model, num_heads):
    import torch

    from attnlib.attention import MultiHeadAttention

    torch.manual_seed(d_model + num_heads)
    module = MultiHeadAttention(d_model, num_heads, bias=False).double().eval()
    x = torch.randn(1, 5, d_model, dtype=torch.float64)
    with torch.no_grad():
        output, weights = module(x)
    # nn.Linear computes x @ weight.T, so the oracle's W_Q is the transposed weight.
    w_q, w_k, w_v = (
        p.weight.detach().numpy().T
        for p in (module.query_projection, module.key_projection, module.value_projection)
    )
    result = reference.multi_head_attention(x[0].numpy(), w_q, w_k, w_v, num_heads)
    np.testing.assert_allclose(result.weights, weights[0].numpy(), atol=1e-12)
    merged = result.outputs @ module.output_projection.weight.detach().numpy().T
    np.testing.assert_allclose(merged, output[0].numpy(), atol=1e-12)
    np.testing.assert_allclose(
        reference.multi_head_weights(x[0].numpy(), w_q, w_k, w_v, num_heads), result.weights
    )


def test_scaling_by_d_model_is_dividing_the_head_scores_by_sqrt_heads_more():
    rng = np.random.default_rng(3)
    x, w_q, w_k, w_v = rng.normal(size=(4, 8)), *rng.normal(size=(3, 8, 8))
    right = reference.multi_head_attention(x, w_q, w_k, w_v, 4)
    bug = reference.multi_head_attention(x, w_q, w_k, w_v, 4, scale_by="model")
    np.testing.assert_allclose(bug.scores * np.sqrt(4), right.scores, atol=1e-12)
    assert reference.entropy(bug.weights).mean() > reference.entropy(right.weights).mean()
    one_head = reference.multi_head_attention(x, w_q, w_k, w_v, 1, scale_by="model")
    np.testing.assert_allclose(
        one_head.weights, reference.multi_head_attention(x, w_q, w_k, w_v, 1).weights
    )
    with pytest.raises(ValueError, match="scale_by must be"):
        reference.multi_head_attention(x, w_q, w_k, w_v, 4, scale_by="heads")


def test_entropy_of_uniform_and_one_hot():
    np.testing.assert_allclose(reference.entropy(np.full(4, 0.25)), math.log(4), atol=1e-15)
    assert reference.entropy(np.array([0.0, 1.0, 0.0])) == 0.0


@pytest.mark.parametrize(("length", "d_model"), [(50, 64), (20, 7), (3, 1), (0, 4), (400, 16)])
def test_sinusoidal_encoding_matches_attnlib_transformer(length, d_model):
    from attnlib.transformer import sinusoidal_encoding

    table = reference.sinusoidal_encoding(length, d_model)
    assert table.shape == (length, d_model)
    np.testing.assert_allclose(table, sinusoidal_encoding(length, d_model).numpy(), atol=1e-6)


def test_sinusoidal_encoding_formula():
    table = reference.sinusoidal_encoding(30, 10)
    pos, i = 17, 3
    np.testing.assert_allclose(table[pos, 2 * i], math.sin(pos / 10000 ** (2 * i / 10)))
    np.testing.assert_allclose(table[pos, 2 * i + 1], math.cos(pos / 10000 ** (2 * i / 10)))
    np.testing.assert_allclose(reference.positional_encoding(np.arange(30), 10), table)


@pytest.mark.parametrize(("offset", "d_model"), [(0, 8), (5, 64), (-3, 16), (2.5, 7), (40, 2)])
def test_offset_rotation_matches_attnlib_transformer(offset, d_model):
    from attnlib.transformer import offset_rotation

    rotation = reference.offset_rotation(offset, d_model)
    np.testing.assert_allclose(rotation, offset_rotation(offset, d_model).numpy(), atol=1e-6)


@pytest.mark.parametrize("d_model", [64, 16, 7, 2])
def test_offset_rotation_moves_every_position_by_k(d_model):
    pairs = 2 * (d_model // 2)
    table = reference.sinusoidal_encoding(200, d_model)
    for offset in (0, 1, 7, 50):
        rotation = reference.offset_rotation(offset, d_model)
        moved = table[: 200 - offset, :pairs] @ rotation.T  # row pos -> M(k) PE(pos)
        np.testing.assert_allclose(moved, table[offset:, :pairs], atol=1e-12)
        assert reference.rotation_error(13, offset, d_model) < 1e-12


def test_encoding_similarity_depends_on_distance_only():
    deltas = np.arange(-5, 60)
    first = reference.encoding_similarity(0, deltas, 64)
    np.testing.assert_allclose(reference.encoding_similarity(37, deltas, 64), first, atol=1e-12)
    np.testing.assert_allclose(first, np.cos(np.outer(deltas, reference.frequencies(64))).sum(1))
    assert first[5] == pytest.approx(32.0)  # Δ = 0: |PE|² = d_model / 2
    np.testing.assert_allclose(first[5 - 3], first[5 + 3], atol=1e-12)  # symmetric in Δ


def test_padding_and_causal_masks_match_attnlib_masks():
    import torch

    from attnlib import masks

    for lengths, max_len in (([3, 1, 4], 5), ([2, 2], None), ([0, 3], 3)):
        want = masks.padding_mask(torch.tensor(lengths), max_len).numpy()
        np.testing.assert_array_equal(reference.padding_mask(lengths, max_len), want)
    for n_queries, n_keys in ((4, None), (3, 5), (1, 1)):
        want = masks.causal_mask(n_queries, n_keys).numpy()
        np.testing.assert_array_equal(reference.causal_mask(n_queries, n_keys), want)


@pytest.mark.parametrize("kind", reference.MASK_KINDS)
@pytest.mark.parametrize(("length", "row"), [(6, None), (4, None), (1, None), (3, 2), (6, 0)])
def test_masked_softmax_matches_attnlib_masks(kind, length, row):
    import torch

    from attnlib import masks

    scores = np.random.default_rng(length).normal(size=(6, 6)) * 3
    mask = reference.attention_mask(kind, 6, length, row)
    combined = masks.combine_masks(
        masks.padding_mask([length], 6)[0] if "padding" in kind else None,
        masks.causal_mask(6) if "causal" in kind else None,
    )
    want_mask = np.ones((6, 6), bool) if combined is None else combined.expand(6, 6).numpy().copy()
    if row is not None:
        want_mask[row] = False
    np.testing.assert_array_equal(mask, want_mask)
    weights = reference.masked_softmax(scores, mask)
    want = masks.masked_softmax(torch.tensor(scores), torch.tensor(mask)).numpy()
    np.testing.assert_allclose(weights, want, atol=1e-12)
    assert not np.isnan(weights).any()
    for fill in (-1e9, 0.0):
        filled = torch.tensor(scores).masked_fill(~torch.tensor(mask), fill)
        np.testing.assert_allclose(
            reference.masked_softmax(scores, mask, fill=fill),
            torch.softmax(filled, dim=-1).numpy(),
            atol=1e-12,
        )


def test_masked_softmax_fills():
    scores = np.array([[1.0, 2.0, 3.0], [0.5, 0.5, 0.5]])
    mask = np.array([[True, True, False], [False, False, False]])
    exact = reference.masked_softmax(scores, mask)
    np.testing.assert_array_equal(exact[1], 0.0)  # a fully masked row: zeros, never NaN
    np.testing.assert_allclose(exact[0], [*softmax(np.array([1.0, 2.0])), 0.0])
    large = reference.masked_softmax(scores, mask, fill=-1e9)
    np.testing.assert_array_equal(large[0], exact[0])
    np.testing.assert_allclose(large[1], 1 / 3)  # -1e9 spreads a fully masked row evenly
    assert reference.masked_softmax(scores, mask, fill=0.0)[0, 2] > 0.0  # 0 leaks weight
    np.testing.assert_allclose(reference.masked_softmax(scores), softmax(scores))
    with pytest.raises(ValueError, match="fill must be finite or -inf"):
        reference.masked_softmax(scores, mask, fill=np.inf)
    with pytest.raises(ValueError, match="kind must be one of"):
        reference.attention_mask("diagonal", 3)
