"""Every mixer of the harness: causal, the right shape, trainable; the short convolution; and
the decoder-only model built around a mixer by its config."""

from __future__ import annotations

import pytest
import torch

from attnlib.encoder import Encoder, parameter_breakdown
from attnlib.lm import DecoderOnlyLM
from attnlib.mixers import MIXERS, MixerCache, MixerLayer, ShortConvolution, make_mixer
from attnlib.model_config import TransformerConfig


def inputs(n: int = 12, seed: int = 0) -> torch.Tensor:
    return torch.randn(2, n, 16, generator=torch.Generator().manual_seed(seed))


@pytest.mark.parametrize("name", list(MIXERS))
def test_a_mixer_never_reads_the_future(name):
    torch.manual_seed(0)
    mixer = make_mixer(name, 16, 2)
    x = inputs()
    changed = x.clone()
    changed[:, 7] += 3.0  # position 7 changes: positions 0..6 must not move
    before, after = mixer(x), mixer(changed)
    assert before.shape == (2, 12, 16)
    torch.testing.assert_close(after[:, :7], before[:, :7], atol=1e-6, rtol=0)
    assert (after[:, 7:] - before[:, 7:]).abs().max().item() > 1e-4


@pytest.mark.parametrize("name", list(MIXERS))
def test_every_parameter_of_a_mixer_gets_a_gradient(name):
    torch.manual_seed(1)
    mixer = make_mixer(name, 16, 2)
    mixer(inputs()).square().mean().backward()
    missing = [n for n, p in mixer.named_parameters() if p.grad is None or not p.grad.any()]
    assert missing == []


def test_the_short_convolution_one_step_at_a_time_equals_the_whole():
    conv = ShortConvolution(16, width=3)
    x, past, outputs = inputs(), None, []
    for t in range(x.shape[1]):
        output, past = conv.step(x[:, t : t + 1], past)
        outputs.append(output)
    torch.testing.assert_close(torch.cat(outputs, dim=1), conv(x), atol=1e-6, rtol=1e-5)
    torch.testing.assert_close(past, x[:, -2:])


def test_the_short_convolution_reads_the_last_width_positions():
    conv = ShortConvolution(16, width=3)
    x = inputs()
    changed = x.clone()
    changed[:, 5] += 1.0
    moved = (conv(changed) - conv(x)).abs().amax(dim=(0, 2))  # (n,)
    assert (moved[:5] == 0).all() and (moved[5:8] > 0).all() and (moved[8:] == 0).all()


def test_make_mixer_names_the_choices():
    with pytest.raises(ValueError, match="unknown mixer 'mamba'; choose one of 'softmax'"):
        make_mixer("mamba", 16, 2)
    with pytest.raises(ValueError, match="num_heads=3 does not divide d_model=16"):
        make_mixer("delta", 16, 3)


def mixer_config(mixer: str | None = "delta", **changes) -> TransformerConfig:
    options = {
        "vocab_size": 11,
        "d_model": 16,
        "num_heads": 2,
        "num_layers": 2,
        "d_ff": 32,
        "dropout": 0.0,
        "positions": "none",
        "norm_first": True,
        "mixer": mixer,
        "short_convolution": 3,
    }
    return TransformerConfig(**{**options, **changes})


@pytest.mark.parametrize("name", list(MIXERS))
def test_a_model_built_around_a_mixer_predicts_from_the_past_only(name):
    torch.manual_seed(2)
    model = DecoderOnlyLM(mixer_config(name))
    assert all(isinstance(layer, MixerLayer) for layer in model.layers)
    ids = torch.randint(1, 11, (2, 9), generator=torch.Generator().manual_seed(3))
    changed = ids.clone()
    changed[:, 6] = (ids[:, 6] % 10) + 1  # another token at position 6
    before, after = model(ids), model(changed)
    assert before.shape == (2, 9, 11)
    torch.testing.assert_close(after[:, :6], before[:, :6], atol=1e-6, rtol=0)
    assert (after[:, 6:] - before[:, 6:]).abs().max().item() > 1e-4


def test_a_mixer_block_is_the_pre_ln_sum_of_its_parts():
    torch.manual_seed(4)
    layer = MixerLayer("linear", 16, 2, 32, conv_width=3)
    x = inputs()
    mixed = x + layer.mixer(layer.convolution(layer.norm1(x)))
    expected = mixed + layer.feed_forward(layer.norm2(mixed))
    torch.testing.assert_close(layer(x)[0], expected)
    assert layer(x)[1] is None
    assert isinstance(MixerLayer("linear", 16, 2, 0).convolution, torch.nn.Identity)


def test_a_mixer_block_refuses_what_only_attention_does():
    layer = MixerLayer("gated", 16, 2, 32)
    with pytest.raises(
        ValueError, match="a 'gated' mixer block takes no mask and forms no attention"
    ):
        layer(inputs(), need_weights=True)


