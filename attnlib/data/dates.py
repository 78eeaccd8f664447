"""Human-written dates and their ISO form, generated deterministically from a seed.

``'saturday 21 november 2026'`` → ``'2026-11-21'``. Many formats, short (``21.11.26``) to long
(``saturday, the twenty-first of november two thousand twenty-six``), so that input length
varies and alignments are easy to read. Two-digit years mean 1950-2049.
"""

from __future__ import annotations

import datetime as dt
import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from attnlib._checks import check_count, is_int

FIRST_DAY = dt.date(1950, 1, 1)
LAST_DAY = dt.date(2049, 12, 31)

_ONES = "zero one two three four five six seven eight nine ten eleven twelve thirteen fourteen \
fifteen sixteen seventeen eighteen nineteen".split()
_TENS = {2: "twenty", 3: "thirty", 4: "forty", 5: "fifty", 6: "sixty", 7: "seventy",
         8: "eighty", 9: "ninety"}  # fmt: skip
_ORDINAL_WORDS = {"one": "first", "two": "second", "three": "third", "five": "fifth",
                  "eight": "eighth", "nine": "ninth", "twelve": "twelfth"}  # fmt: skip


def number_words(number: int) -> str:
    """0-99 in words: 21 -> 'twenty-one'."""
    if not 0 <= number < 100:
        raise ValueError(f"number_words handles 0-99, got {number}")
    if number < 20:
        return _ONES[number]
    tens, ones = divmod(number, 10)
    return _TENS[tens] + (f"-{_ONES[ones]}" if ones else "")


def ordinal_words(number: int) -> str:
    """1-31 as an ordinal in words: 21 -> 'twenty-first'."""
    words = number_words(number)
    head, _, last = words.rpartition("-")
    last = _ORDINAL_WORDS.get(last, last[:-1] + "ieth" if last.endswith("y") else last + "th")
    return f"{head}-{last}" if head else last


def ordinal_suffix(number: int) -> str:
    """21 -> '21st', 12 -> '12th'."""
    if 10 <= number % 100 <= 20:
        return f"{number}th"
    return f"{number}" + {1: "st", 2: "nd", 3: "rd"}.get(number % 10, "th")


def year_words(year: int) -> str:
    """1984 -> 'nineteen eighty-four', 2026 -> 'two thousand twenty-six', 2000 -> 'two thousand'."""
    if 2000 <= year <= 2099:
        rest = year - 2000
        return "two thousand" + (f" {number_words(rest)}" if rest else "")
    century, rest = divmod(year, 100)
    tail = "hundred" if rest == 0 else number_words(rest) if rest >= 10 else f"oh {_ONES[rest]}"
    return f"{number_words(century)} {tail}"


def _month(day: dt.date) -> str:
    return day.strftime("%B").lower()


def _mon(day: dt.date) -> str:
    return day.strftime("%b").lower()


def _weekday(day: dt.date) -> str:
    return day.strftime("%A").lower()


FORMATS: dict[str, Callable[[dt.date], str]] = {
    "d.m.yy": lambda d: f"{d.day}.{d.month}.{d.year % 100:02d}",
    "dd/mm/yyyy": lambda d: f"{d.day:02d}/{d.month:02d}/{d.year}",
    "mon d yy": lambda d: f"{_mon(d)} {d.day} {d.year % 100:02d}",
    "d mon yyyy": lambda d: f"{d.day} {_mon(d)} {d.year}",
    "dd-mon-yyyy": lambda d: f"{d.day:02d}-{_mon(d)}-{d.year}",
    "d month yyyy": lambda d: f"{d.day} {_month(d)} {d.year}",
    "month d, yyyy": lambda d: f"{_month(d)} {d.day}, {d.year}",
    "dth of month yyyy": lambda d: f"{ordinal_suffix(d.day)} of {_month(d)} {d.year}",
    "weekday d month yyyy": lambda d: f"{_weekday(d)} {d.day} {_month(d)} {d.year}",
    "weekday, month d, yyyy": lambda d: f"{_weekday(d)}, {_month(d)} {d.day}, {d.year}",
    "weekday the dth of month, yyyy": lambda d: (
        f"{_weekday(d)} the {ordinal_suffix(d.day)} of {_month(d)}, {d.year}"
    ),
    "the ordinal of month, year in words": lambda d: (
        f"the {ordinal_words(d.day)} of {_month(d)}, {year_words(d.year)}"
    ),
    "weekday, the ordinal of month year in words": lambda d: (
        f"{_weekday(d)}, the {ordinal_words(d.day)} of {_month(d)} {year_words(d.year)}"
    ),
}


def format_date(day: dt.date, fmt: str) -> str:
    """Write ``day`` in the named human format (one of :data:`FORMATS`)."""
    if not isinstance(day, dt.date):
        raise TypeError(
            f"day must be a datetime.date, got {type(day).__name__} {day!r}; for an ISO string "
            "use datetime.date.fromisoformat(day)"
        )
    if not isinstance(fmt, str) or fmt not in FORMATS:
        raise ValueError(f"unknown date format {fmt!r}; known formats: {', '.join(FORMATS)}")
    return FORMATS[fmt](day)


def _check_formats(formats: Sequence[str] | None) -> list[str]:
    chosen = list(FORMATS) if formats is None else list(formats)
    if not chosen:
        raise ValueError("formats must name at least one format")
    unknown = [name for name in chosen if name not in FORMATS]
    if unknown:
        raise ValueError(f"unknown date formats {unknown}; known formats: {', '.join(FORMATS)}")
    return chosen


def generate_pairs(
    n: int, seed: int = 0, formats: Sequence[str] | None = None
) -> list[tuple[str, str]]:
    """``n`` (human date, ISO date) pairs, distinct human strings, the same for the same seed."""
    n = check_count("n", n)
    if not is_int(seed):
        # random.Random(None) seeds itself from the clock: a new data set at every call.
        raise TypeError(
            f"seed must be an int, so that the same seed gives the same pairs, got "
            f"{type(seed).__name__} {seed!r}"
        )
    chosen = _check_formats(formats)
    span = (LAST_DAY - FIRST_DAY).days
    capacity = (span + 1) * len(chosen)
    if n > capacity // 2:
        raise ValueError(f"n={n} is too many distinct dates for {len(chosen)} format(s)")
    rng = random.Random(int(seed))  # NumPy ints too, which random refuses
    pairs: dict[str, str] = {}
    while len(pairs) < n:
        day = FIRST_DAY + dt.timedelta(days=rng.randint(0, span))
        pairs.setdefault(format_date(day, rng.choice(chosen)), day.isoformat())
    return list(pairs.items())


@dataclass(frozen=True)
class DateSplits:
    """Training, validation and test pairs; no human string appears in two splits."""

    train: list[tuple[str, str]]
    valid: list[tuple[str, str]]
    test: list[tuple[str, str]]


def make_splits(
    n_train: int = 20_000,
    n_valid: int = 1_000,
    n_test: int = 2_000,
    seed: int = 0,
    formats: Sequence[str] | None = None,
) -> DateSplits:
    """Disjoint train / validation / test pairs, generated together from one seed."""
    n_train, n_valid, n_test = (
        check_count(name, count)
        for name, count in (("n_train", n_train), ("n_valid", n_valid), ("n_test", n_test))
    )
    pairs = generate_pairs(n_train + n_valid + n_test, seed=seed, formats=formats)
    return DateSplits(
        train=pairs[:n_train],
        valid=pairs[n_train : n_train + n_valid],
        test=pairs[n_train + n_valid :],
    )
