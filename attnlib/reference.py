"""The NumPy oracle: softmax, attention (with a sink too), the worked example, heads, positions,
masks, the online softmax, chapter 12's learning-rate schedules and label smoothing, and
chapter 19's associative memories (a cache against a fixed state).

Everything here is plain NumPy in float64, written to be read; the torch code in the rest of
``attnlib`` and the browser explorers of :mod:`attnlib.live` are tested against it. Masks are
boolean and True means "may attend", as everywhere in ``attnlib``.
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


def entropy(weights: np.ndarray, axis: int = -1) -> np.ndarray:
    """Entropy in nats of each distribution along ``axis`` (0 log 0 counts as 0)."""
    weights = np.asarray(weights, dtype=np.float64)
    logs = np.log(np.maximum(weights, 1e-300))
    return -(weights * logs).sum(axis=axis)


# --- multi-head attention (chapter 07) ---


def split_heads(x: np.ndarray, num_heads: int) -> np.ndarray:
    """(..., seq, d_model) -> (..., heads, seq, d_head); head h is columns h*d_head:(h+1)*d_head."""
    x = np.asarray(x, dtype=np.float64)
    *batch, seq, d_model = x.shape
    if num_heads < 1 or d_model % num_heads != 0:
        raise ValueError(f"num_heads={num_heads} does not divide d_model={d_model}")
    d_head = d_model // num_heads
    return np.swapaxes(x.reshape(*batch, seq, num_heads, d_head), -3, -2)


def merge_heads(x: np.ndarray) -> np.ndarray:
    """(..., heads, seq, d_head) -> (..., seq, heads * d_head), the inverse of split_heads."""
    x = np.asarray(x, dtype=np.float64)
    *batch, heads, seq, d_head = x.shape
    return np.swapaxes(x, -3, -2).reshape(*batch, seq, heads * d_head)


@dataclass(frozen=True)
class MultiHead:
    """Every intermediate of multi-head self-attention on n tokens, before the output projection."""

    queries: np.ndarray  # (heads, n, d_head)
    keys: np.ndarray  # (heads, n, d_head)
    values: np.ndarray  # (heads, n, d_head)
    scores: np.ndarray  # (heads, n queries, n keys), already divided by the scale
    weights: np.ndarray  # (heads, n queries, n keys)
    outputs: np.ndarray  # (n, d_model): the heads' outputs side by side


def multi_head_attention(
    x: np.ndarray,
    w_q: np.ndarray,
    w_k: np.ndarray,
    w_v: np.ndarray,
    num_heads: int,
    scale_by: str = "head",
) -> MultiHead:
    """Self-attention of (n, d_model) inputs in heads: Q = X W_Q etc., each head
    softmax(Q_h K_hᵀ / √d_head) V_h; ``scale_by="model"`` divides by √d_model instead (the bug).
    """
    x = np.asarray(x, dtype=np.float64)
    if scale_by not in ("head", "model"):
        raise ValueError(f"scale_by must be 'head' or 'model', got {scale_by!r}")
    queries, keys, values = (
        split_heads(x @ np.asarray(w, float), num_heads) for w in (w_q, w_k, w_v)
    )
    d_model = queries.shape[-1] * num_heads
    scale = np.sqrt(queries.shape[-1] if scale_by == "head" else d_model)
    scores = queries @ np.swapaxes(keys, -1, -2) / scale  # (heads, n, n)
    weights = softmax(scores, axis=-1)
    return MultiHead(queries, keys, values, scores, weights, merge_heads(weights @ values))


def multi_head_weights(
    x: np.ndarray,
    w_q: np.ndarray,
    w_k: np.ndarray,
    w_v: np.ndarray,
    num_heads: int,
    scale_by: str = "head",
) -> np.ndarray:
    """The per-head attention weights of :func:`multi_head_attention`: (heads, n, n)."""
    return multi_head_attention(x, w_q, w_k, w_v, num_heads, scale_by).weights


# --- sinusoidal positions (chapter 08) ---


def frequencies(d_model: int, base: float = 10000.0) -> np.ndarray:
    """ω_i = 1 / base^(2i/d_model) for i = 0 .. ceil(d_model/2) - 1."""
    return base ** (-np.arange(0, d_model, 2, dtype=np.float64) / d_model)


def positional_encoding(positions: np.ndarray, d_model: int, base: float = 10000.0) -> np.ndarray:
    """PE(pos, 2i) = sin(pos ω_i), PE(pos, 2i+1) = cos(pos ω_i) at any positions: (..., d_model).

    With an odd width the last column is a sine without its cosine.
    """
    if d_model < 1:
        raise ValueError(f"d_model must be at least 1, got {d_model}")
    angles = np.asarray(positions, dtype=np.float64)[..., None] * frequencies(d_model, base)
    table = np.zeros((*angles.shape[:-1], d_model))
    table[..., 0::2] = np.sin(angles)
    table[..., 1::2] = np.cos(angles[..., : d_model // 2])
    return table


def sinusoidal_encoding(length: int, d_model: int, base: float = 10000.0) -> np.ndarray:
    """The table of positions 0 .. length - 1: (length, d_model)."""
    if length < 0:
        raise ValueError(f"length must be non-negative, got {length}")
    return positional_encoding(np.arange(length), d_model, base)


def offset_rotation(offset: float, d_model: int, base: float = 10000.0) -> np.ndarray:
    """M(k) with PE(pos + k)[:2m] = M(k) @ PE(pos)[:2m], m = d_model // 2: (2m, 2m).

    Block diagonal; block i is [[cos kω_i, sin kω_i], [-sin kω_i, cos kω_i]], whatever pos is.
    """
    pairs = d_model // 2
    rotation = np.zeros((2 * pairs, 2 * pairs))
    for i, w in enumerate(frequencies(d_model, base)[:pairs]):
        c, s = np.cos(offset * w), np.sin(offset * w)
        rotation[2 * i : 2 * i + 2, 2 * i : 2 * i + 2] = [[c, s], [-s, c]]
    return rotation


def rotation_error(pos: float, offset: float, d_model: int, base: float = 10000.0) -> float:
    """max |PE(pos + k) - M(k) PE(pos)| over the paired columns (round-off only: ~1e-15)."""
    pairs = 2 * (d_model // 2)
    here, there = positional_encoding(np.array([pos, pos + offset]), d_model, base)[:, :pairs]
    return float(np.abs(there - offset_rotation(offset, d_model, base) @ here).max(initial=0.0))


def encoding_similarity(
    pos: float, deltas: np.ndarray, d_model: int, base: float = 10000.0
) -> np.ndarray:
    """PE(pos) · PE(pos + Δ) for each Δ; with an even width it is Σ_i cos(Δ ω_i), free of pos."""
    deltas = np.asarray(deltas, dtype=np.float64)
    here = positional_encoding(pos, d_model, base)
    return positional_encoding(pos + deltas, d_model, base) @ here


# --- masks (chapter 09) ---

MASK_KINDS = ("none", "padding", "causal", "padding+causal")


def padding_mask(lengths: np.ndarray, max_len: int | None = None) -> np.ndarray:
    """True at real keys: lengths (batch,) -> (batch, 1, max_len), as attnlib.masks.padding_mask."""
    lengths = np.asarray(lengths, dtype=np.int64)
    if max_len is None:
        max_len = int(lengths.max(initial=0))
    return (np.arange(max_len)[None, :] < lengths[:, None])[:, None, :]


def causal_mask(n_queries: int, n_keys: int | None = None) -> np.ndarray:
    """Query j sees keys up to its own position: (n_queries, n_keys), lower triangular.

    With more keys than queries, the queries are the last n_queries positions.
    """
    n_keys = n_queries if n_keys is None else n_keys
    return np.tril(np.ones((n_queries, n_keys), dtype=bool), k=n_keys - n_queries)


def attention_mask(
    kind: str, n: int, length: int | None = None, masked_row: int | None = None
) -> np.ndarray:
    """The (n, n) mask of one sequence: ``kind`` from MASK_KINDS, keys at ``length`` and beyond
    are padding, and query ``masked_row`` (if given) may attend to nothing.
    """
    if kind not in MASK_KINDS:
        raise ValueError(f"kind must be one of {MASK_KINDS}, got {kind!r}")
    length = n if length is None else length
    mask = np.ones((n, n), dtype=bool)
    if "padding" in kind:
        mask &= padding_mask([length], n)[0]
    if "causal" in kind:
        mask &= causal_mask(n)
    if masked_row is not None:
        mask[masked_row] = False
    return mask


def masked_softmax(
    scores: np.ndarray, mask: np.ndarray | None = None, fill: float = -np.inf, axis: int = -1
) -> np.ndarray:
    """Softmax over the keys the mask allows, masked scores replaced by ``fill`` first.

    ``fill=-inf`` is the library's convention: masked keys get exactly 0 and a fully masked row
    gets all zeros, never NaN. A finite fill is what ``softmax(scores.masked_fill(~mask, fill))``
    gives: -1e9 equals -inf wherever a row has a real key (and spreads a fully masked row evenly
    over its masked keys); 0 is a wrong fill that leaves weight on masked keys.
    """
    scores = np.asarray(scores, dtype=np.float64)
    if mask is None:
        return softmax(scores, axis=axis)
    mask = np.broadcast_to(np.asarray(mask, dtype=bool), scores.shape)
    if np.isfinite(fill):
        return softmax(np.where(mask, scores, fill), axis=axis)
    if fill != -np.inf:
        raise ValueError(f"fill must be finite or -inf, got {fill}")
    row_has_key = mask.any(axis=axis, keepdims=True)
    safe = np.where(mask, scores, -np.inf)
    safe = np.where(row_has_key, safe, 0.0)  # a row of -inf has no maximum to subtract
    return np.where(mask & row_has_key, softmax(safe, axis=axis), 0.0)


# --- the online softmax (chapter 15) ---


@dataclass(frozen=True)
class OnlineSoftmaxStep:
    """The state of one row once its keys 0 .. end - 1 are folded in, block by block."""

    end: int
    running_max: float  # -inf while every key seen is masked
    running_sum: float  # Σ exp(s_j - running_max) over the keys seen
    rescale: float  # exp(previous max - running_max): the factor the old sum was scaled by
    weights: np.ndarray  # (end,): the softmax of the keys seen so far
    output: np.ndarray | None  # (d_v,): weights @ values[:end], or None without values


def sink_attention(
    queries: np.ndarray,
    keys: np.ndarray,
    values: np.ndarray,
    sink_logit: float,
    mask: np.ndarray | None = None,
) -> tuple[np.ndarray, np.ndarray]:
    """One head with a sink: queries (n_q, d), keys (n_k, d), values (n_k, d_v), a sink logit
    -> output (n_q, d_v), weights (n_q, n_k). Each row's weights are exp(score) over the sum of
    the allowed keys' exp(score) and exp(sink_logit): the sink takes the rest and adds nothing."""
    queries, keys, values = (np.asarray(a, dtype=np.float64) for a in (queries, keys, values))
    scores = queries @ keys.T / np.sqrt(queries.shape[-1])
    allowed = np.ones(scores.shape, dtype=bool) if mask is None else np.asarray(mask, dtype=bool)
    top = np.maximum(np.where(allowed, scores, -np.inf).max(axis=-1, keepdims=True), sink_logit)
    exponentials = np.where(allowed, np.exp(scores - top), 0.0)
    denominator = exponentials.sum(axis=-1, keepdims=True) + np.exp(sink_logit - top)
    weights = exponentials / denominator
    return weights @ values, weights


