"""Claims about trained models: an assert that also keeps what it measured.

A chapter states what its training showed with :func:`claim`: the bound is asserted as any
``assert`` would, and the measured value is kept. ``scripts/seed_spread.py`` re-runs a chapter
on fitting seeds and then on held-out seeds, reads back every value kept, and reports how close
each came to its bound; with ``ATTNLIB_CLAIMS_RECORD_ONLY=1`` a failed claim is kept without
stopping the cell, so that one run shows every claim a seed breaks.
"""

from __future__ import annotations

import math
import os
from dataclasses import asdict, dataclass

RECORD_ONLY = "ATTNLIB_CLAIMS_RECORD_ONLY"


@dataclass(frozen=True)
class Measurement:
    """One claim's measured value and its bounds (``None`` where a side is open)."""

    name: str
    value: float
    at_least: float | None
    at_most: float | None

    @property
    def held(self) -> bool:
        """Whether the value lies within the bounds (a NaN never does)."""
        if math.isnan(self.value):
            return False
        low_ok = self.at_least is None or self.value >= self.at_least
        return low_ok and (self.at_most is None or self.value <= self.at_most)

    def bound(self) -> str:
        """The bounds as text: ``>= 0.9``, ``<= 0.5`` or ``in [0.15, 0.5]``."""
        if self.at_most is None:
            return f">= {self.at_least:g}"
        if self.at_least is None:
            return f"<= {self.at_most:g}"
        return f"in [{self.at_least:g}, {self.at_most:g}]"


_measured: list[Measurement] = []


def claim(
    name: str, value: float, *, at_least: float | None = None, at_most: float | None = None
) -> None:
    """Assert ``at_least <= value <= at_most`` (either side may be open); keep the value.

    It returns nothing, so that a claim on a cell's last line leaves no ``Out[]`` behind.
    """
    if not isinstance(name, str) or not name.strip():
        raise ValueError(f"a claim needs a name that says what it measures, got {name!r}")
    if at_least is None and at_most is None:
        raise ValueError(f"claim {name!r} needs a bound: at_least=, at_most= or both")
    if at_least is not None and at_most is not None and at_least > at_most:
        raise ValueError(f"claim {name!r}: at_least={at_least} is above at_most={at_most}")
    try:
        value = float(value)
    except (TypeError, ValueError):
        raise TypeError(f"claim {name!r} measures a number, got {type(value).__name__}") from None
    measurement = Measurement(name, value, at_least, at_most)
    _measured.append(measurement)
    if not measurement.held and os.environ.get(RECORD_ONLY) != "1":
        raise AssertionError(f"{name}: measured {value:.4g}, the claim is {measurement.bound()}")


def measurements() -> list[dict]:
    """Every claim made in this process so far, in order, as plain dicts."""
    return [asdict(measurement) for measurement in _measured]


def forget() -> None:
    """Drop the claims kept so far (a chapter re-run in the same kernel starts afresh)."""
    _measured.clear()
