"""Linear attention (Katharopoulos et al. 2020): softmax's exp(q·k) replaced by φ(q)·φ(k).

With a feature map φ (here elu(x) + 1, positive everywhere) the weight of key j for query i is
φ(q_i)·φ(k_j) / Σ_l φ(q_i)·φ(k_l), and the sums factor: a causal output is

    out_i = φ(q_i)ᵀ S_i / φ(q_i)ᵀ z_i,   S_i = Σ_{j ≤ i} φ(k_j) v_jᵀ,   z_i = Σ_{j ≤ i} φ(k_j).

So the same function has two forms. :func:`linear_attention` is the **parallel** one, for
training: the (n, n) matrix of φ(q)·φ(k), masked and normalised row by row, as softmax
attention is. :func:`linear_attention_recurrent` is the **recurrent** one, for generation: a
:class:`LinearState` of fixed size, S (d_k × d_v) and z (d_k) per head, updated one token at a
time by :func:`linear_attention_step`, whatever the length. Tensors are (batch, heads, n, d).

:func:`gated_linear_attention` adds a forget gate per key feature (gated linear attention, the
family of Mamba-2 and GLA): the state decays before each new token is written, so old tokens fade
instead of piling up. It too has both forms, the recurrent one and a parallel one.
:func:`delta_rule` (DeltaNet) writes each token by correcting what the state already holds
for its key, so a key written twice keeps its latest value: recurrent and parallel forms again.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F

from attnlib._checks import check_tensor
from attnlib.masks import causal_mask

EPS = 1e-6  # keeps a denominator of near-zero features finite


def elu_feature(x: torch.Tensor) -> torch.Tensor:
    """φ(x) = elu(x) + 1, positive everywhere: (..., d) -> (..., d)."""
    return F.elu(x) + 1


def _check_qkv(queries: object, keys: object, values: object) -> None:
    """(batch, heads, n, d_k) queries and keys, (batch, heads, n, d_v) values."""
    for name, tensor in (("queries", queries), ("keys", keys), ("values", values)):
        check_tensor(name, tensor, min_dims=4)
    if queries.shape != keys.shape:
        raise ValueError(
            f"queries {tuple(queries.shape)} and keys {tuple(keys.shape)} must have one shape"
        )
    if values.shape[:-1] != keys.shape[:-1]:
        raise ValueError(
            f"values {tuple(values.shape)} must match keys {tuple(keys.shape)} but for the last "
            "dimension"
        )


def linear_attention(
    queries: torch.Tensor, keys: torch.Tensor, values: torch.Tensor, causal: bool = True
) -> tuple[torch.Tensor, torch.Tensor]:
    """The parallel form: queries, keys (batch, heads, n, d_k), values (batch, heads, n, d_v)
    -> output (batch, heads, n, d_v) and weights (batch, heads, n, n), each row summing to 1."""
    _check_qkv(queries, keys, values)
    scores = elu_feature(queries) @ elu_feature(keys).transpose(-2, -1)  # (b, h, n, n), > 0
    if causal:
        scores = scores * causal_mask(scores.shape[-1], device=scores.device)
    weights = scores / (scores.sum(dim=-1, keepdim=True) + EPS)
    return weights @ values, weights


@dataclass
class LinearState:
    """What linear attention keeps between tokens, per head: ``state`` S = Σ φ(k) vᵀ
    (batch, heads, d_k, d_v) and ``normaliser`` z = Σ φ(k) (batch, heads, d_k)."""

    state: torch.Tensor
    normaliser: torch.Tensor

    @classmethod
    def empty(cls, batch: int, heads: int, d_k: int, d_v: int, like: torch.Tensor) -> LinearState:
        """Zeros, on ``like``'s device and dtype."""
        return cls(like.new_zeros(batch, heads, d_k, d_v), like.new_zeros(batch, heads, d_k))

    def nbytes(self) -> int:
        """Bytes held: the same after one token or a million."""
        return sum(t.numel() * t.element_size() for t in (self.state, self.normaliser))


