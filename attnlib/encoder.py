"""The Transformer encoder stack and the models built on it, with what they cost.

:class:`~attnlib.model_config.TransformerConfig` describes a model; :class:`Encoder` turns
token ids ``(batch, seq)`` into hidden states ``(batch, seq, d_model)``;
:class:`SequenceClassifier` and :class:`MaskedLanguageModel` put a head on it. Both share one
encoder layout, so a pretrained MLM's encoder loads into a classifier:
``clf.encoder.load_state_dict(mlm.encoder.state_dict())``. Masks are boolean, True = may
attend; a ``key_mask`` ``(batch, seq)`` is True at real tokens. Inputs are checked once, in
:meth:`Encoder.forward`; the layers of :mod:`attnlib.transformer` trust it.
"""

from __future__ import annotations

import math

import torch
from torch import nn
from torch.utils.checkpoint import checkpoint

from attnlib._checks import check_count, check_flag
from attnlib.mixers import MixerLayer
from attnlib.model_config import TransformerConfig
from attnlib.transformer import (
    EncoderLayer,
    embed_tokens,
    position_table,
    rotary_base_of,
    xavier_init_,
)

# torch.compiler.is_compiling appeared in torch 2.3; older versions never compile this module.
_is_compiling = getattr(torch.compiler, "is_compiling", lambda: False)


def layer_stack(config: TransformerConfig, causal: bool = False) -> nn.ModuleList:
    """``config.num_layers`` blocks of self-attention and feed-forward. A causal stack, a
    decoder-only model's, groups its key/value heads by ``num_kv_heads``, as a decoder does;
    an encoder, which keeps no cache, has one per query head. Only a causal stack takes the
    config's ``attention_sink``, and only a causal stack is built around a ``mixer``."""
    if config.mixer is not None:
        if not causal:
            raise ValueError(f"mixer={config.mixer!r} builds causal blocks: a decoder-only model")
        return nn.ModuleList(
            MixerLayer(
                config.mixer,
                config.d_model,
                config.num_heads,
                config.d_ff,
                config.dropout,
                config.activation,
                config.short_convolution,
                config.num_kv_heads,
            )
            for _ in range(config.num_layers)
        )
    return nn.ModuleList(
        EncoderLayer(
            config.d_model,
            config.num_heads,
            config.d_ff,
            config.dropout,
            config.norm_first,
            config.activation,
            config.fused,
            num_kv_heads=config.num_kv_heads if causal else None,
            rotary_base=rotary_base_of(config.positions),
            causal=causal,
            window=config.window,
            sink=config.attention_sink if causal else None,
        )
        for _ in range(config.num_layers)
    )


