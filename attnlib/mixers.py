"""Sequence mixers for one harness: softmax attention and what replaces or compresses it.

Every mixer maps (batch, n, d_model) -> (batch, n, d_model) causally (position t reads
positions 0..t only) and is named in :data:`MIXERS`:

- ``"softmax"``: multi-head attention (:class:`~attnlib.attention.MultiHeadAttention`);
- ``"latent"``: multi-head latent attention (:class:`~attnlib.mla.MultiHeadLatentAttention`);
- ``"linear"``: linear attention with elu + 1 features
  (:func:`~attnlib.linear_attention.linear_attention`);
- ``"gated"``: gated linear attention, a forget gate per key feature from the token itself;
- ``"delta"``: the delta rule (DeltaNet), unit keys and a write strength β from the token.

The last three keep a state of fixed size when generating; the first two a cache that grows.
Each is written in its parallel form, for training (:mod:`attnlib.linear_attention` holds the
recurrent forms and the checks that they agree). :class:`ShortConvolution` is the short causal
convolution that such models put before a mixer (Zoology, Mamba, DeltaNet all use one).
:class:`MixerLayer` is the block a decoder-only model (:class:`~attnlib.lm.DecoderOnlyLM`) builds
around one when its config names a ``mixer``.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from attnlib._checks import check_count, check_probability
from attnlib.attention import MultiHeadAttention
from attnlib.kv_cache import KVCache, LayerKV
from attnlib.linear_attention import (
    LinearState,
    delta_rule,
    delta_rule_step,
    gated_linear_attention,
    gated_linear_attention_step,
    linear_attention,
    linear_attention_step,
)
from attnlib.mla import LatentCache, MultiHeadLatentAttention
from attnlib.transformer import FeedForward

MIN_LOG_GATE = -1.0  # a gate forgets at most 1 - e^-1 a step: keeps exp(-Σ log a) in range
# GLA's temperature: log σ(·) / 16 starts every gate near σ(0)^(1/16) = 0.96, so an untrained
# state remembers dozens of tokens, not the one or two that σ(0) = 0.5 a step would leave.
GATE_TEMPERATURE = 16.0


class ShortConvolution(nn.Module):
    """A depthwise causal convolution over the last ``width`` positions: (b, n, d) -> same."""

    def __init__(self, d_model: int, width: int = 4) -> None:
        super().__init__()
        self.width = check_count("width", width)
        self.conv = nn.Conv1d(d_model, d_model, width, groups=d_model)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """x (batch, n, d_model) -> (batch, n, d_model), position t from t - width + 1 .. t."""
        padded = F.pad(x.transpose(1, 2), (self.width - 1, 0))  # zeros before the first
        return self.conv(padded).transpose(1, 2)

    def step(self, x: torch.Tensor, past: torch.Tensor | None) -> tuple[torch.Tensor, torch.Tensor]:
        """One position x (batch, 1, d_model) after the ``width - 1`` inputs before it (batch,
        width - 1, d_model; None: zeros, the start) -> output (batch, 1, d_model), and the
        last ``width - 1`` inputs, this one's included."""
        if past is None:
            past = x.new_zeros(x.shape[0], self.width - 1, x.shape[2])
        window = torch.cat([past, x], dim=1)  # (batch, width, d_model)
        return self.conv(window.transpose(1, 2)).transpose(1, 2), window[:, 1:]


