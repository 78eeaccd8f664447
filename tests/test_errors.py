"""Bad input fails early with a message that names the shapes or values at fault."""

import re

import numpy as np
import pytest
import torch
from torch import nn

from attnlib import reference
from attnlib.attention import MultiHeadAttention, attend
from attnlib.masks import causal_mask, combine_masks, masked_softmax, padding_mask
from attnlib.scores import GeneralScore, make_score


def _qkv(n_q=4, n_k=5, d_k=3, batch=(2,)):
    return torch.randn(*batch, n_q, d_k), torch.randn(*batch, n_k, d_k), torch.randn(*batch, n_k, 2)


def test_attend_mismatched_d_k():
    q, k, v = torch.randn(2, 4, 3), torch.randn(2, 5, 4), torch.randn(2, 5, 2)
    with pytest.raises(ValueError, match="keys have d_k=4 but queries have d_k=3"):
        attend(q, k, v)


def test_reference_mismatched_d_k():
    with pytest.raises(ValueError, match="keys have d_k=4 but queries have d_k=3"):
        reference.scaled_dot_product_attention(np.ones((2, 3)), np.ones((5, 4)), np.ones((5, 2)))


def test_attend_mismatched_batch_shapes():
    q, _, _ = _qkv(batch=(2,))
    _, k, v = _qkv(batch=(3,))
    message = "batch shapes do not match: queries (2,), keys (3,), values (3,)"
    with pytest.raises(ValueError, match=re.escape(message)):
        attend(q, k, v)


def test_attend_keys_values_count_mismatch():
    q, k, _ = _qkv()
    with pytest.raises(ValueError, match="keys have n_keys=5 but values have n_keys=4"):
        attend(q, k, torch.randn(2, 4, 2))


def test_attend_mask_that_does_not_broadcast():
    message = "mask of shape (3, 3) does not broadcast to the attention weights shape (2, 4, 5)"
    with pytest.raises(ValueError, match=re.escape(message)):
        attend(*_qkv(), mask=torch.ones(3, 3, dtype=torch.bool))


def test_attend_mask_that_would_enlarge_weights():
    message = "mask of shape (3, 2, 4, 5) would enlarge the attention weights shape (2, 4, 5)"
    with pytest.raises(ValueError, match=re.escape(message)):
        attend(*_qkv(), mask=torch.ones(3, 2, 4, 5, dtype=torch.bool))


def test_attend_float_mask_is_rejected():
    message = "mask must be boolean (True = may attend), got dtype torch.float32"
    with pytest.raises(TypeError, match=re.escape(message)):
        attend(*_qkv(), mask=torch.ones(2, 4, 5))


def test_masked_softmax_float_mask_is_rejected():
    with pytest.raises(TypeError, match=re.escape("mask must be boolean (True = may attend)")):
        masked_softmax(torch.randn(2, 3), torch.ones(2, 3))


def test_combine_masks_rejects_integer_mask():
    with pytest.raises(TypeError, match="masks must be boolean .* got dtype torch.int64"):
        combine_masks(causal_mask(3), torch.ones(3, 3, dtype=torch.int64))


def test_combine_masks_that_do_not_broadcast():
    message = "masks of shapes (2, 3), (4, 4) do not broadcast together"
    with pytest.raises(ValueError, match=re.escape(message)):
        combine_masks(torch.ones(2, 3, dtype=torch.bool), causal_mask(4))


def test_mha_num_heads_must_divide_d_model():
    with pytest.raises(ValueError, match="num_heads=3 does not divide d_model=8"):
        MultiHeadAttention(8, 3)


def test_attend_nan_in_input():
    q, k, v = _qkv()
    q[0, 1, 2] = float("nan")
    with pytest.raises(ValueError, match=re.escape("queries contains NaN (1 of 24 entries)")):
        attend(q, k, v)


def test_mha_nan_in_input():
    x = torch.randn(2, 3, 8)
    x[1, 0] = float("nan")
    with pytest.raises(ValueError, match=re.escape("query contains NaN (8 of 48 entries)")):
        MultiHeadAttention(8, 2)(x)


def test_attend_unknown_score_name():
    message = "unknown score 'cosine'; choose one of dot, scaled_dot, general, additive"
    with pytest.raises(ValueError, match=message):
        attend(*_qkv(), score="cosine")


def test_attend_learned_score_by_name_needs_building():
    message = "score 'general' learns parameters: build it once with attnlib.scores.make_score"
    with pytest.raises(ValueError, match=re.escape(message)):
        attend(*_qkv(), score="general")


def test_make_score_unknown_name():
    message = "unknown score 'cosine'; choose one of dot, scaled_dot, general, additive"
    with pytest.raises(ValueError, match=message):
        make_score("cosine")


def test_make_score_general_needs_widths():
    with pytest.raises(ValueError, match="score 'general' needs d_query and d_key"):
        make_score("general")


def test_general_score_wrong_query_width():
    with pytest.raises(ValueError, match="GeneralScore expects queries with d_q=6, got d_q=5"):
        GeneralScore(6, 4)(torch.randn(3, 5), torch.randn(2, 4))


