"""Linear attention: its recurrent form equals its parallel form, and its state does not grow."""

from __future__ import annotations

import math

import pytest
import torch

from attnlib.linear_attention import (
    LinearState,
    delta_rule,
    delta_rule_recurrent,
    elu_feature,
    gated_linear_attention,
    gated_linear_attention_recurrent,
    linear_attention,
    linear_attention_recurrent,
    linear_attention_step,
)


def qkv(n: int = 9, d_k: int = 4, d_v: int = 3, seed: int = 0) -> list[torch.Tensor]:
    generator = torch.Generator().manual_seed(seed)
    shapes = [(2, 3, n, d_k), (2, 3, n, d_k), (2, 3, n, d_v)]
    return [torch.randn(*shape, generator=generator, dtype=torch.float64) for shape in shapes]


def test_the_recurrent_form_equals_the_parallel_form():
    queries, keys, values = qkv()
    parallel, _ = linear_attention(queries, keys, values)
    recurrent, memory = linear_attention_recurrent(queries, keys, values)
    torch.testing.assert_close(recurrent, parallel, atol=1e-12, rtol=0)
    assert memory.state.shape == (2, 3, 4, 3) and memory.normaliser.shape == (2, 3, 4)


def test_without_a_mask_every_query_reads_the_final_state():
    queries, keys, values = qkv(seed=1)
    everything, _ = linear_attention(queries, keys, values, causal=False)
    _, memory = linear_attention_recurrent(queries, keys, values)
    for t in range(queries.shape[2]):  # a query after the whole text, read from S and z alone
        read, _ = linear_attention_step(
            queries[:, :, t], keys[:, :, 0] * 0 - 1e9, values[:, :, 0] * 0, memory
        )  # a key of φ(k) = 0 adds nothing to the state
        torch.testing.assert_close(read, everything[:, :, t], atol=1e-12, rtol=0)


def test_weights_are_positive_causal_and_sum_to_one():
    queries, keys, values = qkv(seed=2)
    _, weights = linear_attention(queries, keys, values)
    n = weights.shape[-1]
    above = ~torch.ones(n, n, dtype=torch.bool).tril()
    assert weights[..., above].abs().max().item() == 0.0
    assert weights[..., ~above].min().item() > 0.0
    sums = weights.sum(-1)  # 1 but for EPS in the denominator
    torch.testing.assert_close(sums, torch.ones_like(sums), atol=1e-5, rtol=0)


def test_the_state_is_the_same_size_after_five_tokens_or_fifty():
    small = linear_attention_recurrent(*qkv(n=5))[1].nbytes()
    large = linear_attention_recurrent(*qkv(n=50))[1].nbytes()
    assert small == large == 2 * 3 * (4 * 3 + 4) * 8  # float64: S (4 x 3) and z (4) per head


def test_the_feature_map_is_elu_plus_one():
    x = torch.tensor([-2.0, 0.0, 1.5], dtype=torch.float64)
    assert elu_feature(x).tolist() == pytest.approx([math.exp(-2.0), 1.0, 2.5])
    empty = LinearState.empty(1, 2, 3, 4, x)
    assert empty.state.shape == (1, 2, 3, 4) and empty.state.dtype == torch.float64


@pytest.mark.parametrize(
    ("shapes", "message"),
    [
        (((1, 2, 5, 4), (1, 2, 5, 3), (1, 2, 5, 3)), "must have one shape"),
        (((1, 2, 5, 4), (1, 2, 5, 4), (1, 2, 6, 3)), "must match keys"),
        (((2, 5, 4), (2, 5, 4), (2, 5, 4)), "at least 4 dimensions"),
    ],
)
def test_linear_attention_says_what_is_wrong(shapes, message):
    tensors = [torch.zeros(*shape) for shape in shapes]
    with pytest.raises(ValueError, match=message):
        linear_attention(*tensors)


def gates(n: int = 9, d_k: int = 4, seed: int = 5) -> torch.Tensor:
    """log gates in (log 0.5, 0): each step keeps 50% to 100% of every key feature."""
    generator = torch.Generator().manual_seed(seed)
    return -torch.rand(2, 3, n, d_k, generator=generator, dtype=torch.float64) * math.log(2)


