"""Date pairs (:mod:`attnlib.data.dates`) as rows for a decoder-only model: ``source <s> target``.

One character a token, in the project's :class:`~attnlib.data.text.CharVocab` over every
character the formats can write: ``<pad>`` (id 0) pads and ``<s>`` (id 1), the start symbol of
chapter 14's decoder, separates the human date from its ISO form. The rows come as an
:class:`~attnlib.data.mqar.MQARBatch`, which serves both tasks: ``targets`` holds the next
target character at every position that predicts one and ``IGNORE`` elsewhere.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence

import torch

from attnlib._checks import check_count
from attnlib.data.dates import FORMATS, format_date
from attnlib.data.mqar import IGNORE, MQARBatch
from attnlib.data.text import CharVocab


def _sweep() -> list[dt.date]:
    """Every day of 2000 (each month, weekday and day of the month) and 1 January of every year
    of the formats' range (1950-2049): together they reach every character a format writes."""
    year_2000 = [dt.date(2000, 1, 1) + dt.timedelta(days=n) for n in range(366)]
    return year_2000 + [dt.date(year, 1, 1) for year in range(1950, 2050)]


def _characters() -> tuple[str, ...]:
    """The sorted characters of every format's sources and of the ISO targets."""
    written = {
        char
        for day in _sweep()
        for text in (day.isoformat(), *(format_date(day, name) for name in FORMATS))
        for char in text
    }
    return tuple(sorted(written))


# Derived from the formats, not written out, so that a new format or word cannot drift from it.
CHARACTERS = _characters()
VOCAB = CharVocab(CHARACTERS)
VOCAB_SIZE = len(VOCAB)
PAD, SEP = VOCAB.pad_id, VOCAB.sos_id


def encode(text: str) -> list[int]:
    """The ids of ``text``'s characters (len(text),)."""
    if not isinstance(text, str):
        raise TypeError(f"a date must be a str, got {type(text).__name__} {text!r}")
    unknown = sorted({char for char in text if char not in CHARACTERS})
    if unknown:
        raise ValueError(
            f"{text!r} holds {''.join(unknown)!r}, not in the date vocabulary "
            f"{''.join(CHARACTERS)!r}"
        )
    return VOCAB.encode(text)  # CharVocab maps an unknown character to <unk>: refused above


def decode(ids: Sequence[int]) -> str:
    """The characters of ``ids`` (length,), padding and the separator left out."""
    return VOCAB.decode(ids)


def row_length(pair: tuple[str, str]) -> int:
    """The positions a pair's row takes: source, separator, target."""
    source, target = pair
    return len(source) + 1 + len(target)


def date_rows(pairs: Sequence[tuple[str, str]], seq_len: int) -> MQARBatch:
    """Rows (len(pairs), seq_len) of ``source <s> target`` and padding; ``targets`` holds the
    next character from the separator to the target's second-to-last character, so the model
    predicts every target character from the source and the target so far."""
    check_count("seq_len", seq_len)
    if len(pairs) == 0:
        raise ValueError("date_rows needs at least one (human date, ISO date) pair")
    ids = torch.full((len(pairs), seq_len), PAD, dtype=torch.long)
    targets = torch.full((len(pairs), seq_len), IGNORE, dtype=torch.long)
    for row, (source, target) in enumerate(pairs):
        if row_length((source, target)) > seq_len:
            raise ValueError(
                f"pair {row} ({source!r}, {target!r}) needs seq_len >= "
                f"{row_length((source, target))} (source, separator, target), got {seq_len}"
            )
        source_ids, target_ids = encode(source), encode(target)
        sep = len(source_ids)
        end = sep + 1 + len(target_ids)
        ids[row, :end] = torch.tensor([*source_ids, SEP, *target_ids])
        targets[row, sep : end - 1] = torch.tensor(target_ids)
    return MQARBatch(ids, targets)
