"""The KV cache as storage: what it keeps, what a window lets it forget, and its refusals."""

import pytest
import torch

from attnlib.kv_cache import KVCache, LayerKV


def _kv(n: int, start: int = 0) -> tuple[torch.Tensor, torch.Tensor]:
    """Keys and values (1, 2, n, 3) whose entries name their position: start .. start + n - 1."""
    positions = torch.arange(start, start + n, dtype=torch.float32)
    keys = positions[None, None, :, None].expand(1, 2, n, 3).clone()
    return keys, -keys


def test_layer_kv_appends_and_returns_all_it_holds():
    cache = LayerKV()
    keys, values = cache.update(*_kv(4))
    assert keys.shape == (1, 2, 4, 3) and cache.seen == cache.kept == 4
    keys, values = cache.update(*_kv(1, start=4))
    assert keys[0, 0, :, 0].tolist() == [0, 1, 2, 3, 4] and torch.equal(values, -keys)
    assert cache.seen == 5 and cache.nbytes() == 2 * 1 * 2 * 5 * 3 * 4


def test_a_window_keeps_the_last_window_minus_one_before_each_update():
    cache = LayerKV(window=3)
    cache.update(*_kv(5))  # a prompt of 5: every one is new, so all are returned
    keys, _ = cache.update(*_kv(1, start=5))
    # position 5 sees 3, 4 and itself; 0-2 are gone for good
    assert keys[0, 0, :, 0].tolist() == [3, 4, 5] and cache.seen == 6 and cache.kept == 3
    keys, _ = cache.update(*_kv(2, start=6))
    assert keys[0, 0, :, 0].tolist() == [4, 5, 6, 7]


def test_a_fixed_cache_holds_a_memory_and_takes_nothing_new():
    cache = LayerKV.fixed_to(*_kv(7))
    assert cache.fixed and cache.kept == cache.seen == 7
    with pytest.raises(RuntimeError, match="holds a fixed memory and takes no new positions"):
        cache.update(*_kv(1))


def test_kv_cache_counts_positions_and_bytes_and_refuses_another_batch():
    cache = KVCache(num_layers=2, batch=1, memory=[_kv(7), _kv(7)])
    for layer in cache.layers:
        layer.update(*_kv(4))
    assert cache.length == 4
    assert cache.nbytes() == 2 * (4 + 7) * (2 * 1 * 2 * 3 * 4)  # layers x positions x (k and v)
    with pytest.raises(ValueError, match="ids have batch 2 but this KVCache holds a batch of 1"):
        cache.check_batch(torch.zeros(2, 1, dtype=torch.long))
    with pytest.raises(ValueError, match="window must be positive, got 0"):
        KVCache(num_layers=1, batch=1, window=0)
