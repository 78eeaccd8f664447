"""The Transformer block, piece by piece: positions, feed-forward, the encoder layer.

Batch first: hidden states ``(batch, seq, d_model)``, attention weights ``(batch, heads,
n_queries, n_keys)``; masks boolean, True = may attend. A layer's ``forward`` trusts its caller
(a mask already made canonical by ``MultiHeadAttention.prepare_mask``), so a stack of layers
has no checks and no host syncs inside; :meth:`EncoderLayer.checked_forward` is the checked
entry for a layer used alone. The stack, its config and the models on it are in
:mod:`attnlib.encoder`.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import nn

from attnlib._checks import (
    check_count,
    check_flag,
    check_int,
    check_matches_weights,
    check_number,
    check_probability,
    check_tensor,
)
from attnlib.attention import MultiHeadAttention, implementation_for
from attnlib.kv_cache import LayerKV

ACTIVATIONS = {"relu": F.relu, "gelu": F.gelu}


def sinusoidal_encoding(length: int, d_model: int, base: float = 10000.0) -> torch.Tensor:
    """PE(pos, 2i) = sin(pos / base^(2i/d)), PE(pos, 2i+1) = cos(same): (length, d_model).

    Any length and any width; with an odd width the last column is a sine without its cosine.
    """
    length, d_model = check_int("length", length), check_count("d_model", d_model)
    if not check_number("base", base) > 0:
        raise ValueError(f"base must be positive (10000 in the paper), got {base}")
    # float64 so that large positions keep their phase; the table itself is float32.
    positions = torch.arange(length, dtype=torch.float64).unsqueeze(1)  # (length, 1)
    even = torch.arange(0, d_model, 2, dtype=torch.float64)  # 2i: (ceil(d/2),)
    angles = positions * base ** (-even / d_model)  # (length, ceil(d/2))
    table = torch.zeros(length, d_model, dtype=torch.float64)
    table[:, 0::2] = torch.sin(angles)
    table[:, 1::2] = torch.cos(angles[:, : d_model // 2])
    return table.float()


def offset_rotation(offset: float, d_model: int, base: float = 10000.0) -> torch.Tensor:
    """M(k) with PE(pos + k)[:2m] = M(k) @ PE(pos)[:2m], m = d_model // 2: (2m, 2m).

    Block-diagonal 2x2 rotations [[cos kw, sin kw], [-sin kw, cos kw]], one per frequency w; it
    does not depend on pos. An odd width's last sine has no cosine partner, so no M covers it.
    """
    pairs = d_model // 2
    frequencies = base ** (-torch.arange(0, 2 * pairs, 2, dtype=torch.float64) / d_model)
    cos, sin = torch.cos(offset * frequencies), torch.sin(offset * frequencies)
    rotation = torch.zeros(2 * pairs, 2 * pairs, dtype=torch.float64)
    index = torch.arange(pairs) * 2
    rotation[index, index], rotation[index, index + 1] = cos, sin
    rotation[index + 1, index], rotation[index + 1, index + 1] = -sin, cos
    return rotation.float()


def _check_features(module: nn.Module, x: torch.Tensor) -> None:
    """Refuse anything but (batch, seq, d_model) with the module's d_model: shapes only."""
    if not isinstance(x, torch.Tensor):
        raise TypeError(f"x must be a torch.Tensor, got {type(x).__name__}")
    if x.dim() != 3 or x.shape[-1] != module.d_model:
        raise ValueError(
            f"{type(module).__name__} needs x of shape (batch, seq, d_model={module.d_model}), "
            f"got {tuple(x.shape)}"
        )


