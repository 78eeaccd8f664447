"""The KV cache: storage for the keys and values of positions already seen, below the layers.

A model that generates one token at a time would otherwise recompute, at every step, the keys
and values of every earlier position in every layer. :class:`LayerKV` keeps one attention's
keys and values ``(batch, kv_heads, kept, head_dim)``: a self-attention's grow by the new
positions at each step (with a ``window``, it forgets what no later query can see); a cross-
attention's (an encoder's memory, projected once) are fixed. :class:`KVCache` holds one per
layer for one batch. The attention that uses a cache is
:meth:`attnlib.attention.MultiHeadAttention.forward_prepared`; nothing here imports it.
"""

from __future__ import annotations

import torch

from attnlib._checks import check_count


class LayerKV:
    """One attention's cached keys and values (batch, kv_heads, kept, head_dim), or None yet.

    ``seen`` counts the positions fed so far: the next one stands at position ``seen``. With
    ``window`` w, a query sees itself and the w - 1 positions before it, so before each update
    the cache drops all but the last w - 1 keys: it never holds more than w - 1 + new ones.
    """

    # Rotary keys are cached rotated by their positions in the text; a cache that evicts from
    # the middle (attnlib.streaming.SinkCache) keeps them unrotated and sets this, and the
    # attention then rotates every held key by its place in the cache instead.
    renumbers = False

    def __init__(self, window: int | None = None) -> None:
        self.window = None if window is None else check_count("window", window)
        self.keys: torch.Tensor | None = None
        self.values: torch.Tensor | None = None
        self.seen = 0
        self.fixed = False

    @classmethod
    def fixed_to(cls, keys: torch.Tensor, values: torch.Tensor) -> LayerKV:
        """A cache that holds keys and values (batch, kv_heads, n, head_dim) and takes no more:
        a cross-attention's, over a memory that does not change while decoding."""
        cache = cls()
        cache.keys, cache.values, cache.seen, cache.fixed = keys, values, keys.shape[2], True
        return cache

    @property
    def kept(self) -> int:
        """How many positions' keys are held now."""
        return 0 if self.keys is None else self.keys.shape[2]

    def update(self, keys: torch.Tensor, values: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Append new keys and values (batch, kv_heads, n, head_dim); return all that are held,
        (batch, kv_heads, kept + n, head_dim), the new ones last."""
        if self.fixed:
            raise RuntimeError("this cache holds a fixed memory and takes no new positions")
        self.seen += keys.shape[2]
        if self.keys is not None:
            old_keys, old_values = self.keys, self.values
            if self.window is not None:
                # Keys more than window - 1 positions back are seen by no query from now on.
                drop = max(0, old_keys.shape[2] - (self.window - 1))
                old_keys, old_values = old_keys[:, :, drop:], old_values[:, :, drop:]
            keys, values = torch.cat([old_keys, keys], 2), torch.cat([old_values, values], 2)
        self.keys, self.values = keys, values
        return keys, values

    def nbytes(self) -> int:
        """Bytes held by the cached keys and values."""
        held = (self.keys, self.values)
        return sum(t.numel() * t.element_size() for t in held if t is not None)


class KVCache:
    """The cache of a stack of layers for one batch: a growing self-attention :class:`LayerKV`
    per layer, and, for an encoder-decoder, a fixed one per layer over the memory.

    Hand it to the model's decoding call, which feeds it the next positions of the same batch.
    """

    def __init__(
        self,
        num_layers: int,
        batch: int,
        window: int | None = None,
        memory: list[tuple[torch.Tensor, torch.Tensor]] | None = None,
    ) -> None:
        self.batch = check_count("batch", batch)
        self.layers = [LayerKV(window) for _ in range(check_count("num_layers", num_layers))]
        self.memory = None if memory is None else [LayerKV.fixed_to(*kv) for kv in memory]

    @property
    def length(self) -> int:
        """How many positions were fed: the next one stands at this position."""
        return self.layers[0].seen

    def check_batch(self, ids: torch.Tensor) -> None:
        """Refuse next positions (batch, n) of another batch than the cache's."""
        if not isinstance(ids, torch.Tensor):
            raise TypeError(f"ids must be a torch.Tensor, got {type(ids).__name__}")
        if ids.dim() != 2:
            raise ValueError(
                f"ids must be (batch={self.batch}, n) token ids, got shape {tuple(ids.shape)}"
            )
        if ids.shape[0] != self.batch:
            raise ValueError(
                f"ids have batch {ids.shape[0]} but this KVCache holds a batch of {self.batch}: "
                "build a cache for each batch"
            )

    def nbytes(self) -> int:
        """Bytes held by every layer's cached keys and values, the memory's included."""
        stores = self.layers + (self.memory or [])
        return sum(store.nbytes() for store in stores)
