"""attnlib.decoder and the EncoderDecoder of attnlib.generation: against torch's decoder layer,
the masks, the tied projection, bad input."""

import math

import pytest
import torch
from torch import nn

from attnlib.decoder import Decoder, DecoderLayer
from attnlib.encoder import TransformerConfig, count_parameters
from attnlib.generation import EncoderDecoder
from attnlib.masks import causal_mask
from attnlib.transformer import sinusoidal_encoding

SMALL = {"vocab_size": 11, "d_model": 16, "num_heads": 4, "num_layers": 2, "d_ff": 24}


def _randn(*shape: int, seed: int) -> torch.Tensor:
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed))


def _key_mask(lengths: list[int], seq: int) -> torch.Tensor:
    """(batch, seq), True at real tokens."""
    return torch.arange(seq).unsqueeze(0) < torch.tensor(lengths).unsqueeze(1)


def _ids(batch: int, seq: int, vocab: int, seed: int) -> torch.Tensor:
    return torch.randint(1, vocab, (batch, seq), generator=torch.Generator().manual_seed(seed))


def _torch_layer(norm_first: bool) -> nn.TransformerDecoderLayer:
    torch.manual_seed(0)
    layer = nn.TransformerDecoderLayer(
        16, 4, 24, dropout=0.1, batch_first=True, norm_first=norm_first
    ).eval()
    with torch.no_grad():  # torch starts LayerNorms at 1/0: move them so the test sees them
        for norm in (layer.norm1, layer.norm2, layer.norm3):
            norm.weight.uniform_(0.5, 1.5)
            norm.bias.uniform_(-0.5, 0.5)
    return layer


# --- equality with torch.nn.TransformerDecoderLayer -----------------------------------------


@pytest.mark.parametrize("norm_first", [False, True])
@pytest.mark.parametrize("fused", [False, True])
@pytest.mark.parametrize("masks", ["none", "causal", "padded", "causal+padded"])
def test_decoder_layer_equals_torch_layer(norm_first, fused, masks):
    theirs = _torch_layer(norm_first)
    ours = DecoderLayer(16, 4, 24, dropout=0.1, norm_first=norm_first, fused=fused)
    ours.load_from_torch(theirs).eval()
    x, memory = _randn(3, 6, 16, seed=1), _randn(3, 5, 16, seed=2)
    causal = causal_mask(6) if "causal" in masks else None
    padded = "padded" in masks
    key_mask = _key_mask([6, 4, 1], 6) if padded else None
    memory_key_mask = _key_mask([5, 2, 3], 5) if padded else None

    def inverse(mask):  # torch's masks are True where attention is forbidden
        return None if mask is None else ~mask

    expected = theirs(
        x,
        memory,
        tgt_mask=inverse(causal),
        tgt_key_padding_mask=inverse(key_mask),
        memory_key_padding_mask=inverse(memory_key_mask),
    )
    got, self_weights, cross = ours.checked_forward(x, memory, key_mask, memory_key_mask, causal)
    assert got.shape == (3, 6, 16)
    assert (self_weights is None and cross is None) if fused else cross.shape == (3, 4, 6, 5)
    torch.testing.assert_close(got, expected, rtol=0, atol=1e-5)
    # need_weights takes the from-scratch path: the same output, and every weight formed.
    again, self_weights, cross = ours.checked_forward(
        x, memory, key_mask, memory_key_mask, causal, need_weights=True
    )
    torch.testing.assert_close(again, expected, rtol=0, atol=1e-5)
    assert self_weights.shape == (3, 4, 6, 6) and cross.shape == (3, 4, 6, 5)
    torch.testing.assert_close(cross.sum(-1), torch.ones(3, 4, 6))
    if padded:
        assert cross[1, :, :, 2:].abs().max().item() == 0.0  # memory padding: exactly zero
    if causal is not None:
        assert self_weights.triu(diagonal=1).abs().max().item() == 0.0  # no future key


