"""Streaming with a rolling KV cache: what the sink cache keeps, and each strategy's losses
against a computation that needs no cache."""

from __future__ import annotations

import math

import pytest
import torch
import torch.nn.functional as F

from attnlib.encoder import TransformerConfig
from attnlib.lm import DecoderOnlyLM
from attnlib.streaming import SinkCache, perplexity_by_position, sink_cache, stream_losses

TOLERANCE = 1e-5


def model(layers: int = 1, seed: int = 0, **changes) -> DecoderOnlyLM:
    """A small untrained rotary language model, in eval mode."""
    options = dict(
        vocab_size=23, d_model=16, num_heads=2, num_layers=layers, d_ff=24, dropout=0.0,
        positions="rotary", norm_first=True, max_len=16,
    )  # fmt: skip
    torch.manual_seed(seed)
    return DecoderOnlyLM(TransformerConfig(**(options | changes))).eval()


def text(n: int, seed: int = 1) -> torch.Tensor:
    return torch.randint(1, 23, (n,), generator=torch.Generator().manual_seed(seed))


def losses_of(lm: DecoderOnlyLM, ids: torch.Tensor) -> torch.Tensor:
    """Next-token losses (n - 1,) of one forward pass over ids (n,): no cache at all."""
    with torch.no_grad():
        logits = lm.decode(ids[None])[0][0]
    return F.cross_entropy(logits[:-1], ids[1:], reduction="none")


def test_the_sink_cache_keeps_the_sinks_and_the_last_window():
    cache = SinkCache(sinks=2, window=4)
    for t in range(10):
        place = torch.full((1, 1, 1, 1), float(t))  # a key that says which position it is
        keys, _ = cache.update(place, place)
    assert keys.flatten().tolist() == [0, 1, 6, 7, 8, 9]  # 2 sinks, then the last 4
    assert cache.seen == 10 and cache.renumbers
    cache = SinkCache(sinks=0, window=1)
    for t in range(3):
        keys, _ = cache.update(*(torch.full((1, 1, 1, 1), float(t)),) * 2)
    assert keys.flatten().tolist() == [2]


def test_with_sinks_one_layer_sees_exactly_the_kept_tokens_at_cache_positions():
    """A one-layer model: each loss equals a fresh pass over the sinks and the window alone,
    numbered 0, 1, ... as the cache numbers them (StreamingLLM's positions)."""
    lm, ids, sinks, window = model(), text(40), 3, 6
    streamed = stream_losses(lm, ids, "sinks", window, sinks)
    for t in range(ids.numel() - 1):
        kept = (
            torch.arange(t + 1)
            if t < sinks + window
            else torch.cat([torch.arange(sinks), torch.arange(t - window + 1, t + 1)])
        )
        fresh = losses_of(lm, torch.cat([ids[kept], ids[t + 1 : t + 2]]))[-1]
        assert streamed[t] == pytest.approx(fresh.item(), abs=TOLERANCE), t


def test_window_only_equals_recomputing_the_window_for_one_layer():
    lm, ids = model(), text(30)
    window_only = stream_losses(lm, ids, "window", 5)
    recomputed = stream_losses(lm, ids, "recompute", 5)
    torch.testing.assert_close(window_only, recomputed, atol=TOLERANCE, rtol=0)


def test_recompute_predicts_from_the_last_window_tokens_alone():
    lm, ids, window = model(layers=2), text(25), 7
    recomputed = stream_losses(lm, ids, "recompute", window)
    assert recomputed.shape == (24,)
    torch.testing.assert_close(
        recomputed[:window], losses_of(lm, ids[: window + 1]), atol=TOLERANCE, rtol=0
    )
    for t in (window, 15, 23):
        fresh = losses_of(lm, ids[t - window + 1 : t + 2])[-1]
        assert recomputed[t] == pytest.approx(fresh.item(), abs=TOLERANCE), t


def test_the_full_cache_is_one_forward_pass_and_a_cache_that_evicts_nothing_is_too():
    lm, ids = model(layers=2), text(33)
    whole = losses_of(lm, ids)
    torch.testing.assert_close(stream_losses(lm, ids, "full", 4), whole, atol=TOLERANCE, rtol=0)
    roomy = stream_losses(lm, ids, "sinks", window=64, sinks=2)  # never full: nothing evicted
    torch.testing.assert_close(roomy, whole, atol=TOLERANCE, rtol=0)


def test_sink_cache_builds_one_per_layer_and_the_model_keeps_its_mode():
    cache = sink_cache(3, 2, sinks=4, window=8)
    assert [type(layer) for layer in cache.layers] == [SinkCache] * 3 and cache.batch == 2
    lm = model().train()
    stream_losses(lm, text(5), "sinks", 2)
    assert lm.training


def test_perplexity_by_position_averages_losses_over_stretches():
    losses = torch.tensor([0.0, 2.0, 1.0, 1.0, 5.0])
    assert perplexity_by_position(losses, 2).tolist() == pytest.approx([math.e, math.e])
    assert perplexity_by_position(losses, 5).tolist() == pytest.approx([math.exp(1.8)])


@pytest.mark.parametrize(
    ("call", "error", "message"),
    [
        (
            lambda: stream_losses(model(), text(5), "evict", 2),
            ValueError,
            "strategy must be one of",
        ),
        (lambda: stream_losses(object(), text(5), "full", 2), TypeError, "DecoderOnlyLM"),
        (lambda: stream_losses(model(), text(5).float(), "full", 2), TypeError, "1-D torch.long"),
        (lambda: stream_losses(model(), text(1), "full", 2), ValueError, "at least 2 tokens"),
        (lambda: stream_losses(model(), text(5), "full", 0), ValueError, "window must be positive"),
        (
            lambda: stream_losses(model(), text(5), "sinks", 2, -1),
            ValueError,
            "sinks must be an int >= 0",
        ),
        (
            lambda: stream_losses(model(positions="learned"), text(5), "sinks", 2),
            ValueError,
            "use strategy='recompute'",
        ),
        (
            lambda: stream_losses(model(positions="learned"), text(5), "recompute", 20),
            ValueError,
            "longer than the position table",
        ),
        (lambda: stream_losses(model(window=4), text(5), "sinks", 2), ValueError, "window=4"),
        (lambda: SinkCache(sinks=1.5, window=2), TypeError, "sinks must be an int"),
        (lambda: perplexity_by_position(torch.ones(3), 4), ValueError, "no stretch of 4"),
        (lambda: perplexity_by_position(torch.ones(2, 2), 1), TypeError, "1-D tensor"),
    ],
)
def test_streaming_says_what_is_wrong(call, error, message):
    with pytest.raises(error, match=message):
        call()
