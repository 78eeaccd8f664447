"""The encoder–decoder Transformer, and greedy decoding from it with and without a KV cache.

:class:`EncoderDecoder` joins an :class:`~attnlib.encoder.Encoder` to a
:class:`~attnlib.decoder.Decoder` whose target embedding is also the output projection.
Decoding without a cache runs the decoder over the whole prefix at every step, recomputing
the keys and values of every earlier position in every layer, and the memory's too. A
:class:`KVCache` keeps them: each layer's self-attention keys and values ``(batch, kv_heads,
steps, head_dim)`` grow by one position a step; the cross-attention's ``(batch, kv_heads, src,
head_dim)`` are computed once. ``kv_heads`` is ``num_heads`` unless the config's
``decoder_kv_heads`` groups them (grouped-query attention), which shrinks the cache by
``num_heads / kv_heads``. Both give the same tokens. A cache is for inference, and assumes no
padding inside the target prefix (greedy decoding makes none).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

import torch
from torch import nn

from attnlib._checks import (
    check_count,
    check_flag,
    check_floating,
    check_int,
    check_key_mask,
    check_matches_weights,
    check_tensor,
)
from attnlib.attention import MultiHeadAttention, attend_unchecked, pool_kv_heads
from attnlib.decoder import Decoder, _check_ids
from attnlib.encoder import Encoder, TransformerConfig
from attnlib.masks import causal_mask
from attnlib.transformer import xavier_init_

MaybeTensor = torch.Tensor | None


class EncoderDecoder(nn.Module):
    """The whole Transformer: source ids (batch, src) and target inputs (batch, tgt) ->
    next-token logits (batch, tgt, target_vocab).

    ``config`` builds the :class:`Encoder` and, with ``target_vocab_size`` and ``target_pad_id``
    in place of its own (when given), the :class:`Decoder`. With ``tie_weights`` the output
    projection's weight is the target embedding itself (Press & Wolf); it keeps its own bias.
    """

    def __init__(
        self,
        config: TransformerConfig,
        target_vocab_size: int | None = None,
        target_pad_id: int | None = None,
        tie_weights: bool = True,
    ) -> None:
        super().__init__()
        self.tie_weights = check_flag("tie_weights", tie_weights)
        vocab = config.vocab_size if target_vocab_size is None else target_vocab_size
        pad = config.pad_id if target_pad_id is None else target_pad_id
        check_count("target_vocab_size", vocab)
        check_int("target_pad_id", pad)
        # replace() reruns the config's checks, so a pad id outside the vocabulary is refused.
        self.config = config
        self.target_config = dataclasses.replace(config, vocab_size=vocab, pad_id=pad)
        self.encoder = Encoder(config)
        self.decoder = Decoder(self.target_config)
        self.output = nn.Linear(config.d_model, vocab)
        if tie_weights:
            self.output.weight = self.decoder.embedding.weight
        # The decoder comes first in module order, so a tied weight keeps the embedding's init.
        xavier_init_(self)

    def forward(
        self,
        source: torch.Tensor,
        target: torch.Tensor,
        source_key_mask: torch.Tensor | None = None,
        target_key_mask: torch.Tensor | None = None,
        need_weights: bool = False,
    ) -> tuple[torch.Tensor, MaybeTensor]:
        """Teacher forcing: logits (batch, tgt, vocab), cross-attention weights (batch, layers,
        heads, tgt, src) or None. Key masks (batch, src) and (batch, tgt), True at real tokens.
        """
        check_flag("need_weights", need_weights)
        _check_ids(target, self.target_config, "target", check_range=False)  # shapes and dtype
        if isinstance(source, torch.Tensor) and source.dim() >= 1:
            if source.shape[0] != target.shape[0]:
                raise ValueError(
                    f"source has batch {source.shape[0]} but target has batch {target.shape[0]}"
                )
        if target_key_mask is not None:
            check_key_mask(target_key_mask, *target.shape, "target_key_mask", "tgt")
        memory, memory_mask4d = self.encode(source, source_key_mask)
        self_mask4d, _ = self.decoder.prepare_inputs(target, memory, target_key_mask, None)
        hidden, _, cross = self.decoder.decode(
            target, memory, self_mask4d, memory_mask4d, need_weights
        )
        return self.output(hidden), cross

    def encode(
        self, source: torch.Tensor, source_key_mask: torch.Tensor | None = None
    ) -> tuple[torch.Tensor, MaybeTensor]:
        """Checked source (batch, src) -> memory (batch, src, d_model) and the memory's mask
        (batch, 1, 1, src) for the decoder's cross-attention, or None without padding."""
        if source_key_mask is not None and isinstance(source, torch.Tensor) and source.dim() == 2:
            check_key_mask(source_key_mask, *source.shape, "source_key_mask", "src")
        mask4d = self.encoder.prepare_inputs(source, source_key_mask)
        memory, _ = self.encoder.encode(source, mask4d)
        # The encoder's mask is (batch, 1, 1, src) already: the padding of keys, for any query.
        return memory, mask4d