class Encoder(nn.Module):
    """Token ids -> hidden states: embed x sqrt(d_model), add positions, dropout, N layers.

    With ``norm_first`` a final LayerNorm closes the stack (pre-LN leaves the residual stream
    unnormalised). Set ``check_ids = False`` to skip the one host sync of a forward pass (the
    ids-in-vocabulary check) once the data are known to be good, e.g. when training on a GPU.

    Set ``recompute = True`` to trade compute for memory when training: each layer then keeps
    only its input for the backward pass and runs its forward again there (activation
    checkpointing, with the same dropout masks), so a training step holds one layer's
    activations instead of all of them, for about a third more compute. The results are the
    same. On a CPU this matters: there torch's fused attention has no kernel with dropout and
    falls back to one that keeps (batch, heads, seq, seq) tensors for the backward (the softmax,
    the dropout mask and the dropped weights, 48 MB a layer for 4 x 512 tokens and 4 heads).
    """

    def __init__(self, config: TransformerConfig) -> None:
        super().__init__()
        self.config = config
        d = config.d_model
        self.embedding = nn.Embedding(config.vocab_size, d, padding_idx=config.pad_id)
        self.positions = position_table(config.positions, d, config.max_len)
        self.dropout = nn.Dropout(config.dropout)
        self.layers = layer_stack(config)
        self.final_norm = nn.LayerNorm(d) if config.norm_first else nn.Identity()
        self.scale = math.sqrt(d)  # what embed_tokens scales token vectors by (chapter 08 reads it)
        self.check_ids = True
        self.recompute = False
        xavier_init_(self)

    def forward(
        self,
        ids: torch.Tensor,
        key_mask: torch.Tensor | None = None,
        need_weights: bool = False,
    ) -> tuple[torch.Tensor, torch.Tensor | None]:
        """ids (batch, seq) -> hidden (batch, seq, d_model), weights (batch, layers, heads,
        seq, seq) or None. ``key_mask`` (batch, seq) is True at real tokens."""
        mask4d = self.prepare_inputs(ids, key_mask)
        return self.encode(ids, mask4d, check_flag("need_weights", need_weights))

    def encode(
        self, ids: torch.Tensor, mask4d: torch.Tensor | None, need_weights: bool = False
    ) -> tuple[torch.Tensor, torch.Tensor | None]:
        """:meth:`forward` without checks, ``mask4d`` from :meth:`prepare_inputs`: hidden
        (batch, seq, d_model), weights (batch, layers, heads, seq, seq) or None."""
        x = embed_tokens(self.embedding, self.positions, self.dropout, ids)  # (batch, seq, d)
        recompute = self.recompute and torch.is_grad_enabled() and not need_weights
        all_weights = []
        for layer in self.layers:
            if recompute:
                # The default preserve_rng_state replays each layer's dropout masks exactly.
                x, weights = checkpoint(layer, x, mask4d, False, use_reentrant=False)
            else:
                x, weights = layer(x, mask4d, need_weights)
            all_weights.append(weights)
        x = self.final_norm(x)
        return x, torch.stack(all_weights, dim=1) if need_weights else None

    def prepare_inputs(
        self,
        ids: torch.Tensor,
        key_mask: torch.Tensor | None,
        positions: torch.Tensor | None = None,
    ) -> torch.Tensor | None:
        """Check ids (batch, seq), key_mask and an MLM's ``positions`` (batch, k) once; return
        the canonical 4-D mask or None. One host sync checks the ids' and positions' ranges."""
        if not isinstance(ids, torch.Tensor):
            raise TypeError(f"ids must be a torch.Tensor, got {type(ids).__name__}")
        if ids.dtype not in (torch.long, torch.int32):
            raise TypeError(f"ids must be integer token ids (torch.long), got dtype {ids.dtype}")
        if ids.dim() != 2 or ids.shape[1] == 0:
            raise ValueError(
                f"ids must be (batch, seq) with seq >= 1, got shape {tuple(ids.shape)}"
            )
        batch, seq = ids.shape
        if seq > self.config.max_len:
            raise ValueError(
                f"sequence of {seq} tokens is longer than max_len={self.config.max_len}"
            )
        if positions is not None:
            _check_positions(positions, batch)
        if self.check_ids and not _is_compiling() and ids.numel() > 0:
            self._check_ranges(ids, positions)
        return self.layers[0].attention.prepare_mask(None, key_mask, batch, seq, seq)

    def _check_ranges(self, ids: torch.Tensor, positions: torch.Tensor | None) -> None:
        """Ids within the vocabulary, positions within the sequence: one host sync for both."""
        bounds = [*torch.aminmax(ids)]
        if positions is not None and positions.numel() > 0:
            bounds += [*torch.aminmax(positions)]
        values = torch.stack([bound.long() for bound in bounds]).tolist()  # the one host sync
        _check_range("token id", values[:2], "the vocabulary", self.config.vocab_size)
        if len(values) > 2:
            _check_range("position", values[2:], "the sequence", ids.shape[1])


def _check_range(what: str, bounds: list[int], where: str, size: int) -> None:
    """Refuse the smallest or largest of ``bounds`` = [low, high] outside 0..size-1."""
    low, high = bounds
    if low < 0 or high >= size:
        raise ValueError(f"{what} {low if low < 0 else high} is outside {where} 0..{size - 1}")


def _check_positions(positions: object, batch: int) -> None:
    """Require MLM positions as an integer tensor (batch, k); their range is checked apart."""
    if not isinstance(positions, torch.Tensor) or positions.dtype not in (torch.long, torch.int32):
        raise TypeError("positions must be an integer tensor (batch, k)")
    if positions.dim() != 2 or positions.shape[0] != batch:
        raise ValueError(
            f"positions must be (batch, k) with batch={batch}, got shape {tuple(positions.shape)}"
        )


POOLINGS = ("mean", "first")


class SequenceClassifier(nn.Module):
    """ids (batch, seq) -> logits (batch, num_classes): encoder, pooling, dropout, linear."""

    def __init__(self, config: TransformerConfig, num_classes: int = 2, pooling: str = "mean"):
        super().__init__()
        check_count("num_classes", num_classes)
        if pooling not in POOLINGS:
            raise ValueError(f"unknown pooling {pooling!r}; choose 'mean' or 'first'")
        self.config, self.pooling = config, pooling
        self.encoder = Encoder(config)
        self.dropout = nn.Dropout(config.dropout)
        self.head = nn.Linear(config.d_model, num_classes)
        xavier_init_(self.head)

    def forward(
        self,
        ids: torch.Tensor,
        key_mask: torch.Tensor | None = None,
        need_weights: bool = False,
    ) -> tuple[torch.Tensor, torch.Tensor | None]:
        """ids (batch, seq), key_mask (batch, seq) True at real tokens -> logits (batch,
        classes), weights (batch, layers, heads, seq, seq) or None."""
        hidden, weights = self.encoder(ids, key_mask, need_weights)  # (batch, seq, d)
        return self.head(self.dropout(self.pool(hidden, key_mask))), weights

    def pool(self, hidden: torch.Tensor, key_mask: torch.Tensor | None) -> torch.Tensor:
        """(batch, seq, d_model) -> (batch, d_model): mean over real tokens, or the first one."""
        if self.pooling == "first":
            return hidden[:, 0]
        if key_mask is None:
            return hidden.mean(dim=1)
        weights = key_mask.unsqueeze(-1).to(hidden.dtype)  # (batch, seq, 1)
        # clamp: an all-padding row pools to zeros instead of 0/0.
        return (hidden * weights).sum(dim=1) / weights.sum(dim=1).clamp(min=1.0)


