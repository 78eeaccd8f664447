"""The NumPy oracle: softmax, dot-product attention and the worked example of chapter 01.

Everything here is plain NumPy in float64, written to be read; the torch code in the rest of
``attnlib`` is tested against it.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

# The worked example: three inputs of dimension 4 and 4x3 weights for keys, queries, values.
WORKED_INPUTS = np.array([[1, 0, 1, 0], [0, 2, 0, 2], [1, 1, 1, 1]], dtype=np.float64)
WORKED_KEY_WEIGHTS = np.array([[0, 0, 1], [1, 1, 0], [0, 1, 0], [1, 1, 0]], dtype=np.float64)
WORKED_QUERY_WEIGHTS = np.array([[1, 0, 1], [1, 0, 0], [0, 0, 1], [0, 1, 1]], dtype=np.float64)
WORKED_VALUE_WEIGHTS = np.array([[0, 2, 0], [0, 3, 0], [1, 0, 3], [1, 1, 0]], dtype=np.float64)


def softmax(scores: np.ndarray, axis: int = -1, temperature: float = 1.0) -> np.ndarray:
    """Numerically stable softmax of ``scores / temperature`` along ``axis`` (same shape)."""
    scores = np.asarray(scores, dtype=np.float64)
    if not temperature > 0:
        raise ValueError(f"temperature must be positive, got {temperature}")
    shifted = scores / temperature
    # Subtracting the row maximum changes nothing mathematically and keeps exp() from overflowing.
    # For scores near ±1e308 the difference itself can overflow to -inf, whose exp is the right 0.
    with np.errstate(over="ignore"):
        shifted = shifted - shifted.max(axis=axis, keepdims=True)
    exponentials = np.exp(shifted)
    return exponentials / exponentials.sum(axis=axis, keepdims=True)


def dot_product_attention(
    queries: np.ndarray,
    keys: np.ndarray,
    values: np.ndarray,
    scale: bool = False,
    temperature: float = 1.0,
) -> tuple[np.ndarray, np.ndarray]:
    """Attention of (n, d_k) queries over (m, d_k) keys and (m, d_v) values: (n, d_v), (n, m)."""
    queries, keys, values = (np.asarray(a, dtype=np.float64) for a in (queries, keys, values))
    if queries.shape[-1] != keys.shape[-1]:
        raise ValueError(f"keys have d_k={keys.shape[-1]} but queries have d_k={queries.shape[-1]}")
    if keys.shape[-2] != values.shape[-2]:
        raise ValueError(f"{keys.shape[-2]} keys but {values.shape[-2]} values")
    scores = queries @ np.swapaxes(keys, -1, -2)
    if scale:
        scores = scores / np.sqrt(queries.shape[-1])
    weights = softmax(scores, axis=-1, temperature=temperature)
    return weights @ values, weights


def scaled_dot_product_attention(
    queries: np.ndarray, keys: np.ndarray, values: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """softmax(Q Kᵀ / √d_k) V for (n, d_k), (m, d_k), (m, d_v): output (n, d_v), weights (n, m)."""
    return dot_product_attention(queries, keys, values, scale=True)


@dataclass(frozen=True)
class WorkedExample:
    """Every intermediate of the 3-input example; rows are inputs 1, 2, 3."""

    inputs: np.ndarray  # (3, 4)
    keys: np.ndarray  # (3, 3)
    queries: np.ndarray  # (3, 3)
    values: np.ndarray  # (3, 3)
    scores: np.ndarray  # (3 queries, 3 keys)
    weights: np.ndarray  # (3 queries, 3 keys)
    outputs: np.ndarray  # (3, 3)


def worked_example(
    inputs: np.ndarray | None = None,
    key_weights: np.ndarray | None = None,
    query_weights: np.ndarray | None = None,
    value_weights: np.ndarray | None = None,
    scale: bool = False,
    temperature: float = 1.0,
) -> WorkedExample:
    """Self-attention of the worked example (or of edited inputs and weights), step by step."""
    inputs = WORKED_INPUTS if inputs is None else np.asarray(inputs, dtype=np.float64)
    key_weights = WORKED_KEY_WEIGHTS if key_weights is None else np.asarray(key_weights, float)
    query_weights = (
        WORKED_QUERY_WEIGHTS if query_weights is None else np.asarray(query_weights, float)
    )
    value_weights = (
        WORKED_VALUE_WEIGHTS if value_weights is None else np.asarray(value_weights, float)
    )
    keys = inputs @ key_weights
    queries = inputs @ query_weights
    values = inputs @ value_weights
    scores = queries @ keys.T
    if scale:
        scores = scores / np.sqrt(keys.shape[-1])
    weights = softmax(scores, axis=-1, temperature=temperature)
    return WorkedExample(inputs, keys, queries, values, scores, weights, weights @ values)
