"""Sequence-to-sequence models: a GRU encoder and decoders without attention, with Bahdanau's
and with Luong's attention; teacher-forced training and greedy decoding that records alignments.

Shapes: source ids (batch, source_len), target ids (batch, target_len), encoder outputs
(batch, source_len, hidden), alignments (batch, target_len, source_len). The source padding mask
is boolean, True at real characters, so padded positions get exactly zero attention weight.
Models only: special ids come from the vocabularies handed in, tasks live in attnlib.tasks.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

import torch
from torch import nn
from torch.nn.utils.rnn import pack_padded_sequence, pad_packed_sequence

from attnlib._checks import check_count, check_flag, check_lengths
from attnlib.attention import attend_unchecked
from attnlib.encoder import count_parameters as count_parameters  # Part II imports it from here
from attnlib.masks import padding_mask_unchecked
from attnlib.scores import AdditiveScore, Score, make_score

# Luong's scores by their names in attnlib.scores.SCORES ("additive" is the paper's "concat").
LUONG_SCORES = ("dot", "general", "additive")
MODEL_KINDS = ("none", "bahdanau", *(f"luong-{score}" for score in LUONG_SCORES))


class Vocabulary(Protocol):
    """What a model needs of a vocabulary: its size and its special ids."""

    pad_id: int
    sos_id: int
    eos_id: int

    def __len__(self) -> int: ...


class GRUEncoder(nn.Module):
    """Embed characters and read them with a (bidirectional) GRU."""

    def __init__(
        self,
        vocab_size: int,
        embedding_dim: int,
        hidden_size: int,
        bidirectional: bool = True,
        *,
        pad_id: int,
    ):
        super().__init__()
        check_count("hidden_size", hidden_size)
        if check_flag("bidirectional", bidirectional) and hidden_size % 2:
            raise ValueError(
                f"a bidirectional encoder needs an even hidden_size, got {hidden_size}"
            )
        per_direction = hidden_size // 2 if bidirectional else hidden_size
        self.hidden_size = hidden_size
        self.embedding = nn.Embedding(vocab_size, embedding_dim, padding_idx=pad_id)
        self.gru = nn.GRU(
            embedding_dim, per_direction, batch_first=True, bidirectional=bidirectional
        )
        # Both directions' last states, mixed into the decoder's first state.
        self.bridge = nn.Linear(hidden_size, hidden_size)

    def forward(
        self, source: torch.Tensor, lengths: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """(batch, src_len) ids -> outputs (batch, src_len, hidden), summary (batch, hidden)."""
        return self.encode(source, self.checked_lengths(source, lengths))

    def encode(
        self, source: torch.Tensor, host_lengths: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """:meth:`forward` without checks, the lengths on the host from :meth:`checked_lengths`."""
        embedded = self.embedding(source)
        packed = pack_padded_sequence(
            embedded, host_lengths, batch_first=True, enforce_sorted=False
        )
        packed_outputs, final = self.gru(packed)
        outputs, _ = pad_packed_sequence(
            packed_outputs, batch_first=True, total_length=source.shape[1]
        )
        summary = final.transpose(0, 1).reshape(source.shape[0], self.hidden_size)
        return outputs, torch.tanh(self.bridge(summary))

    def checked_lengths(
        self,
        source: torch.Tensor,
        lengths: torch.Tensor | list[int],
        target: torch.Tensor | None = None,
        target_vocab_size: int = 0,
    ) -> torch.Tensor:
        """The lengths on the host, after checking them, the source ids and ``target`` ids.

        Packing needs the lengths on the host anyway; the smallest and largest source (and
        target) id travel with them in that one copy, so on a GPU the checks add no host sync.
        """
        if not isinstance(source, torch.Tensor) or source.dim() != 2:
            shape = tuple(source.shape) if isinstance(source, torch.Tensor) else type(source)
            raise ValueError(f"source must be a 2-D tensor of ids (batch, src_len), got {shape}")
        if source.dtype.is_floating_point or source.dtype == torch.bool:
            raise TypeError(f"source ids must be integers, got dtype {source.dtype}")
        lengths = check_lengths(lengths)
        if lengths.shape[0] != source.shape[0]:
            raise ValueError(
                f"lengths of shape {tuple(lengths.shape)} do not fit a batch of "
                f"{source.shape[0]} sources: one length per row is needed"
            )
        if source.numel() == 0:
            raise ValueError(f"source must hold at least one id, got shape {tuple(source.shape)}")
        ranges = [source.min(), source.max()]
        if target is not None:
            _check_target(target, source.shape[0])
            ranges += [target.min(), target.max()]
        id_range = torch.stack(ranges).to(lengths.device, torch.long)
        host = torch.cat([lengths.long(), id_range]).cpu()  # the one host copy
        host_lengths, bounds = host[: -len(ranges)], host[-len(ranges) :].tolist()
        _check_ids("source", bounds[:2], self.embedding.num_embeddings, "encoder")
        if target is not None:
            _check_ids("target", bounds[2:], target_vocab_size, "decoder")
        padded = source.shape[1]
        if (host_lengths < 1).any() or (host_lengths > padded).any():
            bad = [
                (row, length)
                for row, length in enumerate(host_lengths.tolist())
                if not 1 <= length <= padded
            ]
            shown = ", ".join(f"row {row}: {length}" for row, length in bad[:5])
            raise ValueError(
                f"lengths must lie between 1 and the padded source length {padded}; got {shown}"
            )
        return host_lengths


def _check_ids(what: str, bounds: list[int], vocab_size: int, owner: str) -> None:
    """Refuse the smallest or largest id of ``bounds`` = [low, high] outside the vocabulary."""
    smallest, largest = bounds
    if smallest < 0 or largest >= vocab_size:
        bad = smallest if smallest < 0 else largest
        raise ValueError(
            f"{what} id {bad} is outside the {owner}'s vocabulary of {vocab_size} symbols "
            f"(ids 0 to {vocab_size - 1}); was the {what} encoded with another vocabulary?"
        )


def _check_target(target_in: object, batch: int) -> None:
    """Require target ids (batch, tgt_len) of an integer dtype, tgt_len >= 1; no values read."""
    if not isinstance(target_in, torch.Tensor):
        raise TypeError(f"target_in must be a tensor of ids, got {type(target_in).__name__}")
    if target_in.dtype.is_floating_point or target_in.dtype == torch.bool:
        raise TypeError(f"target_in ids must be integers, got dtype {target_in.dtype}")
    if target_in.dim() != 2 or target_in.shape[0] != batch or target_in.shape[1] == 0:
        raise ValueError(
            f"target_in must be (batch={batch}, tgt_len >= 1), got shape {tuple(target_in.shape)}"
        )


@dataclass
class Memory:
    """What every decoder step reads of the source, computed once per source: the encoder
    outputs (batch, src_len, hidden), the keys as the score prepared them (batch, src_len, d)
    and the padding mask (batch, 1, src_len), True at real characters."""

    values: torch.Tensor
    keys: torch.Tensor
    mask: torch.Tensor


class GRUDecoder(nn.Module):
    """What the three decoders share: a step is embed, ``advance``, then the output layer.

    ``advance`` works on embedded symbols and returns the features the output layer reads, so
    that teacher forcing can embed every step's symbol, and turn every step's features into
    logits, in one call each (:meth:`Seq2Seq.forward`).
    """

    uses_attention: bool
    embedding: nn.Embedding
    output: nn.Linear
    score: Score

    def remember(self, encoder_outputs: torch.Tensor, source_mask: torch.Tensor) -> Memory:
        """Prepare the source once for every step: keys through the score's ``prepare_keys``."""
        return Memory(encoder_outputs, self.score.prepare_keys(encoder_outputs), source_mask)

    def advance(
        self, embedded: torch.Tensor, state: tuple, memory: Memory
    ) -> tuple[torch.Tensor, tuple, torch.Tensor | None]:
        """One step from an embedded symbol (batch, emb): features, new state, weights or None."""
        raise NotImplementedError

    def step(self, token, state, encoder_outputs, source_mask):
        """One step: token (batch,) -> logits (batch, vocab), new state, weights (batch, src)."""
        memory = self.remember(encoder_outputs, source_mask)
        features, state, weights = self.advance(self.embedding(token), state, memory)
        return self.output(features), state, weights

    def _attend(self, query: torch.Tensor, memory: Memory) -> tuple[torch.Tensor, torch.Tensor]:
        """Context (batch, hidden) and weights (batch, src) for one query (batch, hidden)."""
        # Inner step of a checked model: the score's arithmetic alone, no input scans.
        context, weights = attend_unchecked(
            query.unsqueeze(1), memory.keys, memory.values, memory.mask, self.score.score_prepared
        )  # (batch, 1, hidden), (batch, 1, src)
        return context.squeeze(1), weights.squeeze(1)