class MaskedLanguageModel(nn.Module):
    """ids (batch, seq) -> vocabulary logits: encoder, Linear-GELU-LayerNorm, projection.

    With ``tie_weights`` the projection's weight is the token embedding itself (one tensor,
    one storage); the projection keeps its own bias.
    """

    def __init__(self, config: TransformerConfig, tie_weights: bool = True) -> None:
        super().__init__()
        self.config, self.tie_weights = config, tie_weights
        d = config.d_model
        self.encoder = Encoder(config)
        self.transform = nn.Sequential(nn.Linear(d, d), nn.GELU(), nn.LayerNorm(d))
        self.output = nn.Linear(d, config.vocab_size)
        if tie_weights:
            self.output.weight = self.encoder.embedding.weight
        # The encoder comes first in module order, so a tied weight keeps the embedding's init.
        xavier_init_(self)

    def forward(
        self,
        ids: torch.Tensor,
        key_mask: torch.Tensor | None = None,
        positions: torch.Tensor | None = None,
    ) -> torch.Tensor:
        """ids (batch, seq) -> logits (batch, seq, vocab), or (batch, k, vocab) at the
        ``positions`` (batch, k) of each row, so the other positions skip the projection.

        A fixed k per row keeps every shape static: no host sync, and ``torch.compile`` sees
        the same graph at every step.
        """
        mask4d = self.encoder.prepare_inputs(ids, key_mask, positions)
        hidden, _ = self.encoder.encode(ids, mask4d)  # (batch, seq, d)
        if positions is not None:
            index = positions.long().unsqueeze(-1).expand(-1, -1, hidden.shape[-1])
            hidden = hidden.gather(1, index)  # (batch, k, d)
        return self.output(self.transform(hidden))


def count_parameters(module: nn.Module, trainable_only: bool = False) -> int:
    """Number of parameter entries; a tensor shared by two modules (tying) counts once."""
    return sum(p.numel() for p in module.parameters() if p.requires_grad or not trainable_only)


def parameter_breakdown(config: TransformerConfig) -> dict[str, int]:
    """The encoder's parameters block by block, derived by hand (no module is built)."""
    if config.mixer is not None:
        raise ValueError(f"an encoder has attention blocks; mixer={config.mixer!r} is not one")
    d, f = config.d_model, config.d_ff
    attention = 4 * (d * d + d)  # W_Q, W_K, W_V, W_O, each d x d with a bias
    feed_forward = d * f + f + f * d + d if f else 0  # W1 (d x f), b1, W2 (f x d), b2
    norms = (2 if f else 1) * (2 * d)  # a LayerNorm per sublayer, a gain and a bias each
    per_layer = attention + feed_forward + norms
    return {
        "embedding": config.vocab_size * d,
        "positions": config.max_len * d if config.positions == "learned" else 0,
        "per_layer": per_layer,
        "layers": config.num_layers * per_layer,
        "final_norm": 2 * d if config.norm_first else 0,
    }


def parameter_count(
    config: TransformerConfig, head: str = "none", num_classes: int = 2, tie_weights: bool = True
) -> int:
    """Parameters of an encoder (``head="none"``), a classifier or a masked language model."""
    blocks = parameter_breakdown(config)
    total = sum(count for name, count in blocks.items() if name != "per_layer")
    d, vocab = config.d_model, config.vocab_size
    if head == "classifier":
        return total + d * num_classes + num_classes
    if head == "mlm":
        transform = d * d + d + 2 * d  # Linear and LayerNorm (GELU has none)
        projection = vocab + (0 if tie_weights else vocab * d)  # bias, and W unless tied
        return total + transform + projection
    if head != "none":
        raise ValueError(f"unknown head {head!r}; choose 'none', 'classifier' or 'mlm'")
    return total


def flops_per_token(config: TransformerConfig, seq_len: int, training: bool = True) -> int:
    """Matmul FLOPs per token of the encoder stack (a multiply-add counts as 2).

    Per layer: 2 x (4 d^2 + 2 d d_ff) for the projections and the feed-forward, plus
    2 x 2 x seq x d for the scores Q K^T and the weighted sum of V. The backward pass costs about
    twice the forward, so training counts 3x. Embeddings, norms, softmax and the head are left
    out (small beside these for a classifier; an MLM adds 2 d vocab per predicted token).
    """
    if seq_len < 1:
        raise ValueError(f"seq_len must be positive, got {seq_len}")
    d, f = config.d_model, config.d_ff
    per_layer = 2 * (4 * d * d + 2 * d * f) + 2 * 2 * seq_len * d
    forward = config.num_layers * per_layer
    return 3 * forward if training else forward
