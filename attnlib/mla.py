"""Multi-head latent attention (DeepSeek-V2, 2024): keys and values from one small latent.

Each token's hidden state x is compressed to a latent c = x W_down of ``kv_rank`` numbers; every
head's key and value are read from it, k_h = c W_k,h and v_h = c W_v,h. A decoder caches c, not
the keys and values: ``kv_rank`` numbers a token instead of 2 · heads · head_dim. Rotary
positions cannot pass through the latent (a rotation between c and W_k,h would have to be undone
for every position), so a small **decoupled** part carries them: per head a rotated query
q_R,h = RoPE(x W_qR,h), and one rotated key for all heads, k_R = RoPE(x W_kR), cached beside c.
A head's score is (q_h · k_h + q_R,h · k_R) / √(head_dim + rope_dim).

At decode time the up-projections can be **absorbed**: q_h · (c W_k,h) = (q_h W_k,hᵀ) · c, and
Σ w (c W_v,h) = (Σ w c) W_v,h, so attention runs on the cached latents themselves and the keys
and values are never formed. :meth:`MultiHeadLatentAttention.forward` computes the naive form
(keys and values expanded, as in training), :meth:`~MultiHeadLatentAttention.decode` the
absorbed one against a :class:`LatentCache`; the tests hold them equal. DeepSeek-V2 also
compresses the queries and normalises the latent; this module keeps to what changes the cache.
"""

from __future__ import annotations

import math

import torch
from torch import nn

from attnlib._checks import check_count, check_tensor
from attnlib.masks import causal_mask
from attnlib.positions import apply_rotary_unchecked, rotary_frequencies


class LatentCache:
    """The latents (batch, kept, kv_rank) and rotated rope keys (batch, kept, rope_dim) of the
    positions seen so far: all a decoder keeps of them."""

    def __init__(self) -> None:
        self.latents: torch.Tensor | None = None
        self.rope_keys: torch.Tensor | None = None

    @property
    def length(self) -> int:
        """Positions held: the next one stands at this position."""
        return 0 if self.latents is None else self.latents.shape[1]

    def update(self, latents: torch.Tensor, rope_keys: torch.Tensor) -> None:
        """Append new positions' latents (batch, n, kv_rank) and rope keys (batch, n, rope_dim)."""
        if self.latents is None:
            self.latents, self.rope_keys = latents, rope_keys
        else:
            self.latents = torch.cat([self.latents, latents], dim=1)
            self.rope_keys = torch.cat([self.rope_keys, rope_keys], dim=1)

    def nbytes(self) -> int:
        """Bytes held."""
        held = (self.latents, self.rope_keys)
        return sum(t.numel() * t.element_size() for t in held if t is not None)