def test_mha_wrong_feature_count():
    with pytest.raises(ValueError, match="query has 6 features but d_model=8"):
        MultiHeadAttention(8, 2)(torch.randn(2, 3, 6))


def test_mha_needs_three_dimensional_input():
    message = "query must be (batch, seq, d_model), got shape (1, 2, 3, 8)"
    with pytest.raises(ValueError, match=re.escape(message)):
        MultiHeadAttention(8, 2)(torch.randn(1, 2, 3, 8))


def test_mha_batch_mismatch_between_query_and_key():
    with pytest.raises(ValueError, match="batch sizes differ: query 2, key 3, value 3"):
        MultiHeadAttention(8, 2)(torch.randn(2, 4, 8), torch.randn(3, 5, 8))


# Every mask MultiHeadAttention refuses, with its message: the same on both paths.
MHA_MASK_REFUSALS = {
    "wrong key count": (
        {"mask": padding_mask([6, 2], 6)},
        ValueError,
        "mask of shape (2, 1, 6) does not fit (batch, n_queries, n_keys) = (2, 4, 4)",
    ),
    "padding mask as a 2-D mask": (
        {"mask": torch.ones(2, 4, dtype=torch.bool)},
        ValueError,
        "mask of shape (2, 4) does not fit (n_queries, n_keys) = (3, 4); a 2-D mask is always "
        "(n_queries, n_keys): pass a (batch, n_keys) padding mask as key_mask",
    ),
    "1-D mask": (
        {"mask": torch.ones(4, dtype=torch.bool)},
        ValueError,
        "mask must be (n_queries, n_keys), (batch, n_queries, n_keys) or (batch, heads, "
        "n_queries, n_keys), got shape (4,); a padding mask of shape (batch, n_keys) goes in "
        "key_mask",
    ),
    "0-d mask": (
        {"mask": torch.tensor(True)},
        ValueError,
        "mask must be (n_queries, n_keys), (batch, n_queries, n_keys) or (batch, heads, "
        "n_queries, n_keys), got shape ()",
    ),
    "5-D mask": (
        {"mask": torch.ones(1, 2, 2, 3, 4, dtype=torch.bool)},
        ValueError,
        "got shape (1, 2, 2, 3, 4)",
    ),
    "wrong head count": (
        {"mask": torch.ones(2, 3, 3, 4, dtype=torch.bool)},
        ValueError,
        "mask of shape (2, 3, 3, 4) does not fit (batch, heads, n_queries, n_keys) = (2, 2, 3, 4)",
    ),
    "float mask": (
        {"mask": torch.ones(3, 4)},
        TypeError,
        "mask must be boolean (True = may attend), got dtype torch.float32",
    ),
    "list mask": ({"mask": [[True] * 4] * 3}, TypeError, "mask must be a torch.Tensor, got list"),
    "key mask with a query axis": (
        {"key_mask": padding_mask([4, 2], 4)},
        ValueError,
        "key_mask must be (batch, n_keys) = (2, 4), got shape (2, 1, 4)",
    ),
    "key mask of the wrong length": (
        {"key_mask": torch.ones(2, 3, dtype=torch.bool)},
        ValueError,
        "key_mask must be (batch, n_keys) = (2, 4), got shape (2, 3)",
    ),
    "integer key mask": (
        {"key_mask": torch.ones(2, 4, dtype=torch.int64)},
        TypeError,
        "key_mask must be boolean (True = a real key that may be attended), got dtype torch.int64",
    ),
}


@pytest.mark.parametrize("fused", [False, True], ids=["scratch", "fused"])
@pytest.mark.parametrize("case", list(MHA_MASK_REFUSALS))
def test_mha_refuses_masks_alike_on_both_paths(case, fused):
    masks, error, message = MHA_MASK_REFUSALS[case]
    query, key = torch.randn(2, 3, 8), torch.randn(2, 4, 8)
    if case == "wrong key count":
        query = key = torch.randn(2, 4, 8)
    with pytest.raises(error, match=re.escape(message)):
        MultiHeadAttention(8, 2)(query, key, fused=fused, **masks)


def test_padding_mask_length_longer_than_max_len():
    with pytest.raises(ValueError, match="a length of 5 does not fit in max_len=4"):
        padding_mask([3, 5], max_len=4)


def test_padding_mask_negative_lengths():
    with pytest.raises(ValueError, match=re.escape("lengths must be non-negative, got [2, -1]")):
        padding_mask([2, -1])


def test_padding_mask_float_lengths():
    with pytest.raises(TypeError, match="lengths must be integers, got dtype torch.float32"):
        padding_mask(torch.tensor([2.0, 3.0]))


def test_causal_mask_with_fewer_keys_than_queries():
    with pytest.raises(ValueError, match="causal_mask needs n_keys >= n_queries, got 2 < 3"):
        causal_mask(3, 2)


def test_reference_softmax_temperature_zero():
    with pytest.raises(ValueError, match="temperature must be positive, got 0"):
        reference.softmax(np.ones(3), temperature=0)