def unit_rows(rows: np.ndarray, d: int) -> np.ndarray:
    """The first ``d`` entries of every row, scaled to length 1: (rows, d)."""
    part = np.asarray(rows, dtype=np.float64)[:, :d]
    return part / np.linalg.norm(part, axis=1, keepdims=True)


def associative_memories(
    keys: np.ndarray, table: np.ndarray, values: np.ndarray, written: int
) -> dict[str, np.ndarray]:
    """The two fixed states after writing pairs 0 .. written - 1 (key k_i, value table[values[i]]),
    each (d, d_v), key features down: linear attention's M = Σ k vᵀ, and the delta rule's at
    strength 1, M += k (v − Mᵀ k)ᵀ, which first takes out what M says for the key."""
    keys, table = np.asarray(keys, dtype=np.float64), np.asarray(table, dtype=np.float64)
    linear = np.zeros((keys.shape[1], table.shape[1]))
    delta = np.zeros_like(linear)
    for key, value in zip(keys[:written], table[np.asarray(values)[:written]], strict=True):
        linear += np.outer(key, value)
        delta += np.outer(key, value - key @ delta)
    return {"linear": linear, "delta": delta}


def associative_recall(
    keys: np.ndarray, table: np.ndarray, values: np.ndarray, written: int, sharpness: float
) -> dict[str, list[int]]:
    """For every key written so far, the value id each memory recalls: the table row with the
    largest dot product with its read. The ``"cache"`` keeps every pair and reads
    softmax(sharpness K q) V; ``"linear"`` and ``"delta"`` read Mᵀ q from
    :func:`associative_memories`."""
    keys, table = np.asarray(keys, dtype=np.float64), np.asarray(table, dtype=np.float64)
    held, queries = table[np.asarray(values)[:written]], keys[:written]
    reads = {"cache": softmax(sharpness * queries @ keys[:written].T) @ held}
    for name, memory in associative_memories(keys, table, values, written).items():
        reads[name] = queries @ memory
    return {name: (read @ table.T).argmax(axis=1).tolist() for name, read in reads.items()}


