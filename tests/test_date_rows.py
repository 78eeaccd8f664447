"""Chapter 19's date rows: a character a token, ``source <s> target``, the loss on the target."""

from __future__ import annotations

import pytest
import torch

from attnlib.data.date_rows import (
    CHARACTERS,
    PAD,
    SEP,
    VOCAB,
    VOCAB_SIZE,
    date_rows,
    decode,
    encode,
    row_length,
)
from attnlib.data.dates import generate_pairs
from attnlib.data.mqar import IGNORE

PAIR = ("1.2.03", "2003-02-01")


def test_the_vocabulary_is_every_character_the_formats_write_sorted_after_the_specials():
    assert (PAD, SEP, VOCAB_SIZE, len(CHARACTERS)) == (0, 1, 42, 38)
    assert VOCAB.itos[:5] == ["<pad>", "<s>", "</s>", "<unk>", " "]
    assert "".join(CHARACTERS[:15]) == " ,-./0123456789" and list(CHARACTERS) == sorted(CHARACTERS)
    written = {char for pair in generate_pairs(2_000, seed=3) for char in "".join(pair)}
    assert written == set(CHARACTERS)  # 13 formats, 2000 dates: every character, nothing more
    assert decode(encode("saturday, 21 nov 2026")) == "saturday, 21 nov 2026"


def test_a_row_is_source_separator_target_and_the_targets_are_the_next_target_characters():
    batch = date_rows([PAIR], seq_len=18)
    # ' ,-./' are ids 4-8 and the digits 9-18: '1' 10, '.' 7, '2' 11, '0' 9, '3' 12, '-' 6
    assert batch.ids.tolist() == [[10, 7, 11, 7, 9, 12, SEP, 11, 9, 9, 12, 6, 9, 11, 6, 9, 10, PAD]]
    nothing = [IGNORE] * 6  # no loss on the source: only the separator on predicts
    assert batch.targets.tolist() == [[*nothing, 11, 9, 9, 12, 6, 9, 11, 6, 9, 10, IGNORE, IGNORE]]
    assert row_length(PAIR) == 17


def test_every_row_has_one_query_a_target_character():
    batch = date_rows([PAIR, ("may 5 21", "21-5")], seq_len=20)
    assert batch.queries.sum(dim=1).tolist() == [10, 4]
    many = date_rows(generate_pairs(16, seed=1), seq_len=80)
    assert many.ids.shape == (16, 80) and set(many.queries.sum(dim=1).tolist()) == {10}
    torch.testing.assert_close(many.targets[many.queries] >= 4, torch.ones(160, dtype=torch.bool))


@pytest.mark.parametrize(
    ("pairs", "seq_len", "message"),
    [
        ([PAIR], 16, r"pair 0 \('1.2.03', '2003-02-01'\) needs seq_len >= 17 .*got 16"),
        ([PAIR, ("1.2.03!", "2003-02-01")], 20, "'1.2.03!' holds '!', not in the date vocab"),
        ([("May 5 21", "2021-05-05")], 20, "'May 5 21' holds 'M', not in the date vocabulary"),
        ([], 20, r"date_rows needs at least one \(human date, ISO date\) pair"),
    ],
)
def test_a_pair_that_does_not_fit_is_named(pairs, seq_len, message):
    with pytest.raises(ValueError, match=message):
        date_rows(pairs, seq_len)


def test_a_date_must_be_text():
    with pytest.raises(TypeError, match="a date must be a str, got int 20030201"):
        encode(20030201)
