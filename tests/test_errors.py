"""Bad input fails early with a message that names the shapes or values at fault."""

import re

import numpy as np
import pytest
import torch
from torch import nn

from attnlib import reference
from attnlib._checks import check_tensor
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


# --- flags and rates: one validation in every constructor -----------------------------------


def _config(**changes):
    from attnlib.encoder import TransformerConfig

    small = {"vocab_size": 37, "d_model": 16, "num_heads": 2, "num_layers": 1, "d_ff": 32}
    return TransformerConfig(**{**small, **changes})


@pytest.mark.parametrize("value", ["yes", "False", None, 1, np.bool_(True)])
def test_config_norm_first_must_be_a_bool(value):
    # Before: "False", "yes" (and 1) built a pre-LN model, None a post-LN one.
    message = f"norm_first must be True or False, got {type(value).__name__} {value!r}"
    with pytest.raises(TypeError, match=re.escape(message)):
        _config(norm_first=value)


def test_config_fused_must_be_a_bool():
    with pytest.raises(TypeError, match="fused must be True or False, got str 'no'"):
        _config(fused="no")


def test_encoder_layer_norm_first_must_be_a_bool():
    from attnlib.transformer import EncoderLayer

    with pytest.raises(TypeError, match="norm_first must be True or False, got str 'False'"):
        EncoderLayer(8, 2, 16, norm_first="False")


def test_encoder_layer_fused_must_be_a_bool():
    from attnlib.transformer import EncoderLayer

    with pytest.raises(TypeError, match="fused must be True or False, got NoneType None"):
        EncoderLayer(8, 2, 16, fused=None)


def test_mha_forward_fused_must_be_a_bool():
    with pytest.raises(TypeError, match="fused must be True or False, got str 'no'"):
        MultiHeadAttention(8, 2)(torch.randn(1, 3, 8), fused="no")


def test_mha_bias_must_be_a_bool():
    with pytest.raises(TypeError, match="bias must be True or False, got int 0"):
        MultiHeadAttention(8, 2, bias=0)


@pytest.mark.parametrize("flag", ["input_feeding", "bidirectional"])
def test_build_model_flags_must_be_bools(flag):
    from attnlib.data.text import CharVocab
    from attnlib.seq2seq import build_model

    vocab = CharVocab("abc")
    with pytest.raises(TypeError, match=f"{flag} must be True or False, got str 'no'"):
        build_model("luong-general", vocab, vocab, 8, 16, 8, **{flag: "no"})


def test_encoder_need_weights_must_be_a_bool():
    from attnlib.encoder import Encoder

    ids = torch.ones(1, 3, dtype=torch.long)
    with pytest.raises(TypeError, match="need_weights must be True or False, got str 'yes'"):
        Encoder(_config())(ids, need_weights="yes")


@pytest.mark.parametrize("dropout", [1.0, -0.1, 1.5])
def test_encoder_layer_refuses_a_dropout_outside_0_1(dropout):
    from attnlib.transformer import EncoderLayer

    # Before: EncoderLayer accepted 1.0 though TransformerConfig refused it.
    with pytest.raises(ValueError, match=re.escape(f"dropout must be in [0, 1), got {dropout}")):
        EncoderLayer(8, 2, 16, dropout=dropout)


@pytest.mark.parametrize("dropout", [1.0, -0.1])
def test_mha_refuses_a_dropout_outside_0_1(dropout):
    with pytest.raises(ValueError, match=re.escape(f"dropout must be in [0, 1), got {dropout}")):
        MultiHeadAttention(8, 2, dropout=dropout)


def test_feed_forward_refuses_a_dropout_outside_0_1():
    from attnlib.transformer import FeedForward

    with pytest.raises(ValueError, match=re.escape("dropout must be in [0, 1), got 1.0")):
        FeedForward(8, 16, dropout=1.0)


@pytest.mark.parametrize(
    ("dropout", "message"),
    [("0.1", "dropout must be a number, got str '0.1'"), (True, "dropout must be a number")],
)
def test_dropout_must_be_a_number(dropout, message):
    with pytest.raises(TypeError, match=re.escape(message)):
        _config(dropout=dropout)


# --- Part I-II surface: counts, lengths, dates, batches --------------------------------------


def test_padding_mask_refuses_a_float_max_len():
    with pytest.raises(TypeError, match="max_len must be an int >= 0, got float 2.5"):
        padding_mask([1, 2], max_len=2.5)


