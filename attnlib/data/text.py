"""Vocabularies, padding and batching for character (and later token) sequences, and words
looked up in a table of vectors."""

from __future__ import annotations

import random
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

import torch

from attnlib._checks import check_count

PAD, SOS, EOS, UNK = "<pad>", "<s>", "</s>", "<unk>"
SPECIALS = (PAD, SOS, EOS, UNK)


class CharVocab:
    """Characters to ids and back; the special symbols come first, and code that needs their
    ids reads them here (``pad_id``, ``sos_id``, ``eos_id``, ``unk_id``), never as literals."""

    def __init__(self, symbols: Iterable[str]):
        ordered = sorted(set(symbols) - set(SPECIALS))
        self.itos: list[str] = [*SPECIALS, *ordered]
        self.stoi: dict[str, int] = {symbol: index for index, symbol in enumerate(self.itos)}
        self.pad_id, self.sos_id = self.stoi[PAD], self.stoi[SOS]
        self.eos_id, self.unk_id = self.stoi[EOS], self.stoi[UNK]

    @classmethod
    def from_texts(cls, texts: Iterable[str]) -> CharVocab:
        """A vocabulary of every character that occurs in ``texts``."""
        return cls(symbol for text in texts for symbol in text)

    def __len__(self) -> int:
        return len(self.itos)

    def encode(self, text: str, add_sos: bool = False, add_eos: bool = False) -> list[int]:
        """Ids of the characters of ``text`` (unknown ones map to ``<unk>``)."""
        ids = [self.stoi.get(symbol, self.unk_id) for symbol in text]
        return ([self.sos_id] if add_sos else []) + ids + ([self.eos_id] if add_eos else [])

    def decode(self, ids: Iterable[int], stop_at_eos: bool = True) -> str:
        """Text of ``ids``, leaving out padding and start symbols and stopping at the end symbol."""
        symbols = []
        for index in ids:
            index = int(index)
            if index == self.eos_id and stop_at_eos:
                break
            if index in (self.pad_id, self.sos_id, self.eos_id):
                continue
            symbols.append(self.itos[index] if 0 <= index < len(self.itos) else UNK)
        return "".join(symbols)


def embed_words(table: Mapping[str, torch.Tensor], words: Sequence[str]) -> torch.Tensor:
    """The vectors (d,) of ``words`` stacked: (len(words), d), one row per word, in order."""
    if len(words) == 0:
        raise ValueError("no words to embed: the result would have no rows")
    for word in words:
        if word not in table:  # a bare KeyError would show the word alone, not what lacks it
            raise KeyError(f"no vector for the word {word!r} in the table")
    return torch.stack([table[word] for word in words])


def pad_sequences(
    sequences: Sequence[Sequence[int]], pad_id: int
) -> tuple[torch.Tensor, torch.Tensor]:
    """Right-pad id lists with ``pad_id`` to one length: ids (batch, max_len), lengths (batch,)."""
    if not sequences:
        raise ValueError("pad_sequences needs at least one sequence")
    lengths = torch.tensor([len(sequence) for sequence in sequences])
    padded = torch.full((len(sequences), int(lengths.max())), pad_id, dtype=torch.long)
    for row, sequence in enumerate(sequences):
        padded[row, : len(sequence)] = torch.as_tensor(sequence, dtype=torch.long)
    return padded, lengths


@dataclass
class Batch:
    """One batch of a translation task, padded, batch first."""

    source: torch.Tensor  # (batch, source_len) ids
    source_lengths: torch.Tensor  # (batch,)
    target_in: torch.Tensor  # (batch, target_len): <s> + target, the decoder's inputs
    target_out: torch.Tensor  # (batch, target_len): target + </s>, what it must predict
    sources: list[str]
    targets: list[str]

    def to(self, device: torch.device | str) -> Batch:
        """The same batch with its tensors on ``device``."""
        return Batch(
            self.source.to(device),
            self.source_lengths.to(device),
            self.target_in.to(device),
            self.target_out.to(device),
            self.sources,
            self.targets,
        )

    def __len__(self) -> int:
        return len(self.sources)


def _check_pair(index: int, pair: object) -> None:
    """Require a (source, target) pair of strings with a non-empty source."""
    if (
        not isinstance(pair, (tuple, list))
        or len(pair) != 2
        or not all(isinstance(text, str) for text in pair)
    ):
        raise TypeError(f"pair {index} must be (source, target), two strings, got {pair!r}")
    if not pair[0]:
        raise ValueError(
            f"pair {index} has an empty source {pair!r}: the encoder needs at least one symbol"
        )


def make_batches(
    pairs: Sequence[tuple[str, str]],
    source_vocab: CharVocab,
    target_vocab: CharVocab,
    batch_size: int,
    shuffle: bool = False,
    seed: int = 0,
) -> list[Batch]:
    """Cut (source, target) pairs into padded batches, optionally shuffled with ``seed``.

    Each pair is two strings, the source not empty (the encoder needs at least one symbol).
    """
    batch_size = check_count("batch_size", batch_size)
    if not pairs:
        raise ValueError("make_batches needs at least one pair")
    for index, pair in enumerate(pairs):
        _check_pair(index, pair)
    order = list(range(len(pairs)))
    if shuffle:
        random.Random(seed).shuffle(order)
    batches = []
    for start in range(0, len(order), batch_size):
        chunk = [pairs[index] for index in order[start : start + batch_size]]
        sources = [source for source, _ in chunk]
        targets = [target for _, target in chunk]
        source_ids, source_lengths = pad_sequences(
            [source_vocab.encode(s) for s in sources], source_vocab.pad_id
        )
        target_in, _ = pad_sequences(
            [target_vocab.encode(t, add_sos=True) for t in targets], target_vocab.pad_id
        )
        target_out, _ = pad_sequences(
            [target_vocab.encode(t, add_eos=True) for t in targets], target_vocab.pad_id
        )
        batches.append(Batch(source_ids, source_lengths, target_in, target_out, sources, targets))
    return batches
