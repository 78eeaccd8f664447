"""What an attention head does, measured: previous-token, prefix-matching, copying and
first-token (attention sink) scores.

The measures of induction heads in Olsson et al. (2022), "In-context learning and induction
heads", and Elhage et al. (2021), "A mathematical framework for transformer circuits". They take
tensors, not a model: attention weights (batch, layers, heads, seq, seq), with rows the queries
and columns the keys, token ids (batch, seq), one head's weight matrices, per-token losses.

Weight matrices act on row vectors, ``x @ w_v``, as the residual stream does in this library.
From :class:`attnlib.attention.MultiHeadAttention` (nn.Linear weights are (out, in)), head h's
with head_dim hd are ``value_projection.weight[g*hd:(g+1)*hd].T`` (d_model, hd), where g is
the value head h reads (h itself unless heads share values: h // (num_heads // num_kv_heads)),
and ``output_projection.weight[:, h*hd:(h+1)*hd].T`` (hd, d_model).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from attnlib._checks import check_tensor


def _check_weights(weights: object) -> torch.Tensor:
    """Require finite attention weights (batch, layers, heads, seq, seq)."""
    check_tensor("weights", weights, min_dims=5)
    if weights.dim() != 5 or weights.shape[-1] != weights.shape[-2]:
        raise ValueError(
            f"weights must be (batch, layers, heads, seq, seq), got shape {tuple(weights.shape)}"
        )
    return weights


def previous_token_score(weights: torch.Tensor) -> torch.Tensor:
    """Mean weight from t to t - 1 over t >= 1 and the batch: (b, l, h, s, s) -> (layers, heads)."""
    _check_weights(weights)
    if weights.shape[-1] < 2:
        raise ValueError("weights need seq >= 2: position 0 has no previous token")
    to_previous = torch.diagonal(weights, offset=-1, dim1=-2, dim2=-1)  # (b, l, h, seq - 1)
    return to_previous.mean(dim=(0, 3))


def first_token_score(weights: torch.Tensor) -> torch.Tensor:
    """Mean weight from t to position 0 over t >= 1 and the batch, the attention-sink measure
    of Xiao et al. (2023): (b, l, h, s, s) -> (layers, heads). Uniform causal attention gives
    the mean of 1 / (t + 1), which :func:`uniform_first_token_score` names."""
    _check_weights(weights)
    if weights.shape[-1] < 2:
        raise ValueError("weights need seq >= 2: position 0 can only attend to itself")
    return weights[..., 1:, 0].mean(dim=(0, 3))


def uniform_first_token_score(seq: int) -> float:
    """:func:`first_token_score` of uniform causal attention over ``seq`` positions."""
    if isinstance(seq, bool) or not isinstance(seq, int) or seq < 2:
        raise ValueError(f"seq must be an int >= 2, got {seq!r}")
    return sum(1 / (t + 1) for t in range(1, seq)) / (seq - 1)


def _earlier_occurrences(ids: torch.Tensor) -> torch.Tensor:
    """(batch, seq, seq) bool, [b, t, s] True where s < t and ids[b, s] == ids[b, t]."""
    seq = ids.shape[1]
    earlier = torch.ones(seq, seq, dtype=torch.bool, device=ids.device).tril(diagonal=-1)
    return (ids[:, :, None] == ids[:, None, :]) & earlier


def _check_ids(ids: object, weights: torch.Tensor) -> torch.Tensor:
    """Require integer ids (batch, seq) matching the weights' batch and seq."""
    if not isinstance(ids, torch.Tensor):
        raise TypeError(f"ids must be a torch.Tensor, got {type(ids).__name__}")
    if ids.is_floating_point() or ids.is_complex() or ids.dtype == torch.bool:
        raise TypeError(f"ids must be integers, got dtype {ids.dtype}")
    expected = (weights.shape[0], weights.shape[-1])
    if tuple(ids.shape) != expected:
        raise ValueError(
            f"ids must be (batch, seq) = {expected} to match weights of shape "
            f"{tuple(weights.shape)}, got {tuple(ids.shape)}"
        )
    return ids


def prefix_matching_score(weights: torch.Tensor, ids: torch.Tensor) -> torch.Tensor:
    """Mean weight on the tokens after earlier copies of each query's token -> (layers, heads).

    weights (batch, layers, heads, seq, seq), ids (batch, seq). Olsson et al.'s score: for each
    query t whose token occurred earlier, at every s < t with ids[s] == ids[t], the summed
    weight on the keys s + 1; averaged over those queries only (over t and the batch).
    """
    _check_weights(weights)
    _check_ids(ids, weights)
    occurrences = _earlier_occurrences(ids)  # (batch, seq, seq) over (t, s)
    queries = occurrences.any(dim=-1)  # (batch, seq): t has an earlier copy of its token
    if not queries.any():
        raise ValueError("ids repeat no token: the prefix-matching score needs a repeated token")
    # Key s + 1 for each earlier copy s; s < t means s + 1 <= t, a key causal attention can see.
    targets = torch.zeros_like(occurrences)
    targets[..., 1:] = occurrences[..., :-1]
    mass = (weights * targets[:, None, None]).sum(dim=-1)  # (batch, layers, heads, seq)
    counted = queries[:, None, None].to(weights.dtype)
    return (mass * counted).sum(dim=(0, 3)) / counted.sum(dim=(0, 3))


