"""Issue 38's refusals: the KV cache's memory, NaN on the checked paths, masks and batches named
by their argument, and the older surface; each bad input fails with a message that names it."""

from __future__ import annotations

import re

import numpy as np
import pytest
import torch

from attnlib.attention import MultiHeadAttention, attend, implementation_for
from attnlib.checkpoints import load_checkpoint
from attnlib.data.dates import generate_pairs, make_splits
from attnlib.data.subwords import SubwordTokenizer
from attnlib.decoder import Decoder
from attnlib.encoder import TransformerConfig
from attnlib.flash import flash_attention
from attnlib.generation import EncoderDecoder, decoder_cache, greedy_decode
from attnlib.masks import causal_mask, masked_softmax, masked_softmax_unchecked
from attnlib.positions import apply_rotary, rotary_angles
from attnlib.schedules import average_checkpoints, piecewise_constant
from attnlib.scores import scaled_dot_score
from attnlib.transformer import FeedForward

NAN, INF = float("nan"), float("inf")
SMALL = {"vocab_size": 9, "d_model": 16, "num_heads": 2, "num_layers": 1, "d_ff": 32}


def _randn(*shape: int, seed: int = 0, dtype: torch.dtype = torch.float32) -> torch.Tensor:
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed), dtype=dtype)


def _ids(batch: int, seq: int, seed: int = 0) -> torch.Tensor:
    """Token ids 3..8 of shape (batch, seq)."""
    return torch.randint(3, 9, (batch, seq), generator=torch.Generator().manual_seed(seed))


def _with(tensor: torch.Tensor, index: tuple, value: float) -> torch.Tensor:
    """A copy of ``tensor`` with ``value`` at ``index``."""
    changed = tensor.clone()
    changed[index] = value
    return changed


@pytest.fixture(scope="module")
def model() -> EncoderDecoder:
    torch.manual_seed(0)
    return EncoderDecoder(TransformerConfig(**SMALL, dropout=0.0)).eval()


# --- the KV cache checks its decoder and memory ------------------------------------------------


KV_CACHE_REFUSALS = {
    "narrower memory": (
        lambda m: (m.decoder, _randn(2, 5, 8)),
        ValueError,
        "memory must be (batch, src, d_model=16), got shape (2, 5, 8)",
    ),
    "2-D memory": (
        lambda m: (m.decoder, _randn(5, 16)),
        ValueError,
        "memory must be (batch, src, d_model=16), got shape (5, 16)",
    ),
    "float64 memory": (
        lambda m: (m.decoder, _randn(2, 5, 16, dtype=torch.float64)),
        TypeError,
        "memory is torch.float64 but the module's weights are torch.float32",
    ),
    "integer memory": (
        lambda m: (m.decoder, torch.ones(2, 5, 16, dtype=torch.long)),
        TypeError,
        "memory must be a floating-point tensor, got dtype torch.int64",
    ),
    "memory as a list": (
        lambda m: (m.decoder, [[0.0] * 16]),
        TypeError,
        "memory must be a torch.Tensor, got list",
    ),
    "an encoder for the decoder": (
        lambda m: (m.encoder, _randn(2, 5, 16)),
        TypeError,
        "decoder must be an attnlib.decoder.Decoder (an EncoderDecoder's .decoder), got Encoder",
    ),
    "the whole model for the decoder": (
        lambda m: (m, _randn(2, 5, 16)),
        TypeError,
        "got EncoderDecoder",
    ),
    "NaN in memory": (
        lambda m: (m.decoder, _with(_randn(2, 5, 16), (1, 2, 3), NAN)),
        ValueError,
        "memory contains NaN (1 of 160 entries)",
    ),
    "-inf in memory": (
        lambda m: (m.decoder, _with(_randn(2, 5, 16), (0, 0, 0), -INF)),
        ValueError,
        "memory contains ±inf (1 of 160 entries)",
    ),
}


@pytest.mark.parametrize("case", list(KV_CACHE_REFUSALS))
def test_kv_cache_refuses_a_bad_decoder_or_memory(model, case):
    arguments, error, message = KV_CACHE_REFUSALS[case]
    with pytest.raises(error, match=re.escape(message)):
        decoder_cache(*arguments(model))