class PlainDecoder(GRUDecoder):
    """No attention: every step sees the same summary vector of the whole source."""

    uses_attention = False

    def __init__(self, vocab_size: int, embedding_dim: int, hidden_size: int):
        super().__init__()
        self.embedding = nn.Embedding(vocab_size, embedding_dim)
        self.cell = nn.GRUCell(embedding_dim + hidden_size, hidden_size)
        self.output = nn.Linear(hidden_size + hidden_size + embedding_dim, vocab_size)

    def init_state(self, summary: torch.Tensor, encoder_outputs: torch.Tensor) -> tuple:
        """The decoder state before the first step: (hidden, fixed context)."""
        return summary, summary

    def remember(self, encoder_outputs: torch.Tensor, source_mask: torch.Tensor) -> Memory:
        """Nothing to prepare: this decoder never looks at the encoder outputs."""
        return Memory(encoder_outputs, encoder_outputs, source_mask)

    def advance(self, embedded, state, memory):
        """features [s_t; c; e] (batch, 2·hidden + emb), state (s_t, c), no weights."""
        hidden, context = state
        hidden = self.cell(torch.cat([embedded, context], dim=-1), hidden)
        return torch.cat([hidden, context, embedded], dim=-1), (hidden, context), None


class BahdanauDecoder(GRUDecoder):
    """Additive attention queried by the previous state s_{t-1}; the context feeds the GRU."""

    uses_attention = True

    def __init__(self, vocab_size: int, embedding_dim: int, hidden_size: int, attention_size: int):
        super().__init__()
        self.embedding = nn.Embedding(vocab_size, embedding_dim)
        self.score = AdditiveScore(hidden_size, hidden_size, attention_size)
        self.cell = nn.GRUCell(embedding_dim + hidden_size, hidden_size)
        self.output = nn.Linear(hidden_size + hidden_size + embedding_dim, vocab_size)

    def init_state(self, summary: torch.Tensor, encoder_outputs: torch.Tensor) -> tuple:
        """The decoder state before the first step: (hidden,)."""
        return (summary,)

    def advance(self, embedded, state, memory):
        """features [s_t; c_t; e] (batch, 2·hidden + emb), state (s_t,), weights (batch, src)."""
        (previous,) = state
        context, weights = self._attend(previous, memory)
        hidden = self.cell(torch.cat([embedded, context], dim=-1), previous)
        return torch.cat([hidden, context, embedded], dim=-1), (hidden,), weights


