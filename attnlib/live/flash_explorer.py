"""Chapter 15's explorer: the online softmax of one query row, a block of keys at a time.

:func:`flash_live` returns the HTML of the explorer: a root element holding the example rows,
the values and the starting block size in ``data-*`` attributes, then an inline script with
``attention.js``, ``explorers.js`` (the DOM helpers) and ``flash.js``, whose arithmetic is a
port of :func:`attnlib.reference.online_softmax_steps`, checked number for number by
``tests/test_live_flash.py``. It needs no kernel, so it works in the published book.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

import numpy as np
from IPython.display import HTML

from attnlib.live import FLASH_SCRIPTS, _json, _matrix, bundle, snippet

NEG_INF = float("-inf")
# Rows of 12 scores the reader can load with a button; the first is where the explorer starts.
EXAMPLES: dict[str, tuple[float, ...]] = {
    "late maximum": (1.2, -0.5, 2.0, 0.3, -1.1, 1.7, 0.4, -0.2, 0.9, 6.0, -0.8, 1.5),
    "masked keys": (NEG_INF,) * 4 + (0.5, NEG_INF, 2.5, 1.0, NEG_INF, 3.0, 0.2, -1.0),
    "rising": tuple(0.5 * j for j in range(12)),
    "every key masked": (NEG_INF,) * 12,
}


def example_values(n: int = 12, d_v: int = 2, seed: int = 0) -> np.ndarray:
    """Fixed (n, d_v) values with two decimals: what the explorer's partial output mixes."""
    return np.round(np.random.default_rng(seed).normal(size=(n, d_v)), 2)


def _row(name: str, row: Sequence[float], n: int) -> list[float | str]:
    """A row of 1 .. n scores, finite or -inf, as JSON-ready items ("-inf" for a masked key)."""
    row = [float(score) for score in row]
    if not 1 <= len(row) <= n:
        raise ValueError(f"example {name!r} has {len(row)} scores; the values allow 1 to {n}")
    if any(math.isnan(score) or score == math.inf for score in row):
        raise ValueError(f"example {name!r} contains NaN or +inf; only -inf masks a key")
    return ["-inf" if score == NEG_INF else score for score in row]


def flash_live(
    examples: Mapping[str, Sequence[float]] | None = None,
    values: np.ndarray | None = None,
    block_size: int = 4,
) -> HTML:
    """The online-softmax explorer, starting at the first of ``examples`` (default
    :data:`EXAMPLES`) in blocks of ``block_size``; ``values`` (n, d_v), default
    :func:`example_values`, give the partial output, and n bounds a row's length."""
    values = example_values() if values is None else np.asarray(values, dtype=np.float64)
    if values.ndim != 2 or values.shape[0] < 1 or values.shape[1] < 1:
        raise ValueError(f"values must be (n, d_v) with n, d_v >= 1, got shape {values.shape}")
    n = values.shape[0]
    examples = EXAMPLES if examples is None else examples
    if not examples:
        raise ValueError("flash_live needs at least one example row")
    rows = {str(name): _row(str(name), row, n) for name, row in examples.items()}
    first = len(next(iter(rows.values())))
    if isinstance(block_size, bool) or not isinstance(block_size, int):
        raise TypeError(f"block_size must be an int, got {type(block_size).__name__}")
    if not 1 <= block_size <= first:
        raise ValueError(
            f"block_size must be between 1 and {first} (the first row), got {block_size}"
        )
    attributes = {
        "examples": _json(rows),
        "values": _json(_matrix("values", values, values.shape)),
        "block": str(block_size),
    }
    return HTML(snippet("online-softmax", attributes, script=bundle(FLASH_SCRIPTS)))
