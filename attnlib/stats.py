"""Paired comparisons of two classifiers on the same test items, and the spread over seeds.

Two models scored on the same reviews disagree on some of them; McNemar's test asks whether
the reviews only the first gets right outnumber those only the second gets right by more than
chance would. It is the test to use when two accuracies come from one shared test set, where
their difference is far less noisy than two independent samples would be.

A model's predictions can be recorded with it (:func:`pack_labels`, a bit per item as text), so
that a later run of the same model, on another machine, is compared item by item: a change of
one or two points in accuracy shows as that many items disagreeing, even on a small subset.

A score over a few seeds is reported as its mean ± sample standard deviation (:func:`mean_sd`).
"""

from __future__ import annotations

import base64
import math
import statistics
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from fractions import Fraction

import numpy as np


@dataclass(frozen=True)
class McNemar:
    """The discordant pairs and the exact two-sided p-value of McNemar's test."""

    only_first: int  # items the first model gets right and the second wrong
    only_second: int  # items the second model gets right and the first wrong
    p_value: float


def mcnemar(first_correct: Sequence[bool], second_correct: Sequence[bool]) -> McNemar:
    """Exact McNemar test on per-item correctness (n,) of two models on the same n items."""
    first = np.asarray(first_correct)
    second = np.asarray(second_correct)
    if first.ndim != 1 or first.shape != second.shape:
        raise ValueError(
            f"need two 1-D arrays of the same length, got shapes {first.shape} and {second.shape}"
        )
    if first.dtype != np.bool_ or second.dtype != np.bool_:
        raise TypeError(f"correctness must be boolean, got {first.dtype} and {second.dtype}")
    only_first = int((first & ~second).sum())
    only_second = int((~first & second).sum())
    n = only_first + only_second
    # Under the null each discordant item is a fair coin: a two-sided binomial tail, exactly.
    tail = sum(math.comb(n, i) for i in range(min(only_first, only_second) + 1))
    p_value = min(1.0, float(2 * Fraction(tail, 2**n)))
    return McNemar(only_first, only_second, p_value)


def pack_labels(labels: Sequence[bool]) -> str:
    """Binary labels (n,) as text: one bit each, base64 (25,000 labels in about 4.2 kB)."""
    array = np.asarray(labels)
    if array.ndim != 1 or array.dtype != np.bool_:
        raise TypeError(f"labels must be a 1-D boolean array, got {array.dtype} {array.shape}")
    return base64.b64encode(np.packbits(array).tobytes()).decode("ascii")


def unpack_labels(text: str, count: int) -> np.ndarray:
    """The ``count`` labels (count,) that :func:`pack_labels` wrote as ``text``."""
    bits = np.unpackbits(np.frombuffer(base64.b64decode(text, validate=True), dtype=np.uint8))
    if not count <= len(bits) < count + 8:
        raise ValueError(f"the text holds {len(bits) // 8} bytes, not the labels of {count} items")
    return bits[:count].astype(bool)


def mean_sd(values: Iterable[float]) -> tuple[float, float]:
    """Mean and sample standard deviation (n - 1 in the denominator) of n >= 2 values."""
    values = list(values)  # a generator or a dict's values, read once
    if len(values) < 2:
        raise ValueError(f"a sample standard deviation needs at least 2 values, got {len(values)}")
    return float(statistics.mean(values)), float(statistics.stdev(values))