def test_load_from_torch_refuses_other_configurations():
    ours = DecoderLayer(16, 4, 24, dropout=0.1)
    with pytest.raises(TypeError, match="must be a torch.nn.TransformerDecoderLayer, got Trans"):
        ours.load_from_torch(nn.TransformerEncoderLayer(16, 4, 24, batch_first=True))
    with pytest.raises(ValueError, match=r"batch_first=False \(ours True\)"):
        ours.load_from_torch(nn.TransformerDecoderLayer(16, 4, 24, dropout=0.1))
    with pytest.raises(ValueError, match=r"norm_first=True \(ours False\)"):
        ours.load_from_torch(
            nn.TransformerDecoderLayer(16, 4, 24, 0.1, batch_first=True, norm_first=True)
        )
    other = nn.TransformerDecoderLayer(16, 2, 32, 0.2, activation="gelu", batch_first=True)
    with pytest.raises(ValueError) as caught:
        ours.load_from_torch(other)
    assert str(caught.value) == (
        "torch layer differs from this one: num_heads=2 (ours 4), d_ff=32 (ours 24), "
        "dropout=0.2 (ours 0.1), activation=gelu (ours relu)"
    )
    gelu = DecoderLayer(16, 4, 24, dropout=0.1, activation="gelu")
    gelu.load_from_torch(nn.TransformerDecoderLayer(16, 4, 24, 0.1, "gelu", batch_first=True))
    assert gelu.feed_forward.activation_name == "gelu"


def test_layer_input_refusals():
    layer = DecoderLayer(16, 4, 24)
    x, memory = _randn(2, 3, 16, seed=0), _randn(2, 4, 16, seed=1)
    with pytest.raises(ValueError, match=r"memory must be \(batch, seq, d_model=16\), got shape"):
        layer.checked_forward(x, memory[..., :8])
    with pytest.raises(ValueError, match="x has batch 2 but memory has batch 1"):
        layer.checked_forward(x, memory[:1])
    with pytest.raises(TypeError, match="memory is torch.float64 but the module's weights"):
        layer.checked_forward(x, memory.double())
    with pytest.raises(ValueError, match="memory contains NaN"):
        layer.checked_forward(x, memory.masked_fill(memory > 1, float("nan")))
    with pytest.raises(ValueError, match=r"memory_key_mask must be \(batch, src\) = \(2, 4\)"):
        layer.checked_forward(x, memory, memory_key_mask=_key_mask([3, 2], 3))
    with pytest.raises(ValueError, match=r"mask of shape \(4, 4\) does not fit"):
        layer.checked_forward(x, memory, mask=causal_mask(4))


# --- the stack: embedding, masks, weights -----------------------------------------------------


def test_decoder_embeds_scaled_tokens_plus_positions_at_any_offset():
    decoder = Decoder(TransformerConfig(**SMALL, dropout=0.0))
    ids = _ids(2, 5, 11, seed=0)
    expected = decoder.embedding(ids) * math.sqrt(16) + sinusoidal_encoding(5, 16)
    torch.testing.assert_close(decoder.embed(ids), expected)
    # Positions 3 and 4 alone, as a cached step sees them: the same rows.
    torch.testing.assert_close(decoder.embed(ids[:, 3:], start=3), expected[:, 3:])
    learned = Decoder(TransformerConfig(**SMALL, dropout=0.0, positions="learned"))
    full = learned.embed(ids)
    torch.testing.assert_close(learned.embed(ids[:, 4:], start=4), full[:, 4:])


@pytest.mark.parametrize("fused", [False, True])
@pytest.mark.parametrize("norm_first", [False, True])
def test_decoder_is_causal_and_ignores_padding(fused, norm_first):
    decoder = Decoder(TransformerConfig(**SMALL, fused=fused, norm_first=norm_first)).eval()
    ids, memory = _ids(2, 6, 11, seed=0), _randn(2, 4, 16, seed=1)
    memory_key_mask = _key_mask([4, 2], 4)
    later = ids.clone()
    later[:, 4:] = _ids(2, 2, 11, seed=2)  # new tokens at positions 4 and 5 only
    other_memory = torch.where(memory_key_mask[..., None], memory, _randn(2, 4, 16, seed=3))
    with torch.no_grad():
        hidden, _, _ = decoder(ids, memory, memory_key_mask=memory_key_mask)
        changed, _, _ = decoder(later, other_memory, memory_key_mask=memory_key_mask)
    torch.testing.assert_close(changed[:, :4], hidden[:, :4], rtol=0, atol=1e-6)
    assert (changed[:, 4:] - hidden[:, 4:]).abs().max().item() > 1e-3
    if norm_first:
        assert isinstance(decoder.final_norm, nn.LayerNorm)
    else:
        assert isinstance(decoder.final_norm, nn.Identity)