def _attend_heads(
    attention: MultiHeadAttention,
    queries: torch.Tensor,
    keys: torch.Tensor,
    values: torch.Tensor,
    mask4d: MaybeTensor,
    fused: bool,
) -> tuple[torch.Tensor, MaybeTensor]:
    """Queries (batch, heads, n_q, hd), keys and values (batch, kv_heads, n_keys, hd) -> heads
    (batch, heads, n_q, hd) and weights (batch, heads, n_q, n_keys) or None if fused; a query
    with no allowed key gets a zero output on both paths, as in attnlib."""
    if fused:  # SDPA, sharing each key/value head among its group without copying it
        return attention._fused_attention(queries, keys, values, mask4d), None
    keys, values = attention.repeat_kv_heads(keys), attention.repeat_kv_heads(values)
    return attend_unchecked(queries, keys, values, mask4d, dropout=attention.dropout)


class LayerCache:
    """One decoder layer's keys and values: self-attention's (batch, kv_heads, steps, head_dim),
    one position longer after each step; cross-attention's (batch, kv_heads, src, head_dim)."""

    def __init__(self, cross_attention: MultiHeadAttention, memory: torch.Tensor) -> None:
        # The memory does not change while decoding: project it once, not once a step.
        attention = cross_attention
        self.memory_keys = attention.split_kv_heads(attention.key_projection(memory))
        self.memory_values = attention.split_kv_heads(attention.value_projection(memory))
        self.keys: torch.Tensor | None = None
        self.values: torch.Tensor | None = None

    @property
    def length(self) -> int:
        """How many target positions are cached."""
        return 0 if self.keys is None else self.keys.shape[2]

    def self_attend(
        self, attention: MultiHeadAttention, x: torch.Tensor, fused: bool
    ) -> tuple[torch.Tensor, MaybeTensor]:
        """New positions x (batch, n, d_model) -> output (batch, n, d_model), weights (batch,
        heads, n, cached + n) or None; their keys and values join the cache."""
        keys = attention.split_kv_heads(attention.key_projection(x))  # (batch, kv_heads, n, hd)
        values = attention.split_kv_heads(attention.value_projection(x))
        if self.keys is not None:
            keys, values = torch.cat([self.keys, keys], 2), torch.cat([self.values, values], 2)
        self.keys, self.values = keys, values  # (batch, kv_heads, cached + n, hd)
        queries = attention.split_heads(attention.query_projection(x))
        n_new, n_all = x.shape[1], keys.shape[2]
        # One new position sees every cached one; a block of them must not see its own future.
        mask = causal_mask(n_new, n_all, device=x.device)[None, None] if n_new > 1 else None
        heads, weights = _attend_heads(attention, queries, keys, values, mask, fused)
        return attention.output_projection(attention.merge_heads(heads)), weights

    def cross_attend(
        self, attention: MultiHeadAttention, x: torch.Tensor, mask4d: MaybeTensor, fused: bool
    ) -> tuple[torch.Tensor, MaybeTensor]:
        """Queries x (batch, n, d_model) over the cached memory -> output (batch, n, d_model),
        weights (batch, heads, n, src) or None."""
        queries = attention.split_heads(attention.query_projection(x))
        heads, weights = _attend_heads(
            attention, queries, self.memory_keys, self.memory_values, mask4d, fused
        )
        return attention.output_projection(attention.merge_heads(heads)), weights

    def nbytes(self) -> int:
        """Bytes held by this layer's cached tensors."""
        held = (self.memory_keys, self.memory_values, self.keys, self.values)
        return sum(t.numel() * t.element_size() for t in held if t is not None)


