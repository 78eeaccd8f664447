"""The configuration of a Transformer: every choice that builds one, in one dataclass.

:class:`TransformerConfig` holds the sizes, the positions ("sinusoidal", "learned", "rotary"
or "none"), the key/value heads of a decoder's attention, a sliding window, the norm's place
and whether attention runs torch's fused kernel; the encoder (:mod:`attnlib.encoder`), the
decoder (:mod:`attnlib.decoder`), the encoder-decoder (:mod:`attnlib.generation`) and the
decoder-only model (:mod:`attnlib.lm`) are built from it. ``to_dict`` / ``from_dict`` carry it
in checkpoints and in a shipped model's ``config.json``.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass, fields
from typing import Any

from attnlib._checks import check_count, check_flag, check_int, check_probability
from attnlib.attention import SINKS
from attnlib.mixers import MIXERS
from attnlib.transformer import ACTIVATIONS, POSITIONS

# Keys that configs saved by earlier versions of attnlib may hold, and their names now.
_RENAMED = {"decoder_kv_heads": "num_kv_heads"}
_NAMED_WHEN_SET = (
    "num_kv_heads",
    "window",
    "attention_sink",
    "mixer",
    "short_convolution",
)
# What a mixer block (attnlib.mixers.MixerLayer) cannot take: all of it belongs to the
# attention module of an EncoderLayer.
_ATTENTION_ONLY = ("num_kv_heads", "window", "attention_sink")


@dataclass
class TransformerConfig:
    """Everything needed to rebuild an encoder; ``to_dict`` / ``from_dict`` for checkpoints.

    ``num_kv_heads`` (None: ``num_heads``) gives the decoder's attention that many key/value
    heads, grouped-query attention (1: multi-query), which shrinks the KV cache of
    :mod:`attnlib.generation`; the encoder, which keeps no cache, has one per query head.
    A decoder-only model (:mod:`attnlib.lm`) is a decoder and takes it too.

    ``d_ff=0`` builds attention-only layers (no feed-forward sublayer), as interpretability
    work studies them (Elhage et al. 2021); the encoder and the decoder-only model take it.

    ``positions`` is "sinusoidal" or "learned" (a table added to the token vectors), "rotary"
    (queries and keys rotated inside self-attention) or "none". ``window`` (None: none) keeps
    each position's self-attention to the last ``window`` positions (causal models) or to those
    within ``window`` on either side (the encoder).

    ``attention_sink`` gives each head of a decoder-only model's attention a place to put
    weight that returns nothing (:data:`attnlib.attention.SINKS`): "learned", one logit per head
    (as in some 2025 open models), or "plus_one", a logit fixed at 0 (softmax plus one).

    ``mixer`` (None: the attention block above) builds a decoder-only model's blocks around one
    of :data:`attnlib.mixers.MIXERS` instead, pre-LN (``norm_first``), with a short causal
    convolution of ``short_convolution`` positions before it (None: none); such a block takes
    table positions or none, not rotary, windows or sinks; only "softmax" takes
    ``num_kv_heads``, grouping its query heads around fewer key/value heads.
    """

    vocab_size: int
    d_model: int = 256
    num_heads: int = 4
    num_layers: int = 4
    d_ff: int = 1024
    dropout: float = 0.1
    max_len: int = 512
    positions: str = "sinusoidal"
    norm_first: bool = False
    pad_id: int = 0
    fused: bool = True
    activation: str = "relu"
    num_kv_heads: int | None = None
    window: int | None = None
    attention_sink: str | None = None
    mixer: str | None = None
    short_convolution: int | None = None

    def __repr__(self) -> str:
        # Fields added after chapter 13's stored GPU run are named only when set, so that its
        # compared cell, which prints an encoder's configuration, holds until the next run.
        shown = [f for f in fields(self) if f.name not in _NAMED_WHEN_SET or getattr(self, f.name)]
        return (
            f"TransformerConfig({', '.join(f'{f.name}={getattr(self, f.name)!r}' for f in shown)})"
        )

    def __post_init__(self) -> None:
        for name in ("vocab_size", "d_model", "num_heads", "num_layers", "d_ff", "max_len"):
            value = getattr(self, name)
            least = 0 if name == "d_ff" else 1  # d_ff = 0: attention-only layers
            if isinstance(value, bool) or not isinstance(value, int) or value < least:
                kind = "a non-negative" if least == 0 else "a positive"
                raise ValueError(f"{name} must be {kind} integer, got {value!r}")
        if self.d_model % self.num_heads != 0:
            raise ValueError(
                f"num_heads={self.num_heads} does not divide d_model={self.d_model}: each head "
                "needs d_model / num_heads features"
            )
        if self.num_kv_heads is not None:
            kv_heads = check_count("num_kv_heads", self.num_kv_heads)
            if self.num_heads % kv_heads != 0:
                raise ValueError(
                    f"num_kv_heads={kv_heads} does not divide num_heads={self.num_heads}"
                )
        if self.window is not None:
            check_count("window", self.window)
        if self.attention_sink is not None and self.attention_sink not in SINKS:
            raise ValueError(
                f"unknown attention_sink {self.attention_sink!r}; choose None or one of "
                f"{', '.join(map(repr, SINKS))}"
            )
        self._check_mixer()
        self.dropout = check_probability("dropout", self.dropout)
        self.norm_first = check_flag("norm_first", self.norm_first)
        self.fused = check_flag("fused", self.fused)
        if self.positions not in POSITIONS:
            raise ValueError(
                f"unknown positions {self.positions!r}; choose one of "
                f"{', '.join(map(repr, POSITIONS))}"
            )
        if self.activation not in ACTIVATIONS:
            raise ValueError(f"unknown activation {self.activation!r}; choose 'relu' or 'gelu'")
        if check_int("pad_id", self.pad_id) >= self.vocab_size:
            raise ValueError(
                f"pad_id={self.pad_id} is outside the vocabulary 0..{self.vocab_size - 1}"
            )

    def _check_mixer(self) -> None:
        """A mixer is one of MIXERS, in a pre-LN block, without attention's own options."""
        if self.mixer is None:
            if self.short_convolution is not None:
                raise ValueError("short_convolution goes before a mixer: set mixer too")
            return
        if self.mixer not in MIXERS:
            names = ", ".join(map(repr, MIXERS))
            raise ValueError(f"unknown mixer {self.mixer!r}; choose None or one of {names}")
        if self.short_convolution is not None:
            check_count("short_convolution", self.short_convolution)
        if self.norm_first is not True:
            raise ValueError(f"a mixer block is pre-LN: mixer={self.mixer!r} needs norm_first=True")
        if self.positions == "rotary":
            raise ValueError(
                f"mixer={self.mixer!r} takes positions 'none', 'sinusoidal' or 'learned': rotary "
                "positions rotate an attention block's queries and keys"
            )
        for name in _ATTENTION_ONLY:
            if name == "num_kv_heads" and self.mixer == "softmax":
                continue  # softmax attention groups its key/value heads as a decoder's does
            if getattr(self, name) is not None:
                raise ValueError(f"{name} belongs to an attention block; mixer={self.mixer!r} "
                                 "takes none")  # fmt: skip

    def to_dict(self) -> dict[str, Any]:
        """Plain types only, so a ``weights_only`` checkpoint can hold it."""
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, values: dict[str, Any]) -> TransformerConfig:
        """Rebuild from :meth:`to_dict`'s output, an earlier version's too (``decoder_kv_heads``
        is read as ``num_kv_heads``); unknown keys are refused by name."""
        if not isinstance(values, Mapping):
            raise TypeError(
                f"values must be a dict of TransformerConfig fields (as to_dict gives), got "
                f"{type(values).__name__}"
            )
        values = _renamed(values)
        known = {field.name for field in dataclasses.fields(cls)}
        unknown = sorted(set(values) - known)
        if unknown:
            raise ValueError(f"unknown TransformerConfig keys: {', '.join(unknown)}")
        return cls(**values)


def _renamed(values: Mapping[str, Any]) -> dict[str, Any]:
    """``values`` with keys of earlier versions (:data:`_RENAMED`) under their names now."""
    values = dict(values)
    for old, new in _RENAMED.items():
        if old in values:
            if new in values:
                raise ValueError(f"{old!r} is the old name of {new!r}: give one of them, not both")
            values[new] = values.pop(old)
    return values