def test_decoder_weights_of_every_layer():
    decoder = Decoder(TransformerConfig(**{**SMALL, "num_layers": 3})).eval()
    ids, memory = _ids(2, 5, 11, seed=0), _randn(2, 4, 16, seed=1)
    key_mask, memory_key_mask = _key_mask([5, 3], 5), _key_mask([4, 1], 4)
    with torch.no_grad():
        hidden, self_weights, cross = decoder(ids, memory, key_mask, memory_key_mask, True)
        fused_hidden, none_self, none_cross = decoder(ids, memory, key_mask, memory_key_mask)
    assert hidden.shape == (2, 5, 16) and none_self is None and none_cross is None
    assert self_weights.shape == (2, 3, 4, 5, 5)  # (batch, layers, heads, tgt, tgt)
    assert cross.shape == (2, 3, 4, 5, 4)  # (batch, layers, heads, tgt, src)
    torch.testing.assert_close(fused_hidden, hidden, rtol=0, atol=1e-5)
    assert self_weights.triu(diagonal=1).abs().max().item() == 0.0
    assert self_weights[1, ..., 3:].abs().max().item() == 0.0  # padded target keys
    assert cross[1, ..., 1:].abs().max().item() == 0.0  # padded source keys
    torch.testing.assert_close(cross[1, ..., 0], torch.ones(3, 4, 5))


# --- the encoder-decoder model ----------------------------------------------------------------


def test_model_shapes_tying_and_source_padding():
    config = TransformerConfig(**SMALL)
    model = EncoderDecoder(config, target_vocab_size=13, target_pad_id=12).eval()
    assert model.output.weight is model.decoder.embedding.weight
    assert model.decoder.embedding.padding_idx == 12 and model.encoder.embedding.padding_idx == 0
    untied = EncoderDecoder(config, target_vocab_size=13, tie_weights=False)
    assert untied.output.weight.data_ptr() != untied.decoder.embedding.weight.data_ptr()
    assert count_parameters(untied) - count_parameters(model) == 13 * 16
    # The tied weight kept the embedding's init (std d^-0.5), not Xavier's for a 16->13 matrix.
    assert model.output.weight[:12].std().item() == pytest.approx(16**-0.5, rel=0.3)
    source, key_mask = _ids(3, 7, 11, seed=0), _key_mask([7, 5, 2], 7)
    target = _ids(3, 4, 13, seed=1)
    other = torch.where(key_mask, source, _ids(3, 7, 11, seed=2))  # new padding tokens only
    with torch.no_grad():
        logits, cross = model(source, target, key_mask, need_weights=True)
        again, none = model(other, target, key_mask)
    assert logits.shape == (3, 4, 13) and cross.shape == (3, 2, 4, 4, 7) and none is None
    torch.testing.assert_close(again, logits, rtol=0, atol=1e-5)
    # A short source alone, without padding, gives the same logits.
    alone, _ = model(source[2:, :2], target[2:])
    torch.testing.assert_close(alone, logits[2:], rtol=0, atol=1e-5)


def test_model_backward_reaches_both_stacks_and_the_tied_weight():
    model = EncoderDecoder(TransformerConfig(**SMALL))
    source, target = _ids(2, 5, 11, seed=0), _ids(2, 4, 11, seed=1)
    logits, _ = model(source, target, _key_mask([5, 3], 5), _key_mask([4, 2], 4))
    logits.sum().backward()
    for parameter in (
        model.encoder.layers[0].attention.query_projection.weight,
        model.decoder.layers[1].cross_attention.key_projection.weight,
        model.decoder.embedding.weight,
    ):
        assert parameter.grad is not None and parameter.grad.abs().max().item() > 0
    assert torch.isfinite(model.decoder.embedding.weight.grad).all()


