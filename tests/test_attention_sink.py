"""Attention with a sink (a learned logit per head, or softmax plus one) against the NumPy
oracle written by hand, and in the decoder-only model."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from attnlib import reference
from attnlib.attention import MultiHeadAttention, attend_with_sink_unchecked
from attnlib.encoder import TransformerConfig
from attnlib.lm import DecoderOnlyLM
from attnlib.masks import causal_mask


def qkv(seed: int = 0, heads: int = 3, n: int = 5, d: int = 4) -> list[torch.Tensor]:
    generator = torch.Generator().manual_seed(seed)
    return [torch.randn(2, heads, n, d, generator=generator, dtype=torch.float64) for _ in "qkv"]


def test_sink_attention_equals_the_oracle_with_and_without_a_mask():
    queries, keys, values = qkv()
    sinks = torch.tensor([-1.0, 0.0, 2.5], dtype=torch.float64)
    mask = causal_mask(5)[None, None].expand(2, 3, 5, 5).clone()
    mask[1, 2, 3] = False  # a row with no allowed key: all weight on the sink
    for allowed in (None, mask):
        out, weights = attend_with_sink_unchecked(queries, keys, values, allowed, sinks)
        for b in range(2):
            for h in range(3):
                row_mask = None if allowed is None else allowed[b, h].numpy()
                want_out, want_weights = reference.sink_attention(
                    queries[b, h].numpy(), keys[b, h].numpy(), values[b, h].numpy(),
                    sinks[h].item(), row_mask,
                )  # fmt: skip
                np.testing.assert_allclose(weights[b, h].numpy(), want_weights, atol=1e-12)
                np.testing.assert_allclose(out[b, h].numpy(), want_out, atol=1e-12)
    assert out[1, 2, 3].abs().max().item() == 0.0 and weights[1, 2, 3].sum().item() == 0.0


def test_a_very_low_sink_logit_is_plain_attention_and_a_high_one_takes_everything():
    queries, keys, values = qkv(seed=1, heads=1)
    plain = torch.softmax(queries @ keys.transpose(-1, -2) / 2.0, dim=-1)
    _, low = attend_with_sink_unchecked(queries, keys, values, None, torch.tensor([-1e4]))
    torch.testing.assert_close(low, plain)
    _, high = attend_with_sink_unchecked(queries, keys, values, None, torch.tensor([1e4]))
    assert high.abs().max().item() == 0.0


def test_the_oracle_row_sums_to_one_with_the_sink():
    q, k, v = (np.arange(12.0).reshape(3, 4) / 10 for _ in range(3))
    _, weights = reference.sink_attention(q, k, v, sink_logit=0.3)
    scores = q @ k.T / 2
    expected_sink = np.exp(0.3) / (np.exp(scores).sum(-1) + np.exp(0.3))
    np.testing.assert_allclose(1 - weights.sum(-1), expected_sink, atol=1e-12)


def lm(sink: str | None, **changes) -> DecoderOnlyLM:
    options = dict(
        vocab_size=17, d_model=16, num_heads=4, num_layers=2, d_ff=0, dropout=0.0,
        positions="rotary", norm_first=True, attention_sink=sink,
    )  # fmt: skip
    torch.manual_seed(0)
    return DecoderOnlyLM(TransformerConfig(**(options | changes))).eval()


@pytest.mark.parametrize("sink", ["learned", "plus_one"])
def test_the_model_with_a_sink_gives_the_same_logits_on_every_path_and_with_the_cache(sink):
    model = lm(sink)
    ids = torch.randint(1, 17, (2, 9), generator=torch.Generator().manual_seed(3))
    with torch.no_grad():
        logits, weights = model.attention_weights(ids)
        model.implementation = "sdpa"
        torch.testing.assert_close(model(ids), logits)
        cache = model.new_cache(2)
        stepwise = torch.cat([model.decode(ids[:, t : t + 1], cache)[0] for t in range(9)], dim=1)
    torch.testing.assert_close(stepwise, logits, atol=1e-5, rtol=0)
    assert (weights.sum(-1) < 1).all()  # every row leaves some weight to the sink
    learned = [name for name, _ in model.named_parameters() if "sink" in name]
    assert len(learned) == (2 if sink == "learned" else 0)


def test_a_learned_sink_trains_and_plus_one_stays_at_zero():
    for sink in ("learned", "plus_one"):
        model = lm(sink).train()
        ids = torch.randint(1, 17, (4, 8), generator=torch.Generator().manual_seed(4))
        loss = torch.nn.functional.cross_entropy(
            model(ids)[:, :-1].flatten(0, 1), ids[:, 1:].flatten()
        )
        loss.backward()
        logits = model.layers[0].attention.sink_logits
        assert logits.shape == (4,)
        assert (logits.grad is not None and logits.grad.abs().sum() > 0) == (sink == "learned")
        assert logits.abs().sum().item() == 0.0


def test_sinks_refuse_flash_and_unknown_kinds_and_encoders_take_none():
    model = lm("learned")
    model.implementation = "flash"
    with pytest.raises(ValueError, match="flash implementation has no attention sink"):
        model(torch.ones(1, 3, dtype=torch.long))
    with pytest.raises(ValueError, match="unknown attention_sink 'zero'"):
        TransformerConfig(vocab_size=5, d_model=8, num_heads=2, attention_sink="zero")
    with pytest.raises(ValueError, match="sink must be None or one of"):
        MultiHeadAttention(8, 2, sink="always")
    config = TransformerConfig(vocab_size=5, d_model=8, num_heads=2, attention_sink="learned")
    assert "attention_sink='learned'" in repr(config)
    assert "attention_sink" not in repr(TransformerConfig(vocab_size=5, d_model=8, num_heads=2))
    from attnlib.encoder import Encoder

    assert Encoder(config).layers[0].attention.sink is None
    copy = MultiHeadAttention(8, 2, sink="learned").rotary()
    assert copy.sink == "learned" and copy.sink_logits.requires_grad
