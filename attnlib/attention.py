"""Attention itself: ``attend`` for one set of queries, and multi-head attention from scratch.

Shapes: queries ``(..., n_queries, d_k)``, keys ``(..., n_keys, d_k)``, values
``(..., n_keys, d_v)``; weights ``(..., n_queries, n_keys)``; masks boolean, True = may attend.

Inputs are checked once, at the public entry (``attend``, ``MultiHeadAttention.forward``); the
kernels behind them (``attend_unchecked``, ``forward_prepared``) trust their callers.

:meth:`MultiHeadAttention.forward_prepared` is the one attention body of the library: it
projects, rotates (rotary positions), updates a KV cache, and calls one of three
implementations of the same function, named in :data:`IMPLEMENTATIONS`: ``"eager"``, the
from-scratch path of chapters 06-07 (the only one that returns the weights); ``"sdpa"``,
torch's fused ``scaled_dot_product_attention``; ``"flash"``, chapter 15's tiles. Causal
order and sliding windows pass as structure, not as a mask tensor, wherever the
implementation takes them so.
"""

from __future__ import annotations

from collections.abc import Callable

import torch
import torch.nn.functional as F
from torch import nn

from attnlib._checks import (
    check_count,
    check_flag,
    check_mask,
    check_matches_weights,
    check_number,
    check_probability,
    check_same_dtype,
    check_tensor,
)
from attnlib.flash import FlashAttentionFunction
from attnlib.kv_cache import LayerKV
from attnlib.masks import masked_softmax_unchecked, prepare_attention_mask, structure_mask
from attnlib.positions import apply_rotary_unchecked, rotary_frequencies
from attnlib.scores import Score, ScoreFunction, resolve_score, scaled_dot_product

# enable_gqa arrived in torch 2.5; before it, the fused path repeats key/value heads itself.
SDPA_HAS_GQA = torch.__version__ >= (2, 5)
IMPLEMENTATIONS = ("eager", "sdpa", "flash")
FLASH_BLOCK = 64  # chapter 15's tile: (64, 64) scores at a time


def check_implementation(implementation: object) -> str:
    """Refuse a name that is not one of :data:`IMPLEMENTATIONS`; return it."""
    if implementation not in IMPLEMENTATIONS:
        raise ValueError(
            f"unknown attention implementation {implementation!r}; choose one of "
            f"{', '.join(map(repr, IMPLEMENTATIONS))}"
        )
    return implementation


def implementation_for(fused: bool) -> str:
    """The implementation a ``fused`` switch names: "sdpa" (torch's fused kernel) or "eager"."""
    return "sdpa" if check_flag("fused", fused) else "eager"


def _check_qkv(queries: torch.Tensor, keys: torch.Tensor, values: torch.Tensor) -> tuple:
    """Scan each tensor once; return the weights' shape (..., n_queries, n_keys)."""
    for name, tensor in (("queries", queries), ("keys", keys), ("values", values)):
        check_tensor(name, tensor)
    check_same_dtype(queries=queries, keys=keys, values=values)
    if queries.shape[-1] == 0 or keys.shape[-1] == 0:
        raise ValueError(
            f"queries have d_k={queries.shape[-1]} and keys d_k={keys.shape[-1]} features: "
            "a score needs at least one (scaled dot divides by √d_k)"
        )
    if keys.shape[-2] != values.shape[-2]:
        raise ValueError(
            f"keys have n_keys={keys.shape[-2]} but values have n_keys={values.shape[-2]}"
        )
    batch_shapes = {
        "queries": tuple(queries.shape[:-2]),
        "keys": tuple(keys.shape[:-2]),
        "values": tuple(values.shape[:-2]),
    }
    try:
        batch = torch.broadcast_shapes(*batch_shapes.values())
    except RuntimeError:
        described = ", ".join(f"{name} {shape}" for name, shape in batch_shapes.items())
        raise ValueError(f"batch shapes do not match: {described}") from None
    return (*batch, queries.shape[-2], keys.shape[-2])