class SinusoidalPositions(nn.Module):
    """Adds the fixed sinusoidal table: (batch, seq, d_model) -> (batch, seq, d_model)."""

    def __init__(self, d_model: int, max_len: int = 512) -> None:
        super().__init__()
        self.d_model = check_count("d_model", d_model)
        check_count("max_len", max_len)
        # Not persistent: the table is a formula, so checkpoints need not carry it.
        self.register_buffer("table", sinusoidal_encoding(max_len, d_model), persistent=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """(batch, seq, d_model) -> same, with PE[:seq] added; longer inputs get a fresh table."""
        _check_features(self, x)
        seq = x.shape[1]
        table = self.table if seq <= self.table.shape[0] else sinusoidal_encoding(seq, self.d_model)
        return x + table[:seq].to(device=x.device, dtype=x.dtype)


class LearnedPositions(nn.Module):
    """Adds one learned vector per position: (batch, seq, d_model) -> same; seq <= max_len."""

    def __init__(self, d_model: int, max_len: int = 512) -> None:
        super().__init__()
        self.d_model = check_count("d_model", d_model)
        self.max_len = check_count("max_len", max_len)
        self.weight = nn.Parameter(torch.empty(max_len, d_model))
        self.reset_parameters()

    def reset_parameters(self) -> None:
        """Small normal(0, 0.02) start: positions are learned from ~zero.

        BERT starts its token embeddings at the same std, so there the two begin equal; attnlib's
        token vectors are scaled to about unit size, so here positions start ~50x smaller
        (chapter 08 compares both scales)."""
        nn.init.normal_(self.weight, std=0.02)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """(batch, seq, d_model) -> same, with weight[:seq] added."""
        _check_features(self, x)
        if x.shape[1] > self.max_len:
            raise ValueError(
                f"sequence of {x.shape[1]} positions but learned positions stop at "
                f"max_len={self.max_len}: truncate the input or build with a larger max_len"
            )
        return x + self.weight[: x.shape[1]].to(x.dtype)


POSITIONS = ("sinusoidal", "learned", "rotary", "none")
ROTARY_BASE = 10000.0  # RoFormer's


def position_table(kind: str, d_model: int, max_len: int) -> nn.Module:
    """What adds positions to x (batch, seq, d_model) for a config's ``positions``: a table, or
    nothing for "rotary" (the attention rotates queries and keys instead) and "none"."""
    if kind == "sinusoidal":
        return SinusoidalPositions(d_model, max_len)
    if kind == "learned":
        return LearnedPositions(d_model, max_len)
    return nn.Identity()


def rotary_base_of(kind: str) -> float | None:
    """The rotary base the attention of a model with ``positions=kind`` rotates by, or None."""
    return ROTARY_BASE if kind == "rotary" else None


def embed_tokens(
    embedding: nn.Embedding,
    positions: nn.Module,
    dropout: nn.Module,
    ids: torch.Tensor,
    start: int = 0,
) -> torch.Tensor:
    """ids (batch, n) at positions start .. start + n - 1 -> (batch, n, d_model): the token
    vectors times sqrt(d_model), plus positions, then dropout."""
    x = embedding(ids) * math.sqrt(embedding.embedding_dim)  # (batch, n, d)
    if start > 0 and not isinstance(positions, nn.Identity):
        # The position tables add rows 0..seq-1; zeros in front shift these ids to theirs.
        ahead = x.new_zeros(x.shape[0], start, x.shape[2])
        return dropout(positions(torch.cat([ahead, x], dim=1))[:, start:])
    return dropout(positions(x))


class FeedForward(nn.Module):
    """max(0, x W1 + b1) W2 + b2 at every position: (batch, seq, d_model) -> same."""

    def __init__(
        self, d_model: int, d_ff: int, dropout: float = 0.1, activation: str = "relu"
    ) -> None:
        super().__init__()
        d_model, d_ff = check_count("d_model", d_model), check_count("d_ff", d_ff)
        dropout = check_probability("dropout", dropout)
        if activation not in ACTIVATIONS:
            raise ValueError(f"unknown activation {activation!r}; choose 'relu' or 'gelu'")
        self.activation_name, self.activation = activation, ACTIVATIONS[activation]
        self.linear1 = nn.Linear(d_model, d_ff)
        self.dropout = nn.Dropout(dropout)  # after the activation, where torch puts it
        self.linear2 = nn.Linear(d_ff, d_model)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """(batch, seq, d_model) -> (batch, seq, d_ff) -> (batch, seq, d_model); unchecked."""
        return self.linear2(self.dropout(self.activation(self.linear1(x))))

    def checked_forward(self, x: torch.Tensor) -> torch.Tensor:
        """:meth:`forward` for a block used alone: x (..., d_model) of the weights' width and
        dtype, every entry finite (one scan), -> (..., d_model)."""
        check_tensor("x", x, min_dims=1)
        d_model = self.linear1.in_features
        if x.shape[-1] != d_model:
            raise ValueError(f"x must be (..., d_model={d_model}), got shape {tuple(x.shape)}")
        check_matches_weights("x", x, self.linear1.weight)
        return self(x)


class ChoosesAttention:
    """The attention implementation a layer runs, ``implementation`` (one of
    :data:`attnlib.attention.IMPLEMENTATIONS`), and ``fused``, its on/off view: "sdpa" or
    "eager". A call that asks for the weights runs "eager", the one path that forms them."""

    implementation: str

    @property
    def fused(self) -> bool:
        """Whether the attention runs a fused kernel ("sdpa" or "flash"), not "eager"."""
        return self.implementation != "eager"

    @fused.setter
    def fused(self, value: bool) -> None:
        self.implementation = implementation_for(value)

    def implementation_for_call(self, need_weights: bool) -> str:
        """The implementation of one call: "eager" when it asks for the weights."""
        return "eager" if need_weights else self.implementation


class EncoderLayer(ChoosesAttention, nn.Module):
    """Self-attention then feed-forward, each with a residual and a LayerNorm.

    ``norm_first=False`` is the paper's post-LN, x = LN(x + Sublayer(x)); ``norm_first=True``
    is pre-LN, x = x + Sublayer(LN(x)). ``fused`` picks torch's fused attention once, here; a
    call asking for the weights takes the from-scratch path, which forms them
    (:class:`ChoosesAttention`: ``implementation`` may name "flash" too).

    ``d_ff=0`` leaves the feed-forward sublayer out: an attention-only block.

    With ``causal`` each position attends to itself and those before it (a decoder-only
    model's block), with a ``window`` to the last ``window`` of them (without ``causal``, to
    those within ``window`` on either side). ``num_kv_heads``, ``rotary_base`` and ``sink`` go
    to the attention (:class:`~attnlib.attention.MultiHeadAttention`).
    """

    def __init__(
        self,
        d_model: int,
        num_heads: int,
        d_ff: int,
        dropout: float = 0.1,
        norm_first: bool = False,
        activation: str = "relu",
        fused: bool = True,
        layer_norm_eps: float = 1e-5,
        *,
        num_kv_heads: int | None = None,
        rotary_base: float | None = None,
        causal: bool = False,
        window: int | None = None,
        sink: str | None = None,
    ) -> None:
        super().__init__()
        self.d_model, self.num_heads, self.d_ff = d_model, num_heads, d_ff
        self.norm_first = check_flag("norm_first", norm_first)
        self.fused = fused
        self.dropout_p = check_probability("dropout", dropout)
        if not check_number("layer_norm_eps", layer_norm_eps) > 0:
            raise ValueError(f"layer_norm_eps must be positive, got {layer_norm_eps}")
        self.causal = check_flag("causal", causal)
        self.window = None if window is None else check_count("window", window)
        # The attention module drops attention weights; dropout1/2 drop each sublayer's output.
        self.attention = MultiHeadAttention(
            d_model,
            num_heads,
            dropout=dropout,
            num_kv_heads=num_kv_heads,
            rotary_base=rotary_base,
            sink=sink,
        )
        # d_ff = 0: no feed-forward sublayer at all, an attention-only block (Elhage et al. 2021)
        self.feed_forward = FeedForward(d_model, d_ff, dropout, activation) if d_ff else None
        self.norm1 = nn.LayerNorm(d_model, eps=layer_norm_eps)
        # without a feed-forward sublayer its norm is the identity and its block adds nothing
        self.norm2 = nn.LayerNorm(d_model, eps=layer_norm_eps) if d_ff else nn.Identity()
        self.dropout1, self.dropout2 = nn.Dropout(dropout), nn.Dropout(dropout)

    def forward(
        self,
        x: torch.Tensor,
        mask4d: torch.Tensor | None = None,
        need_weights: bool = False,
        cache: LayerKV | None = None,
    ) -> tuple[torch.Tensor, torch.Tensor | None]:
        """(batch, seq, d_model) -> same, weights (batch, heads, seq, seq) or None; unchecked.

        ``mask4d`` is a canonical boolean mask from ``MultiHeadAttention.prepare_mask``. With
        ``cache`` (a causal block's), x holds the positions after the cached ones.
        """
        # The one place where the two orders differ.
        if self.norm_first:
            attended, weights = self._sa_block(self.norm1(x), mask4d, need_weights, cache)
            x = x + attended
            x = x + self._ff_block(self.norm2(x))
        else:
            attended, weights = self._sa_block(x, mask4d, need_weights, cache)
            x = self.norm1(x + attended)
            x = self.norm2(x + self._ff_block(x))
        return x, weights

    def checked_forward(
        self,
        x: torch.Tensor,
        key_mask: torch.Tensor | None = None,
        mask: torch.Tensor | None = None,
        need_weights: bool = False,
    ) -> tuple[torch.Tensor, torch.Tensor | None]:
        """:meth:`forward` for a caller outside an :class:`Encoder`: checks x and the masks first.

        x (batch, seq, d_model); ``key_mask`` (batch, seq) True at real tokens; ``mask``
        broadcasting to (batch, heads, seq, seq), True = may attend.
        """
        check_tensor("x", x, min_dims=3)
        if x.dim() != 3 or x.shape[-1] != self.d_model:
            raise ValueError(
                f"x must be (batch, seq, d_model={self.d_model}), got shape {tuple(x.shape)}"
            )
        check_matches_weights("x", x, self.norm1.weight)
        check_flag("need_weights", need_weights)
        batch, seq, _ = x.shape
        mask4d = self.attention.prepare_mask(mask, key_mask, batch, seq, seq)
        return self(x, mask4d, need_weights)

    def _sa_block(
        self,
        x: torch.Tensor,
        mask4d: torch.Tensor | None,
        need_weights: bool,
        cache: LayerKV | None = None,
    ) -> tuple[torch.Tensor, torch.Tensor | None]:
        """Self-attention, then dropout: (batch, seq, d_model) -> same, weights or None."""
        attended, weights = self.attention.forward_prepared(
            x,
            x,
            x,
            mask4d,
            self.implementation_for_call(need_weights),
            causal=self.causal,
            window=self.window,
            cache=cache,
        )
        return self.dropout1(attended), weights

    def _ff_block(self, x: torch.Tensor) -> torch.Tensor:
        """Feed-forward, then dropout: (batch, seq, d_model) -> same; zero without one."""
        if self.feed_forward is None:
            return x.new_zeros(())
        return self.dropout2(self.feed_forward(x))

    @torch.no_grad()
    def load_from_torch(self, layer: nn.TransformerEncoderLayer) -> EncoderLayer:
        """Copy the weights of a ``torch.nn.TransformerEncoderLayer`` of the same configuration."""
        if not isinstance(layer, nn.TransformerEncoderLayer):
            raise TypeError(
                f"layer must be a torch.nn.TransformerEncoderLayer, got {type(layer).__name__}"
            )
        activation = {1: "relu", 2: "gelu"}.get(getattr(layer, "activation_relu_or_gelu", 0))
        theirs = {
            "batch_first": layer.self_attn.batch_first,
            "d_model": layer.self_attn.embed_dim,
            "num_heads": layer.self_attn.num_heads,
            "d_ff": layer.linear1.out_features,
            "dropout": layer.dropout.p,
            "norm_first": layer.norm_first,
            "activation": activation,
            "layer_norm_eps": layer.norm1.eps,
            "bias": layer.linear1.bias is not None,
        }
        ours = {
            "batch_first": True,
            "d_model": self.d_model,
            "num_heads": self.num_heads,
            "d_ff": self.d_ff,
            "dropout": self.dropout_p,
            "norm_first": self.norm_first,
            "activation": self.feed_forward.activation_name,
            "layer_norm_eps": self.norm1.eps,
            "bias": True,
        }
        differ = [
            f"{key}={theirs[key]} (ours {ours[key]})" for key in ours if theirs[key] != ours[key]
        ]
        if differ:
            raise ValueError("torch layer differs from this one: " + ", ".join(differ))
        self.attention.load_from_torch(layer.self_attn)
        pairs = [
            (self.feed_forward.linear1, layer.linear1),
            (self.feed_forward.linear2, layer.linear2),
            (self.norm1, layer.norm1),
            (self.norm2, layer.norm2),
        ]
        for mine, source in pairs:
            mine.weight.copy_(source.weight)
            mine.bias.copy_(source.bias)
        return self


def xavier_init_(module: nn.Module) -> nn.Module:
    """Xavier-uniform weight matrices, zero biases, embeddings normal(0, d^-0.5); in place.

    A parameter shared between modules (a tied embedding and output projection) is initialised
    once, by the first module that holds it.
    """
    done: set[int] = set()
    for sub in module.modules():
        if isinstance(sub, nn.Linear):
            if id(sub.weight) not in done:
                nn.init.xavier_uniform_(sub.weight)
            if sub.bias is not None:
                nn.init.zeros_(sub.bias)
        elif isinstance(sub, nn.Embedding) and id(sub.weight) not in done:
            # normal(0, d^-0.5) times the sqrt(d) scale in Encoder gives unit-variance tokens.
            nn.init.normal_(sub.weight, std=sub.embedding_dim**-0.5)
            if sub.padding_idx is not None:
                with torch.no_grad():
                    sub.weight[sub.padding_idx].zero_()
        elif isinstance(sub, nn.LayerNorm) and sub.weight is not None:
            nn.init.ones_(sub.weight)
            nn.init.zeros_(sub.bias)
        elif isinstance(sub, LearnedPositions):
            sub.reset_parameters()
        done.update(id(p) for p in sub.parameters(recurse=False))
    return module
