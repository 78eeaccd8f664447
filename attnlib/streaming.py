"""Streaming a text longer than the model was trained on: a rolling KV cache, attention sinks.

Xiao et al. (2023, StreamingLLM) fed language models an endless text through a KV cache that
keeps only the last positions, and found their loss blowing up as soon as the first tokens left
the cache; keeping those first few tokens (the **attention sinks**, which many heads put most
of their weight on) beside the window was enough to hold it. :class:`SinkCache` is that cache,
with positions as the paper handles them: keys are held unrotated and every one is rotated by
its place in the cache, so that no distance exceeds what the model saw in training.

:func:`stream_losses` runs a :class:`~attnlib.lm.DecoderOnlyLM` over a long text in one of
:data:`STRATEGIES`, and returns the loss of each next token:

- ``"window"``: a cache of the last ``window`` positions, the oldest evicted;
- ``"sinks"``: the first ``sinks`` positions kept, plus the last ``window``;
- ``"recompute"``: each prediction computed afresh over the last ``window`` tokens, at positions
  0 to ``window`` - 1 (exact, and ``window`` times the work);
- ``"full"``: a cache of everything, positions past the training length included.

:func:`perplexity_by_position` averages those losses over stretches of the text.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from attnlib._checks import check_count, check_int
from attnlib.kv_cache import KVCache, LayerKV
from attnlib.lm import DecoderOnlyLM

STRATEGIES = ("window", "sinks", "recompute", "full")
CACHE_POSITIONS = ("rotary", "none")  # positions a rolling cache can renumber
RECOMPUTE_BATCH = 64  # windows run together by "recompute"


class SinkCache(LayerKV):
    """One attention's cache for streaming: keys and values (batch, kv_heads, kept, head_dim)
    of the first ``sinks`` positions and of the most recent ones, so that a new query sees the
    sinks and the last ``window`` positions, itself included. Keys are held unrotated
    (``renumbers``): the attention rotates each by its place in the cache."""

    renumbers = True

    def __init__(self, sinks: int, window: int) -> None:
        super().__init__(window)
        self.sinks = check_int("sinks", sinks)

    def update(self, keys: torch.Tensor, values: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Evict the middle, then append keys and values (batch, kv_heads, n, head_dim); return
        what is held, (batch, kv_heads, kept, head_dim), the sinks first and the new ones last."""
        self.seen += keys.shape[2]
        if self.keys is not None:
            old_keys, old_values = self.keys, self.values
            held, recent = old_keys.shape[2], self.window - 1
            if held > self.sinks + recent:
                tail = held - recent  # the first of the recent positions that stay
                old_keys = torch.cat([old_keys[:, :, : self.sinks], old_keys[:, :, tail:]], 2)
                old_values = torch.cat([old_values[:, :, : self.sinks], old_values[:, :, tail:]], 2)
            keys, values = torch.cat([old_keys, keys], 2), torch.cat([old_values, values], 2)
        self.keys, self.values = keys, values
        return keys, values


def sink_cache(num_layers: int, batch: int, sinks: int, window: int) -> KVCache:
    """A :class:`~attnlib.kv_cache.KVCache` whose every layer is a :class:`SinkCache`."""
    cache = KVCache(num_layers, batch)
    cache.layers = [SinkCache(sinks, window) for _ in range(num_layers)]
    return cache


def _check_stream(model: object, ids: object, strategy: object, window: int, sinks: int) -> None:
    """Refuse what :func:`stream_losses` cannot run, saying why."""
    if not isinstance(model, DecoderOnlyLM):
        raise TypeError(f"model must be an attnlib.lm.DecoderOnlyLM, got {type(model).__name__}")
    if strategy not in STRATEGIES:
        raise ValueError(f"strategy must be one of {list(STRATEGIES)}, got {strategy!r}")
    if not isinstance(ids, torch.Tensor) or ids.dim() != 1 or ids.dtype != torch.long:
        raise TypeError("ids must be one text's token ids, a 1-D torch.long tensor")
    if ids.numel() < 2:
        raise ValueError(f"ids must hold at least 2 tokens to predict one, got {ids.numel()}")
    check_count("window", window)
    check_int("sinks", sinks)
    config = model.config
    if config.window is not None:
        raise ValueError(
            f"the model attends within window={config.window}: streaming here is for models "
            "trained with full causal attention"
        )
    if config.positions in CACHE_POSITIONS:
        return
    if strategy != "recompute":
        raise ValueError(
            f"a cache over a long text needs positions in {list(CACHE_POSITIONS)}, but the "
            f"model's are {config.positions!r}: use strategy='recompute'"
        )
    if window > config.max_len:
        raise ValueError(
            f"window={window} is longer than the position table (max_len={config.max_len})"
        )


def _recompute_logits(model: DecoderOnlyLM, ids: torch.Tensor, window: int) -> torch.Tensor:
    """ids (n,) -> logits (n - 1, vocab), each from the last ``window`` tokens alone."""
    n = ids.numel()
    first = model.decode(ids[None, : min(window, n - 1)])[0][0]  # t < window: the whole prefix
    rows = [first]
    starts = torch.arange(1, n - window)  # the window ids[s : s + window] predicts ids[s + window]
    for chunk in starts.split(RECOMPUTE_BATCH):
        windows = torch.stack([ids[s : s + window] for s in chunk.tolist()])
        rows.append(model.decode(windows)[0][:, -1])
    return torch.cat(rows)


def _cached_logits(model: DecoderOnlyLM, ids: torch.Tensor, cache: KVCache) -> torch.Tensor:
    """ids (n,) -> logits (n - 1, vocab), one token at a time through ``cache``."""
    rows = [model.decode(ids[None, t : t + 1], cache)[0][0, -1] for t in range(ids.numel() - 1)]
    return torch.stack(rows)


@torch.no_grad()
def stream_losses(
    model: DecoderOnlyLM, ids: torch.Tensor, strategy: str, window: int, sinks: int = 4
) -> torch.Tensor:
    """ids (n,) -> losses (n - 1,): at t, the loss of ``ids[t + 1]`` given what ``strategy``
    lets the model see of ``ids[: t + 1]``. In eval mode; the model's mode comes back."""
    _check_stream(model, ids, strategy, window, sinks)
    was_training = model.training
    model.eval()
    try:
        ids = ids.to(next(model.parameters()).device)
        if strategy == "recompute":
            logits = _recompute_logits(model, ids, window)
        elif strategy == "full":
            logits = _cached_logits(model, ids, model.new_cache(1))
        else:
            kept = sinks if strategy == "sinks" else 0
            cache = sink_cache(len(model.layers), 1, kept, window)
            logits = _cached_logits(model, ids, cache)
        return F.cross_entropy(logits.float(), ids[1:], reduction="none").cpu()
    finally:
        model.train(was_training)


def perplexity_by_position(losses: torch.Tensor, stretch: int) -> torch.Tensor:
    """Per-token losses (n,) -> perplexity (n // stretch,): exp of the mean loss over each
    stretch of ``stretch`` consecutive tokens; a last, shorter stretch is left out."""
    if not isinstance(losses, torch.Tensor) or losses.dim() != 1:
        raise TypeError("losses must be a 1-D tensor of per-token losses")
    check_count("stretch", stretch)
    if losses.numel() < stretch:
        raise ValueError(f"{losses.numel()} losses make no stretch of {stretch}")
    whole = losses.numel() // stretch * stretch
    return losses[:whole].view(-1, stretch).mean(dim=1).exp()