def online_softmax_steps(
    row: np.ndarray, block_size: int, values: np.ndarray | None = None
) -> list[OnlineSoftmaxStep]:
    """Softmax of a row (n,) a block of keys at a time, and with (n, d_v) values the output.

    The last step's weights are ``softmax(row)`` (all zeros for a row of -inf, never NaN).
    """
    row = np.asarray(row, dtype=np.float64)
    if row.ndim != 1:
        raise ValueError(f"row must be 1-D (n,), got shape {row.shape}")
    if np.isnan(row).any() or (row == np.inf).any():
        raise ValueError("row contains NaN or +inf; only -inf (a masked key) is allowed")
    if (
        isinstance(block_size, bool)
        or not isinstance(block_size, (int, np.integer))
        or block_size < 1
    ):
        raise ValueError(f"block_size must be a positive int, got {block_size!r}")
    if values is not None:
        values = np.asarray(values, dtype=np.float64)
        if values.ndim != 2 or len(values) != len(row):
            raise ValueError(f"values must be (n, d_v) with n={len(row)}, got {values.shape}")
    running_max, running_sum, total = -np.inf, 0.0, 0.0  # total: Σ exp(s_j - max) v_j
    steps = []
    for start in range(0, len(row), block_size):
        end = min(start + block_size, len(row))
        new_max = max(running_max, row[start:end].max())
        shift = 0.0 if new_max == -np.inf else new_max  # exp(-inf - 0) = 0, not NaN
        rescale = float(np.exp(running_max - shift))
        exps = np.exp(row[start:end] - shift)
        running_max, running_sum = new_max, running_sum * rescale + exps.sum()
        norm = running_sum if running_sum > 0 else 1.0
        output = None
        if values is not None:
            total = total * rescale + exps @ values[start:end]
            output = total / norm
        weights = np.exp(row[:end] - shift) / norm
        steps.append(OnlineSoftmaxStep(end, running_max, running_sum, rescale, weights, output))
    return steps


