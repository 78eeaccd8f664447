"""Chapter 19's explorer: key–value pairs written into a cache that grows and into states that
do not, and what each still recalls.

:func:`recall_live` returns the HTML of the explorer: a root element holding the keys (pairs ×
the largest key size), a table of value vectors, each pair's value id, the cache's sharpness and
the key sizes offered in ``data-*`` attributes, then an inline script with ``attention.js``,
``explorers.js`` (the DOM helpers) and ``recall.js``, whose arithmetic equals attnlib's own
steps (softmax attention, gated linear attention with every gate at 1, the delta rule), checked
number for number by ``tests/test_live_recall.py``. It needs no kernel, so it works in the
published book.
"""

from __future__ import annotations

import numpy as np
from IPython.display import HTML

from attnlib._checks import check_count, check_int, check_number
from attnlib.live import RECALL_SCRIPTS, _json, bundle, snippet


def example_pairs(
    num_pairs: int = 24, max_dim: int = 16, seed: int = 0
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Keys (num_pairs, max_dim) and a table of value vectors (num_pairs, max_dim), normal with
    three decimals, and each pair's value id (num_pairs,), a shuffle of 0 .. num_pairs - 1:
    where the explorer starts."""
    rng = np.random.default_rng(check_int("seed", seed))
    shape = (check_count("num_pairs", num_pairs), check_count("max_dim", max_dim))
    keys, table = np.round(rng.normal(size=shape), 3), np.round(rng.normal(size=shape), 3)
    return keys, table, rng.permutation(num_pairs)


def _rows(name: str, value: object) -> np.ndarray:
    """A finite float matrix (rows, d) with rows >= 1; the error names the shape."""
    array = np.asarray(value, dtype=np.float64)
    if array.ndim != 2 or array.shape[0] == 0:
        raise ValueError(f"{name} must be (rows, d) with rows >= 1, got shape {array.shape}")
    if not np.isfinite(array).all():
        raise ValueError(f"{name} must be finite, got {int((~np.isfinite(array)).sum())} bad")
    return array


def recall_live(
    keys: np.ndarray | None = None,
    table: np.ndarray | None = None,
    values: np.ndarray | None = None,
    sharpness: float = 16.0,
    dims: tuple[int, ...] = (4, 8, 16),
) -> HTML:
    """The recall explorer for keys (pairs, d_max), value vectors (value ids, d_max) and each
    pair's value id (pairs,) (default :func:`example_pairs`); the cache scores a query by
    ``sharpness`` · k·q over unit keys; the key size d is chosen among ``dims``: the first d
    entries of every vector, scaled to length 1."""
    start = example_pairs()
    keys = _rows("keys", start[0] if keys is None else keys)
    table = _rows("table", start[1] if table is None else table)
    values = np.asarray(start[2] if values is None else values)
    if table.shape[1] != keys.shape[1]:
        raise ValueError(f"table has vectors of {table.shape[1]} but keys of {keys.shape[1]}")
    if values.shape != (keys.shape[0],) or not np.issubdtype(values.dtype, np.integer):
        raise ValueError(
            f"values must be {keys.shape[0]} integer value ids, one a key, got shape "
            f"{values.shape} of {values.dtype}"
        )
    if values.min() < 0 or values.max() >= table.shape[0]:
        raise ValueError(
            f"value ids must be rows of the table, 0..{table.shape[0] - 1}, got "
            f"{values.min()}..{values.max()}"
        )
    if not check_number("sharpness", sharpness) > 0:
        raise ValueError(f"sharpness must be positive, got {sharpness}")
    if not dims or any(check_count("dim", d) > keys.shape[1] for d in dims):
        raise ValueError(f"dims must be key sizes in 1..{keys.shape[1]}, got {dims}")
    attributes = {
        "keys": _json(keys.tolist()),
        "table": _json(table.tolist()),
        "values": _json([int(v) for v in values]),
        "sharpness": f"{float(sharpness):g}",
        "dims": _json([int(d) for d in dims]),
    }
    return HTML(snippet("recall", attributes, script=bundle(RECALL_SCRIPTS)))