def test_padding_mask_refuses_none():
    with pytest.raises(TypeError, match="lengths must be a tensor or a list of ints, got NoneType"):
        padding_mask(None)


def test_padding_mask_of_no_lengths_is_empty():
    # Before: [] failed with "lengths must be integers, got float32".
    assert padding_mask([], 4).shape == (0, 1, 4)
    assert padding_mask(torch.tensor([], dtype=torch.long)).shape == (0, 1, 0)


def test_padding_mask_takes_numpy_lengths_and_max_len():
    mask = padding_mask(np.array([1, 3]), np.int64(4))
    assert mask.tolist() == [[[True, False, False, False]], [[True, True, True, False]]]


@pytest.mark.parametrize(("args", "name"), [((2.5,), "n_queries"), ((2, 3.0), "n_keys")])
def test_causal_mask_refuses_float_sizes(args, name):
    with pytest.raises(TypeError, match=f"{name} must be an int, got float"):
        causal_mask(*args)


def test_causal_mask_takes_numpy_sizes():
    assert torch.equal(causal_mask(np.int64(3)), causal_mask(3))


@pytest.mark.parametrize(
    ("args", "message"),
    [((8.0, 2), "d_model must be an int, got float 8.0"), ((8, 2.0), "num_heads must be an int")],
)
def test_mha_refuses_float_sizes(args, message):
    with pytest.raises(TypeError, match=message):
        MultiHeadAttention(*args)  # before: failed deep inside torch


def test_attend_refuses_a_temperature_that_is_not_a_number():
    with pytest.raises(TypeError, match="temperature must be a number, got str 'hot'"):
        attend(*_qkv(), temperature="hot")


def test_attend_refuses_a_nan_temperature():
    with pytest.raises(ValueError, match="temperature must be finite, got nan"):
        attend(*_qkv(), temperature=float("nan"))


def test_generate_pairs_takes_a_numpy_count():
    from attnlib.data.dates import generate_pairs

    assert generate_pairs(np.int64(5), seed=3) == generate_pairs(5, seed=3)


@pytest.mark.parametrize(("n", "shown"), [(True, "bool True"), (5.0, "float 5.0")])
def test_generate_pairs_refuses_bools_and_floats(n, shown):
    from attnlib.data.dates import generate_pairs

    with pytest.raises(TypeError, match=f"n must be an int, got {shown}"):
        generate_pairs(n)


def test_format_date_refuses_a_string():
    from attnlib.data.dates import format_date

    message = "day must be a datetime.date, got str '2026-01-01'"
    with pytest.raises(TypeError, match=re.escape(message)):
        format_date("2026-01-01", "dd/mm/yyyy")  # before: an AttributeError


def test_make_batches_refuses_an_empty_source():
    from attnlib.data.text import CharVocab, make_batches

    vocab = CharVocab("abc")
    message = "pair 1 has an empty source ('', 'c'): the encoder needs at least one symbol"
    with pytest.raises(ValueError, match=re.escape(message)):
        make_batches([("a", "b"), ("", "c")], vocab, vocab, 2)


def test_make_batches_refuses_a_pair_that_is_not_two_strings():
    from attnlib.data.text import CharVocab, make_batches

    vocab = CharVocab("abc")
    with pytest.raises(TypeError, match=re.escape("pair 0 must be (source, target), two strings")):
        make_batches([("a", "b", "c")], vocab, vocab, 2)


def test_make_batches_takes_a_numpy_batch_size():
    from attnlib.data.text import CharVocab, make_batches

    vocab = CharVocab("abc")
    assert len(make_batches([("a", "b")] * 3, vocab, vocab, np.int64(2))) == 2


def test_seq2seq_takes_lengths_as_a_list():
    model = _seq2seq().eval()
    source, target = torch.tensor([[4, 5, 6], [4, 5, 0]]), torch.tensor([[1, 4], [1, 5]])
    with torch.no_grad():
        from_list, _ = model(source, [3, 2], target)
        from_tensor, _ = model(source, torch.tensor([3, 2]), target)
        decoded = model.greedy_decode(source, [3, 2], max_steps=3)
    assert torch.equal(from_list, from_tensor)  # before: AttributeError: no attribute 'to'
    assert decoded.tokens.shape[0] == 2


