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
from attnlib.linear_attention import delta_rule, gated_linear_attention, linear_attention
from attnlib.mla import MultiHeadLatentAttention
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
    """Causal multi-head softmax attention."""

    def __init__(self, d_model: int, num_heads: int) -> None:
        super().__init__()
        self.attention = MultiHeadAttention(d_model, num_heads)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """(batch, n, d_model) -> same."""
        return self.attention.forward_prepared(x, x, x, None, "sdpa", causal=True)[0]


class LatentMixer(nn.Module):
    """Multi-head latent attention: keys and values from a ``kv_rank`` latent."""

    def __init__(self, d_model: int, num_heads: int, kv_rank: int | None = None) -> None:
        super().__init__()
        rank = d_model // 2 if kv_rank is None else kv_rank
        self.attention = MultiHeadLatentAttention(d_model, num_heads, rank)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """(batch, n, d_model) -> same."""
        return self.attention(x)[0]


class LinearMixer(_Heads):
    """Causal linear attention, elu + 1 features."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """(batch, n, d_model) -> same."""
        return self.merge(linear_attention(*self.project(x))[0])


class GatedMixer(_Heads):
    """Gated linear attention: each token sets how much of every key feature the state keeps,
    log a = max(log σ(x W_a) / GATE_TEMPERATURE, MIN_LOG_GATE); the output is normalised per
    head."""

    def __init__(self, d_model: int, num_heads: int) -> None:
        super().__init__(d_model, num_heads)
        self.gate = nn.Linear(d_model, d_model)
        self.norm = nn.LayerNorm(self.head_dim)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """(batch, n, d_model) -> same."""
        queries, keys, values = self.project(x)
        log_gates = F.logsigmoid(self.gate(x)) / GATE_TEMPERATURE
        log_gates = self.split(log_gates.clamp(min=MIN_LOG_GATE))
        heads = gated_linear_attention(queries, keys / self.head_dim**0.5, values, log_gates)
        return self.merge(self.norm(heads))


class DeltaMixer(_Heads):
    """The delta rule: unit queries and keys, a write strength β = σ(x w_β) per head and token;
    the output is normalised per head."""

    def __init__(self, d_model: int, num_heads: int) -> None:
        super().__init__(d_model, num_heads)
        self.beta = nn.Linear(d_model, num_heads)
        self.norm = nn.LayerNorm(self.head_dim)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """(batch, n, d_model) -> same."""
        queries, keys, values = self.project(x)
        queries, keys = F.normalize(queries, dim=-1), F.normalize(keys, dim=-1)
        beta = torch.sigmoid(self.beta(x)).transpose(1, 2)  # (batch, heads, n)
        return self.merge(self.norm(delta_rule(queries, keys, values, beta)))


MIXERS = {
    "softmax": SoftmaxMixer,
    "latent": LatentMixer,
    "linear": LinearMixer,
    "gated": GatedMixer,
    "delta": DeltaMixer,
}


def make_mixer(name: str, d_model: int, num_heads: int) -> nn.Module:
    """The mixer ``name`` of :data:`MIXERS`, for width ``d_model`` and ``num_heads`` heads."""
    if name not in MIXERS:
        raise ValueError(f"unknown mixer {name!r}; choose one of {', '.join(map(repr, MIXERS))}")
    return MIXERS[name](d_model, num_heads)


class MixerLayer(nn.Module):
    """A pre-LN block around a mixer: x + mixer(conv(LN(x))), then x + FF(LN(x)); each sublayer's
    output passes dropout. ``conv_width`` (None: no convolution) puts a
    :class:`ShortConvolution` before the mixer; ``d_ff=0`` leaves the feed-forward out."""

    def __init__(
        self,
        mixer: str,
        d_model: int,
        num_heads: int,
        d_ff: int,
        dropout: float = 0.0,
        activation: str = "relu",
        conv_width: int | None = None,
    ) -> None:
        super().__init__()
        self.mixer_name = mixer
        self.mixer = make_mixer(mixer, d_model, num_heads)
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
        cache: object = None,
    ) -> tuple[torch.Tensor, None]:
        """(batch, n, d_model) -> same, None: an :class:`~attnlib.transformer.EncoderLayer`'s
        call, causal always; it forms no weights and keeps no cache."""
        if mask4d is not None or need_weights or cache is not None:
            raise ValueError(
                f"a {self.mixer_name!r} mixer block takes no mask, forms no attention weights "
                "and keeps no KV cache"
            )
        x = x + self.dropout1(self.mixer(self.convolution(self.norm1(x))))
        if self.feed_forward is not None:
            x = x + self.dropout2(self.feed_forward(self.norm2(x)))
        return x, None