class KVCache:
    """A :class:`LayerCache` per decoder layer, started from the memory (batch, src, d_model);
    hand it to :meth:`Decoder.decode`, which feeds it the next positions of the same batch.

    The memory is checked once, here (its shape, dtype and values: one scan, so one host sync
    per cache, not per step); each step checks only that its ids have the memory's batch.
    """

    def __init__(self, decoder: Decoder, memory: torch.Tensor) -> None:
        _check_cache_inputs(decoder, memory)
        self.batch = memory.shape[0]
        for layer in decoder.layers:
            for attention in (layer.self_attention, layer.cross_attention):
                # A subclass may change what happens between projection and scores (rotary
                # positions do), which the cache, projecting and attending itself, would skip.
                if type(attention) is not MultiHeadAttention:
                    raise TypeError(
                        f"KVCache works with attnlib's MultiHeadAttention only, not with "
                        f"{type(attention).__name__}: decode with use_cache=False"
                    )
        self.layers = [LayerCache(layer.cross_attention, memory) for layer in decoder.layers]

    @property
    def length(self) -> int:
        """How many target positions are cached."""
        return self.layers[0].length

    def check_batch(self, ids: torch.Tensor) -> None:
        """Refuse next positions (batch, n) of another batch than the cached memory's."""
        if not isinstance(ids, torch.Tensor):
            raise TypeError(f"ids must be a torch.Tensor, got {type(ids).__name__}")
        if ids.dim() != 2:
            raise ValueError(
                f"ids must be (batch={self.batch}, n) token ids, got shape {tuple(ids.shape)}"
            )
        if ids.shape[0] != self.batch:
            raise ValueError(
                f"ids have batch {ids.shape[0]} but this KVCache was built from a memory of "
                f"batch {self.batch}: build a cache for each batch"
            )

    def nbytes(self) -> int:
        """Bytes held by every layer's cached keys and values, memory's included."""
        return sum(layer.nbytes() for layer in self.layers)


def _check_cache_inputs(decoder: object, memory: object) -> None:
    """Require attnlib's Decoder and a finite memory (batch, src, d_model) in its dtype."""
    if not isinstance(decoder, Decoder):
        raise TypeError(
            f"decoder must be an attnlib.decoder.Decoder (an EncoderDecoder's .decoder), got "
            f"{type(decoder).__name__}"
        )
    d_model = decoder.config.d_model
    if not isinstance(memory, torch.Tensor):
        raise TypeError(f"memory must be a torch.Tensor, got {type(memory).__name__}")
    if memory.dim() != 3 or memory.shape[2] != d_model:
        raise ValueError(
            f"memory must be (batch, src, d_model={d_model}), got shape {tuple(memory.shape)}"
        )
    check_floating("memory", memory, min_dims=3)
    check_matches_weights("memory", memory, decoder.layers[0].norm1.weight)
    check_tensor("memory", memory, min_dims=3)  # every entry finite: the one scan


def with_kv_heads(model: EncoderDecoder, num_kv_heads: int) -> EncoderDecoder:
    """A copy of ``model`` whose decoder has ``num_kv_heads`` key/value heads in every attention,
    each the mean of the heads of its group (:func:`~attnlib.attention.pool_kv_heads`): a
    multi-head model converted to grouped-query attention, to be trained on briefly (uptraining)."""
    if not isinstance(model, EncoderDecoder):
        raise TypeError(f"model must be an EncoderDecoder, got {type(model).__name__}")
    config = dataclasses.replace(model.config, decoder_kv_heads=num_kv_heads)  # checks it
    target = model.target_config
    copy = EncoderDecoder(config, target.vocab_size, target.pad_id, model.tie_weights)
    head_dim = config.d_model // config.num_heads
    state = {
        key: pool_kv_heads(value, num_kv_heads, head_dim) if _decoder_key_or_value(key) else value
        for key, value in model.state_dict().items()
    }
    copy.load_state_dict(state)
    return copy.to(next(model.parameters())).train(model.training)


def _decoder_key_or_value(key: str) -> bool:
    """Whether a state-dict key is a decoder attention's key or value projection."""
    return key.startswith("decoder.") and (".key_projection." in key or ".value_projection." in key)


