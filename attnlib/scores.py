"""Score functions: how much a query matches each key, and the one registry of them by name.

Every score has the same call signature, ``score(queries, keys) -> scores`` with
queries ``(..., n_queries, d_q)``, keys ``(..., n_keys, d_k)`` and scores
``(..., n_queries, n_keys)``. Dot and scaled dot have no parameters; general (bilinear) and
additive (Bahdanau's; Luong calls it concat) learn theirs. :data:`SCORES` names each once.

Calling a score checks its inputs. Each score module also has ``check_shapes`` (widths only)
and ``unchecked`` (the arithmetic alone), so that :func:`attnlib.attention.attend`, which has
already scanned its inputs, does not scan them again. ``unchecked`` is ``prepare_keys`` (what
depends on the keys alone, e.g. W_k k) followed by ``score_prepared``: a decoder that asks many
queries of the same keys, one step at a time, prepares them once.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from functools import cache

import torch
from torch import nn

from attnlib._checks import check_same_dtype, check_tensor

ScoreFunction = Callable[[torch.Tensor, torch.Tensor], torch.Tensor]


# Half precision overflows past 65,504 (float16) or rounds coarsely (bfloat16); a q·k product
# passes that long before softmax would mind. Their scores are formed in float32, as SDPA's
# kernels accumulate, and come back as float32: the softmax runs in float32 too.
HALF_DTYPES = (torch.float16, torch.bfloat16)


def dot_product(queries: torch.Tensor, keys: torch.Tensor) -> torch.Tensor:
    """Unchecked q·k: (..., n_queries, d_k), (..., n_keys, d_k) -> (..., n_queries, n_keys).

    Half-precision inputs are scored in float32 and give float32 scores.
    """
    if queries.dtype in HALF_DTYPES:
        queries, keys = queries.float(), keys.float()
    return queries @ keys.transpose(-2, -1)


def scaled_dot_product(queries: torch.Tensor, keys: torch.Tensor) -> torch.Tensor:
    """Unchecked q·k / √d_k: (..., n_queries, d_k), (..., n_keys, d_k) -> (..., n_q, n_keys).

    Half-precision inputs are scaled before the product, in float32, and give float32 scores.
    """
    if queries.dtype in HALF_DTYPES:
        scaled = queries.float() / math.sqrt(queries.shape[-1])
        return scaled @ keys.float().transpose(-2, -1)
    return queries @ keys.transpose(-2, -1) / math.sqrt(queries.shape[-1])


def _check_same_width(queries: torch.Tensor, keys: torch.Tensor) -> None:
    if queries.shape[-1] != keys.shape[-1]:
        raise ValueError(f"keys have d_k={keys.shape[-1]} but queries have d_k={queries.shape[-1]}")
    if queries.shape[-1] == 0:
        raise ValueError("queries and keys have d_k=0 features: a score needs at least one")


def _check_pair(queries: torch.Tensor, keys: torch.Tensor) -> None:
    check_tensor("queries", queries)
    check_tensor("keys", keys)
    check_same_dtype(queries=queries, keys=keys)


def dot_score(queries: torch.Tensor, keys: torch.Tensor) -> torch.Tensor:
    """q·k for every pair: (..., n_queries, d_k), (..., n_keys, d_k) -> (..., n_queries, n_keys)."""
    _check_pair(queries, keys)
    _check_same_width(queries, keys)
    return dot_product(queries, keys)


def scaled_dot_score(queries: torch.Tensor, keys: torch.Tensor) -> torch.Tensor:
    """q·k / √d_k: (..., n_queries, d_k), (..., n_keys, d_k) -> (..., n_queries, n_keys)."""
    _check_pair(queries, keys)
    _check_same_width(queries, keys)
    return scaled_dot_product(queries, keys)


class Score(nn.Module):
    """A score as a module: ``forward`` checks, ``check_shapes`` + ``unchecked`` for callers
    that have checked already."""

    def forward(self, queries: torch.Tensor, keys: torch.Tensor) -> torch.Tensor:
        """(..., n_queries, d_q), (..., n_keys, d_k) -> (..., n_queries, n_keys)."""
        _check_pair(queries, keys)
        self.check_shapes(queries, keys)
        return self.unchecked(queries, keys)

    def check_shapes(self, queries: torch.Tensor, keys: torch.Tensor) -> None:
        """Fail with a message naming the widths if this score cannot compare them."""
        _check_same_width(queries, keys)

    def unchecked(self, queries: torch.Tensor, keys: torch.Tensor) -> torch.Tensor:
        """The arithmetic alone: (..., n_queries, d_q), (..., n_keys, d_k) -> (..., n_q, n_k)."""
        return self.score_prepared(queries, self.prepare_keys(keys))

    def prepare_keys(self, keys: torch.Tensor) -> torch.Tensor:
        """What depends on the keys alone: (..., n_keys, d_k) -> (..., n_keys, d); here the keys."""
        return keys

    def score_prepared(self, queries: torch.Tensor, prepared: torch.Tensor) -> torch.Tensor:
        """Scores from prepared keys: (..., n_queries, d_q), (..., n_keys, d) -> (..., n_q, n_k)."""
        raise NotImplementedError


class DotScore(Score):
    """Module form of :func:`dot_score` (no parameters)."""

    def score_prepared(self, queries: torch.Tensor, prepared: torch.Tensor) -> torch.Tensor:
        """(..., n_queries, d_k), keys (..., n_keys, d_k) -> (..., n_queries, n_keys)."""
        return dot_product(queries, prepared)


class ScaledDotScore(Score):
    """Module form of :func:`scaled_dot_score` (no parameters)."""

    def score_prepared(self, queries: torch.Tensor, prepared: torch.Tensor) -> torch.Tensor:
        """(..., n_queries, d_k), keys (..., n_keys, d_k) -> (..., n_queries, n_keys)."""
        return scaled_dot_product(queries, prepared)


class _WidthsScore(Score):
    """A score with learned parameters sized for queries of width d_query, keys of d_key."""

    d_query: int
    d_key: int

    def check_shapes(self, queries: torch.Tensor, keys: torch.Tensor) -> None:
        """Fail unless queries are (..., d_query) and keys (..., d_key)."""
        if queries.shape[-1] != self.d_query:
            raise ValueError(
                f"{type(self).__name__} expects queries with d_q={self.d_query}, "
                f"got d_q={queries.shape[-1]}"
            )
        if keys.shape[-1] != self.d_key:
            raise ValueError(
                f"{type(self).__name__} expects keys with d_k={self.d_key}, "
                f"got d_k={keys.shape[-1]}"
            )


class GeneralScore(_WidthsScore):
    """Luong's general (bilinear) score qᵀ W k, with W of shape (d_q, d_k)."""

    def __init__(self, d_query: int, d_key: int) -> None:
        super().__init__()
        self.d_query, self.d_key = d_query, d_key
        self.key_projection = nn.Linear(d_key, d_query, bias=False)

    def prepare_keys(self, keys: torch.Tensor) -> torch.Tensor:
        """W k for every key: (..., n_keys, d_k) -> (..., n_keys, d_q)."""
        return self.key_projection(keys)

    def score_prepared(self, queries: torch.Tensor, prepared: torch.Tensor) -> torch.Tensor:
        """qᵀ (W k): (..., n_queries, d_q), (..., n_keys, d_q) -> (..., n_queries, n_keys)."""
        return dot_product(queries, prepared)


