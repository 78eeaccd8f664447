"""A decoder-only language model, GPT's shape, composed by its config: token ids ``(batch, seq)``
-> next-token logits ``(batch, seq, vocab)``.

It is built from the encoder's parts: one embedding (:func:`attnlib.transformer.embed_tokens`)
and one stack of :class:`~attnlib.transformer.EncoderLayer` blocks made causal, each position
attending to itself and those before it. The config chooses the rest: ``positions``
(a sinusoidal or learned table, rotary, or none), ``num_kv_heads`` (grouped-query
attention), ``window`` (sliding-window attention) and, with ``implementation``, which of
:data:`attnlib.attention.IMPLEMENTATIONS` computes attention. :meth:`DecoderOnlyLM.generate`
continues a prompt greedily, with the KV cache of :mod:`attnlib.kv_cache` or without it; the
two give the same tokens. A config's ``mixer`` builds the blocks around one of
:data:`attnlib.mixers.MIXERS` instead of self-attention: such a model forms no attention
weights, and generates with a :class:`~attnlib.mixers.MixerCache`, one position at a time.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass

import torch
from torch import nn

from attnlib._checks import check_count, check_flag, check_int
from attnlib.attention import check_implementation
from attnlib.encoder import layer_stack
from attnlib.kv_cache import KVCache
from attnlib.mixers import MixerCache
from attnlib.model_config import TransformerConfig
from attnlib.transformer import (
    embed_tokens,
    position_table,
    xavier_init_,
)

TABLES = ("sinusoidal", "learned")  # positions with a table of max_len rows


class DecoderOnlyLM(nn.Module):
    """Embedding, N causal blocks, a final LayerNorm with ``norm_first``, and an output layer
    whose weight is the embedding's with ``tie_weights`` (Press & Wolf).

    ``implementation`` (None: "sdpa" if ``config.fused`` else "eager") names the attention's
    implementation in every block; "flash" takes no dropout while training.
    """

    def __init__(
        self,
        config: TransformerConfig,
        tie_weights: bool = True,
        implementation: str | None = None,
    ) -> None:
        super().__init__()
        if not isinstance(config, TransformerConfig):
            raise TypeError(f"config must be a TransformerConfig, got {type(config).__name__}")
        self.config = c = config
        self.tie_weights = check_flag("tie_weights", tie_weights)
        self.embedding = nn.Embedding(c.vocab_size, c.d_model, padding_idx=c.pad_id)
        self.positions = position_table(c.positions, c.d_model, c.max_len)
        self.dropout = nn.Dropout(c.dropout)
        self.layers = layer_stack(c, causal=True)
        self.final_norm = nn.LayerNorm(c.d_model) if c.norm_first else nn.Identity()
        self.output = nn.Linear(c.d_model, c.vocab_size)
        if tie_weights:
            self.output.weight = self.embedding.weight
        xavier_init_(self)  # the embedding comes first, so a tied weight keeps its init
        if implementation is not None:
            self.implementation = implementation

    def _needs_attention(self, what: str) -> None:
        """Refuse ``what`` for a model built around a mixer, whose blocks have no attention."""
        if self.config.mixer is not None:
            raise ValueError(
                f"{what} needs attention blocks; this model's blocks are built around the "
                f"{self.config.mixer!r} mixer"
            )

    @property
    def implementation(self) -> str:
        """The attention implementation every block runs."""
        self._needs_attention("an attention implementation")
        return self.layers[0].implementation

    @implementation.setter
    def implementation(self, name: str) -> None:
        self._needs_attention("an attention implementation")
        check_implementation(name)
        for layer in self.layers:
            layer.implementation = name

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        """ids (batch, seq) -> logits (batch, seq, vocab): at each position, the next token's."""
        self._check_ids(ids, start=0)
        return self.decode(ids)[0]

    def attention_weights(self, ids: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """ids (batch, seq) -> logits (batch, seq, vocab) and every head's attention weights
        (batch, layers, heads, seq, seq), from the from-scratch path (the one that forms them)."""
        self._needs_attention("attention weights")
        self._check_ids(ids, start=0)
        logits, weights = self.decode(ids, need_weights=True)
        return logits, weights

    def decode(
        self, ids: torch.Tensor, cache: KVCache | None = None, need_weights: bool = False
    ) -> tuple[torch.Tensor, torch.Tensor | None]:
        """:meth:`forward` without checks: logits (batch, n, vocab) and, if asked for, weights
        (batch, layers, heads, n, n); with ``cache``, ids (batch, n) are the positions after the
        cached ones, and their keys and values join it."""
        start = 0 if cache is None else cache.length
        x = embed_tokens(self.embedding, self.positions, self.dropout, ids, start)
        all_weights = []
        for index, layer in enumerate(self.layers):
            layer_cache = None if cache is None else cache.layers[index]
            x, weights = layer(x, None, need_weights, layer_cache)
            all_weights.append(weights)
        stacked = torch.stack(all_weights, dim=1) if need_weights else None
        return self.output(self.final_norm(x)), stacked  # (batch, n, vocab)

    @contextmanager
    def ablated(self, heads: Iterable[tuple[int, int]]) -> Iterator[DecoderOnlyLM]:
        """Within the block, the outputs of the (layer, head) pairs are zero: the model as if
        those heads were not there (how chapter 17 tests what a head does)."""
        self._needs_attention("ablating heads")
        gates = [torch.ones(layer.attention.num_heads) for layer in self.layers]
        for layer_index, head in heads:
            if not 0 <= layer_index < len(self.layers):
                raise ValueError(f"layer {layer_index} is outside 0..{len(self.layers) - 1}")
            if not 0 <= head < gates[layer_index].numel():
                raise ValueError(f"head {head} is outside 0..{gates[layer_index].numel() - 1}")
            gates[layer_index][head] = 0.0
        try:
            for layer, gate in zip(self.layers, gates, strict=True):
                layer.attention.head_gate = None if bool(gate.all()) else gate
            yield self
        finally:
            for layer in self.layers:
                layer.attention.head_gate = None

    def new_cache(self, batch: int) -> KVCache:
        """An empty cache for a batch of ``batch`` sequences, as long as the config's window;
        around a mixer, a :class:`~attnlib.mixers.MixerCache` of caches or states."""
        if self.config.mixer is not None:
            return MixerCache(len(self.layers), batch)
        return KVCache(len(self.layers), batch, self.config.window)

    @torch.no_grad()
    def generate(
        self,
        prompt: torch.Tensor,
        max_new_tokens: int,
        *,
        use_cache: bool = True,
        end_id: int | None = None,
    ) -> Generation:
        """Continue ``prompt`` (batch, n) by the likeliest token, ``max_new_tokens`` times or until
        every sequence has produced ``end_id`` (then it gets padding). In eval mode (no
        dropout); the model's mode comes back afterwards.

        With ``use_cache`` the prompt runs once (prefill) and each new token alone after it
        (decode), against the cached keys and values; without, the whole sequence runs again
        at every step.
        """
        check_count("max_new_tokens", max_new_tokens)
        check_flag("use_cache", use_cache)
        if end_id is not None and check_int("end_id", end_id) >= self.config.vocab_size:
            raise ValueError(
                f"end_id={end_id} is outside the vocabulary 0..{self.config.vocab_size - 1}"
            )
        self._check_ids(prompt, start=0, new=max_new_tokens)
        was_training = self.training
        self.eval()
        try:
            return self._generate(prompt, max_new_tokens, use_cache, end_id)
        finally:
            self.train(was_training)

    def _generate(
        self, prompt: torch.Tensor, max_new_tokens: int, use_cache: bool, end_id: int | None
    ) -> Generation:
        """The loop of :meth:`generate`, on checked arguments, in eval mode."""
        batch = prompt.shape[0]
        cache = self.new_cache(batch) if use_cache else None
        finished = torch.zeros(batch, dtype=torch.bool, device=prompt.device)
        sequence, tokens, logits = prompt, [], []
        step_input = prompt
        for _ in range(max_new_tokens):
            if cache is not None:
                step_logits = self.decode(step_input, cache)[0][:, -1]  # (batch, vocab)
            else:
                step_logits = self.decode(sequence)[0][:, -1]
            token = step_logits.argmax(dim=-1).masked_fill(finished, self.config.pad_id)
            tokens.append(token)
            logits.append(step_logits)
            sequence = torch.cat([sequence, token[:, None]], dim=1)
            step_input = token[:, None]
            if end_id is not None:
                finished |= token == end_id
                if bool(finished.all()):  # one host sync a step
                    break
        return Generation(torch.stack(tokens, 1), torch.stack(logits, 1), cache)

    def _check_ids(self, ids: object, start: int, new: int = 0) -> None:
        """Token ids (batch, n), n >= 1, in the vocabulary; positions within a table's max_len."""
        if not isinstance(ids, torch.Tensor):
            raise TypeError(f"ids must be a torch.Tensor, got {type(ids).__name__}")
        if ids.dtype not in (torch.long, torch.int32):
            raise TypeError(f"ids must be integer token ids (torch.long), got dtype {ids.dtype}")
        if ids.dim() != 2 or ids.shape[1] == 0:
            raise ValueError(f"ids must be (batch, n) with n >= 1, got shape {tuple(ids.shape)}")
        end = start + ids.shape[1] + new
        if self.config.positions in TABLES and end > self.config.max_len:
            raise ValueError(
                f"{end} positions, but the {self.config.positions} position table stops at "
                f"max_len={self.config.max_len}"
            )
        if ids.numel() > 0:
            low, high = torch.aminmax(ids)
            if int(low) < 0 or int(high) >= self.config.vocab_size:  # one host sync
                bad = int(low) if int(low) < 0 else int(high)
                raise ValueError(
                    f"token id {bad} is outside the vocabulary 0..{self.config.vocab_size - 1}"
                )


@dataclass
class Generation:
    """What :meth:`DecoderOnlyLM.generate` made: tokens (batch, new), ending with the end token
    or padding after it; logits (batch, new, vocab); the cache, if one was used."""

    tokens: torch.Tensor
    logits: torch.Tensor
    cache: KVCache | None