class LuongDecoder(GRUDecoder):
    """Attention queried by the current state s_t; s̃_t = tanh(W_c [c_t; s_t]) predicts.

    With input feeding, s̃_{t-1} joins the next step's input, so the decoder knows where it
    attended before.
    """

    uses_attention = True

    def __init__(
        self,
        vocab_size: int,
        embedding_dim: int,
        hidden_size: int,
        score: str = "general",
        input_feeding: bool = True,
        attention_size: int | None = None,
    ):
        super().__init__()
        if score not in LUONG_SCORES:
            raise ValueError(
                f"unknown Luong score {score!r}; choose one of {', '.join(LUONG_SCORES)}"
            )
        self.score = make_score(score, hidden_size, hidden_size, attention_size or hidden_size)
        self.score_name, self.input_feeding = score, check_flag("input_feeding", input_feeding)
        self.embedding = nn.Embedding(vocab_size, embedding_dim)
        input_size = embedding_dim + (hidden_size if input_feeding else 0)
        self.cell = nn.GRUCell(input_size, hidden_size)
        self.combine = nn.Linear(2 * hidden_size, hidden_size, bias=False)
        self.output = nn.Linear(hidden_size, vocab_size)

    def init_state(self, summary: torch.Tensor, encoder_outputs: torch.Tensor) -> tuple:
        """The decoder state before the first step: (hidden, attentional state s̃ = 0)."""
        return summary, torch.zeros_like(summary)

    def advance(self, embedded, state, memory):
        """features s̃_t (batch, hidden), state (s_t, s̃_t), weights (batch, src)."""
        previous, attentional = state
        step_input = torch.cat([embedded, attentional], -1) if self.input_feeding else embedded
        hidden = self.cell(step_input, previous)
        context, weights = self._attend(hidden, memory)
        attentional = torch.tanh(self.combine(torch.cat([context, hidden], dim=-1)))
        return attentional, (hidden, attentional), weights


@dataclass
class Decoded:
    """Greedy decoding's result: token ids (batch, steps), alignments (batch, steps, src)."""

    tokens: torch.Tensor
    alignments: torch.Tensor | None