class MultiHeadLatentAttention(nn.Module):
    """Causal self-attention whose keys and values come from a ``kv_rank`` latent, with a
    decoupled rotary part of ``rope_dim`` per head: (batch, n, d_model) -> same."""

    def __init__(
        self,
        d_model: int,
        num_heads: int,
        kv_rank: int,
        rope_dim: int = 8,
        rotary_base: float = 10000.0,
    ) -> None:
        super().__init__()
        d_model, num_heads = check_count("d_model", d_model), check_count("num_heads", num_heads)
        if d_model % num_heads:
            raise ValueError(f"num_heads={num_heads} does not divide d_model={d_model}")
        self.d_model, self.num_heads, self.head_dim = d_model, num_heads, d_model // num_heads
        self.kv_rank, self.rope_dim = (
            check_count("kv_rank", kv_rank),
            check_count("rope_dim", rope_dim),
        )
        rotary_frequencies(rope_dim, rotary_base)  # checks: an even rope_dim, base > 0
        self.rotary_base = float(rotary_base)
        self.down = nn.Linear(d_model, kv_rank, bias=False)  # x -> c
        self.key_up = nn.Linear(kv_rank, d_model, bias=False)  # c -> every head's k
        self.value_up = nn.Linear(kv_rank, d_model, bias=False)  # c -> every head's v
        self.query = nn.Linear(d_model, d_model, bias=False)
        self.query_rope = nn.Linear(d_model, num_heads * rope_dim, bias=False)
        self.key_rope = nn.Linear(d_model, rope_dim, bias=False)  # one for all heads
        self.output = nn.Linear(d_model, d_model, bias=False)
        # As MultiHeadAttention's projections: with PyTorch's default init the two-step keys
        # and values (x -> c -> k) start so small that every score is near 0 and training sits
        # on a plateau of uniform attention (seen on MQAR).
        for projection in (self.down, self.key_up, self.value_up, self.query, self.query_rope,
                           self.key_rope):  # fmt: skip
            nn.init.xavier_uniform_(projection.weight)

    def cache_bytes_per_token(self, element_size: int = 4) -> int:
        """What one position costs in the cache: its latent and its rope key."""
        return (self.kv_rank + self.rope_dim) * element_size

    def _heads(self, x: torch.Tensor, width: int) -> torch.Tensor:
        """(batch, n, heads * width) -> (batch, heads, n, width)."""
        batch, n, _ = x.shape
        return x.view(batch, n, self.num_heads, width).transpose(1, 2)

    def _rotated(self, x: torch.Tensor, start: int) -> tuple[torch.Tensor, torch.Tensor]:
        """Rope queries (batch, heads, n, rope_dim) and the rope key (batch, n, rope_dim) of
        positions start .. start + n - 1."""
        positions = torch.arange(start, start + x.shape[1], device=x.device)
        queries = self._heads(self.query_rope(x), self.rope_dim)
        queries = apply_rotary_unchecked(queries, positions, self.rotary_base)
        keys = apply_rotary_unchecked(self.key_rope(x), positions, self.rotary_base)
        return queries, keys

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """The naive form, keys and values expanded: x (batch, n, d_model) -> output (batch, n,
        d_model) and weights (batch, heads, n, n)."""
        check_tensor("x", x, min_dims=3)
        latents = self.down(x)  # (batch, n, kv_rank)
        keys = self._heads(self.key_up(latents), self.head_dim)  # (batch, heads, n, hd)
        values = self._heads(self.value_up(latents), self.head_dim)
        queries = self._heads(self.query(x), self.head_dim)
        rope_queries, rope_keys = self._rotated(x, 0)
        scores = queries @ keys.transpose(-2, -1) + rope_queries @ rope_keys[:, None].transpose(
            -2, -1
        )
        future = ~causal_mask(x.shape[1], device=x.device)
        scores = scores.masked_fill(future, float("-inf")) / math.sqrt(
            self.head_dim + self.rope_dim
        )
        weights = torch.softmax(scores, dim=-1)
        heads = (weights @ values).transpose(1, 2).reshape(x.shape)
        return self.output(heads), weights

    def decode(self, x: torch.Tensor, cache: LatentCache) -> torch.Tensor:
        """The absorbed form: new positions x (batch, n, d_model), after those ``cache`` holds
        -> output (batch, n, d_model); their latents and rope keys join the cache."""
        check_tensor("x", x, min_dims=3)
        start, n = cache.length, x.shape[1]
        rope_queries, rope_keys = self._rotated(x, start)
        cache.update(self.down(x), rope_keys)
        latents, all_rope_keys = cache.latents, cache.rope_keys  # (batch, kept, ...)
        # Absorb W_k,h into the query: q_h W_k,hᵀ, a (kv_rank)-vector per head.
        w_key = self.key_up.weight.view(self.num_heads, self.head_dim, self.kv_rank)
        queries = self._heads(self.query(x), self.head_dim)  # (batch, heads, n, hd)
        absorbed = queries @ w_key  # (batch, heads, n, kv_rank)
        scores = absorbed @ latents[:, None].transpose(-2, -1)  # (batch, heads, n, kept)
        scores = scores + rope_queries @ all_rope_keys[:, None].transpose(-2, -1)
        kept = latents.shape[1]
        allowed = causal_mask(n, kept, device=x.device)  # the new queries at the last places
        scores = scores.masked_fill(~allowed, float("-inf")) / math.sqrt(
            self.head_dim + self.rope_dim
        )
        weights = torch.softmax(scores, dim=-1)
        mixed = weights @ latents[:, None]  # (batch, heads, n, kv_rank): Σ w c
        w_value = self.value_up.weight.view(self.num_heads, self.head_dim, self.kv_rank)
        heads = mixed @ w_value.transpose(-2, -1)  # (batch, heads, n, hd): (Σ w c) W_v,h
        return self.output(heads.transpose(1, 2).reshape(x.shape))