def test_seq2seq_refuses_lengths_of_none():
    with pytest.raises(TypeError, match="lengths must be a tensor or a list of ints, got NoneType"):
        _seq2seq()(torch.ones(1, 3, dtype=torch.long), None, torch.ones(1, 2, dtype=torch.long))


# --- infinities ------------------------------------------------------------------------------


@pytest.mark.parametrize("name", ["queries", "keys", "values"])
def test_attend_refuses_inf(name):
    q, k, v = _qkv()
    {"queries": q, "keys": k, "values": v}[name][0, 1, 0] = -float("inf")
    with pytest.raises(ValueError, match=re.escape(f"{name} contains ±inf (1 of")):
        attend(q, k, v)  # before: NaN everywhere


def test_attend_counts_nan_and_inf_together():
    q, k, v = _qkv()
    q[0, 0, :2] = float("nan")
    q[1, 0, 0] = float("inf")
    message = "queries contains NaN (2 of 24 entries) and ±inf (1 of 24 entries)"
    with pytest.raises(ValueError, match=re.escape(message)):
        attend(q, k, v)


def test_mha_refuses_inf_at_a_padded_position():
    # An inf at a padded key would poison the real tokens: 0 weight x inf is NaN.
    x = torch.randn(2, 4, 8)
    x[1, 3] = float("inf")
    key_mask = padding_mask([4, 3], 4).squeeze(1)
    with pytest.raises(ValueError, match=re.escape("query contains ±inf (8 of 64 entries)")):
        MultiHeadAttention(8, 2)(x, key_mask=key_mask)


def test_encoder_layer_refuses_inf():
    from attnlib.transformer import EncoderLayer

    x = torch.randn(2, 3, 8)
    x[0, 2, 5] = float("-inf")
    with pytest.raises(ValueError, match=re.escape("x contains ±inf (1 of 48 entries)")):
        EncoderLayer(8, 2, 16).checked_forward(x)


def test_score_functions_refuse_inf():
    from attnlib.scores import dot_score

    keys = torch.randn(5, 3)
    keys[2, 1] = float("inf")
    with pytest.raises(ValueError, match=re.escape("keys contains ±inf (1 of 15 entries)")):
        dot_score(torch.randn(4, 3), keys)


# --- types that used to reach torch's internals ----------------------------------------------


def test_attend_refuses_mixed_dtypes():
    q, k, v = _qkv()
    message = "dtypes differ: queries torch.float64, keys torch.float32, values torch.float32"
    with pytest.raises(TypeError, match=re.escape(message)):
        attend(q.double(), k, v)


def test_mha_refuses_inputs_of_different_dtypes():
    message = "dtypes differ: query torch.float32, key torch.float64, value torch.float64"
    with pytest.raises(TypeError, match=re.escape(message)):
        MultiHeadAttention(8, 2)(torch.randn(1, 3, 8), torch.randn(1, 4, 8).double())


def test_mha_refuses_an_input_in_another_dtype_than_its_weights():
    message = "query is torch.float64 but the module's weights are torch.float32"
    with pytest.raises(TypeError, match=re.escape(message)):
        MultiHeadAttention(8, 2)(torch.randn(1, 3, 8).double())


def test_mha_takes_half_inputs_for_float_weights_under_autocast():
    with torch.autocast("cpu", dtype=torch.bfloat16):
        output, _ = MultiHeadAttention(8, 2)(torch.randn(1, 3, 8).bfloat16())
    assert output.dtype == torch.bfloat16


def test_encoder_layer_refuses_an_input_in_another_dtype_than_its_weights():
    from attnlib.transformer import EncoderLayer

    message = "x is torch.float64 but the module's weights are torch.float32"
    with pytest.raises(TypeError, match=re.escape(message)):
        EncoderLayer(8, 2, 16).checked_forward(torch.randn(1, 3, 8).double())


def test_seq2seq_refuses_target_ids_outside_the_vocabulary():
    model = _seq2seq()  # target vocabulary of 10 symbols
    message = "target id 10 is outside the decoder's vocabulary of 10 symbols (ids 0 to 9)"
    with pytest.raises(ValueError, match=re.escape(message)):
        model(torch.ones(2, 3, dtype=torch.long), [3, 2], torch.tensor([[1, 4], [1, 10]]))


def test_seq2seq_refuses_float_target_ids():
    model = _seq2seq()
    with pytest.raises(TypeError, match="target_in ids must be integers, got dtype torch.float32"):
        model(torch.ones(2, 3, dtype=torch.long), [3, 2], torch.zeros(2, 2))