# --- learning-rate schedules and label smoothing (chapter 12) ---

# A step whose value is within this relative distance of the largest one counts as the peak:
# a warm-up ends at exactly 1 and the decay's first value can come out an ulp above it.
PEAK_TOLERANCE = 1e-12


def _steps(steps: np.ndarray) -> np.ndarray:
    """Steps t = 0, 1, ... as float64, counted as ``LambdaLR`` counts them (and attnlib)."""
    steps = np.asarray(steps, dtype=np.float64)
    if (steps < 0).any() or (steps != np.floor(steps)).any():
        raise ValueError("steps must be integers >= 0 (t = s - 1 for optimizer step s)")
    return steps


def noam_rates(steps: np.ndarray, d_model: int, warmup: int) -> np.ndarray:
    """d_model^-0.5 * min(s^-0.5, s * warmup^-1.5) with s = t + 1: the learning rate itself."""
    if d_model < 1 or warmup < 1:
        raise ValueError(f"d_model and warmup must be >= 1, got {d_model} and {warmup}")
    s = _steps(steps) + 1
    return d_model**-0.5 * np.minimum(s**-0.5, s * warmup**-1.5)


def cosine_multipliers(
    steps: np.ndarray, total_steps: int, warmup: int = 0, final: float = 0.0
) -> np.ndarray:
    """(t + 1) / warmup for t < warmup, then final + (1 - final) * (1 + cos(pi * progress)) / 2,
    progress = min(1, (t - warmup) / (total_steps - warmup)): a multiplier of the base rate."""
    if not 0 <= warmup < total_steps or not 0 <= final <= 1:
        raise ValueError(
            f"need 0 <= warmup < total_steps and final in [0, 1], got {warmup}, "
            f"{total_steps}, {final}"
        )
    t = _steps(steps)
    progress = np.minimum(1.0, np.maximum(t - warmup, 0) / (total_steps - warmup))
    decay = final + (1 - final) * 0.5 * (1 + np.cos(np.pi * progress))
    return np.where(t < warmup, (t + 1) / max(warmup, 1), decay)


def linear_multipliers(
    steps: np.ndarray, warmup: int, total_steps: int, final: float = 0.0
) -> np.ndarray:
    """(t + 1) / warmup for t < warmup, then 1 - (1 - final) * min(1, (t + 1 - warmup) /
    (total_steps - warmup)): up to 1 in ``warmup`` steps, down to ``final`` at ``total_steps``."""
    if not 1 <= warmup < total_steps or not 0 <= final <= 1:
        raise ValueError(
            f"need 1 <= warmup < total_steps and final in [0, 1], got {warmup}, "
            f"{total_steps}, {final}"
        )
    t = _steps(steps)
    progress = np.minimum(1.0, np.maximum(t + 1 - warmup, 0) / (total_steps - warmup))
    return np.where(t < warmup, (t + 1) / warmup, 1 - (1 - final) * progress)


def first_peak(values: np.ndarray) -> tuple[int, float]:
    """The first index whose value is the largest (to :data:`PEAK_TOLERANCE`), and that value."""
    values = np.asarray(values, dtype=np.float64)
    if values.ndim != 1 or values.size == 0:
        raise ValueError(f"values must be a non-empty 1-D array, got shape {values.shape}")
    index = int(np.flatnonzero(values >= values.max() * (1 - PEAK_TOLERANCE))[0])
    return index, float(values[index])


def smoothed_target(num_classes: int, epsilon: float, label: int = 0) -> np.ndarray:
    """q' = (1 - epsilon) one-hot(label) + epsilon / K, (K,): PyTorch's ``label_smoothing``."""
    if num_classes < 2 or not 0 <= epsilon <= 1 or not 0 <= label < num_classes:
        raise ValueError(
            f"need K >= 2, epsilon in [0, 1] and 0 <= label < K, got {num_classes}, "
            f"{epsilon}, {label}"
        )
    target = np.full(num_classes, epsilon / num_classes)
    target[label] += 1 - epsilon
    return target


def smoothing_floor(num_classes: int, epsilon: float) -> float:
    """The smallest cross-entropy against q': its entropy H(q') in nats (0 without smoothing)."""
    return float(entropy(smoothed_target(num_classes, epsilon)))