def test_a_mixer_model_refuses_weights_ablations_and_implementations():
    model = DecoderOnlyLM(mixer_config("linear"))
    ids = torch.ones(1, 4, dtype=torch.long)
    with pytest.raises(ValueError, match="attention weights needs attention blocks; this model's"):
        model.attention_weights(ids)
    with pytest.raises(ValueError, match="ablating heads needs attention blocks"):
        with model.ablated([(0, 0)]):
            pass
    with pytest.raises(ValueError, match="an attention implementation needs attention blocks"):
        DecoderOnlyLM(mixer_config("linear"), implementation="eager")


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        ({"mixer": "mamba"}, "unknown mixer 'mamba'; choose None or one of 'softmax'"),
        ({"norm_first": False}, "a mixer block is pre-LN: mixer='delta' needs norm_first=True"),
        ({"positions": "rotary"}, "mixer='delta' takes positions 'none', 'sinusoidal' or"),
        ({"window": 4}, "window belongs to an attention block; mixer='delta' takes none"),
        ({"num_kv_heads": 1}, "num_kv_heads belongs to an attention block; mixer='delta"),
        ({"attention_sink": "learned"}, "attention_sink belongs to an attention block"),
        ({"short_convolution": 0}, "short_convolution must be positive, got 0"),
        ({"mixer": None}, "short_convolution goes before a mixer: set mixer too"),
    ],
)
def test_a_config_names_what_a_mixer_cannot_take(changes, message):
    with pytest.raises(ValueError, match=message):
        mixer_config(**changes)


def test_a_mixer_config_survives_a_checkpoint_and_names_itself():
    config = mixer_config("latent")
    assert TransformerConfig.from_dict(config.to_dict()) == config
    assert "mixer='latent', short_convolution=3)" in repr(config)
    assert "mixer" not in repr(mixer_config(None, short_convolution=None))


def test_only_a_causal_stack_is_built_around_a_mixer():
    with pytest.raises(ValueError, match="mixer='delta' builds causal blocks"):
        Encoder(mixer_config())
    with pytest.raises(ValueError, match="an encoder has attention blocks; mixer='delta'"):
        parameter_breakdown(mixer_config())


@pytest.mark.parametrize("name", list(MIXERS))
def test_generating_from_the_memory_equals_recomputing(name):
    torch.manual_seed(5)
    model = DecoderOnlyLM(mixer_config(name)).eval()
    prompt = torch.randint(1, 11, (2, 5), generator=torch.Generator().manual_seed(6))
    remembered, recomputed = model.generate(prompt, 10), model.generate(prompt, 10, use_cache=False)
    assert torch.equal(remembered.tokens, recomputed.tokens)
    torch.testing.assert_close(remembered.logits, recomputed.logits, atol=1e-5, rtol=1e-5)
    assert isinstance(remembered.cache, MixerCache) and remembered.cache.length == 14


# Bytes a position adds, in float32, 2 layers of d_model 16: softmax attention caches a key and a
# value of 16; latent attention a latent of d_model / 2 = 8 and a rope key of 8; the others none.
GROWTH = {"softmax": 2 * 2 * 16 * 4, "latent": 2 * (8 + 8) * 4, "linear": 0, "gated": 0, "delta": 0}


@pytest.mark.parametrize("name", list(MIXERS))
def test_a_cache_grows_with_the_length_and_a_state_does_not(name):
    model = DecoderOnlyLM(mixer_config(name)).eval()
    cache = model.new_cache(1)
    model.decode(torch.ones(1, 3, dtype=torch.long), cache)
    before = cache.nbytes()
    model.decode(torch.ones(1, 4, dtype=torch.long), cache)
    assert cache.nbytes() - before == 4 * GROWTH[name]
    convolutions = 2 * 2 * 16 * 4  # 2 layers keep width - 1 = 2 inputs of 16
    states = {
        "linear": 2 * 2 * (8 * 8 + 8) * 4,
        "gated": 2 * 2 * 8 * 8 * 4,
        "delta": 2 * 2 * 8 * 8 * 4,
    }
    if name in states:  # per layer 2 heads of an 8 x 8 state (and linear's normaliser of 8)
        assert before == convolutions + states[name]


def test_a_softmax_mixer_groups_its_key_value_heads():
    grouped = make_mixer("softmax", 16, 4, num_kv_heads=1)
    assert grouped.attention.key_projection.weight.shape == (4, 16)  # one head of 16 / 4
    torch.manual_seed(7)
    x = inputs()
    causal = grouped(x)
    torch.testing.assert_close(grouped(x[:, :5]), causal[:, :5])  # still blind to the future
    with pytest.raises(ValueError, match="num_kv_heads groups softmax attention's heads; mixer"):
        make_mixer("linear", 16, 4, num_kv_heads=1)


@pytest.mark.parametrize("kv_heads", [1, 2])
def test_a_grouped_softmax_model_generates_from_a_smaller_cache(kv_heads):
    torch.manual_seed(8)
    config = mixer_config("softmax", num_kv_heads=kv_heads)
    model = DecoderOnlyLM(config).eval()
    prompt = torch.randint(1, 11, (2, 5), generator=torch.Generator().manual_seed(9))
    remembered, recomputed = model.generate(prompt, 10), model.generate(prompt, 10, use_cache=False)
    assert torch.equal(remembered.tokens, recomputed.tokens)
    torch.testing.assert_close(remembered.logits, recomputed.logits, atol=1e-5, rtol=1e-5)
    cache = model.new_cache(1)
    model.decode(torch.ones(1, 3, dtype=torch.long), cache)
    before = cache.nbytes()
    model.decode(torch.ones(1, 4, dtype=torch.long), cache)
    # a key and a value of kv_heads x 8 numbers a position, in each of 2 layers, in float32
    assert cache.nbytes() - before == 4 * 2 * 2 * kv_heads * 8 * 4