def test_kv_cache_step_refuses_ids_of_another_batch(model):
    cache = decoder_cache(model.decoder, _randn(2, 5, 16))
    message = "ids have batch 3 but this KVCache holds a batch of 2"
    with pytest.raises(ValueError, match=message):
        model.decoder.decode(_ids(3, 1), None, None, None, cache=cache)
    with pytest.raises(ValueError, match=r"ids must be \(batch=2, n\) token ids, got shape \(2,\)"):
        model.decoder.decode(_ids(1, 2)[0], None, None, None, cache=cache)
    assert cache.length == 0  # nothing was cached by the refused steps
    hidden, _, _ = model.decoder.decode(_ids(2, 1), None, None, None, cache=cache)
    assert hidden.shape == (2, 1, 16) and cache.length == 1


# --- NaN and inf on the checked paths, not on the training path --------------------------------


@pytest.mark.parametrize(
    ("where", "value", "message"),
    [((1, 4, 0), NAN, r"memory contains NaN \(1 of 160 entries\)"), ((0, 0, 7), -INF, "±inf")],
)
def test_decoder_forward_refuses_non_finite_memory(model, where, value, message):
    memory = _with(_randn(2, 5, 16), where, value)
    with pytest.raises(ValueError, match=message):
        model.decoder(_ids(2, 3), memory)


def test_decoder_forward_checks_the_ids_before_the_memory(model):
    memory = _with(_randn(2, 5, 16), (0, 0, 0), NAN)
    ids = _with(_ids(2, 3), (1, 1), 9)
    with pytest.raises(ValueError, match=r"target token id 9 is outside the vocabulary 0..8"):
        model.decoder(ids, memory)


def test_decoder_forward_with_check_ids_off_scans_nothing(monkeypatch):
    decoder = Decoder(TransformerConfig(**SMALL, dropout=0.0)).eval()
    decoder.check_ids = False
    monkeypatch.setattr(torch, "isfinite", _no_scan)
    hidden, _, _ = decoder(_ids(2, 3), _randn(2, 5, 16))
    assert hidden.shape == (2, 3, 16)


def _no_scan(*args, **kwargs):
    raise AssertionError("a value scan (a host sync on a GPU) on the training path")


def test_training_paths_scan_no_values(monkeypatch):
    """EncoderDecoder's training forward with check_ids off, the rotary layer's forward_prepared
    and FeedForward.forward: no NaN scan, so no host sync on a GPU."""
    torch.manual_seed(0)
    trained = EncoderDecoder(TransformerConfig(**SMALL, dropout=0.0))
    trained.encoder.check_ids = trained.decoder.check_ids = False
    rotary = MultiHeadAttention(16, 2, rotary_base=10000.0)
    feed_forward = FeedForward(16, 32)
    x = _randn(2, 4, 16)
    monkeypatch.setattr(torch, "isfinite", _no_scan)
    monkeypatch.setattr(torch, "isnan", _no_scan)
    logits, _ = trained(_ids(2, 5), _ids(2, 4, seed=1))
    assert logits.shape == (2, 4, 9)
    for fused in (False, True):
        assert rotary.forward_prepared(x, x, x, None, implementation_for(fused))[0].shape == (
            2,
            4,
            16,
        )
    assert feed_forward(x).shape == (2, 4, 16)


@pytest.mark.parametrize(
    ("where", "value", "mask", "message"),
    [
        ((1, 2, 0), NAN, causal_mask(3), r"NaN \(1 of 18 entries\) at keys the mask allows"),
        ((0, 1, 1), INF, causal_mask(3), r"\+inf \(1 of 18 entries\) at keys the mask allows"),
        ((0, 0, 2), NAN, None, r"NaN \(1 of 18 entries\) with no mask \(every key allowed\)"),
    ],
)
def test_masked_softmax_refuses_nan_and_inf_at_allowed_keys(where, value, mask, message):
    scores = _with(_randn(2, 3, 3), where, value)
    first = re.escape(f"the first at index {where}: such a score makes its whole row of weights")
    with pytest.raises(ValueError, match=rf"^scores contains {message}.*{first} NaN\. .*unchecked"):
        masked_softmax(scores, mask)