def linear_attention_step(
    query: torch.Tensor, key: torch.Tensor, value: torch.Tensor, memory: LinearState
) -> tuple[torch.Tensor, LinearState]:
    """One token: query, key (batch, heads, d_k), value (batch, heads, d_v) and the state of
    the tokens before it -> output (batch, heads, d_v) and the state that includes it."""
    feature_key, feature_query = elu_feature(key), elu_feature(query)
    state = memory.state + feature_key[..., :, None] * value[..., None, :]  # += φ(k) vᵀ
    normaliser = memory.normaliser + feature_key
    numerator = (feature_query[..., None, :] @ state)[..., 0, :]  # φ(q)ᵀ S: (b, h, d_v)
    denominator = (feature_query * normaliser).sum(dim=-1, keepdim=True) + EPS
    return numerator / denominator, LinearState(state, normaliser)


def linear_attention_recurrent(
    queries: torch.Tensor, keys: torch.Tensor, values: torch.Tensor
) -> tuple[torch.Tensor, LinearState]:
    """The recurrent form of causal :func:`linear_attention`, one token at a time: output
    (batch, heads, n, d_v) and the final state."""
    _check_qkv(queries, keys, values)
    batch, heads, n, d_k = keys.shape
    memory = LinearState.empty(batch, heads, d_k, values.shape[-1], values)
    outputs = []
    for t in range(n):
        output, memory = linear_attention_step(
            queries[:, :, t], keys[:, :, t], values[:, :, t], memory
        )
        outputs.append(output)
    return torch.stack(outputs, dim=2), memory


def _check_gates(log_gates: object, keys: torch.Tensor) -> None:
    """log_gates (batch, heads, n, d_k), each <= 0: a gate in (0, 1] per key feature."""
    check_tensor("log_gates", log_gates, min_dims=4)
    if log_gates.shape != keys.shape:
        raise ValueError(
            f"log_gates {tuple(log_gates.shape)} must have the keys' shape {tuple(keys.shape)}"
        )
    if bool((log_gates > 0).any()):
        raise ValueError("log_gates must be <= 0: a gate is in (0, 1], its log at most 0")


def gated_linear_attention(
    queries: torch.Tensor, keys: torch.Tensor, values: torch.Tensor, log_gates: torch.Tensor
) -> torch.Tensor:
    """A gated linear recurrence in its parallel form (gated linear attention, Yang et al.
    2023): S_t = diag(a_t) S_{t-1} + k_t v_tᵀ and out_t = S_tᵀ q_t, with gates a_t = exp(log_gates)
    per key feature. Token j reaches query i scaled by the gates in between, Π_{j<l≤i} a_l:
    with b the running sum of log_gates, q_i ⊙ exp(b_i) against k_j ⊙ exp(-b_j), masked to
    j ≤ i. queries, keys, log_gates (batch, heads, n, d_k), values (batch, heads, n, d_v) ->
    (batch, heads, n, d_v). exp(-b) grows with the length: real kernels work in chunks."""
    _check_qkv(queries, keys, values)
    _check_gates(log_gates, keys)
    decay = torch.cumsum(log_gates, dim=2)  # b_i = Σ_{l ≤ i} log a_l, (b, h, n, d_k)
    scores = (queries * decay.exp()) @ (keys * (-decay).exp()).transpose(-2, -1)
    scores = scores * causal_mask(scores.shape[-1], device=scores.device)
    return scores @ values


def gated_linear_attention_recurrent(
    queries: torch.Tensor, keys: torch.Tensor, values: torch.Tensor, log_gates: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor]:
    """The recurrent form of :func:`gated_linear_attention`: output (batch, heads, n, d_v) and
    the final state S (batch, heads, d_k, d_v), one token at a time."""
    _check_qkv(queries, keys, values)
    _check_gates(log_gates, keys)
    batch, heads, n, d_k = keys.shape
    state = values.new_zeros(batch, heads, d_k, values.shape[-1])
    outputs = []
    for t in range(n):
        output, state = gated_linear_attention_step(
            queries[:, :, t], keys[:, :, t], values[:, :, t], log_gates[:, :, t], state
        )
        outputs.append(output)
    return torch.stack(outputs, dim=2), state


