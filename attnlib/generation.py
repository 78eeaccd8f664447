"""The encoder–decoder Transformer, and greedy decoding from it with and without a KV cache.

:class:`EncoderDecoder` joins an :class:`~attnlib.encoder.Encoder` to a
:class:`~attnlib.decoder.Decoder` whose target embedding is also the output projection.
Decoding without a cache runs the decoder over the whole prefix at every step, recomputing
the keys and values of every earlier position in every layer, and the memory's too. A
:class:`~attnlib.kv_cache.KVCache` (made by :func:`decoder_cache`) keeps them: each layer's
self-attention keys and values ``(batch, kv_heads, steps, head_dim)`` grow by one position a
step; the cross-attention's ``(batch, kv_heads, src, head_dim)`` are computed once.
``kv_heads`` is ``num_heads`` unless the config's ``num_kv_heads`` groups them
(grouped-query attention), which shrinks the cache by ``num_heads / kv_heads``. Both give
the same tokens. A cache is for inference, and assumes no padding inside the target prefix
(greedy decoding makes none).
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
from attnlib.attention import pool_kv_heads
from attnlib.decoder import Decoder, MaybeTensor, _check_ids
from attnlib.encoder import Encoder
from attnlib.kv_cache import KVCache
from attnlib.model_config import TransformerConfig
from attnlib.transformer import xavier_init_


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


def decoder_cache(decoder: Decoder, memory: torch.Tensor) -> KVCache:
    """An empty :class:`~attnlib.kv_cache.KVCache` for ``decoder``, its cross-attention keys
    and values projected from the memory (batch, src, d_model) once, here.

    The memory is checked once, here (its shape, dtype and values: one scan, so one host sync
    per cache, not per step); each step checks only that its ids have the memory's batch.
    """
    _check_cache_inputs(decoder, memory)
    fixed = []
    for layer in decoder.layers:
        attention = layer.cross_attention
        if attention.rotary_base is not None:
            raise TypeError(
                "a decoder's cross-attention cannot have rotary positions: the memory's "
                "positions are not the target's"
            )
        keys = attention.split_kv_heads(attention.key_projection(memory))
        fixed.append((keys, attention.split_kv_heads(attention.value_projection(memory))))
    return KVCache(len(decoder.layers), memory.shape[0], decoder.config.window, memory=fixed)


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
    config = dataclasses.replace(model.config, num_kv_heads=num_kv_heads)  # checks it
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
    kv_heads x head_dim numbers each (d_model unless ``config.num_kv_heads`` groups the
    heads), per layer, per sequence, per cached position."""
    check_count("batch", batch)
    check_int("length", length)
    check_int("memory_len", memory_len)
    itemsize = torch.empty((), dtype=dtype).element_size()
    kv_heads = config.num_heads if config.num_kv_heads is None else config.num_kv_heads
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
    cache = decoder_cache(decoder, memory) if use_cache else None
    tokens, logits, weights = [], [], []
    for step in range(max_len):
        if cache is not None:  # only the newest token goes in; the rest is cached
            hidden, _, cross = decoder.decode(
                inputs[:, -1:], None, None, memory_mask4d, need_weights, cache
            )
        else:  # the whole prefix again, under a causal mask
            causal = decoder.order_mask(step + 1, device)[None, None]
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