def test_masked_softmax_ignores_nan_at_masked_keys_and_unchecked_lets_it_propagate(monkeypatch):
    scores, mask = _randn(2, 3, 3), causal_mask(3)
    poisoned = _with(_with(scores, (0, 0, 2), NAN), (1, 1, 2), INF)  # both at masked keys
    assert torch.equal(masked_softmax(poisoned, mask), masked_softmax(scores, mask))
    monkeypatch.setattr(torch, "isnan", _no_scan)
    monkeypatch.setattr(torch, "isfinite", _no_scan)
    weights = masked_softmax_unchecked(_with(scores, (1, 2, 0), NAN), mask)  # no scan, no sync
    assert weights[1, 2].isnan().all() and not weights[[0, 1], :2].isnan().any()


@pytest.mark.parametrize(
    ("x", "positions", "message"),
    [
        (_randn(2, 3, 4), torch.tensor([0.0, NAN, 2.0]), r"positions contains NaN \(1 of 3"),
        (_randn(2, 3, 4), torch.tensor([[0.0, 1.0, INF]] * 2), r"positions contains ±inf \(2 of 6"),
        (_with(_randn(2, 3, 4), (1, 2, 3), NAN), torch.arange(3), r"x contains NaN \(1 of 24"),
    ],
)
def test_apply_rotary_refuses_nan_and_inf(x, positions, message):
    with pytest.raises(ValueError, match=message):
        apply_rotary(x, positions)


def test_rotary_angles_refuse_a_nan_position():
    with pytest.raises(ValueError, match=r"positions contains NaN \(1 of 2 entries\)"):
        rotary_angles(torch.tensor([1.0, NAN]), 4)


def test_feed_forward_checked_forward_refuses_nan_and_equals_forward():
    torch.manual_seed(0)
    block = FeedForward(16, 32, dropout=0.0)
    x = _randn(2, 3, 16)
    assert torch.equal(block.checked_forward(x), block(x))
    with pytest.raises(ValueError, match=r"x contains NaN \(1 of 96 entries\)"):
        block.checked_forward(_with(x, (0, 1, 2), NAN))
    with pytest.raises(
        ValueError, match=r"x must be \(\.\.\., d_model=16\), got shape \(2, 3, 8\)"
    ):
        block.checked_forward(x[..., :8])
    with pytest.raises(TypeError, match="x is torch.float64 but the module's weights are"):
        block.checked_forward(x.double())


# --- messages that name the argument at fault --------------------------------------------------


def _key_mask(batch: int, n: int) -> torch.Tensor:
    return torch.ones(batch, n, dtype=torch.bool)


def test_decoder_names_the_mask_at_fault(model):
    ids, memory = _ids(2, 3), _randn(2, 5, 16)
    with pytest.raises(
        ValueError, match=re.escape("memory_key_mask must be (batch, src) = (2, 5)")
    ):
        model.decoder(ids, memory, memory_key_mask=_key_mask(2, 3))
    with pytest.raises(ValueError, match=re.escape("key_mask must be (batch, tgt) = (2, 3), got")):
        model.decoder(ids, memory, key_mask=_key_mask(2, 5))
    layer = model.decoder.layers[0]
    with pytest.raises(
        ValueError, match=re.escape("memory_key_mask must be (batch, src) = (2, 5)")
    ):
        layer.checked_forward(_randn(2, 3, 16), memory, memory_key_mask=_key_mask(2, 3))


def test_encoder_decoder_names_the_mask_and_the_batch_at_fault(model):
    source, target = _ids(2, 5), _ids(2, 4, seed=1)
    message = "target_key_mask must be (batch, tgt) = (2, 4), got shape (2, 5)"
    with pytest.raises(ValueError, match=re.escape(message)):
        model(source, target, target_key_mask=_key_mask(2, 5))
    message = "source_key_mask must be (batch, src) = (2, 5), got shape (2, 4)"
    with pytest.raises(ValueError, match=re.escape(message)):
        model(source, target, source_key_mask=_key_mask(2, 4))
    with pytest.raises(ValueError, match="source has batch 2 but target has batch 3"):
        model(source, _ids(3, 4))
    with pytest.raises(ValueError, match=re.escape("source_key_mask must be (batch, src)")):
        greedy_decode(model, source, _key_mask(3, 5), start_id=1, end_id=2, max_len=3)


