"""Date pairs: deterministic, correct, disjoint splits, clear errors."""

from __future__ import annotations

import datetime as dt

import pytest

from attnlib.data.dates import (
    FORMATS,
    format_date,
    generate_pairs,
    make_splits,
    ordinal_suffix,
    ordinal_words,
    year_words,
)

DAY = dt.date(2026, 11, 21)


def test_same_seed_gives_the_same_pairs():
    assert generate_pairs(200, seed=7) == generate_pairs(200, seed=7)


def test_other_seed_gives_other_pairs():
    assert generate_pairs(200, seed=7) != generate_pairs(200, seed=8)


@pytest.mark.parametrize(
    ("fmt", "expected"),
    [
        ("d.m.yy", "21.11.26"),
        ("dd/mm/yyyy", "21/11/2026"),
        ("mon d yy", "nov 21 26"),
        ("d mon yyyy", "21 nov 2026"),
        ("weekday d month yyyy", "saturday 21 november 2026"),
        ("weekday, month d, yyyy", "saturday, november 21, 2026"),
        (
            "the ordinal of month, year in words",
            "the twenty-first of november, two thousand twenty-six",
        ),
    ],
)
def test_formats_write_the_day_as_expected(fmt, expected):
    assert format_date(DAY, fmt) == expected


def test_every_target_is_the_iso_date_of_its_source_day():
    for source, target in generate_pairs(300, seed=1):
        day = dt.date.fromisoformat(target)
        assert source in {format_date(day, fmt) for fmt in FORMATS}


def test_number_words():
    assert [ordinal_words(n) for n in (1, 2, 3, 12, 20, 31)] == [
        "first", "second", "third", "twelfth", "twentieth", "thirty-first"
    ]  # fmt: skip
    assert [ordinal_suffix(n) for n in (1, 2, 3, 11, 12, 13, 22)] == [
        "1st", "2nd", "3rd", "11th", "12th", "13th", "22nd"
    ]  # fmt: skip
    assert year_words(1984) == "nineteen eighty-four"
    assert year_words(2000) == "two thousand"
    assert year_words(1905) == "nineteen oh five"


def test_splits_are_disjoint_and_sized():
    splits = make_splits(500, 50, 100, seed=3)
    assert (len(splits.train), len(splits.valid), len(splits.test)) == (500, 50, 100)
    sources = [set(s for s, _ in split) for split in (splits.train, splits.valid, splits.test)]
    assert sources[0].isdisjoint(sources[1]) and sources[0].isdisjoint(sources[2])
    assert sources[1].isdisjoint(sources[2])


def test_restricting_formats_uses_only_those():
    pairs = generate_pairs(50, seed=0, formats=["dd/mm/yyyy"])
    assert all(len(source) == 10 and source[2] == "/" for source, _ in pairs)


def test_zero_samples_is_refused():
    with pytest.raises(ValueError, match="n must be positive, got 0"):
        generate_pairs(0)


def test_zero_test_samples_is_refused():
    with pytest.raises(ValueError, match="n_test must be positive, got 0"):
        make_splits(10, 10, 0)


def test_unknown_format_is_named():
    with pytest.raises(ValueError, match=r"unknown date formats \['yyyy\?\?'\]"):
        generate_pairs(5, formats=["yyyy??"])
    with pytest.raises(ValueError, match="unknown date format 'x'"):
        format_date(DAY, "x")
