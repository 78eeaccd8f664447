"""The Transformer's decoder: the decoder layer and the decoder stack.

Batch first: target ids ``(batch, tgt)``, the encoder's output (the "memory") ``(batch, src,
d_model)``; self-attention weights ``(batch, heads, tgt, tgt)``, cross-attention weights
``(batch, heads, tgt, src)``. Masks are boolean, True = may attend; a ``key_mask`` is True at
real tokens. The stack builds its masks once (target: padding AND causal; memory: source
padding) and its layers trust them. The encoder–decoder model and greedy decoding are in
:mod:`attnlib.generation`; the KV cache, which a layer takes, is in :mod:`attnlib.kv_cache`.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from attnlib._checks import (
    check_flag,
    check_floating,
    check_key_mask,
    check_matches_weights,
    check_number,
    check_probability,
    check_tensor,
)
from attnlib.attention import MultiHeadAttention
from attnlib.kv_cache import KVCache, LayerKV
from attnlib.masks import causal_mask, sliding_window_mask
from attnlib.model_config import TransformerConfig
from attnlib.transformer import (
    ChoosesAttention,
    FeedForward,
    embed_tokens,
    position_table,
    rotary_base_of,
    xavier_init_,
)

MaybeTensor = torch.Tensor | None
# torch keeps the function itself, not its name; any other callable is named in the error.
_ACTIVATION_NAMES = {F.relu: "relu", F.gelu: "gelu"}


class DecoderLayer(ChoosesAttention, nn.Module):
    """Masked self-attention, cross-attention over the memory, feed-forward; each sublayer with
    a residual and a LayerNorm: post-LN x = LN(x + f(x)), or pre-LN x = x + f(LN(x)) with
    ``norm_first``. ``fused`` picks torch's fused attention; asking for weights takes the
    from-scratch path, which forms them. ``num_kv_heads`` < ``num_heads`` groups the key/value
    heads of both attentions (see :class:`MultiHeadAttention`), and so of their cache.
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
        num_kv_heads: int | None = None,
        rotary_base: float | None = None,
        window: int | None = None,
    ) -> None:
        super().__init__()
        self.d_model, self.num_heads, self.d_ff = d_model, num_heads, d_ff
        self.norm_first = check_flag("norm_first", norm_first)
        self.fused = fused
        self.dropout_p = check_probability("dropout", dropout)
        if not check_number("layer_norm_eps", layer_norm_eps) > 0:
            raise ValueError(f"layer_norm_eps must be positive, got {layer_norm_eps}")
        self.window = window  # the self-attention's; its mask comes from the stack, or the cache
        self.self_attention, self.cross_attention = (
            MultiHeadAttention(
                d_model, num_heads, dropout=dropout, num_kv_heads=num_kv_heads, rotary_base=rotary
            )
            for rotary in (rotary_base, None)  # the memory's positions are not the target's
        )
        self.feed_forward = FeedForward(d_model, d_ff, dropout, activation)
        self.norm1, self.norm2, self.norm3 = (
            nn.LayerNorm(d_model, eps=layer_norm_eps) for _ in range(3)
        )
        self.dropout1, self.dropout2, self.dropout3 = (nn.Dropout(dropout) for _ in range(3))

    def forward(
        self,
        x: torch.Tensor,
        memory: torch.Tensor | None,
        self_mask4d: torch.Tensor | None = None,
        memory_mask4d: torch.Tensor | None = None,
        need_weights: bool = False,
        cache: tuple[LayerKV, LayerKV] | None = None,
    ) -> tuple[torch.Tensor, MaybeTensor, MaybeTensor]:
        """x (batch, tgt, d), memory (batch, src, d) -> x, self weights (batch, heads, tgt,
        tgt), cross weights (batch, heads, tgt, src), or Nones; unchecked. With ``cache``, this
        layer's self-attention and memory caches, the new positions attend to the cached ones,
        and ``memory`` and ``self_mask4d`` go unused.
        """
        # The one place where the two orders differ.
        if self.norm_first:
            attended, self_weights = self._sa_block(self.norm1(x), self_mask4d, need_weights, cache)
            x = x + attended
            attended, cross = self._ca_block(
                self.norm2(x), memory, memory_mask4d, need_weights, cache
            )
            x = x + attended
            x = x + self._ff_block(self.norm3(x))
        else:
            attended, self_weights = self._sa_block(x, self_mask4d, need_weights, cache)
            x = self.norm1(x + attended)
            attended, cross = self._ca_block(x, memory, memory_mask4d, need_weights, cache)
            x = self.norm2(x + attended)
            x = self.norm3(x + self._ff_block(x))
        return x, self_weights, cross

    def checked_forward(
        self,
        x: torch.Tensor,
        memory: torch.Tensor,
        key_mask: torch.Tensor | None = None,
        memory_key_mask: torch.Tensor | None = None,
        mask: torch.Tensor | None = None,
        need_weights: bool = False,
    ) -> tuple[torch.Tensor, MaybeTensor, MaybeTensor]:
        """:meth:`forward` for a layer used alone: checks the inputs and masks first.

        x (batch, tgt, d_model), memory (batch, src, d_model); ``key_mask`` (batch, tgt) and
        ``memory_key_mask`` (batch, src) True at real tokens; ``mask`` broadcasting to (batch,
        heads, tgt, tgt), e.g. :func:`attnlib.masks.causal_mask`. No mask: nothing is hidden.
        """
        for name, tensor in (("x", x), ("memory", memory)):
            check_tensor(name, tensor, min_dims=3)
            if tensor.dim() != 3 or tensor.shape[-1] != self.d_model:
                raise ValueError(
                    f"{name} must be (batch, seq, d_model={self.d_model}), got shape "
                    f"{tuple(tensor.shape)}"
                )
            check_matches_weights(name, tensor, self.norm1.weight)
        if memory.shape[0] != x.shape[0]:
            raise ValueError(f"x has batch {x.shape[0]} but memory has batch {memory.shape[0]}")
        check_flag("need_weights", need_weights)
        (batch, tgt, _), src = x.shape, memory.shape[1]
        if key_mask is not None:
            check_key_mask(key_mask, batch, tgt, "key_mask", "tgt")
        if memory_key_mask is not None:
            check_key_mask(memory_key_mask, batch, src, "memory_key_mask", "src")
        self_mask4d = self.self_attention.prepare_mask(mask, key_mask, batch, tgt, tgt)
        memory_mask4d = self.cross_attention.prepare_mask(None, memory_key_mask, batch, tgt, src)
        return self(x, memory, self_mask4d, memory_mask4d, need_weights)

    def _sa_block(
        self,
        x: torch.Tensor,
        mask4d: MaybeTensor,
        need_weights: bool,
        cache: tuple[LayerKV, LayerKV] | None,
    ) -> tuple[torch.Tensor, MaybeTensor]:
        """Masked self-attention, then dropout: (batch, tgt, d_model) -> same, weights or None."""
        implementation = self.implementation_for_call(need_weights)
        if cache is None:
            attended, weights = self.self_attention.forward_prepared(
                x, x, x, mask4d, implementation
            )
        else:  # the new positions are the last ones; causal order keeps a block from its future
            attended, weights = self.self_attention.forward_prepared(
                x, x, x, None, implementation, causal=True, window=self.window, cache=cache[0]
            )
        return self.dropout1(attended), weights

    def _ca_block(
        self,
        x: torch.Tensor,
        memory: torch.Tensor | None,
        mask4d: MaybeTensor,
        need_weights: bool,
        cache: tuple[LayerKV, LayerKV] | None,
    ) -> tuple[torch.Tensor, MaybeTensor]:
        """Queries from x, keys and values from memory, then dropout: (batch, tgt, d_model)."""
        attended, weights = self.cross_attention.forward_prepared(
            x,
            memory,
            memory,
            mask4d,
            self.implementation_for_call(need_weights),
            cache=None if cache is None else cache[1],
        )
        return self.dropout2(attended), weights

    def _ff_block(self, x: torch.Tensor) -> torch.Tensor:
        """Feed-forward, then dropout: (batch, tgt, d_model) -> same."""
        return self.dropout3(self.feed_forward(x))

    @torch.no_grad()
    def load_from_torch(self, layer: nn.TransformerDecoderLayer) -> DecoderLayer:
        """Copy the weights of a ``torch.nn.TransformerDecoderLayer`` of the same configuration."""
        if not isinstance(layer, nn.TransformerDecoderLayer):
            raise TypeError(
                f"layer must be a torch.nn.TransformerDecoderLayer, got {type(layer).__name__}"
            )
        names = ("batch_first", "d_model", "num_heads", "d_ff", "dropout", "norm_first")
        names += ("activation", "layer_norm_eps", "bias")
        attention, linear1 = layer.self_attn, layer.linear1
        theirs = (attention.batch_first, attention.embed_dim, attention.num_heads)
        theirs += (linear1.out_features, layer.dropout.p, layer.norm_first)
        activation = _ACTIVATION_NAMES.get(layer.activation, layer.activation)
        theirs += (activation, layer.norm1.eps, linear1.bias is not None)
        ours = (True, self.d_model, self.num_heads, self.d_ff, self.dropout_p, self.norm_first)
        ours += (self.feed_forward.activation_name, self.norm1.eps, True)
        differ = [
            f"{name}={their} (ours {our})"
            for name, their, our in zip(names, theirs, ours, strict=True)
            if their != our
        ]
        if differ:
            raise ValueError("torch layer differs from this one: " + ", ".join(differ))
        self.self_attention.load_from_torch(layer.self_attn)
        self.cross_attention.load_from_torch(layer.multihead_attn)
        pairs = [
            (self.feed_forward.linear1, layer.linear1),
            (self.feed_forward.linear2, layer.linear2),
            (self.norm1, layer.norm1),
            (self.norm2, layer.norm2),
            (self.norm3, layer.norm3),
        ]
        for mine, source in pairs:
            mine.weight.copy_(source.weight)
            mine.bias.copy_(source.bias)
        return self


