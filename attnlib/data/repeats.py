"""Token sequences with one repeated segment, for in-context copying and induction heads.

Each row is ``BOS, noise, segment, noise, segment, noise``: the segment (random tokens, random
length) appears twice at random places, and the noise is drawn with replacement from the same
tokens. Only a model that looks back at what followed the segment's first copy can predict the
second copy past its first token: neither the position nor "this token was seen before" tells
(noise repeats tokens too). Generated from an int seed: the same seed gives the same batch.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from attnlib._checks import check_count, check_flag, check_int


@dataclass(frozen=True)
class RepeatedSegments:
    """A batch of sequences with one segment repeated in each row.

    ``ids`` (batch, seq_len) long: BOS at position 0, tokens elsewhere (never BOS).
    ``repeat_mask`` (batch, seq_len) bool: True at position t exactly when t = second + j for
    0 <= j <= length - 2, that is at every token of the second copy but its last, where the next
    token ids[t + 1] equals ids[first + j + 1], the token that followed the same token in the
    first copy. These are the positions whose prediction copying can get right (set by
    construction; a noise token that happens to equal a segment token is not marked).
    ``first``, ``second``, ``length`` (batch,) long: where each copy starts and how long it is.
    """

    ids: torch.Tensor
    repeat_mask: torch.Tensor
    first: torch.Tensor
    second: torch.Tensor
    length: torch.Tensor


def _check_arguments(
    batch: object,
    seq_len: object,
    vocab_size: object,
    min_segment: object,
    max_segment: object,
    seed: object,
    bos_id: object,
    unique: object,
) -> None:
    """Refuse any argument repeated_segments cannot honour; each message names the argument."""
    check_count("batch", batch)
    check_count("seq_len", seq_len)
    check_int("vocab_size", vocab_size, least=2)  # BOS and at least one token
    check_int("min_segment", min_segment, least=2)  # a copy of one token predicts nothing
    check_int("max_segment", max_segment, least=min_segment)
    check_int("seed", seed)
    check_int("bos_id", bos_id)
    check_flag("unique", unique)
    if bos_id >= vocab_size:
        raise ValueError(f"bos_id must be below vocab_size={vocab_size}, got {bos_id}")
    if 1 + 2 * max_segment > seq_len:
        raise ValueError(
            f"max_segment={max_segment} does not fit twice in seq_len={seq_len} after BOS: "
            f"seq_len must be at least 1 + 2 * max_segment = {1 + 2 * max_segment}"
        )
    if unique and max_segment > vocab_size - 1:
        raise ValueError(
            f"vocab_size={vocab_size} is too small for unique segments of max_segment="
            f"{max_segment} tokens: it has {vocab_size - 1} tokens besides BOS"
        )


def _tokens(size: tuple[int, ...], vocab_size: int, bos_id: int, generator: torch.Generator):
    """Tokens drawn uniformly with replacement from 0..vocab_size-1 less bos_id: (*size) long."""
    drawn = torch.randint(0, vocab_size - 1, size, generator=generator)
    return drawn + (drawn >= bos_id).long()  # step over BOS, keeping the draw uniform


def _distinct_tokens(
    batch: int, count: int, vocab_size: int, bos_id: int, generator: torch.Generator
) -> torch.Tensor:
    """``count`` distinct tokens per row, never BOS: (batch, count) long."""
    order = torch.rand(batch, vocab_size - 1, generator=generator).argsort(dim=1)[:, :count]
    return order + (order >= bos_id).long()


def _places(
    length: torch.Tensor, seq_len: int, generator: torch.Generator
) -> tuple[torch.Tensor, torch.Tensor]:
    """Where the two copies start, (batch,) each: noise split uniformly before, between, after."""
    noise = seq_len - 1 - 2 * length  # noise tokens per row, shared by the three gaps
    # Two distinct cut points among noise + 2 slots, uniform: every split of the noise into
    # (before, between, after) is equally likely, gaps of zero included.
    slots = noise + 2
    # float64, so that a draw just below 1 cannot round up to ``slots`` itself.
    uniform = torch.rand((2, *length.shape), generator=generator, dtype=torch.float64)
    low = (uniform[0] * slots).long()
    high = (uniform[1] * (slots - 1)).long()
    high = high + (high >= low).long()
    low, high = torch.minimum(low, high), torch.maximum(low, high)
    first = 1 + low
    second = first + length + (high - low - 1)
    return first, second


def repeated_segments(
    batch: int,
    seq_len: int,
    vocab_size: int,
    *,
    min_segment: int,
    max_segment: int,
    seed: int,
    bos_id: int = 0,
    unique: bool = False,
) -> RepeatedSegments:
    """Rows of BOS, noise and one segment twice: ids and repeat_mask (batch, seq_len)."""
    _check_arguments(batch, seq_len, vocab_size, min_segment, max_segment, seed, bos_id, unique)
    # NumPy integers pass the checks; torch's generator and factories want Python ints.
    sizes = (batch, seq_len, vocab_size, min_segment, max_segment, seed, bos_id)
    batch, seq_len, vocab_size, min_segment, max_segment, seed, bos_id = map(int, sizes)
    generator = torch.Generator().manual_seed(seed)
    length = torch.randint(min_segment, max_segment + 1, (batch,), generator=generator)
    first, second = _places(length, seq_len, generator)
    if unique:
        segment = _distinct_tokens(batch, max_segment, vocab_size, bos_id, generator)
    else:
        segment = _tokens((batch, max_segment), vocab_size, bos_id, generator)

    ids = _tokens((batch, seq_len), vocab_size, bos_id, generator)
    ids[:, 0] = bos_id
    offset = torch.arange(max_segment)
    inside = offset < length[:, None]  # (batch, max_segment): which slots the row's segment uses
    rows = torch.arange(batch)[:, None].expand(batch, max_segment)
    ids[rows[inside], (first[:, None] + offset)[inside]] = segment[inside]
    ids[rows[inside], (second[:, None] + offset)[inside]] = segment[inside]

    repeat_mask = torch.zeros(batch, seq_len, dtype=torch.bool)
    predictable = offset < length[:, None] - 1  # every token of the second copy but its last
    repeat_mask[rows[predictable], (second[:, None] + offset)[predictable]] = True
    return RepeatedSegments(ids, repeat_mask, first, second, length)
