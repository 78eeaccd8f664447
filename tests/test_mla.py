"""Multi-head latent attention: the absorbed form at decode time equals the naive form."""

from __future__ import annotations

import pytest
import torch

from attnlib.mla import LatentCache, MultiHeadLatentAttention


def mla(seed: int = 0, **changes) -> MultiHeadLatentAttention:
    torch.manual_seed(seed)
    options = {"d_model": 24, "num_heads": 3, "kv_rank": 6, "rope_dim": 4} | changes
    return MultiHeadLatentAttention(**options).double()


def hidden(n: int = 10, seed: int = 1) -> torch.Tensor:
    return torch.randn(2, n, 24, generator=torch.Generator().manual_seed(seed), dtype=torch.float64)


def test_decoding_from_the_latent_cache_equals_the_naive_form():
    layer, x = mla(), hidden()
    naive, _ = layer(x)
    cache = LatentCache()
    stepwise = torch.cat([layer.decode(x[:, t : t + 1], cache) for t in range(10)], dim=1)
    torch.testing.assert_close(stepwise, naive, atol=1e-12, rtol=0)
    prefilled = LatentCache()  # a prompt of 6, then one position at a time
    parts = [layer.decode(x[:, :6], prefilled)] + [
        layer.decode(x[:, t : t + 1], prefilled) for t in range(6, 10)
    ]
    torch.testing.assert_close(torch.cat(parts, dim=1), naive, atol=1e-12, rtol=0)


def test_the_cache_holds_the_latent_and_one_rope_key_a_token():
    layer, cache = mla(), LatentCache()
    layer.decode(hidden(7), cache)
    assert cache.length == 7 and cache.latents.shape == (2, 7, 6)
    assert cache.nbytes() == 2 * 7 * (6 + 4) * 8  # float64
    assert layer.cache_bytes_per_token() == (6 + 4) * 4
    assert layer.cache_bytes_per_token() < 2 * 24 * 4  # multi-head attention's keys and values


def test_the_weights_are_causal_and_the_rope_part_sees_only_offsets():
    layer, x = mla(seed=2), hidden(seed=3)
    _, weights = layer(x)
    above = ~torch.ones(10, 10, dtype=torch.bool).tril()
    assert weights[..., above].abs().max().item() == 0.0
    torch.testing.assert_close(weights.sum(-1), torch.ones(2, 3, 10, dtype=torch.float64))
    # The decoupled rotary part scores offsets only: the same tokens placed 5 positions later
    # give the same rope scores.
    first_queries, first_keys = layer._rotated(x, 0)
    later_queries, later_keys = layer._rotated(x, 5)
    torch.testing.assert_close(
        later_queries @ later_keys[:, None].transpose(-2, -1),
        first_queries @ first_keys[:, None].transpose(-2, -1),
        atol=1e-12,
        rtol=0,
    )
    assert not torch.allclose(later_keys, first_keys)  # the keys themselves did move


@pytest.mark.parametrize(
    ("changes", "error", "message"),
    [
        ({"num_heads": 5}, ValueError, "does not divide d_model=24"),
        ({"kv_rank": 0}, ValueError, "kv_rank must be positive"),
        ({"rope_dim": 3}, ValueError, "even"),
    ],
)
def test_mla_says_what_is_wrong(changes, error, message):
    with pytest.raises(error, match=message):
        mla(**changes)