class Decoder(nn.Module):
    """Target ids -> hidden states: embed x sqrt(d_model), add positions, dropout, N layers that
    each attend to the memory; a final LayerNorm with ``norm_first``, as in :class:`Encoder`.
    ``check_ids = False`` skips the one host sync of :meth:`forward`, as in :class:`Encoder`:
    the ids' range check and, in the same sync, the memory's scan for NaN and ±inf.
    """

    def __init__(self, config: TransformerConfig) -> None:
        super().__init__()
        self.config = c = config
        d = c.d_model
        self.embedding = nn.Embedding(c.vocab_size, d, padding_idx=c.pad_id)
        self.positions = position_table(c.positions, d, c.max_len)
        self.dropout = nn.Dropout(c.dropout)
        layer_options = (c.num_heads, c.d_ff, c.dropout, c.norm_first, c.activation, c.fused)
        self.layers = nn.ModuleList(
            DecoderLayer(
                d,
                *layer_options,
                num_kv_heads=c.num_kv_heads,
                rotary_base=rotary_base_of(c.positions),
                window=c.window,
            )
            for _ in range(c.num_layers)
        )
        self.final_norm = nn.LayerNorm(d) if c.norm_first else nn.Identity()
        self.check_ids = True
        xavier_init_(self)

    def forward(
        self,
        ids: torch.Tensor,
        memory: torch.Tensor,
        key_mask: torch.Tensor | None = None,
        memory_key_mask: torch.Tensor | None = None,
        need_weights: bool = False,
    ) -> tuple[torch.Tensor, MaybeTensor, MaybeTensor]:
        """ids (batch, tgt), memory (batch, src, d) -> hidden (batch, tgt, d), self weights
        (batch, layers, heads, tgt, tgt), cross weights (batch, layers, heads, tgt, src) or
        Nones. ``key_mask`` (batch, tgt), ``memory_key_mask`` (batch, src): True at real tokens.
        """
        masks = self._prepare(ids, memory, key_mask, memory_key_mask, check_range=False)
        check_flag("need_weights", need_weights)
        if self.check_ids:
            _check_values(ids, memory, self.config)
        return self.decode(ids, memory, *masks, need_weights)

    def prepare_inputs(
        self,
        ids: torch.Tensor,
        memory: torch.Tensor,
        key_mask: torch.Tensor | None,
        memory_key_mask: torch.Tensor | None,
    ) -> tuple[torch.Tensor, MaybeTensor]:
        """Check the inputs once; the canonical masks: target padding AND causal (batch or 1,
        1, tgt, tgt), and the memory's padding (batch, 1, 1, src) or None. Shapes, dtypes and
        the ids' range; the memory's values are scanned by :meth:`forward` alone."""
        return self._prepare(ids, memory, key_mask, memory_key_mask, self.check_ids)

    def _prepare(
        self,
        ids: torch.Tensor,
        memory: torch.Tensor,
        key_mask: torch.Tensor | None,
        memory_key_mask: torch.Tensor | None,
        check_range: bool,
    ) -> tuple[torch.Tensor, MaybeTensor]:
        """:meth:`prepare_inputs`, with the ids' range check (a host sync) on or off."""
        _check_ids(ids, self.config, "target", check_range=check_range)
        check_floating("memory", memory, min_dims=3)
        (batch, tgt), d = ids.shape, self.config.d_model
        if memory.dim() != 3 or memory.shape[0] != batch or memory.shape[2] != d:
            raise ValueError(
                f"memory must be (batch={batch}, src, d_model={d}), got shape {tuple(memory.shape)}"
            )
        check_matches_weights("memory", memory, self.layers[0].norm1.weight)
        src = memory.shape[1]
        if key_mask is not None:
            check_key_mask(key_mask, batch, tgt, "key_mask", "tgt")
        if memory_key_mask is not None:
            check_key_mask(memory_key_mask, batch, src, "memory_key_mask", "src")
        attention = self.layers[0].self_attention
        causal = self.order_mask(tgt, ids.device)
        self_mask4d = attention.prepare_mask(causal, key_mask, batch, tgt, tgt)
        memory_mask4d = attention.prepare_mask(None, memory_key_mask, batch, tgt, src)
        return self_mask4d, memory_mask4d

    def order_mask(self, tgt: int, device: torch.device | None = None) -> torch.Tensor:
        """(tgt, tgt) bool: each position sees itself and those before it, the last ``window`` of
        them with the config's window."""
        window = self.config.window
        if window is None:
            return causal_mask(tgt, device=device)
        return sliding_window_mask(tgt, window, device=device)

    def decode(
        self,
        ids: torch.Tensor,
        memory: torch.Tensor | None,
        self_mask4d: MaybeTensor,
        memory_mask4d: MaybeTensor,
        need_weights: bool = False,
        cache: KVCache | None = None,
    ) -> tuple[torch.Tensor, MaybeTensor, MaybeTensor]:
        """:meth:`forward` without checks, masks from :meth:`prepare_inputs`. With ``cache``
        (from :func:`attnlib.generation.decoder_cache`), ids are the next positions after the
        cached ones."""
        start = 0
        if cache is not None:
            cache.check_batch(ids)  # shapes only: no host sync
            start = cache.length
        x = self.embed(ids, start)  # (batch, tgt, d)
        self_weights, cross_weights = [], []
        for index, layer in enumerate(self.layers):
            layer_cache = None if cache is None else (cache.layers[index], cache.memory[index])
            x, weights, cross = layer(
                x, memory, self_mask4d, memory_mask4d, need_weights, layer_cache
            )
            self_weights.append(weights)
            cross_weights.append(cross)
        if not need_weights:
            return self.final_norm(x), None, None
        return self.final_norm(x), torch.stack(self_weights, 1), torch.stack(cross_weights, 1)

    def embed(self, ids: torch.Tensor, start: int = 0) -> torch.Tensor:
        """ids (batch, n) at positions start..start+n-1 -> (batch, n, d_model), with dropout."""
        return embed_tokens(self.embedding, self.positions, self.dropout, ids, start)