def attend(
    queries: torch.Tensor,
    keys: torch.Tensor,
    values: torch.Tensor,
    mask: torch.Tensor | None = None,
    score: str | ScoreFunction = "scaled_dot",
    temperature: float = 1.0,
    dropout: nn.Module | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Weighted sum of values: output (..., n_queries, d_v), weights (..., n_queries, n_keys).

    ``mask`` is boolean, True where a query may attend to a key, and broadcasts to the weights'
    shape; a fully masked query gets zero weights and a zero output. ``score`` is a name of
    :data:`attnlib.scores.SCORES` without parameters, a score module, or any callable
    ``score(queries, keys)``.
    """
    score_function = resolve_score(score)
    weights_shape = _check_qkv(queries, keys, values)
    if isinstance(score_function, Score):
        # attnlib's scores check widths here and skip their own NaN scans below.
        score_function.check_shapes(queries, keys)
        score_function = score_function.unchecked
    if not check_number("temperature", temperature) > 0:
        raise ValueError(f"temperature must be positive, got {temperature}")
    if mask is not None:
        check_mask(mask, weights_shape, "attention weights")
    return attend_unchecked(queries, keys, values, mask, score_function, temperature, dropout)


def attend_unchecked(
    queries: torch.Tensor,
    keys: torch.Tensor,
    values: torch.Tensor,
    mask: torch.Tensor | None,
    score: ScoreFunction = scaled_dot_product,
    temperature: float = 1.0,
    dropout: nn.Module | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """:func:`attend` without checks: output (..., n_queries, d_v), weights (..., n_q, n_keys).

    Half-precision scores come as float32 (see :mod:`attnlib.scores`); the weights are cast
    back to the values' dtype after the softmax.
    """
    scores = score(queries, keys)  # (..., n_queries, n_keys)
    if temperature != 1.0:
        scores = scores / temperature
    weights = masked_softmax_unchecked(scores, mask).to(values.dtype)  # (..., n_q, n_keys)
    dropped = dropout(weights) if dropout is not None else weights
    return dropped @ values, weights  # (..., n_queries, d_v)


def attend_with_sink_unchecked(
    queries: torch.Tensor,
    keys: torch.Tensor,
    values: torch.Tensor,
    mask: torch.Tensor | None,
    sink_logits: torch.Tensor,
    dropout: nn.Module | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Scaled dot-product attention with a sink: queries (batch, heads, n_q, d), keys and values
    (batch, heads, n_k, d), sink_logits (heads,) -> output (batch, heads, n_q, d) and weights
    (batch, heads, n_q, n_k). Each row's softmax runs over its scores and the head's sink
    logit, a key that takes weight and returns nothing, so a row's weights sum to less than 1
    (a fully masked row gives all to the sink: zero weights, zero output)."""
    scores = scaled_dot_product(queries, keys)  # (batch, heads, n_q, n_k), float32 for halves
    if mask is not None:
        scores = scores.masked_fill(~mask, float("-inf"))
    sink = sink_logits.to(scores.dtype).view(1, -1, 1, 1).expand(*scores.shape[:-1], 1)
    weights = torch.softmax(torch.cat([scores, sink], dim=-1), dim=-1)[..., :-1]
    weights = weights.to(values.dtype)
    dropped = dropout(weights) if dropout is not None else weights
    return dropped @ values, weights


def pool_kv_heads(weight: torch.Tensor, num_kv_heads: int, head_dim: int) -> torch.Tensor:
    """(kv_heads * head_dim, ...) -> (num_kv_heads * head_dim, ...): the mean of each group of
    kv_heads / num_kv_heads consecutive heads' rows (Ainslie et al., 2023: GQA from multi-head)."""
    kv_heads = weight.shape[0] // head_dim
    if check_count("num_kv_heads", num_kv_heads) > kv_heads or kv_heads % num_kv_heads:
        raise ValueError(
            f"num_kv_heads={num_kv_heads} must divide the {kv_heads} key/value heads it pools"
        )
    grouped = weight.reshape(num_kv_heads, kv_heads // num_kv_heads, head_dim, *weight.shape[1:])
    return grouped.mean(dim=1).reshape(num_kv_heads * head_dim, *weight.shape[1:])


SINKS = ("learned", "plus_one")  # a learned logit per head, or a logit fixed at 0


class MultiHeadAttention(nn.Module):
    """Multi-head attention written out: project, split heads, attend, merge, project.

    ``forward`` returns ``(output, weights)``: output ``(batch, n_queries, d_model)`` and
    per-head weights ``(batch, heads, n_queries, n_keys)``, or ``None`` on the fused path,
    which calls ``torch.nn.functional.scaled_dot_product_attention`` and never forms them.
    ``num_kv_heads`` < ``num_heads`` is grouped-query attention (1: multi-query): each group of
    ``num_heads // num_kv_heads`` query heads shares one key/value head. With ``rotary_base``
    the queries and keys of each head are rotated by their positions after the projections
    (rotary positions, :mod:`attnlib.positions`): keys stand at 0 .. n_keys - 1 after what a
    cache holds, and the queries at the last of them, so it is meant for self-attention.
    ``sink`` (one of :data:`SINKS`) adds to every head a key that takes weight and returns
    nothing (:func:`attend_with_sink_unchecked`); the "flash" implementation has none.
    """

    def __init__(
        self,
        d_model: int,
        num_heads: int,
        bias: bool = True,
        dropout: float = 0.0,
        num_kv_heads: int | None = None,
        rotary_base: float | None = None,
        sink: str | None = None,
    ):
        super().__init__()
        d_model, num_heads = check_count("d_model", d_model), check_count("num_heads", num_heads)
        check_flag("bias", bias)
        dropout = check_probability("dropout", dropout)
        if d_model % num_heads != 0:
            raise ValueError(
                f"num_heads={num_heads} does not divide d_model={d_model}: each head needs "
                f"d_model / num_heads features"
            )
        kv_heads = check_count("num_kv_heads", num_heads if num_kv_heads is None else num_kv_heads)
        if num_heads % kv_heads != 0:
            raise ValueError(f"num_kv_heads={kv_heads} does not divide num_heads={num_heads}")
        self.d_model, self.num_heads, self.num_kv_heads = d_model, num_heads, kv_heads
        self.head_dim = d_model // num_heads
        self.dropout_p = dropout
        if rotary_base is not None:
            rotary_frequencies(self.head_dim, rotary_base)  # checks: an even head_dim, base > 0
            rotary_base = float(rotary_base)
        self.rotary_base = rotary_base
        if sink is not None and sink not in SINKS:
            raise ValueError(f"sink must be None or one of {list(SINKS)}, got {sink!r}")
        self.sink = sink
        if sink == "learned":
            self.sink_logits = nn.Parameter(torch.zeros(num_heads))
        else:  # softmax plus one: a logit of 0, not trained
            self.register_buffer(
                "sink_logits", None if sink is None else torch.zeros(num_heads), persistent=False
            )
        # (heads,) multipliers of each head's output, or None: 0 switches a head off (ablation).
        self.head_gate: torch.Tensor | None = None
        kv_features = kv_heads * self.head_dim  # d_model unless heads are grouped
        self.query_projection = nn.Linear(d_model, d_model, bias=bias)
        self.key_projection = nn.Linear(d_model, kv_features, bias=bias)
        self.value_projection = nn.Linear(d_model, kv_features, bias=bias)
        self.output_projection = nn.Linear(d_model, d_model, bias=bias)
        self.dropout = nn.Dropout(dropout)
        for projection in (self.query_projection, self.key_projection, self.value_projection):
            nn.init.xavier_uniform_(projection.weight)

    def grouped(self, num_kv_heads: int) -> MultiHeadAttention:
        """A copy with ``num_kv_heads`` key/value heads, each the mean of its group's heads, the
        query and output projections unchanged: the start of the GQA paper's uptraining."""

        def pooled() -> dict[str, torch.Tensor]:
            return {
                name: pool_kv_heads(value, num_kv_heads, self.head_dim)
                if name.startswith(("key_projection", "value_projection"))
                else value
                for name, value in self.state_dict().items()
            }

        return self._copy(pooled, num_kv_heads=num_kv_heads)

    def rotary(self, base: float = 10000.0) -> MultiHeadAttention:
        """A copy whose queries and keys are rotated by their positions (rotary positions), with
        the same sizes, dropout and weights: how a model trades its position table for RoPE."""
        return self._copy(self.state_dict, rotary_base=base)

    def _copy(
        self, state: Callable[[], dict[str, torch.Tensor]], **changes: object
    ) -> MultiHeadAttention:
        """A module of this one's options but ``changes`` (checked first), holding ``state()``,
        on this one's device and dtype and in its mode."""
        options = {
            "bias": self.query_projection.bias is not None,
            "dropout": self.dropout_p,
            "num_kv_heads": self.num_kv_heads,
            "rotary_base": self.rotary_base,
            "sink": self.sink,
        }
        copy = MultiHeadAttention(self.d_model, self.num_heads, **(options | changes))
        copy.load_state_dict(state())
        return copy.to(self.query_projection.weight).train(self.training)

    def split_heads(self, x: torch.Tensor) -> torch.Tensor:
        """(batch, seq, d_model) -> (batch, heads, seq, head_dim)."""
        batch, seq, _ = x.shape
        return x.view(batch, seq, self.num_heads, self.head_dim).transpose(1, 2)

    def split_kv_heads(self, x: torch.Tensor) -> torch.Tensor:
        """(batch, seq, kv_heads * head_dim) -> (batch, kv_heads, seq, head_dim)."""
        batch, seq, _ = x.shape
        return x.view(batch, seq, self.num_kv_heads, self.head_dim).transpose(1, 2)

    def repeat_kv_heads(self, x: torch.Tensor) -> torch.Tensor:
        """(batch, kv_heads, seq, hd) -> (batch, heads, seq, hd): head h reads kv head h // group"""
        group = self.num_heads // self.num_kv_heads
        return x if group == 1 else x.repeat_interleave(group, dim=1)

    def merge_heads(self, x: torch.Tensor) -> torch.Tensor:
        """(batch, heads, seq, head_dim) -> (batch, seq, d_model)."""
        batch, _, seq, _ = x.shape
        return x.transpose(1, 2).reshape(batch, seq, self.d_model)

    def forward(
        self,
        query: torch.Tensor,
        key: torch.Tensor | None = None,
        value: torch.Tensor | None = None,
        mask: torch.Tensor | None = None,
        key_mask: torch.Tensor | None = None,
        fused: bool = False,
    ) -> tuple[torch.Tensor, torch.Tensor | None]:
        """Attend (batch, n_queries, d_model) over (batch, n_keys, d_model); no key: self-attention.
        ``fused`` picks torch's SDPA ("sdpa"), which forms no weights, over "eager".

        Both masks are boolean and True means "may attend"; both paths accept the same ones.

        - ``key_mask`` ``(batch, n_keys)``: True at real keys, False at padding. This is the
          inverse of torch's ``key_padding_mask`` (True = padding): pass ``~key_padding_mask``.
        - ``mask``: ``(n_queries, n_keys)`` (say a causal mask), ``(batch, n_queries, n_keys)``
          (as from :func:`attnlib.masks.padding_mask`) or ``(batch, heads, n_queries, n_keys)``;
          any axis may be 1 to broadcast. A 2-D mask is always ``(n_queries, n_keys)``, never
          ``(batch, n_keys)``: padding goes in ``key_mask``.

        Checks the inputs, then runs :meth:`prepare_mask` and :meth:`forward_prepared`.
        """
        key = query if key is None else key
        value = key if value is None else value
        check_flag("fused", fused)
        self._check_inputs(query, key, value)
        if self.rotary_base is not None and query.shape[1] > key.shape[1]:
            raise ValueError(
                f"rotary attention places the queries at the last of the key positions 0 .. "
                f"n_keys - 1, so it needs n_queries <= n_keys: got query of {query.shape[1]} "
                f"positions and key of {key.shape[1]}"
            )
        mask4d = self.prepare_mask(mask, key_mask, query.shape[0], query.shape[1], key.shape[1])
        return self.forward_prepared(query, key, value, mask4d, implementation_for(fused))

    def prepare_mask(
        self,
        mask: torch.Tensor | None,
        key_mask: torch.Tensor | None,
        batch: int,
        n_queries: int,
        n_keys: int,
    ) -> torch.Tensor | None:
        """Check ``mask`` and ``key_mask`` once; their AND as a 4-D bool mask, or None.

        The result broadcasts to (batch, heads, n_queries, n_keys); a stack of layers prepares
        it once and hands it to every layer's :meth:`forward_prepared`.
        """
        return prepare_attention_mask(mask, key_mask, (batch, self.num_heads, n_queries, n_keys))

    def forward_prepared(
        self,
        query: torch.Tensor,
        key: torch.Tensor,
        value: torch.Tensor,
        mask4d: torch.Tensor | None,
        implementation: str = "eager",
        *,
        causal: bool = False,
        window: int | None = None,
        cache: LayerKV | None = None,
    ) -> tuple[torch.Tensor, torch.Tensor | None]:
        """:meth:`forward` without checks, ``mask4d`` from :meth:`prepare_mask`: output
        (batch, n_queries, d_model), weights (batch, heads, n_queries, n_keys) from "eager",
        else None.

        ``causal`` and ``window`` are structure: query i stands at key position
        i + n_keys - n_queries (the last positions, after a cache) and sees, causally, the keys
        up to it, or within ``window`` of it (:func:`attnlib.masks.sliding_window_mask`).
        ``cache`` (:class:`attnlib.kv_cache.LayerKV`) holds the keys and values of earlier
        positions: the new ones join it, or, for a fixed cache (an encoder's memory), it holds
        them all and ``key`` and ``value`` go unused.
        """
        queries = self.split_heads(self.query_projection(query))  # (batch, heads, n_q, head_dim)
        if cache is not None and cache.fixed:
            keys, values = cache.keys, cache.values  # projected once, when the cache was made
        else:
            keys = self.split_kv_heads(self.key_projection(key))  # (batch, kv_heads, n_k, hd)
            values = self.split_kv_heads(self.value_projection(value))  # (batch, kv_heads, n_k, hd)
            if cache is not None and cache.renumbers:
                # Positions are places in the cache (StreamingLLM): rotate what it holds.
                keys, values = cache.update(keys, values)  # (batch, kv_heads, kept, hd)
                if self.rotary_base is not None:
                    queries, keys = self.rotate(queries, keys)
            else:
                if self.rotary_base is not None:
                    start = 0 if cache is None else cache.seen
                    queries, keys = self.rotate(queries, keys, start)
                if cache is not None:
                    keys, values = cache.update(keys, values)  # (batch, kv_heads, kept + n_k, hd)
        heads, weights = self.attend_heads(
            queries, keys, values, mask4d, implementation, causal, window
        )
        if self.head_gate is not None:
            heads = heads * self.head_gate.to(heads).view(1, -1, 1, 1)
        return self.output_projection(self.merge_heads(heads)), weights  # (batch, n_q, d_model)

    def rotate(
        self, queries: torch.Tensor, keys: torch.Tensor, start: int = 0
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """Rotate keys (batch, kv_heads, n_k, hd) by positions start .. start + n_k - 1 and
        queries (batch, heads, n_q, hd) by the last n_q of them: the same shapes."""
        n_queries, n_keys = queries.shape[2], keys.shape[2]
        positions = torch.arange(start, start + n_keys, device=keys.device)
        queries = apply_rotary_unchecked(queries, positions[n_keys - n_queries :], self.rotary_base)
        return queries, apply_rotary_unchecked(keys, positions, self.rotary_base)

    def attend_heads(
        self,
        queries: torch.Tensor,
        keys: torch.Tensor,
        values: torch.Tensor,
        mask4d: torch.Tensor | None,
        implementation: str,
        causal: bool = False,
        window: int | None = None,
    ) -> tuple[torch.Tensor, torch.Tensor | None]:
        """Queries (batch, heads, n_q, hd), keys and values (batch, kv_heads, n_k, hd) -> heads
        (batch, heads, n_q, hd), weights (batch, heads, n_q, n_k) or None; a query with no
        allowed key gets a zero output in every implementation."""
        if self.sink is not None:
            return self._sink_heads(queries, keys, values, mask4d, implementation, causal, window)
        if implementation == "flash":
            return self._flash_heads(queries, keys, values, mask4d, causal, window), None
        n_queries, n_keys = queries.shape[2], keys.shape[2]
        structure = structure_mask(n_queries, n_keys, causal, window, queries.device)
        if implementation == "sdpa":
            # SDPA takes plain causal order as a flag; a window needs a mask tensor.
            as_flag = causal and window is None and mask4d is None and n_queries == n_keys
            if as_flag:
                return self._sdpa_heads(queries, keys, values, None, is_causal=True), None
            mask = _and(mask4d, structure)
            return self._sdpa_heads(queries, keys, values, mask), None
        keys, values = self.repeat_kv_heads(keys), self.repeat_kv_heads(values)
        return attend_unchecked(
            queries, keys, values, _and(mask4d, structure), dropout=self.dropout
        )

    def _sink_heads(
        self,
        queries: torch.Tensor,
        keys: torch.Tensor,
        values: torch.Tensor,
        mask4d: torch.Tensor | None,
        implementation: str,
        causal: bool,
        window: int | None,
    ) -> tuple[torch.Tensor, torch.Tensor | None]:
        """:meth:`attend_heads` with the sink, written out for "eager" and "sdpa" alike (torch's
        fused kernel has no sink); weights for "eager" only, as without a sink."""
        if implementation == "flash":
            raise ValueError(
                "the flash implementation has no attention sink: use 'sdpa' or 'eager'"
            )
        structure = structure_mask(queries.shape[2], keys.shape[2], causal, window, queries.device)
        keys, values = self.repeat_kv_heads(keys), self.repeat_kv_heads(values)
        dropout = self.dropout if self.training else None
        heads, weights = attend_with_sink_unchecked(
            queries, keys, values, _and(mask4d, structure), self.sink_logits, dropout
        )
        return heads, weights if implementation == "eager" else None

    def _sdpa_heads(
        self,
        queries: torch.Tensor,
        keys: torch.Tensor,
        values: torch.Tensor,
        mask: torch.Tensor | None,
        is_causal: bool = False,
    ) -> torch.Tensor:
        """SDPA: queries (batch, heads, n_q, hd), keys and values (batch, kv_heads, n_k, hd)."""
        dropout_p = self.dropout_p if self.training else 0.0
        if keys.shape[1] != queries.shape[1] and not SDPA_HAS_GQA:
            keys, values = self.repeat_kv_heads(keys), self.repeat_kv_heads(values)
        # With enable_gqa, SDPA shares each key/value head among its group without copying it.
        grouped = {"enable_gqa": True} if keys.shape[1] != queries.shape[1] else {}
        heads = F.scaled_dot_product_attention(
            queries,
            keys,
            values,
            attn_mask=mask,
            dropout_p=dropout_p,
            is_causal=is_causal,
            **grouped,
        )
        if mask is not None:
            # Backends differ on rows with no allowed key (NaN or a uniform average); the
            # library's convention is a zero output, so enforce it here.
            row_has_key = mask.any(dim=-1, keepdim=True)
            heads = torch.where(row_has_key, heads, torch.zeros_like(heads))
        return heads

    def _flash_heads(
        self,
        queries: torch.Tensor,
        keys: torch.Tensor,
        values: torch.Tensor,
        mask4d: torch.Tensor | None,
        causal: bool,
        window: int | None,
    ) -> torch.Tensor:
        """Chapter 15's tiles: padding as a key mask, causal order and a window as structure."""
        if self.training and self.dropout_p > 0:
            raise ValueError(
                f"the flash implementation has no dropout, but this attention has "
                f"dropout={self.dropout_p} and is training: use 'sdpa' or 'eager', or eval()"
            )
        if window is not None and not causal:
            raise ValueError("the flash implementation takes a window with causal order only")
        key_mask = None
        if mask4d is not None:
            if mask4d.shape[1] != 1 or mask4d.shape[2] != 1:
                raise ValueError(
                    f"the flash implementation takes padding, a (batch, 1, 1, n_keys) mask, and "
                    f"causal order and windows as structure; got a mask of shape "
                    f"{tuple(mask4d.shape)}: use 'sdpa' or 'eager' for a general mask"
                )
            key_mask = mask4d[:, 0, 0, :].expand(queries.shape[0], keys.shape[2])
        keys, values = self.repeat_kv_heads(keys), self.repeat_kv_heads(values)
        return FlashAttentionFunction.apply(
            queries, keys, values, key_mask, causal, FLASH_BLOCK, window
        )

    def _check_inputs(self, query: torch.Tensor, key: torch.Tensor, value: torch.Tensor) -> None:
        seen: list[torch.Tensor] = []
        for name, tensor in (("query", query), ("key", key), ("value", value)):
            # Self-attention passes one tensor three times: scan it for NaN only once.
            if not any(tensor is earlier for earlier in seen):
                check_tensor(name, tensor, min_dims=3)
                seen.append(tensor)
            if tensor.dim() != 3:
                raise ValueError(
                    f"{name} must be (batch, seq, d_model), got shape {tuple(tensor.shape)}"
                )
            if tensor.shape[-1] != self.d_model:
                raise ValueError(
                    f"{name} has {tensor.shape[-1]} features but d_model={self.d_model}"
                )
        if not query.shape[0] == key.shape[0] == value.shape[0]:
            raise ValueError(
                f"batch sizes differ: query {query.shape[0]}, key {key.shape[0]}, "
                f"value {value.shape[0]}"
            )
        if key.shape[1] != value.shape[1]:
            raise ValueError(f"key has {key.shape[1]} positions but value has {value.shape[1]}")
        check_same_dtype(query=query, key=key, value=value)
        check_matches_weights("query", query, self.query_projection.weight)

    @torch.no_grad()
    def load_from_torch(self, reference: nn.MultiheadAttention) -> MultiHeadAttention:
        """Copy the weights of a batch-first ``torch.nn.MultiheadAttention`` of the same size."""
        if not isinstance(reference, nn.MultiheadAttention):
            raise TypeError(
                f"reference must be a torch.nn.MultiheadAttention, got {type(reference).__name__}"
            )
        if self.num_kv_heads != self.num_heads:
            raise ValueError(
                f"torch.nn.MultiheadAttention has no grouped key/value heads, but this module has "
                f"num_kv_heads={self.num_kv_heads} < num_heads={self.num_heads}"
            )
        if reference.embed_dim != self.d_model or reference.num_heads != self.num_heads:
            raise ValueError(
                f"torch module has embed_dim={reference.embed_dim}, "
                f"num_heads={reference.num_heads}; this one has d_model={self.d_model}, "
                f"num_heads={self.num_heads}"
            )
        if not reference._qkv_same_embed_dim:
            raise ValueError("only torch modules with kdim == vdim == embed_dim can be copied")
        if reference.bias_k is not None or reference.add_zero_attn:
            raise ValueError("torch modules with add_bias_kv or add_zero_attn cannot be copied")
        theirs, ours = reference.in_proj_bias is not None, self.query_projection.bias is not None
        if theirs != ours:
            raise ValueError(f"torch module has bias={theirs} but this one has bias={ours}")
        weights = reference.in_proj_weight.chunk(3, dim=0)
        projections = (self.query_projection, self.key_projection, self.value_projection)
        biases = (
            reference.in_proj_bias.chunk(3) if reference.in_proj_bias is not None else [None] * 3
        )
        for projection, weight, bias in zip(projections, weights, biases, strict=True):
            projection.weight.copy_(weight)
            if projection.bias is not None and bias is not None:
                projection.bias.copy_(bias)
        self.output_projection.weight.copy_(reference.out_proj.weight)
        if self.output_projection.bias is not None and reference.out_proj.bias is not None:
            self.output_projection.bias.copy_(reference.out_proj.bias)
        return self


def _and(mask4d: torch.Tensor | None, structure: torch.Tensor | None) -> torch.Tensor | None:
    """A 4-D mask AND a (n_queries, n_keys) structure mask; either may be None."""
    if structure is None:
        return mask4d
    return structure[None, None] if mask4d is None else mask4d & structure
