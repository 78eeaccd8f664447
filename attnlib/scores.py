"""Score functions: how much a query matches each key.

Every score has the same call signature, ``score(queries, keys) -> scores`` with
queries ``(..., n_queries, d_q)``, keys ``(..., n_keys, d_k)`` and scores
``(..., n_queries, n_keys)``. Dot and scaled dot have no parameters; general (bilinear) and
additive (concat) learn theirs, so they are ``nn.Module``s.
"""

from __future__ import annotations

import math

import torch
from torch import nn

from attnlib._checks import check_tensor

SCORE_NAMES = ("dot", "scaled_dot", "general", "additive")


def _check_pair(queries: torch.Tensor, keys: torch.Tensor, same_width: bool) -> None:
    check_tensor("queries", queries)
    check_tensor("keys", keys)
    if same_width and queries.shape[-1] != keys.shape[-1]:
        raise ValueError(f"keys have d_k={keys.shape[-1]} but queries have d_k={queries.shape[-1]}")


def dot_score(queries: torch.Tensor, keys: torch.Tensor) -> torch.Tensor:
    """q·k for every pair: (..., n_queries, d_k), (..., n_keys, d_k) -> (..., n_queries, n_keys)."""
    _check_pair(queries, keys, same_width=True)
    return queries @ keys.transpose(-2, -1)


def scaled_dot_score(queries: torch.Tensor, keys: torch.Tensor) -> torch.Tensor:
    """q·k / √d_k: (..., n_queries, d_k), (..., n_keys, d_k) -> (..., n_queries, n_keys)."""
    return dot_score(queries, keys) / math.sqrt(queries.shape[-1])


class DotScore(nn.Module):
    """Module wrapper of :func:`dot_score` (no parameters)."""

    def forward(self, queries: torch.Tensor, keys: torch.Tensor) -> torch.Tensor:
        """(..., n_queries, d_k), (..., n_keys, d_k) -> (..., n_queries, n_keys)."""
        return dot_score(queries, keys)


class ScaledDotScore(nn.Module):
    """Module wrapper of :func:`scaled_dot_score` (no parameters)."""

    def forward(self, queries: torch.Tensor, keys: torch.Tensor) -> torch.Tensor:
        """(..., n_queries, d_k), (..., n_keys, d_k) -> (..., n_queries, n_keys)."""
        return scaled_dot_score(queries, keys)


class GeneralScore(nn.Module):
    """Luong's general (bilinear) score qᵀ W k, with W of shape (d_q, d_k)."""

    def __init__(self, d_query: int, d_key: int) -> None:
        super().__init__()
        self.d_query, self.d_key = d_query, d_key
        self.key_projection = nn.Linear(d_key, d_query, bias=False)

    def forward(self, queries: torch.Tensor, keys: torch.Tensor) -> torch.Tensor:
        """(..., n_queries, d_q), (..., n_keys, d_k) -> (..., n_queries, n_keys)."""
        _check_widths(self, queries, keys)
        return queries @ self.key_projection(keys).transpose(-2, -1)


class AdditiveScore(nn.Module):
    """Bahdanau's additive (concat) score vᵀ tanh(W_q q + W_k k)."""

    def __init__(self, d_query: int, d_key: int, d_hidden: int) -> None:
        super().__init__()
        self.d_query, self.d_key = d_query, d_key
        self.query_projection = nn.Linear(d_query, d_hidden, bias=False)
        self.key_projection = nn.Linear(d_key, d_hidden, bias=True)
        self.vector = nn.Linear(d_hidden, 1, bias=False)

    def forward(self, queries: torch.Tensor, keys: torch.Tensor) -> torch.Tensor:
        """(..., n_queries, d_q), (..., n_keys, d_k) -> (..., n_queries, n_keys)."""
        _check_widths(self, queries, keys)
        # Broadcast to (..., n_queries, n_keys, d_hidden): this is why additive scores cost
        # more memory than a matrix product.
        hidden = self.query_projection(queries).unsqueeze(-2) + self.key_projection(keys).unsqueeze(
            -3
        )
        return self.vector(torch.tanh(hidden)).squeeze(-1)


def _check_widths(module: GeneralScore | AdditiveScore, queries, keys) -> None:
    _check_pair(queries, keys, same_width=False)
    if queries.shape[-1] != module.d_query:
        raise ValueError(
            f"{type(module).__name__} expects queries with d_q={module.d_query}, "
            f"got d_q={queries.shape[-1]}"
        )
    if keys.shape[-1] != module.d_key:
        raise ValueError(
            f"{type(module).__name__} expects keys with d_k={module.d_key}, "
            f"got d_k={keys.shape[-1]}"
        )


def make_score(
    name: str, d_query: int | None = None, d_key: int | None = None, d_hidden: int | None = None
) -> nn.Module:
    """Build a score module by name: 'dot', 'scaled_dot', 'general' or 'additive'."""
    if name == "dot":
        return DotScore()
    if name == "scaled_dot":
        return ScaledDotScore()
    if name in ("general", "additive"):
        if d_query is None or d_key is None:
            raise ValueError(f"score '{name}' needs d_query and d_key")
        if name == "general":
            return GeneralScore(d_query, d_key)
        return AdditiveScore(d_query, d_key, d_hidden or d_query)
    raise ValueError(f"unknown score {name!r}; choose one of {', '.join(SCORE_NAMES)}")