def test_the_gated_recurrence_equals_its_parallel_form():
    queries, keys, values = qkv(seed=4)
    log_gates = gates()
    parallel = gated_linear_attention(queries, keys, values, log_gates)
    recurrent, state = gated_linear_attention_recurrent(queries, keys, values, log_gates)
    torch.testing.assert_close(recurrent, parallel, atol=1e-12, rtol=0)
    assert state.shape == (2, 3, 4, 3)


def test_gates_of_one_keep_everything_and_small_gates_forget():
    queries, keys, values = qkv(seed=6)
    keep = gated_linear_attention(queries, keys, values, torch.zeros_like(keys))
    unnormalised = (queries @ keys.transpose(-2, -1)).tril() @ values  # no gate: a plain sum
    torch.testing.assert_close(keep, unnormalised, atol=1e-12, rtol=0)
    forget = torch.full_like(keys, -50.0)  # each step keeps e^-50 of the state: only itself
    alone = gated_linear_attention(queries, keys, values, forget)
    itself = (queries * keys).sum(-1, keepdim=True) * values
    torch.testing.assert_close(alone, itself, atol=1e-12, rtol=0)


def test_gated_linear_attention_refuses_gates_above_one():
    queries, keys, values = qkv()
    with pytest.raises(ValueError, match="log_gates must be <= 0"):
        gated_linear_attention(queries, keys, values, torch.full_like(keys, 0.1))
    with pytest.raises(ValueError, match="must have the keys' shape"):
        gated_linear_attention_recurrent(queries, keys, values, torch.zeros(2, 3, 9, 5))


def betas(n: int = 9, seed: int = 7) -> torch.Tensor:
    return torch.rand(2, 3, n, generator=torch.Generator().manual_seed(seed), dtype=torch.float64)


def unit_keys(n: int = 9, seed: int = 8) -> torch.Tensor:
    """Keys of length 1, as DeltaNet normalises them (the update is then a projection)."""
    keys = qkv(n=n, seed=seed)[1]
    return keys / keys.norm(dim=-1, keepdim=True)


def test_the_delta_rule_recurrence_equals_its_parallel_form():
    queries, _, values = qkv(seed=9)
    keys, beta = unit_keys(), betas()
    parallel = delta_rule(queries, keys, values, beta)
    recurrent, state = delta_rule_recurrent(queries, keys, values, beta)
    torch.testing.assert_close(recurrent, parallel, atol=1e-10, rtol=0)
    assert state.shape == (2, 3, 3, 4)


def test_the_delta_rule_overwrites_a_key_where_linear_attention_adds():
    """Two orthonormal keys; the first written twice, with different values, at β = 1. Asked
    with that key, the delta rule returns the latest value; a plain sum returns both."""
    e1, e2 = torch.eye(4, dtype=torch.float64)[:2]
    keys = torch.stack([e1, e2, e1])[None, None]  # (1, 1, 3, 4)
    values = torch.tensor([[1.0, 0.0], [0.0, 1.0], [5.0, 5.0]], dtype=torch.float64)[None, None]
    queries = keys.clone()
    out = delta_rule(queries, keys, values, torch.ones(1, 1, 3, dtype=torch.float64))
    assert out[0, 0, 2].tolist() == pytest.approx([5.0, 5.0])  # the old [1, 0] is gone
    summed = gated_linear_attention(queries, keys, values, torch.zeros_like(keys))
    assert summed[0, 0, 2].tolist() == pytest.approx([6.0, 5.0])  # old and new added up


def test_the_delta_rule_refuses_beta_outside_zero_to_one():
    queries, keys, values = qkv()
    with pytest.raises(ValueError, match=r"beta must be in \[0, 1\]"):
        delta_rule(queries, keys, values, torch.full((2, 3, 9), 1.5, dtype=torch.float64))
    with pytest.raises(ValueError, match=r"must be \(batch, heads, n\)"):
        delta_rule_recurrent(queries, keys, values, torch.ones(2, 3, 8))