def test_attend_temperature_negative():
    with pytest.raises(ValueError, match="temperature must be positive, got -1.0"):
        attend(*_qkv(), temperature=-1.0)


def test_attend_integer_inputs():
    q, k, v = (torch.ones(2, 3, dtype=torch.int64) for _ in range(3))
    with pytest.raises(TypeError, match="queries must be a floating-point tensor, got dtype"):
        attend(q, k, v)


def test_attend_numpy_input_is_not_a_tensor():
    _, k, v = _qkv()
    with pytest.raises(TypeError, match="queries must be a torch.Tensor, got ndarray"):
        attend(np.ones((2, 4, 3)), k, v)


def test_load_from_torch_with_a_different_size():
    message = "torch module has embed_dim=16, num_heads=2; this one has d_model=8, num_heads=2"
    with pytest.raises(ValueError, match=message):
        MultiHeadAttention(8, 2).load_from_torch(nn.MultiheadAttention(16, 2, batch_first=True))


@pytest.mark.parametrize(("ours", "theirs"), [(True, False), (False, True)])
def test_load_from_torch_with_different_bias(ours, theirs):
    message = f"torch module has bias={theirs} but this one has bias={ours}"
    reference = nn.MultiheadAttention(8, 2, bias=theirs, batch_first=True)
    with pytest.raises(ValueError, match=message):
        MultiHeadAttention(8, 2, bias=ours).load_from_torch(reference)


def test_load_from_torch_with_bias_kv():
    reference = nn.MultiheadAttention(8, 2, add_bias_kv=True, batch_first=True)
    with pytest.raises(ValueError, match="add_bias_kv or add_zero_attn cannot be copied"):
        MultiHeadAttention(8, 2).load_from_torch(reference)


# Part II: the seq2seq models, batching and the date task's configuration.


def _seq2seq():
    from attnlib.data.text import CharVocab
    from attnlib.seq2seq import build_model

    source, target = CharVocab("abcdefgh"), CharVocab("abcdef")  # 12 and 10 symbols
    return build_model("bahdanau", source, target, 8, 16, 8)


def test_source_ids_outside_the_vocabulary():
    model = _seq2seq()
    source = torch.tensor([[4, 5, 12], [4, 5, 6]])
    message = "source id 12 is outside the encoder's vocabulary of 12 symbols (ids 0 to 11)"
    with pytest.raises(ValueError, match=re.escape(message)):
        model(source, torch.tensor([3, 3]), torch.zeros(2, 2, dtype=torch.long))
    with pytest.raises(ValueError, match="source id -1 is outside"):
        model.greedy_decode(torch.tensor([[4, -1]]), torch.tensor([2]))


def test_lengths_that_disagree_with_the_batch():
    model = _seq2seq()
    message = "lengths of shape (3,) do not fit a batch of 2 sources"
    with pytest.raises(ValueError, match=re.escape(message)):
        model.greedy_decode(torch.ones(2, 4, dtype=torch.long), torch.tensor([4, 4, 4]))


def test_lengths_beyond_the_padded_length_or_zero():
    model = _seq2seq()
    message = "lengths must lie between 1 and the padded source length 4; got row 1: 5, row 2: 0"
    with pytest.raises(ValueError, match=re.escape(message)):
        model.greedy_decode(torch.ones(3, 4, dtype=torch.long), torch.tensor([4, 5, 0]))


def test_float_lengths_and_float_source_are_refused():
    model = _seq2seq()
    with pytest.raises(TypeError, match="lengths must be integers, got dtype torch.float32"):
        model.greedy_decode(torch.ones(1, 4, dtype=torch.long), torch.tensor([4.0]))
    with pytest.raises(TypeError, match="source ids must be integers, got dtype torch.float32"):
        model.greedy_decode(torch.ones(1, 4), torch.tensor([4]))


@pytest.mark.parametrize("max_steps", [0, -1, 2.0])
def test_greedy_decode_needs_a_positive_int_of_steps(max_steps):
    model = _seq2seq()
    message = f"max_steps must be a positive integer, got {max_steps!r}"
    with pytest.raises(ValueError, match=re.escape(message)):
        model.greedy_decode(torch.ones(1, 4, dtype=torch.long), torch.tensor([4]), max_steps)


def test_make_batches_refuses_a_float_batch_size():
    from attnlib.data.text import CharVocab, make_batches

    vocab = CharVocab("ab")
    with pytest.raises(TypeError, match="batch_size must be an int, got float 32.0"):
        make_batches([("a", "b")], vocab, vocab, 32.0)


@pytest.mark.parametrize("field", ["epochs", "batch_size"])
def test_date_task_config_refuses_floats(field):
    from attnlib.tasks.dates import DateTaskConfig

    with pytest.raises(TypeError, match=f"DateTaskConfig.{field} must be an int, got float 3.0"):
        DateTaskConfig(**{field: 3.0})
    with pytest.raises(ValueError, match=f"DateTaskConfig.{field} must be positive, got 0"):
        DateTaskConfig(**{field: 0})