def gap_logits(num_classes: int, gap: float, label: int = 0) -> np.ndarray:
    """Logits (K,) with the label's ``gap`` above every other class (all others at 0)."""
    logits = np.zeros(num_classes)
    logits[label] = gap
    return logits


def cross_entropy(logits: np.ndarray, label: int, epsilon: float = 0.0) -> float:
    """-sum_k q'(k) log softmax(logits)(k) for one example, with q' smoothed by ``epsilon``."""
    logits = np.asarray(logits, dtype=np.float64)
    shifted = logits - logits.max()
    log_p = shifted - np.log(np.exp(shifted).sum())
    return float(-(smoothed_target(len(logits), epsilon, label) * log_p).sum())


def best_logit_gap(num_classes: int, epsilon: float) -> float:
    """The gap at which softmax equals q': ln(q'(label) / q'(other)); inf without smoothing."""
    target = smoothed_target(num_classes, epsilon)
    with np.errstate(divide="ignore"):
        return float(np.log(target[0]) - np.log(target[1]))


# --- queries, keys and values of a sentence (chapter 06) ---


@dataclass(frozen=True)
class SentenceAttention:
    """One self-attention layer on a sentence, every step; rows follow the order it was given."""

    inputs: np.ndarray  # (n, d_model): the token vectors in that order, positions added if asked
    queries: np.ndarray  # (n, d_k)
    keys: np.ndarray  # (n, d_k)
    values: np.ndarray  # (n, d_v)
    scores: np.ndarray  # (n queries, n keys): q_i · k_j / √d_k
    weights: np.ndarray  # (n queries, n keys)
    outputs: np.ndarray  # (n, d_v)


def _order(order: np.ndarray | None, n: int) -> np.ndarray:
    """``order`` as an index array, checked to be a permutation of 0 .. n - 1 (None: as given)."""
    if order is None:
        return np.arange(n)
    order = np.asarray(order)
    if order.shape != (n,) or sorted(order.tolist()) != list(range(n)):
        raise ValueError(f"order must be a permutation of 0 .. {n - 1}, got {order.tolist()}")
    return order


def sentence_attention(
    x: np.ndarray,
    w_q: np.ndarray,
    w_k: np.ndarray,
    w_v: np.ndarray,
    strengths: np.ndarray | None = None,
    order: np.ndarray | None = None,
    positions: bool = False,
) -> SentenceAttention:
    """Self-attention of the words ``x`` (n, d_model) listed in ``order`` (row j is word
    order[j]), with column c of W_Q multiplied by ``strengths[c]`` and, if ``positions``, the
    sinusoidal table added after the reordering (position j goes with the word standing there)."""
    x, w_q, w_k, w_v = (np.asarray(a, dtype=np.float64) for a in (x, w_q, w_k, w_v))
    if x.ndim != 2 or w_q.shape != w_k.shape or len({x.shape[1], w_q.shape[0], w_v.shape[0]}) > 1:
        raise ValueError(
            f"x {x.shape}, W_Q {w_q.shape}, W_K {w_k.shape}, W_V {w_v.shape} do not fit "
            "(n, d_model), (d_model, d_k), (d_model, d_k), (d_model, d_v)"
        )
    strengths = np.ones(w_q.shape[1]) if strengths is None else np.asarray(strengths, float)
    if strengths.shape != (w_q.shape[1],):
        raise ValueError(f"strengths must have d_k={w_q.shape[1]} entries, got {strengths.shape}")
    inputs = x[_order(order, x.shape[0])]
    if positions:
        inputs = inputs + sinusoidal_encoding(*inputs.shape)
    queries = inputs @ (w_q * strengths)  # scaling column c of W_Q scales query dimension c
    keys, values = inputs @ w_k, inputs @ w_v
    outputs, weights = scaled_dot_product_attention(queries, keys, values)
    scores = queries @ keys.T / np.sqrt(keys.shape[-1])
    return SentenceAttention(inputs, queries, keys, values, scores, weights, outputs)


def permutation_shift(
    x: np.ndarray,
    w_q: np.ndarray,
    w_k: np.ndarray,
    w_v: np.ndarray,
    order: np.ndarray,
    strengths: np.ndarray | None = None,
    positions: bool = False,
) -> tuple[float, float]:
    """How far SA(PX) is from P SA(X), and weights(PX) from P weights(X) Pᵀ (largest entry):
    rounding only without positions, since self-attention is permutation-equivariant."""
    order = _order(order, np.asarray(x).shape[0])
    before = sentence_attention(x, w_q, w_k, w_v, strengths, positions=positions)
    after = sentence_attention(x, w_q, w_k, w_v, strengths, order, positions)
    outputs = np.abs(after.outputs - before.outputs[order]).max()
    weights = np.abs(after.weights - before.weights[np.ix_(order, order)]).max()
    return float(outputs), float(weights)


# --- the residual stream and normalisation (chapter 10) ---