def _check_ov(embedding: object, w_v: object, w_o: object, unembedding: object) -> None:
    """Require matrices whose shapes chain as embedding w_v w_o unembeddingᵀ."""
    matrices = {"embedding": embedding, "w_v": w_v, "w_o": w_o, "unembedding": unembedding}
    for name, matrix in matrices.items():
        check_tensor(name, matrix, min_dims=2)
        if matrix.dim() != 2:
            raise ValueError(f"{name} must be a matrix, got shape {tuple(matrix.shape)}")
    shapes = {name: tuple(matrix.shape) for name, matrix in matrices.items()}
    vocab, d_model = embedding.shape
    d_head = w_v.shape[1]
    expected = {
        "w_v": (d_model, d_head),
        "w_o": (d_head, d_model),
        "unembedding": (vocab, d_model),
    }
    for name, shape in expected.items():
        if shapes[name] != shape:
            raise ValueError(
                f"{name} must be {shape} to chain with the others, got {shapes[name]} "
                f"(embedding (vocab, d_model), w_v (d_model, d_head), w_o (d_head, d_model), "
                f"unembedding (vocab, d_model); shapes given: {shapes})"
            )


def ov_circuit(
    embedding: torch.Tensor, w_v: torch.Tensor, w_o: torch.Tensor, unembedding: torch.Tensor
) -> torch.Tensor:
    """One head's full OV circuit, embedding w_v w_o unembeddingᵀ: (vocab, vocab) -> logits.

    embedding (vocab, d_model), w_v (d_model, d_head), w_o (d_head, d_model), unembedding
    (vocab, d_model). Row i holds the logits the head adds when it attends to token i alone.
    """
    _check_ov(embedding, w_v, w_o, unembedding)
    return embedding @ w_v @ w_o @ unembedding.T


def copying_score(
    embedding: torch.Tensor, w_v: torch.Tensor, w_o: torch.Tensor, unembedding: torch.Tensor
) -> float:
    """Elhage et al.'s copying score Σλ / Σ|λ| over the eigenvalues λ of the (vocab, vocab) OV.

    Shapes as :func:`ov_circuit`. 1 for a head that raises the logit of the token it attends to
    (identity OV), -1 for one that lowers it, near 0 for one unrelated to copying. Σλ is real:
    complex eigenvalues of a real matrix come in conjugate pairs.
    """
    _check_ov(embedding, w_v, w_o, unembedding)
    # The OV circuit (embedding w_v)(w_o unembeddingᵀ) has rank <= d_head. Its nonzero
    # eigenvalues are those of the (d_head, d_head) product taken the other way round, so no
    # (vocab, vocab) matrix is formed; float64, as eigenvalues are sensitive to rounding.
    embedding, w_v, w_o, unembedding = (m.double() for m in (embedding, w_v, w_o, unembedding))
    small = (w_o @ unembedding.T) @ (embedding @ w_v)
    eigenvalues = torch.linalg.eigvals(small)
    magnitude = eigenvalues.abs().sum()
    if magnitude == 0:
        raise ValueError("the OV circuit is zero: a head that writes nothing has no copying score")
    return float(eigenvalues.real.sum() / magnitude)


@dataclass(frozen=True)
class InContextLoss:
    """Mean loss on the repeated positions and on the others; ``gain`` is other - repeated."""

    repeated: float
    other: float

    @property
    def gain(self) -> float:
        return self.other - self.repeated


def in_context_gain(losses: torch.Tensor, repeat_mask: torch.Tensor) -> InContextLoss:
    """Mean of per-token losses (batch, seq) where repeat_mask (batch, seq) is True and False.

    losses[:, t] is the loss of the prediction made at position t. For losses of
    logits[:, :-1] against ids[:, 1:], pass repeat_mask[:, :-1].
    """
    check_tensor("losses", losses, min_dims=2)
    if not isinstance(repeat_mask, torch.Tensor) or repeat_mask.dtype != torch.bool:
        described = getattr(repeat_mask, "dtype", type(repeat_mask).__name__)
        raise TypeError(f"repeat_mask must be a boolean tensor, got {described}")
    if losses.dim() != 2 or losses.shape != repeat_mask.shape:
        raise ValueError(
            f"losses and repeat_mask must both be (batch, seq), got {tuple(losses.shape)} and "
            f"{tuple(repeat_mask.shape)}; for losses of logits[:, :-1] against ids[:, 1:], "
            "pass repeat_mask[:, :-1]"
        )
    if repeat_mask.all() or not repeat_mask.any():
        raise ValueError("repeat_mask must hold both repeated (True) and other (False) positions")
    return InContextLoss(
        repeated=float(losses[repeat_mask].mean()), other=float(losses[~repeat_mask].mean())
    )