def test_rotary_attention_refuses_more_queries_than_keys():
    rotary = MultiHeadAttention(16, 2, rotary_base=10000.0)
    message = "needs n_queries <= n_keys: got query of 8 positions and key of 3"
    for fused in (False, True):
        with pytest.raises(ValueError, match=message):
            rotary(_randn(1, 8, 16), _randn(1, 3, 16), fused=fused)


# --- the older surface -------------------------------------------------------------------------


def test_a_width_of_zero_is_refused_before_it_divides_by_zero():
    q, k, v = torch.zeros(2, 3, 0), torch.zeros(2, 4, 0), torch.zeros(2, 4, 5)
    with pytest.raises(ValueError, match="queries have d_k=0 and keys d_k=0 features"):
        attend(q, k, v)
    with pytest.raises(ValueError, match="queries and keys have d_k=0 features"):
        scaled_dot_score(q, k)
    with pytest.raises(ValueError, match="queries and keys have d_k=0 features"):
        flash_attention(q, k, v)


def test_generate_pairs_needs_an_int_seed():
    with pytest.raises(TypeError, match="seed must be an int, so that the same seed gives the"):
        generate_pairs(5, seed=None)
    with pytest.raises(TypeError, match="got float 1.5"):
        make_splits(3, 1, 1, seed=1.5)
    assert generate_pairs(5, seed=np.int64(3)) == generate_pairs(5, seed=3)


def test_config_from_dict_refuses_a_list():
    message = "values must be a dict of TransformerConfig fields (as to_dict gives), got list"
    with pytest.raises(TypeError, match=re.escape(message)):
        TransformerConfig.from_dict([("vocab_size", 9)])


def test_piecewise_constant_refuses_none():
    with pytest.raises(TypeError, match="boundaries must be a list of numbers, got NoneType"):
        piecewise_constant(None, [1.0])
    with pytest.raises(TypeError, match="values must be a list of numbers, got float"):
        piecewise_constant([10], 0.5)
    schedule = piecewise_constant(np.array([10, 20]), (1.0, 0.5, 0.25))
    assert [schedule(step) for step in (0, 10, 25)] == [1.0, 0.5, 0.25]


def test_average_checkpoints_refuses_a_generator_or_one_state_dict():
    states = [{"w": torch.ones(2)}, {"w": torch.zeros(2)}]
    with pytest.raises(TypeError, match=r"got generator; pass list\(\.\.\.\) of them"):
        average_checkpoints(state for state in states)
    with pytest.raises(TypeError, match="got dict: one state dict. pass a list of them"):
        average_checkpoints(states[0])
    assert average_checkpoints(tuple(states))["w"].tolist() == [0.5, 0.5]


@pytest.mark.parametrize(
    ("saved_model", "message"),
    [
        (torch.zeros(3), "its 'model' entry is a Tensor, not a state dict"),
        ([torch.zeros(3)], "its 'model' entry is a list, not a state dict"),
        ({"weight": [1.0, 2.0]}, "its 'model' state dict holds a list under 'weight'"),
    ],
)
def test_load_checkpoint_refuses_a_model_entry_that_is_not_a_state_dict(
    tmp_path, saved_model, message
):
    path = tmp_path / "odd.pt"
    torch.save({"model": saved_model}, path)
    with pytest.raises(ValueError, match=re.escape(message)):
        load_checkpoint(path, torch.nn.Linear(3, 1))


@pytest.fixture(scope="module")
def tokenizer() -> SubwordTokenizer:
    return SubwordTokenizer.train(["the movie was great", "a bad movie"], 60, min_frequency=1)


def test_subword_tokenizer_refuses_a_lone_surrogate(tokenizer):
    message = r"text holds a lone surrogate '\\ud800' at index 2: half of a UTF-16 pair"
    with pytest.raises(ValueError, match=message):
        tokenizer.encode("ab\ud800c")
    with pytest.raises(ValueError, match="text holds a lone surrogate"):
        tokenizer.tokens("\udfff")
    with pytest.raises(ValueError, match=r"texts\[1\] holds a lone surrogate '\\udc80' at index 1"):
        tokenizer.encode_batch(["movie", "a\udc80"])
    assert tokenizer.encode("the café") == tokenizer.encode_batch(["the café"])[0]