def test_model_and_decoder_input_refusals():
    config = TransformerConfig(**SMALL, max_len=6)
    model = EncoderDecoder(config, target_vocab_size=9)
    source, target = _ids(2, 5, 11, seed=0), _ids(2, 4, 9, seed=1)
    with pytest.raises(ValueError, match=r"target token id 9 is outside the vocabulary 0..8"):
        model(source, torch.tensor([[1, 9], [2, 3]]))
    with pytest.raises(ValueError, match=r"token id 11 is outside the vocabulary 0..10"):
        model(torch.tensor([[1, 11], [2, 3]]), target)
    with pytest.raises(ValueError, match="target of 7 tokens is longer than max_len=6"):
        model(source, _ids(2, 7, 9, seed=0))
    with pytest.raises(TypeError, match="target ids must be integer token ids"):
        model(source, target.float())
    with pytest.raises(ValueError, match=r"target ids must be \(batch, seq\) with seq >= 1"):
        model(source, target[:, :0])
    with pytest.raises(ValueError, match=r"target_key_mask must be \(batch, tgt\) = \(2, 4\)"):
        model(source, target, target_key_mask=_key_mask([3, 3], 3))
    with pytest.raises(TypeError, match="source_key_mask must be boolean"):
        model(source, target, source_key_mask=_key_mask([5, 3], 5).long())
    with pytest.raises(ValueError, match=r"pad_id=9 is outside the vocabulary 0..8"):
        EncoderDecoder(config, target_vocab_size=9, target_pad_id=9)
    with pytest.raises(TypeError, match="tie_weights must be True or False, got int 1"):
        EncoderDecoder(config, tie_weights=1)
    decoder = model.decoder
    with pytest.raises(ValueError, match=r"memory must be \(batch=2, src, d_model=16\)"):
        decoder(target, _randn(3, 5, 16, seed=0))
    with pytest.raises(TypeError, match="memory is torch.float64 but the module's weights"):
        decoder(target, _randn(2, 5, 16, seed=0).double())


# --- grouped key/value heads -------------------------------------------------------------------


@pytest.mark.parametrize("kv_heads", [1, 2])
def test_grouped_decoder_layer_has_smaller_key_value_projections(kv_heads):
    layer = DecoderLayer(16, 4, 24, dropout=0.0, num_kv_heads=kv_heads)
    plain = DecoderLayer(16, 4, 24, dropout=0.0)
    for attention in (layer.self_attention, layer.cross_attention):
        assert attention.num_kv_heads == kv_heads
        assert attention.key_projection.weight.shape == (kv_heads * 4, 16)  # head_dim 4
    # Each attention saves 2 (K, V) x (16 - 4 kv_heads) x (16 inputs + 1 bias).
    saved = 2 * 2 * (16 - 4 * kv_heads) * 17
    assert count_parameters(plain) - count_parameters(layer) == saved


def test_decoder_takes_num_kv_heads_from_the_config():
    torch.manual_seed(0)
    model = EncoderDecoder(TransformerConfig(**SMALL, num_kv_heads=2, dropout=0.0)).eval()
    for layer in model.decoder.layers:
        assert layer.self_attention.num_kv_heads == layer.cross_attention.num_kv_heads == 2
    assert model.encoder.layers[0].attention.num_kv_heads == 4  # the encoder keeps no cache
    source, target = _ids(2, 5, 11, seed=1), _ids(2, 4, 11, seed=2)
    fused, _ = model(source, target)
    for layer in model.decoder.layers:
        layer.fused = False
    scratch, cross = model(source, target, need_weights=True)
    torch.testing.assert_close(fused, scratch, rtol=0, atol=1e-5)
    assert cross.shape == (2, 2, 4, 4, 5)  # weights per query head: (batch, layers, heads, t, s)


def test_num_kv_heads_must_divide_num_heads():
    with pytest.raises(ValueError, match="num_kv_heads=3 does not divide num_heads=4"):
        TransformerConfig(**SMALL, num_kv_heads=3)
    with pytest.raises(ValueError, match="num_kv_heads must be positive, got 0"):
        TransformerConfig(**SMALL, num_kv_heads=0)
    config = TransformerConfig(**SMALL, num_kv_heads=1)
    assert TransformerConfig.from_dict(config.to_dict()) == config
    with pytest.raises(ValueError, match="no grouped key/value heads"):
        DecoderLayer(16, 4, 24, num_kv_heads=2).load_from_torch(_torch_layer(False))