class AdditiveScore(_WidthsScore):
    """Bahdanau's additive score vᵀ tanh(W_q q + W_k k) (Luong's "concat")."""

    def __init__(self, d_query: int, d_key: int, d_hidden: int) -> None:
        super().__init__()
        self.d_query, self.d_key = d_query, d_key
        self.query_projection = nn.Linear(d_query, d_hidden, bias=False)
        self.key_projection = nn.Linear(d_key, d_hidden, bias=True)
        self.vector = nn.Linear(d_hidden, 1, bias=False)

    def prepare_keys(self, keys: torch.Tensor) -> torch.Tensor:
        """W_k k + b for every key: (..., n_keys, d_k) -> (..., n_keys, d_hidden)."""
        return self.key_projection(keys)

    def score_prepared(self, queries: torch.Tensor, prepared: torch.Tensor) -> torch.Tensor:
        """vᵀ tanh(W_q q + prepared): (..., n_q, d_q), (..., n_keys, d_h) -> (..., n_q, n_k)."""
        # Broadcast to (..., n_queries, n_keys, d_hidden): this is why additive scores cost
        # more memory than a matrix product.
        hidden = self.query_projection(queries).unsqueeze(-2) + prepared.unsqueeze(-3)
        return self.vector(torch.tanh(hidden)).squeeze(-1)


# The one registry: every score has one name, used by attend, MultiHeadAttention and the
# seq2seq decoders alike.
SCORES: dict[str, type[Score]] = {
    "dot": DotScore,
    "scaled_dot": ScaledDotScore,
    "general": GeneralScore,
    "additive": AdditiveScore,
}
SCORE_NAMES = tuple(SCORES)
_LEARNED = ("general", "additive")


def _check_name(name: str) -> None:
    if name not in SCORES:
        raise ValueError(f"unknown score {name!r}; choose one of {', '.join(SCORE_NAMES)}")


def make_score(
    name: str, d_query: int | None = None, d_key: int | None = None, d_hidden: int | None = None
) -> Score:
    """Build a score module by name: 'dot', 'scaled_dot', 'general' or 'additive'."""
    _check_name(name)
    if name not in _LEARNED:
        return SCORES[name]()
    if d_query is None or d_key is None:
        raise ValueError(f"score '{name}' needs d_query and d_key")
    if name == "general":
        return GeneralScore(d_query, d_key)
    return AdditiveScore(d_query, d_key, d_hidden or d_query)


@cache
def _shared(name: str) -> Score:
    # Parameter-free scores hold no state, so one instance serves every call.
    return SCORES[name]()


def resolve_score(score: str | ScoreFunction) -> ScoreFunction:
    """A callable score from a name of :data:`SCORES` without parameters, or ``score`` itself."""
    if callable(score):
        return score
    _check_name(score)
    if score in _LEARNED:
        raise ValueError(
            f"score {score!r} learns parameters: build it once with "
            f"attnlib.scores.make_score({score!r}, d_query, d_key) and pass the module"
        )
    return _shared(score)