def _check_ids(ids: object, config: TransformerConfig, what: str, check_range: bool = True) -> None:
    """Require integer ids (batch, seq), 1 <= seq <= max_len, within the vocabulary (one sync)."""
    if not isinstance(ids, torch.Tensor):
        raise TypeError(f"{what} ids must be a torch.Tensor, got {type(ids).__name__}")
    if ids.dtype not in (torch.long, torch.int32):
        raise TypeError(f"{what} ids must be integer token ids (torch.long), got dtype {ids.dtype}")
    if ids.dim() != 2 or ids.shape[1] == 0:
        raise ValueError(
            f"{what} ids must be (batch, seq) with seq >= 1, got shape {tuple(ids.shape)}"
        )
    if ids.shape[1] > config.max_len:
        raise ValueError(f"{what} of {ids.shape[1]} tokens is longer than max_len={config.max_len}")
    if check_range and ids.numel() > 0:
        low, high = torch.stack([*torch.aminmax(ids)]).long().tolist()  # the one host sync
        _check_id_range(low, high, config, what)


def _check_id_range(low: int, high: int, config: TransformerConfig, what: str) -> None:
    """Refuse the smallest or largest id when it lies outside the vocabulary."""
    if low < 0 or high >= config.vocab_size:
        raise ValueError(
            f"{what} token id {low if low < 0 else high} is outside the vocabulary "
            f"0..{config.vocab_size - 1}"
        )


def _check_values(ids: torch.Tensor, memory: torch.Tensor, config: TransformerConfig) -> None:
    """Target ids (batch, tgt) within the vocabulary, memory (batch, src, d) free of NaN and
    ±inf: one host sync for both; the counts of bad entries are taken only on failure."""
    if ids.numel() == 0:
        return  # batch 0: no id and no memory entry to check
    low, high = torch.aminmax(ids)
    finite = torch.isfinite(memory).all()
    low, high, finite = torch.stack([low.long(), high.long(), finite.long()]).tolist()
    _check_id_range(low, high, config, "target")
    if not finite:
        check_tensor("memory", memory, min_dims=3)  # raises, with the counts
