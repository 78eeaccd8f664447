"""Chapter 16's explorer: rotary positions, one pair of dimensions at a time.

:func:`rotary_live` returns the HTML of the explorer: a root element holding a query and a key
vector, the base and the slider ranges in ``data-*`` attributes, then an inline script with
``attention.js``, ``explorers.js`` (the DOM helpers) and ``rotary.js``, whose arithmetic is a
port of :func:`attnlib.positions.apply_rotary`, checked number for number against a NumPy
oracle by ``tests/test_live_rotary.py``. It needs no kernel, so it works in the published book.
"""

from __future__ import annotations

import numpy as np
from IPython.display import HTML

from attnlib._checks import check_count, check_number
from attnlib.live import ROTARY_SCRIPTS, _json, bundle, snippet


def example_vectors(dim: int = 8, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """A fixed query and key (dim,) with two decimals: where the explorer starts."""
    rng = np.random.default_rng(seed)
    return np.round(rng.normal(size=dim), 2), np.round(rng.normal(size=dim), 2)


def _vector(name: str, value: object) -> np.ndarray:
    """A finite 1-D float vector of an even length; the error names the shape."""
    vector = np.asarray(value, dtype=np.float64)
    if vector.ndim != 1 or vector.size < 2 or vector.size % 2:
        raise ValueError(
            f"{name} must be a vector of an even length >= 2 (pairs), got shape {vector.shape}"
        )
    if not np.isfinite(vector).all():
        raise ValueError(f"{name} must be finite, got {int((~np.isfinite(vector)).sum())} bad")
    return vector


def rotary_live(
    query: np.ndarray | None = None,
    key: np.ndarray | None = None,
    base: float = 10000.0,
    max_position: int = 64,
    max_offset: int = 16,
) -> HTML:
    """The rotary explorer for a query and a key (d,), d even (default :func:`example_vectors`,
    d = 8): key position 0 .. ``max_position``, offset -``max_offset`` .. ``max_offset``, a
    shift of both positions 0 .. ``max_position``, and a choice of base starting at ``base``."""
    start_query, start_key = example_vectors()
    query = _vector("query", start_query if query is None else query)
    key = _vector("key", start_key if key is None else key)
    if query.shape != key.shape:
        raise ValueError(f"query has shape {query.shape} but key has shape {key.shape}")
    if not check_number("base", base) > 0:
        raise ValueError(f"base must be positive (10000 in RoFormer), got {base}")
    attributes = {
        "query": _json(query.tolist()),
        "key": _json(key.tolist()),
        "base": f"{float(base):g}",
        "max-position": str(check_count("max_position", max_position)),
        "max-offset": str(check_count("max_offset", max_offset)),
    }
    return HTML(snippet("rotary", attributes, script=bundle(ROTARY_SCRIPTS)))