class Seq2Seq(nn.Module):
    """An encoder and a decoder, run with teacher forcing (training) or greedily (inference).

    ``pad_id``, ``sos_id`` and ``eos_id`` are the target vocabulary's special ids.
    """

    def __init__(
        self, encoder: GRUEncoder, decoder: GRUDecoder, *, pad_id: int, sos_id: int, eos_id: int
    ):
        super().__init__()
        self.encoder, self.decoder = encoder, decoder
        self.pad_id, self.sos_id, self.eos_id = pad_id, sos_id, eos_id

    def _start(
        self, source: torch.Tensor, lengths: torch.Tensor, target: torch.Tensor | None = None
    ) -> tuple[Memory, tuple]:
        """Check the inputs and encode the source: the decoder's memory of it and its state
        before the first step. ``lengths`` may be a tensor or a list of ints."""
        lengths = check_lengths(lengths)
        vocab_size = self.decoder.embedding.num_embeddings
        host_lengths = self.encoder.checked_lengths(source, lengths, target, vocab_size)
        encoder_outputs, summary = self.encoder.encode(source, host_lengths)
        mask = padding_mask_unchecked(lengths.to(source.device), source.shape[1])  # checked
        memory = self.decoder.remember(encoder_outputs, mask)
        return memory, self.decoder.init_state(summary, encoder_outputs)

    def forward(
        self, source: torch.Tensor, lengths: torch.Tensor, target_in: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor | None]:
        """Teacher forcing: logits (batch, tgt_len, vocab), alignments (batch, tgt_len, src_len)."""
        decoder = self.decoder
        memory, state = self._start(source, lengths, target_in)
        # The same arithmetic as calling decoder.step in a loop, but the symbols are embedded
        # and the features turned into logits for all steps at once: fewer, larger operations.
        embedded = decoder.embedding(target_in)  # (batch, tgt_len, emb)
        all_features, all_weights = [], []
        for step in range(target_in.shape[1]):
            features, state, weights = decoder.advance(embedded[:, step], state, memory)
            all_features.append(features)
            all_weights.append(weights)
        alignments = torch.stack(all_weights, 1) if decoder.uses_attention else None
        return decoder.output(torch.stack(all_features, 1)), alignments

    @torch.no_grad()
    def greedy_decode(
        self, source: torch.Tensor, lengths: torch.Tensor, max_steps: int = 20
    ) -> Decoded:
        """Feed back the likeliest symbol until every row has produced the end symbol."""
        if isinstance(max_steps, bool) or not isinstance(max_steps, int) or max_steps < 1:
            raise ValueError(f"max_steps must be a positive integer, got {max_steps!r}")
        decoder = self.decoder
        memory, state = self._start(source, lengths)
        token = torch.full((source.shape[0],), self.sos_id, device=source.device)
        finished = torch.zeros(source.shape[0], dtype=torch.bool, device=source.device)
        tokens, alignments = [], []
        for _ in range(max_steps):
            features, state, weights = decoder.advance(decoder.embedding(token), state, memory)
            token = decoder.output(features).argmax(-1)
            tokens.append(token.masked_fill(finished, self.pad_id))
            alignments.append(weights)
            finished |= token == self.eos_id
            if bool(finished.all()):
                break
        stacked = torch.stack(alignments, 1) if self.decoder.uses_attention else None
        return Decoded(torch.stack(tokens, 1), stacked)


def build_model(
    kind: str,
    source_vocab: Vocabulary,
    target_vocab: Vocabulary,
    embedding_dim: int = 32,
    hidden_size: int = 128,
    attention_size: int = 64,
    input_feeding: bool = True,
    bidirectional: bool = True,
) -> Seq2Seq:
    """A seq2seq model of the named kind ('none', 'bahdanau', 'luong-dot|general|additive'),
    sized and given its special ids by the two vocabularies."""
    if kind not in MODEL_KINDS:
        raise ValueError(f"unknown model kind {kind!r}; choose one of {', '.join(MODEL_KINDS)}")
    check_count("embedding_dim", embedding_dim)
    check_count("hidden_size", hidden_size)
    check_count("attention_size", attention_size)
    source_vocab_size, target_vocab_size = len(source_vocab), len(target_vocab)
    encoder = GRUEncoder(
        source_vocab_size, embedding_dim, hidden_size, bidirectional, pad_id=source_vocab.pad_id
    )
    if kind == "none":
        decoder = PlainDecoder(target_vocab_size, embedding_dim, hidden_size)
    elif kind == "bahdanau":
        decoder = BahdanauDecoder(target_vocab_size, embedding_dim, hidden_size, attention_size)
    else:
        decoder = LuongDecoder(
            target_vocab_size,
            embedding_dim,
            hidden_size,
            score=kind.removeprefix("luong-"),
            input_feeding=input_feeding,
            attention_size=attention_size,
        )
    return Seq2Seq(
        encoder,
        decoder,
        pad_id=target_vocab.pad_id,
        sos_id=target_vocab.sos_id,
        eos_id=target_vocab.eos_id,
    )
