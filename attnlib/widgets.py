"""The Python side of the explorers: what only Python computes for them.

Every explorer runs in the browser (:mod:`attnlib.live`), so it answers in JupyterLab and in the
published book alike, with no kernel; chapters 03-05's trained translators run there too
(:mod:`attnlib.live.translator`). :func:`parse_matrix` reads the matrix text of chapter 01's
explorer, the oracle ``attention.js`` is tested against.
"""

from __future__ import annotations

import numpy as np


def parse_matrix(text: str, shape: tuple[int, int], name: str) -> np.ndarray:
    """Read a matrix written as rows separated by ';' or newlines, numbers by spaces or commas."""
    rows = [row for row in text.replace(";", "\n").splitlines() if row.strip()]
    values = []
    for row in rows:
        values.append([])
        for word in row.replace(",", " ").split():
            try:
                values[-1].append(float(word))
            except ValueError:
                raise ValueError(f"{name}: '{word}' is not a number") from None
    n_rows, n_cols = shape
    if len(values) != n_rows:
        plural = "row" if len(values) == 1 else "rows"
        raise ValueError(
            f"{name} needs {n_rows} rows of {n_cols} numbers, one row per line; "
            f"it has {len(values)} {plural}"
        )
    for i, row in enumerate(values, start=1):
        if len(row) != n_cols:
            raise ValueError(f"{name} needs {n_cols} numbers in each row; row {i} has {len(row)}")
    return np.array(values, dtype=np.float64)