def kv_cache_bytes(
    config: TransformerConfig,
    batch: int,
    length: int,
    memory_len: int = 0,
    dtype: torch.dtype = torch.float32,
) -> int:
    """Bytes of a :class:`KVCache` after ``length`` steps, by formula: keys and values,
    kv_heads x head_dim numbers each (d_model unless ``config.decoder_kv_heads`` groups the
    heads), per layer, per sequence, per cached position."""
    check_count("batch", batch)
    check_int("length", length)
    check_int("memory_len", memory_len)
    itemsize = torch.empty((), dtype=dtype).element_size()
    kv_heads = config.num_heads if config.decoder_kv_heads is None else config.decoder_kv_heads
    features = kv_heads * (config.d_model // config.num_heads)  # per key (and per value)
    return 2 * config.num_layers * batch * (length + memory_len) * features * itemsize


@dataclass
class Generated:
    """Greedy decoding's result: tokens (batch, steps), ending with the end token or padding
    after it; logits (batch, steps, vocab); cross-attention weights (batch, layers, heads,
    steps, src), zero after a sequence's end, or None; the cache, if one was used."""

    tokens: torch.Tensor
    logits: torch.Tensor
    cross_weights: MaybeTensor
    cache: KVCache | None


@torch.no_grad()
def greedy_decode(
    model: EncoderDecoder,
    source: torch.Tensor,
    source_key_mask: torch.Tensor | None = None,
    *,
    start_id: int,
    end_id: int | None,
    max_len: int = 20,
    use_cache: bool = True,
    need_weights: bool = True,
) -> Generated:
    """Feed back the likeliest token from ``start_id`` until every sequence has produced
    ``end_id`` or ``max_len`` tokens; finished sequences get the target's pad id. With
    ``end_id=None`` nothing ends early: exactly ``max_len`` tokens (for timing, say).

    ``source`` (batch, src) ids, ``source_key_mask`` (batch, src) True at real tokens. The model
    runs in eval mode (no dropout) and gets its mode back afterwards. ``need_weights`` takes the
    from-scratch attention path and records every layer's cross-attention weights.
    """
    if not isinstance(model, EncoderDecoder):
        raise TypeError(f"model must be an EncoderDecoder, got {type(model).__name__}")
    config = model.target_config
    for name, token in (("start_id", start_id), ("end_id", end_id)):
        if token is not None and check_int(name, token) >= config.vocab_size:
            raise ValueError(
                f"{name}={token} is outside the target vocabulary 0..{config.vocab_size - 1}"
            )
    if check_count("max_len", max_len) > config.max_len:
        raise ValueError(
            f"max_len={max_len} steps need {max_len} positions, but the decoder has "
            f"max_len={config.max_len}"
        )
    check_flag("use_cache", use_cache)
    check_flag("need_weights", need_weights)
    was_training = model.training
    model.eval()
    try:
        return _greedy(
            model, source, source_key_mask, start_id, end_id, max_len, use_cache, need_weights
        )
    finally:
        model.train(was_training)


def _greedy(
    model: EncoderDecoder,
    source: torch.Tensor,
    source_key_mask: torch.Tensor | None,
    start_id: int,
    end_id: int | None,
    max_len: int,
    use_cache: bool,
    need_weights: bool,
) -> Generated:
    """The loop of :func:`greedy_decode`, on checked arguments, in eval mode."""
    decoder, pad_id = model.decoder, model.target_config.pad_id
    memory, memory_mask4d = model.encode(source, source_key_mask)  # (batch, src, d)
    batch, device = source.shape[0], source.device
    inputs = torch.full((batch, 1), start_id, dtype=torch.long, device=device)
    finished = torch.zeros(batch, dtype=torch.bool, device=device)
    cache = KVCache(decoder, memory) if use_cache else None
    tokens, logits, weights = [], [], []
    for step in range(max_len):
        if cache is not None:  # only the newest token goes in; the rest is cached
            hidden, _, cross = decoder.decode(
                inputs[:, -1:], None, None, memory_mask4d, need_weights, cache
            )
        else:  # the whole prefix again, under a causal mask
            causal = causal_mask(step + 1, device=device)[None, None]
            hidden, _, cross = decoder.decode(inputs, memory, causal, memory_mask4d, need_weights)
        step_logits = model.output(hidden[:, -1])  # (batch, vocab)
        token = step_logits.argmax(dim=-1).masked_fill(finished, pad_id)  # (batch,)
        if need_weights:
            last = cross[:, :, :, -1]  # (batch, layers, heads, src)
            weights.append(last.masked_fill(finished[:, None, None, None], 0.0))
        tokens.append(token)
        logits.append(step_logits)
        inputs = torch.cat([inputs, token[:, None]], dim=1)
        if end_id is not None:
            finished |= token == end_id
            if bool(finished.all()):  # one host sync a step
                break
    cross_weights = torch.stack(weights, dim=3) if need_weights else None
    return Generated(torch.stack(tokens, 1), torch.stack(logits, 1), cross_weights, cache)