class _Heads(nn.Module):
    """Queries, keys and values split into heads, and the output projection, shared by the
    linear mixers."""

    def __init__(self, d_model: int, num_heads: int) -> None:
        super().__init__()
        check_count("d_model", d_model)
        if d_model % check_count("num_heads", num_heads):
            raise ValueError(f"num_heads={num_heads} does not divide d_model={d_model}")
        self.num_heads, self.head_dim = num_heads, d_model // num_heads
        self.qkv = nn.Linear(d_model, 3 * d_model, bias=False)
        self.output = nn.Linear(d_model, d_model, bias=False)

    def split(self, x: torch.Tensor) -> torch.Tensor:
        """(batch, n, heads * width) -> (batch, heads, n, width)."""
        batch, n, _ = x.shape
        return x.view(batch, n, self.num_heads, -1).transpose(1, 2)

    def project(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """x (batch, n, d_model) -> queries, keys, values, each (batch, heads, n, head_dim)."""
        return tuple(self.split(part) for part in self.qkv(x).chunk(3, dim=-1))

    def merge(self, heads: torch.Tensor) -> torch.Tensor:
        """(batch, heads, n, head_dim) -> the output projection of (batch, n, d_model)."""
        batch, _, n, _ = heads.shape
        return self.output(heads.transpose(1, 2).reshape(batch, n, -1))


class SoftmaxMixer(nn.Module):
    """Causal multi-head softmax attention; ``num_kv_heads`` (None: one per query head) groups
    the query heads around fewer key/value heads (chapter 16's GQA, MQA with 1)."""

    def __init__(self, d_model: int, num_heads: int, num_kv_heads: int | None = None) -> None:
        super().__init__()
        self.attention = MultiHeadAttention(d_model, num_heads, num_kv_heads=num_kv_heads)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """(batch, n, d_model) -> same."""
        return self.attention.forward_prepared(x, x, x, None, "sdpa", causal=True)[0]

    def step(self, x: torch.Tensor, memory: LayerKV | None) -> tuple[torch.Tensor, LayerKV]:
        """One position x (batch, 1, d_model) -> same, and the cache of keys and values."""
        memory = LayerKV() if memory is None else memory
        out = self.attention.forward_prepared(x, x, x, None, "sdpa", causal=True, cache=memory)
        return out[0], memory


class LatentMixer(nn.Module):
    """Multi-head latent attention: keys and values from a ``kv_rank`` latent."""

    def __init__(self, d_model: int, num_heads: int, kv_rank: int | None = None) -> None:
        super().__init__()
        rank = d_model // 2 if kv_rank is None else kv_rank
        self.attention = MultiHeadLatentAttention(d_model, num_heads, rank)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """(batch, n, d_model) -> same."""
        return self.attention(x)[0]

    def step(self, x: torch.Tensor, memory: LatentCache | None) -> tuple[torch.Tensor, LatentCache]:
        """One position x (batch, 1, d_model) -> same, and the cache of latents (absorbed)."""
        memory = LatentCache() if memory is None else memory
        return self.attention.decode(x, memory), memory


class LinearMixer(_Heads):
    """Causal linear attention, elu + 1 features."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """(batch, n, d_model) -> same."""
        return self.merge(linear_attention(*self.project(x))[0])

    def step(self, x: torch.Tensor, memory: LinearState | None) -> tuple[torch.Tensor, LinearState]:
        """One position x (batch, 1, d_model) -> same, and the state S, z."""
        query, key, value = (part[:, :, 0] for part in self.project(x))  # (batch, heads, d)
        if memory is None:
            memory = LinearState.empty(*key.shape[:2], key.shape[-1], value.shape[-1], value)
        out, memory = linear_attention_step(query, key, value, memory)
        return self.merge(out[:, :, None]), memory


class GatedMixer(_Heads):
    """Gated linear attention: each token sets how much of every key feature the state keeps,
    log a = max(log σ(x W_a) / GATE_TEMPERATURE, MIN_LOG_GATE); the output is normalised per
    head."""

    def __init__(self, d_model: int, num_heads: int) -> None:
        super().__init__(d_model, num_heads)
        self.gate = nn.Linear(d_model, d_model)
        self.norm = nn.LayerNorm(self.head_dim)

    def inputs(self, x: torch.Tensor) -> tuple[torch.Tensor, ...]:
        """x (batch, n, d_model) -> queries, scaled keys, log gates (batch, heads, n, head_dim)
        and values (batch, heads, n, head_dim), in the recurrence's order."""
        queries, keys, values = self.project(x)
        log_gates = F.logsigmoid(self.gate(x)) / GATE_TEMPERATURE
        log_gates = self.split(log_gates.clamp(min=MIN_LOG_GATE))
        return queries, keys / self.head_dim**0.5, values, log_gates

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """(batch, n, d_model) -> same."""
        return self.merge(self.norm(gated_linear_attention(*self.inputs(x))))

    def step(
        self, x: torch.Tensor, memory: torch.Tensor | None
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """One position x (batch, 1, d_model) -> same, and the state S (batch, heads, d, d)."""
        query, key, value, log_gate = (part[:, :, 0] for part in self.inputs(x))
        if memory is None:
            memory = value.new_zeros(*key.shape, value.shape[-1])
        out, memory = gated_linear_attention_step(query, key, value, log_gate, memory)
        return self.merge(self.norm(out[:, :, None])), memory


class DeltaMixer(_Heads):
    """The delta rule: unit queries and keys, a write strength β = σ(x w_β) per head and token;
    the output is normalised per head."""

    def __init__(self, d_model: int, num_heads: int) -> None:
        super().__init__(d_model, num_heads)
        self.beta = nn.Linear(d_model, num_heads)
        self.norm = nn.LayerNorm(self.head_dim)

    def inputs(self, x: torch.Tensor) -> tuple[torch.Tensor, ...]:
        """x (batch, n, d_model) -> unit queries and keys, values (batch, heads, n, head_dim)
        and β (batch, heads, n)."""
        queries, keys, values = self.project(x)
        queries, keys = F.normalize(queries, dim=-1), F.normalize(keys, dim=-1)
        return queries, keys, values, torch.sigmoid(self.beta(x)).transpose(1, 2)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """(batch, n, d_model) -> same."""
        return self.merge(self.norm(delta_rule(*self.inputs(x))))

    def step(
        self, x: torch.Tensor, memory: torch.Tensor | None
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """One position x (batch, 1, d_model) -> same, and the state S (batch, heads, d, d)."""
        query, key, value, beta = (part[:, :, 0] for part in self.inputs(x))
        if memory is None:
            memory = value.new_zeros(*value.shape, key.shape[-1])
        out, memory = delta_rule_step(query, key, value, beta, memory)
        return self.merge(self.norm(out[:, :, None])), memory


MIXERS = {
    "softmax": SoftmaxMixer,
    "latent": LatentMixer,
    "linear": LinearMixer,
    "gated": GatedMixer,
    "delta": DeltaMixer,
}


def make_mixer(
    name: str, d_model: int, num_heads: int, num_kv_heads: int | None = None
) -> nn.Module:
    """The mixer ``name`` of :data:`MIXERS`, for width ``d_model`` and ``num_heads`` heads;
    ``num_kv_heads`` groups the heads of "softmax" (the only mixer with key/value heads)."""
    if name not in MIXERS:
        raise ValueError(f"unknown mixer {name!r}; choose one of {', '.join(map(repr, MIXERS))}")
    if num_kv_heads is None:
        return MIXERS[name](d_model, num_heads)
    if name != "softmax":
        raise ValueError(f"num_kv_heads groups softmax attention's heads; mixer {name!r} has none")
    return SoftmaxMixer(d_model, num_heads, num_kv_heads)


class MixerLayer(nn.Module):
    """A pre-LN block around a mixer: x + mixer(conv(LN(x))), then x + FF(LN(x)); each sublayer's
    output passes dropout. ``conv_width`` (None: no convolution) puts a
    :class:`ShortConvolution` before the mixer; ``d_ff=0`` leaves the feed-forward out;
    ``num_kv_heads`` groups a softmax mixer's heads."""

    def __init__(
        self,
        mixer: str,
        d_model: int,
        num_heads: int,
        d_ff: int,
        dropout: float = 0.0,
        activation: str = "relu",
        conv_width: int | None = None,
        num_kv_heads: int | None = None,
    ) -> None:
        super().__init__()
        self.mixer_name = mixer
        self.mixer = make_mixer(mixer, d_model, num_heads, num_kv_heads)
        self.convolution = (
            nn.Identity() if conv_width is None else ShortConvolution(d_model, conv_width)
        )
        check_probability("dropout", dropout)
        self.feed_forward = FeedForward(d_model, d_ff, dropout, activation) if d_ff else None
        self.norm1 = nn.LayerNorm(d_model)
        self.norm2 = nn.LayerNorm(d_model) if d_ff else nn.Identity()
        self.dropout1, self.dropout2 = nn.Dropout(dropout), nn.Dropout(dropout)

    def forward(
        self,
        x: torch.Tensor,
        mask4d: torch.Tensor | None = None,
        need_weights: bool = False,
        cache: MixerMemory | None = None,
    ) -> tuple[torch.Tensor, None]:
        """(batch, n, d_model) -> same, None: an :class:`~attnlib.transformer.EncoderLayer`'s
        call, causal always; it forms no weights. With ``cache``, x holds the positions after
        those it has seen, and they run one at a time, as in generation."""
        if mask4d is not None or need_weights:
            raise ValueError(
                f"a {self.mixer_name!r} mixer block takes no mask and forms no attention weights"
            )
        if cache is None:
            mixed = self.mixer(self.convolution(self.norm1(x)))
        else:
            mixed = torch.cat([self._step(x[:, t : t + 1], cache) for t in range(x.shape[1])], 1)
        x = x + self.dropout1(mixed)
        if self.feed_forward is not None:
            x = x + self.dropout2(self.feed_forward(self.norm2(x)))
        return x, None

    def _step(self, x: torch.Tensor, memory: MixerMemory) -> torch.Tensor:
        """One position x (batch, 1, d_model) -> the mixer's output there; ``memory`` moves on."""
        x = self.norm1(x)
        if isinstance(self.convolution, ShortConvolution):
            x, memory.convolution = self.convolution.step(x, memory.convolution)
        out, memory.mixer = self.mixer.step(x, memory.mixer)
        memory.seen += 1
        return out


class MixerMemory:
    """What a :class:`MixerLayer` keeps between positions in generation: its convolution's last
    inputs and its mixer's cache or state (a :class:`~attnlib.kv_cache.LayerKV`, a
    :class:`~attnlib.mla.LatentCache`, a :class:`~attnlib.linear_attention.LinearState` or a
    state tensor), each made at the first position."""

    def __init__(self) -> None:
        self.convolution: torch.Tensor | None = None
        self.mixer: LayerKV | LatentCache | LinearState | torch.Tensor | None = None
        self.seen = 0

    def nbytes(self) -> int:
        """Bytes held: a cache grows with the positions seen, a state does not."""
        held = [self.convolution, self.mixer]
        return sum(
            part.numel() * part.element_size() if isinstance(part, torch.Tensor) else part.nbytes()
            for part in held
            if part is not None
        )


class MixerCache(KVCache):
    """The generation memory of a stack of :class:`MixerLayer` blocks for one batch: a
    :class:`MixerMemory` per layer, fed as a :class:`~attnlib.kv_cache.KVCache` is."""

    def __init__(self, num_layers: int, batch: int) -> None:
        super().__init__(num_layers, batch)
        self.layers = [MixerMemory() for _ in self.layers]