NORM_EPS = 1e-5  # torch's LayerNorm and BatchNorm1d default
# The browser's stack: width d, heads, d_ff = 4d, one sequence of STACK_SEQ random tokens.
STACK_WIDTH, STACK_HEADS, STACK_FF, STACK_SEQ = 32, 4, 128, 16
STACK_MATRICES = ("W_Q", "W_K", "W_V", "W_O", "W_1", "W_2")
STACK_QUANTITIES = ("stream std", "stream gradient", "cosine", "all", *STACK_MATRICES)
_MASK32 = 0xFFFFFFFF


def _mix32(x: np.ndarray) -> np.ndarray:
    """A 32-bit integer hash (lowbias32) on uint64 arrays holding 32-bit values."""
    x = x ^ (x >> 16)
    x = (x * 0x7FEB352D) & _MASK32
    x = x ^ (x >> 15)
    x = (x * 0x846CA68B) & _MASK32
    return x ^ (x >> 16)


def hash_uniform(seed: int, stream: int, count: int) -> np.ndarray:
    """(count,) numbers in (0, 1), a pure function of (seed, stream, index): the browser's
    generator, so that stack.js draws the very same weights without being sent them."""
    key = _mix32(_mix32(np.array([seed & _MASK32], np.uint64)) ^ np.uint64(stream & _MASK32))
    bits = _mix32(key ^ _mix32(np.arange(count, dtype=np.uint64)))
    return (bits.astype(np.float64) + 0.5) / 2.0**32


def xavier_matrix(seed: int, stream: int, fan_in: int, fan_out: int) -> np.ndarray:
    """(fan_in, fan_out) Xavier-uniform weights, U(±sqrt(6 / (fan_in + fan_out))); y = x @ W."""
    bound = np.sqrt(6.0 / (fan_in + fan_out))
    return (2 * hash_uniform(seed, stream, fan_in * fan_out) - 1).reshape(fan_in, fan_out) * bound


def stack_weights(
    seed: int, num_layers: int, d: int = STACK_WIDTH, d_ff: int = STACK_FF
) -> list[dict[str, np.ndarray]]:
    """Each block's six matrices, (in, out): block l's do not depend on the depth."""
    shapes = {"W_Q": (d, d), "W_K": (d, d), "W_V": (d, d), "W_O": (d, d)}
    shapes |= {"W_1": (d, d_ff), "W_2": (d_ff, d)}
    return [
        {
            name: xavier_matrix(seed, 8 * layer + k, *shapes[name])
            for k, name in enumerate(STACK_MATRICES)
        }
        for layer in range(num_layers)
    ]


def stack_input(
    seed: int, seq: int = STACK_SEQ, d: int = STACK_WIDTH, std: float = 1.0
) -> np.ndarray:
    """(seq, d) input tokens, uniform with standard deviation ``std``."""
    return (2 * hash_uniform(seed, 1_000_001, seq * d) - 1).reshape(seq, d) * np.sqrt(3.0) * std


def stack_readout(seed: int, seq: int = STACK_SEQ, d: int = STACK_WIDTH) -> np.ndarray:
    """(seq, d) G: the loss is sum(G * top) (a fixed random linear read-out, mean over tokens)."""
    return (2 * hash_uniform(seed, 1_000_002, seq * d) - 1).reshape(seq, d) * np.sqrt(3.0) / seq


def layer_norm(x: np.ndarray, eps: float = NORM_EPS) -> np.ndarray:
    """Each row to mean 0, biased variance 1 (gain 1, bias 0): torch.nn.LayerNorm(d)."""
    x = np.asarray(x, dtype=np.float64)
    centred = x - x.mean(axis=-1, keepdims=True)
    return centred / np.sqrt((centred**2).mean(axis=-1, keepdims=True) + eps)


def batch_norm(x: np.ndarray, eps: float = NORM_EPS) -> np.ndarray:
    """Each column over the batch (training-mode statistics): torch.nn.BatchNorm1d(features).

    A batch of one gives zeros here; torch refuses it in training mode."""
    x = np.asarray(x, dtype=np.float64)
    centred = x - x.mean(axis=0, keepdims=True)
    return centred / np.sqrt((centred**2).mean(axis=0, keepdims=True) + eps)


def norm_statistics(x: np.ndarray, axis: int) -> tuple[np.ndarray, np.ndarray]:
    """Means and biased standard deviations along ``axis`` (1: per row, 0: per column)."""
    x = np.asarray(x, dtype=np.float64)
    mean = x.mean(axis=axis)
    return mean, np.sqrt(((x - np.expand_dims(mean, axis)) ** 2).mean(axis=axis))


def _layer_norm_backward(grad: np.ndarray, x: np.ndarray, eps: float = NORM_EPS) -> tuple:
    """(dL/dx, dL/dgain, dL/dbias) of :func:`layer_norm` at ``x`` (gain 1)."""
    centred = x - x.mean(axis=-1, keepdims=True)
    inverse = 1 / np.sqrt((centred**2).mean(axis=-1, keepdims=True) + eps)
    normed = centred * inverse
    dx = inverse * (
        grad - grad.mean(-1, keepdims=True) - normed * (grad * normed).mean(-1, keepdims=True)
    )
    return dx, (grad * normed).sum(0), grad.sum(0)