def test_seq2seq_refuses_targets_of_another_batch():
    model = _seq2seq()
    message = "target_in must be (batch=2, tgt_len >= 1), got shape (3, 2)"
    with pytest.raises(ValueError, match=re.escape(message)):
        model(torch.ones(2, 3, dtype=torch.long), [3, 2], torch.zeros(3, 2, dtype=torch.long))


def test_masked_softmax_refuses_integer_scores():
    message = "scores must be a floating-point tensor, got dtype torch.int64"
    with pytest.raises(TypeError, match=re.escape(message)):
        masked_softmax(torch.ones(2, 3, dtype=torch.int64))


@pytest.mark.parametrize(
    ("args", "error", "message"),
    [
        ((2.5, 8), TypeError, "length must be an int >= 0, got float 2.5"),
        ((4, 8.0), TypeError, "d_model must be an int, got float 8.0"),
        ((4, 8, 0), ValueError, "base must be positive (10000 in the paper), got 0"),
        ((4, 8, float("nan")), ValueError, "base must be finite, got nan"),
    ],
    ids=["float length", "float width", "base 0", "base nan"],
)
def test_sinusoidal_encoding_refuses_bad_sizes_and_bases(args, error, message):
    from attnlib.transformer import sinusoidal_encoding

    with pytest.raises(error, match=re.escape(message)):
        sinusoidal_encoding(*args)  # before: torch errors, or a table of NaN for base 0


@pytest.mark.parametrize("kind", ["SinusoidalPositions", "LearnedPositions"])
def test_position_modules_refuse_inputs_of_another_width(kind):
    from attnlib import transformer

    message = f"{kind} needs x of shape (batch, seq, d_model=8), got (2, 3, 6)"
    with pytest.raises(ValueError, match=re.escape(message)):
        getattr(transformer, kind)(8)(torch.randn(2, 3, 6))


def test_encoder_layer_load_from_torch_refuses_another_module_type():
    from attnlib.transformer import EncoderLayer

    message = "layer must be a torch.nn.TransformerEncoderLayer, got MultiheadAttention"
    with pytest.raises(TypeError, match=re.escape(message)):
        EncoderLayer(8, 2, 16).load_from_torch(nn.MultiheadAttention(8, 2))


def test_mha_load_from_torch_refuses_another_module_type():
    message = "reference must be a torch.nn.MultiheadAttention, got TransformerEncoderLayer"
    with pytest.raises(TypeError, match=re.escape(message)):
        MultiHeadAttention(8, 2).load_from_torch(nn.TransformerEncoderLayer(8, 2, 16))


def test_config_refuses_a_float_pad_id():
    with pytest.raises(TypeError, match="pad_id must be an int >= 0, got float 1.5"):
        _config(pad_id=1.5)


def test_config_refuses_a_negative_pad_id():
    with pytest.raises(ValueError, match="pad_id must be an int >= 0, got -1"):
        _config(pad_id=-1)


@pytest.mark.parametrize(("bad", "wrong"), [([0, 6], 6), ([-1, 2], -1)], ids=["end", "negative"])
def test_mlm_refuses_positions_outside_the_sequence(bad, wrong):
    from attnlib.encoder import MaskedLanguageModel

    model = MaskedLanguageModel(_config())
    ids = torch.randint(5, 37, (2, 6), generator=torch.Generator().manual_seed(0))
    message = f"position {wrong} is outside the sequence 0..5"
    with pytest.raises(ValueError, match=re.escape(message)):
        model(ids, positions=torch.tensor([bad, [1, 2]]))  # before: torch's index error


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.float64])
def test_the_finite_check_tells_an_overflowing_sum_from_a_nan_or_an_inf(dtype):
    huge = torch.finfo(dtype).max / 2
    x = torch.full((1, 4, 3), huge, dtype=dtype)  # every entry finite, their sum is not
    assert check_tensor("queries", x) is x
    x[0, 1, 2] = float("nan")
    with pytest.raises(ValueError, match=r"queries contains NaN \(1 of 12 entries\)"):
        attend(x, x, x)
    x[0, 1, 2], x[0, 2, 0] = float("inf"), float("-inf")
    with pytest.raises(ValueError, match=r"queries contains ±inf \(2 of 12 entries\)"):
        attend(x, x, x)