def gated_linear_attention_step(
    query: torch.Tensor,
    key: torch.Tensor,
    value: torch.Tensor,
    log_gate: torch.Tensor,
    state: torch.Tensor,
) -> tuple[torch.Tensor, torch.Tensor]:
    """One token: query, key, log_gate (batch, heads, d_k), value (batch, heads, d_v) and S
    (batch, heads, d_k, d_v) -> output q_tᵀ S_t (batch, heads, d_v) and S_t."""
    gate = log_gate.exp()[..., :, None]  # (b, h, d_k, 1): forget per key feature
    state = gate * state + key[..., :, None] * value[..., None, :]
    return (query[..., None, :] @ state)[..., 0, :], state


def _check_beta(beta: object, keys: torch.Tensor) -> None:
    """beta (batch, heads, n), each in [0, 1]: how much of each token to write."""
    check_tensor("beta", beta, min_dims=3)
    if beta.shape != keys.shape[:-1]:
        raise ValueError(
            f"beta {tuple(beta.shape)} must be (batch, heads, n) = {tuple(keys.shape[:-1])}"
        )
    if bool(((beta < 0) | (beta > 1)).any()):
        raise ValueError("beta must be in [0, 1]: the share of each token's value written")


def delta_rule(
    queries: torch.Tensor, keys: torch.Tensor, values: torch.Tensor, beta: torch.Tensor
) -> torch.Tensor:
    """The delta rule (DeltaNet, Schlag et al. 2021; Yang et al. 2024) in its parallel form.

    The recurrence writes each token by correcting what the state already says for its key:
    S_t = S_{t-1} + β_t (v_t - S_{t-1} k_t) k_tᵀ, out_t = S_t q_t, with S (d_v × d_k) per head.
    Unrolled, S_t = Σ_{j≤t} u_j k_jᵀ where u_t = β_t (v_t - Σ_{j<t} (k_j·k_t) u_j): a triangular
    system, T U = diag(β) V with T = I + diag(β) · strictly-lower(K Kᵀ), solved at once; then
    out = lower(Q Kᵀ) U. queries, keys (batch, heads, n, d_k), values (batch, heads, n, d_v),
    beta (batch, heads, n) -> (batch, heads, n, d_v)."""
    _check_qkv(queries, keys, values)
    _check_beta(beta, keys)
    n = keys.shape[2]
    lower = causal_mask(n, device=keys.device)
    overlaps = (keys @ keys.transpose(-2, -1)) * lower.tril(-1)  # k_j·k_t for j < t
    system = torch.eye(n, dtype=keys.dtype, device=keys.device) + beta[..., :, None] * overlaps
    written = torch.linalg.solve_triangular(
        system, beta[..., None] * values, upper=False, unitriangular=True
    )  # U: (b, h, n, d_v)
    return ((queries @ keys.transpose(-2, -1)) * lower) @ written


def delta_rule_recurrent(
    queries: torch.Tensor, keys: torch.Tensor, values: torch.Tensor, beta: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor]:
    """The recurrent form of :func:`delta_rule`: output (batch, heads, n, d_v) and the final
    state S (batch, heads, d_v, d_k), one token at a time."""
    _check_qkv(queries, keys, values)
    _check_beta(beta, keys)
    batch, heads, n, d_k = keys.shape
    state = values.new_zeros(batch, heads, values.shape[-1], d_k)
    outputs = []
    for t in range(n):
        output, state = delta_rule_step(
            queries[:, :, t], keys[:, :, t], values[:, :, t], beta[:, :, t], state
        )
        outputs.append(output)
    return torch.stack(outputs, dim=2), state


def delta_rule_step(
    query: torch.Tensor,
    key: torch.Tensor,
    value: torch.Tensor,
    beta: torch.Tensor,
    state: torch.Tensor,
) -> tuple[torch.Tensor, torch.Tensor]:
    """One token: query, key (batch, heads, d_k), value (batch, heads, d_v), beta (batch,
    heads) and S (batch, heads, d_v, d_k) -> output S_t q_t (batch, heads, d_v) and S_t."""
    said = (state @ key[..., None])[..., 0]  # what S says now for this key: S k_t
    correction = beta[..., None] * (value - said)  # (b, h, d_v)
    state = state + correction[..., :, None] * key[..., None, :]
    return (state @ query[..., None])[..., 0], state