def _attention(x: np.ndarray, w: dict[str, np.ndarray], heads: int) -> tuple[np.ndarray, dict]:
    """Self-attention of (seq, d) with zero biases; the output and what its backward needs."""
    q, k, v = x @ w["W_Q"], x @ w["W_K"], x @ w["W_V"]
    seq, d = x.shape
    dh = d // heads
    split = lambda m: m.reshape(seq, heads, dh).transpose(1, 0, 2)  # noqa: E731
    p = softmax(split(q) @ split(k).transpose(0, 2, 1) / np.sqrt(dh))  # (heads, seq, seq)
    mixed = (p @ split(v)).transpose(1, 0, 2).reshape(seq, d)
    return mixed @ w["W_O"], {"x": x, "q": q, "k": k, "v": v, "p": p, "mixed": mixed}


def _attention_backward(grad: np.ndarray, w: dict, cache: dict, heads: int) -> tuple:
    """dL/dx and the gradients of W_Q, W_K, W_V, W_O and their biases."""
    x, p = cache["x"], cache["p"]
    seq, d = x.shape
    dh = d // heads
    split = lambda m: m.reshape(seq, heads, dh).transpose(1, 0, 2)  # noqa: E731
    merge = lambda m: m.transpose(1, 0, 2).reshape(seq, d)  # noqa: E731
    grads = {"W_O": cache["mixed"].T @ grad, "b_O": grad.sum(0)}
    d_mixed = split(grad @ w["W_O"].T)
    d_p = d_mixed @ split(cache["v"]).transpose(0, 2, 1)
    d_scores = p * (d_p - (d_p * p).sum(-1, keepdims=True)) / np.sqrt(dh)
    d_q = merge(d_scores @ split(cache["k"]))
    d_k = merge(d_scores.transpose(0, 2, 1) @ split(cache["q"]))
    d_v = merge(p.transpose(0, 2, 1) @ d_mixed)
    dx = np.zeros_like(x)
    for name, dm in (("Q", d_q), ("K", d_k), ("V", d_v)):
        grads[f"W_{name}"], grads[f"b_{name}"] = x.T @ dm, dm.sum(0)
        dx = dx + dm @ w[f"W_{name}"].T
    return dx, grads


def _feed_forward(x: np.ndarray, w: dict) -> tuple[np.ndarray, dict]:
    """max(0, x W_1) W_2 with zero biases, and what its backward needs."""
    z = x @ w["W_1"]
    return np.maximum(z, 0) @ w["W_2"], {"x": x, "z": z}


def _feed_forward_backward(grad: np.ndarray, w: dict, cache: dict) -> tuple:
    """dL/dx and the gradients of W_1, W_2 and their biases."""
    hidden = np.maximum(cache["z"], 0)
    d_z = (grad @ w["W_2"].T) * (cache["z"] > 0)
    grads = {
        "W_2": hidden.T @ grad,
        "b_2": grad.sum(0),
        "W_1": cache["x"].T @ d_z,
        "b_1": d_z.sum(0),
    }
    return d_z @ w["W_1"].T, grads


def _block_forward(x: np.ndarray, w: dict, norm_first: bool, heads: int) -> tuple:
    """One block, post-LN LN(x + f(x)) or pre-LN x + f(LN(x)); the output and its caches."""
    if norm_first:
        attended, attention = _attention(layer_norm(x), w, heads)
        h = x + attended
        fed, feed = _feed_forward(layer_norm(h), w)
        return h + fed, {"x": x, "h": h, "attention": attention, "feed": feed}
    attended, attention = _attention(x, w, heads)
    s1 = x + attended
    h = layer_norm(s1)
    fed, feed = _feed_forward(h, w)
    return layer_norm(h + fed), {"s1": s1, "s2": h + fed, "attention": attention, "feed": feed}


def _block_backward(grad: np.ndarray, w: dict, cache: dict, norm_first: bool, heads: int):
    """dL/d(block input) and every parameter's gradient (LayerNorm gains and biases too)."""
    grads = {}
    if norm_first:
        d_v, grads["W_1+"] = _feed_forward_backward(grad, w, cache["feed"])
        d_h, grads["g_2"], grads["c_2"] = _layer_norm_backward(d_v, cache["h"])
        d_h = grad + d_h
        d_u, grads["W_Q+"] = _attention_backward(d_h, w, cache["attention"], heads)
        d_x, grads["g_1"], grads["c_1"] = _layer_norm_backward(d_u, cache["x"])
        d_x = d_h + d_x
    else:
        d_s2, grads["g_2"], grads["c_2"] = _layer_norm_backward(grad, cache["s2"])
        d_h, grads["W_1+"] = _feed_forward_backward(d_s2, w, cache["feed"])
        d_h = d_s2 + d_h
        d_s1, grads["g_1"], grads["c_1"] = _layer_norm_backward(d_h, cache["s1"])
        d_x, grads["W_Q+"] = _attention_backward(d_s1, w, cache["attention"], heads)
        d_x = d_s1 + d_x
    flat = {**grads.pop("W_1+"), **grads.pop("W_Q+"), **grads}
    return d_x, flat


def mean_cosine(h: np.ndarray) -> float:
    """Mean cosine between two different tokens of one (seq, d) sequence."""
    unit = h / np.linalg.norm(h, axis=-1, keepdims=True)
    seq = h.shape[0]
    return float(((unit @ unit.T).sum() - seq) / (seq * (seq - 1)))


def stack_profile(
    norm_first: bool,
    num_layers: int,
    seed: int = 0,
    input_std: float = 1.0,
    d: int = STACK_WIDTH,
    heads: int = STACK_HEADS,
    d_ff: int = STACK_FF,
    seq: int = STACK_SEQ,
) -> dict[str, np.ndarray]:
    """One forward and backward pass through a fresh stack (Xavier, zero biases, LayerNorm
    gain 1, a final LayerNorm for pre-LN); per block, as (num_layers,) arrays: the stream's
    standard deviation (unbiased, as torch's std) and gradient norm after the block, the mean
    cosine between its tokens, and the gradient norms of each matrix and of the whole block."""
    weights = stack_weights(seed, num_layers, d, d_ff)
    h = stack_input(seed, seq, d, input_std)
    streams, caches = [], []
    for w in weights:
        h, cache = _block_forward(h, w, norm_first, heads)
        streams.append(h)
        caches.append(cache)
    readout = stack_readout(seed, seq, d)
    grad = _layer_norm_backward(readout, h)[0] if norm_first else readout
    record: dict[str, list[float]] = {name: [] for name in STACK_QUANTITIES}
    for w, cache, stream in zip(weights[::-1], caches[::-1], streams[::-1], strict=True):
        record["stream gradient"].append(float(np.linalg.norm(grad)))
        grad, grads = _block_backward(grad, w, cache, norm_first, heads)
        for name in STACK_MATRICES:
            record[name].append(float(np.linalg.norm(grads[name])))
        record["all"].append(float(np.sqrt(sum((g**2).sum() for g in grads.values()))))
        record["stream std"].append(float(stream.std(ddof=1)))
        record["cosine"].append(mean_cosine(stream))
    return {name: np.array(values[::-1]) for name, values in record.items()}


def stack_loss(norm_first: bool, num_layers: int, seed: int = 0, input_std: float = 1.0) -> float:
    """The loss sum(G * top) whose gradients :func:`stack_profile` measures."""
    h = stack_input(seed, std=input_std)
    for w in stack_weights(seed, num_layers):
        h = _block_forward(h, w, norm_first, STACK_HEADS)[0]
    top = layer_norm(h) if norm_first else h
    return float((stack_readout(seed) * top).sum())


# --- byte-pair encoding, merge by merge (chapter 11) ---


@dataclass(frozen=True)
class BpeStep:
    """One merge applied across a whole text: its rank in the learned list, the pair, how many
    places it joined, and every word's symbols after it."""

    rank: int
    pair: tuple[str, str]
    places: int
    words: tuple[tuple[str, ...], ...]


def bpe_words(text: str, end: str = "</w>") -> list[list[str]]:
    """The toy's pre-tokenisation: ``text.split()``, each word as its characters then ``end``
    (:func:`attnlib.data.bpe.word_counts`), with no normalisation."""
    return [[*word, end] for word in text.split()]


def _join_pair(symbols: list[str], pair: tuple[str, str]) -> tuple[list[str], int]:
    """``symbols`` with every ``pair`` joined, left to right, and how many were joined."""
    out, places, i = [], 0, 0
    while i < len(symbols):
        if i + 1 < len(symbols) and (symbols[i], symbols[i + 1]) == pair:
            out.append(symbols[i] + symbols[i + 1])
            places, i = places + 1, i + 2
        else:
            out.append(symbols[i])
            i += 1
    return out, places


def bpe_steps(words: list[list[str]], merges: list[tuple[str, str]]) -> list[BpeStep]:
    """Apply learned ``merges`` to ``words`` (lists of symbols), one merge per step, across the
    whole text: each step takes the earliest-learned merge whose pair is found in any word and
    joins it everywhere. Word by word this is :func:`attnlib.data.bpe.apply_merges` (words are
    independent, and a pair made by a merge was always learned after it)."""
    rank = {tuple(pair): index for index, pair in enumerate(merges)}  # as apply_merges ranks
    current = [list(word) for word in words]
    steps = []
    while True:
        found = [
            rank[pair]
            for word in current
            for pair in zip(word, word[1:], strict=False)
            if pair in rank
        ]
        if not found:
            return steps
        best = min(found)
        pair = tuple(merges[best])
        places = 0
        for index, word in enumerate(current):
            current[index], joined = _join_pair(word, pair)
            places += joined
        steps.append(BpeStep(best, pair, places, tuple(map(tuple, current))))
