"""Rotary positions (RoPE): rotate queries and keys by their position instead of adding a table.

Pairs of features are rotated, each by its own angle ``position * base^(-2i/dim)`` for pair i.
The pairs are the interleaved ones of RoFormer, (0, 1), (2, 3), ...: the same pairs and
frequencies as the sinusoidal table of :mod:`attnlib.transformer`, whose ``offset_rotation(k)``
is exactly this rotation (``apply_rotary(x, k) == x @ offset_rotation(k, dim)`` for a row x).
GPT-NeoX and Llama pair feature i with i + dim/2 instead ("rotate half"): the same rotation
of a permuted feature order, chosen there because contiguous halves are cheaper to slice;
weights trained one way need their query and key projection rows permuted to run the other.

Because a rotation by m then by -n is a rotation by m - n, the score of a query at m and a key
at n depends on the offset m - n only. :class:`attnlib.attention.MultiHeadAttention` with a
``rotary_base`` (``MultiHeadAttention.rotary()`` makes one of a module) applies the rotation
inside self-attention, between the projections and the scores, in place of a position table
added to the input.
"""

from __future__ import annotations

import torch

from attnlib._checks import check_count, check_number, check_tensor


def rotary_frequencies(dim: int, base: float = 10000.0) -> torch.Tensor:
    """base^(-2i/dim) for each pair i of an even width: (dim // 2,) float64 radians per step."""
    dim = check_count("dim", dim)
    if dim % 2:
        raise ValueError(f"rotary positions rotate pairs of features, so dim must be even: {dim}")
    if not check_number("base", base) > 0:
        raise ValueError(f"base must be positive (10000 in RoFormer), got {base}")
    return base ** (-torch.arange(0, dim, 2, dtype=torch.float64) / dim)


def rotary_angles(positions: torch.Tensor, dim: int, base: float = 10000.0) -> torch.Tensor:
    """Angle of each pair at each position: (seq,) or (batch, seq) -> (..., seq, dim // 2).

    Radians, float64 (float32 on MPS, which has no float64), on the positions' device.
    Float positions must be finite (one scan).
    """
    return _angles(_check_positions(positions), rotary_frequencies(dim, base))


def _angles(positions: torch.Tensor, frequencies: torch.Tensor) -> torch.Tensor:
    """positions (...,) times frequencies (pairs,) -> (..., pairs), as wide as the device allows."""
    # float64 keeps the phase of large positions, as in sinusoidal_encoding.
    wide = torch.float32 if positions.device.type == "mps" else torch.float64
    frequencies = frequencies.to(dtype=wide).to(positions.device)
    return positions.to(wide)[..., None] * frequencies


def apply_rotary(x: torch.Tensor, positions: torch.Tensor, base: float = 10000.0) -> torch.Tensor:
    """Rotate each pair (x[2i], x[2i+1]) of x (..., seq, dim) by its angle: same shape and dtype.

    ``positions`` are ints or floats, ``(seq,)`` for every sequence alike or ``(batch, seq)``
    with batch = x's first axis (or 1); the axes between (heads) share them. Position 0
    leaves x as it is. Pair (a, b) at angle t becomes (a cos t - b sin t, a sin t + b cos t).
    x and float positions must be finite: each is scanned once (a host sync on a GPU);
    :class:`~attnlib.attention.MultiHeadAttention` rotates with :func:`apply_rotary_unchecked`.
    """
    check_tensor("x", x, min_dims=2)
    positions = _check_positions(positions)
    seq = x.shape[-2]
    if positions.shape[-1] != seq:
        raise ValueError(
            f"positions have length {positions.shape[-1]} but x {tuple(x.shape)} has seq={seq}"
        )
    if positions.dim() == 2 and (x.dim() < 3 or positions.shape[0] not in (1, x.shape[0])):
        raise ValueError(
            f"positions (batch, seq) = {tuple(positions.shape)} need x of shape "
            f"(batch, ..., seq, dim) with the same batch, got {tuple(x.shape)}"
        )
    return apply_rotary_unchecked(x, positions, base)


def apply_rotary_unchecked(
    x: torch.Tensor, positions: torch.Tensor, base: float = 10000.0
) -> torch.Tensor:
    """:func:`apply_rotary` on checked inputs, with no scan of their values: x (..., seq,
    dim), positions (seq,) or (batch, seq) -> same shape and dtype as x."""
    seq, dim = x.shape[-2], x.shape[-1]
    if positions.dim() == 2:
        # (batch, seq) -> (batch, 1, ..., 1, seq): the batch axis meets x's first axis.
        positions = positions.reshape(positions.shape[0], *[1] * (x.dim() - 3), seq)
    angles = _angles(positions.to(x.device), rotary_frequencies(dim, base))  # (..., seq, dim/2)
    cos, sin = torch.cos(angles).to(x.dtype), torch.sin(angles).to(x.dtype)
    even, odd = x[..., 0::2], x[..., 1::2]  # (..., seq, dim // 2) each
    rotated = torch.stack((even * cos - odd * sin, even * sin + odd * cos), dim=-1)
    return rotated.flatten(-2)  # interleave the pairs back: (..., seq, dim)


def _check_positions(positions: object) -> torch.Tensor:
    """Require a 1-D (seq,) or 2-D (batch, seq) tensor of real ints or floats."""
    if not isinstance(positions, torch.Tensor):
        raise TypeError(
            f"positions must be a torch.Tensor such as torch.arange(seq), "
            f"got {type(positions).__name__}"
        )
    if positions.dtype == torch.bool or positions.dtype.is_complex:
        raise TypeError(f"positions must be integers or floats, got dtype {positions.dtype}")
    if positions.dim() not in (1, 2):
        raise ValueError(
            f"positions must be (seq,) or (batch, seq), got shape {tuple(positions.shape)}"
        )
    if positions.is_floating_point():  # an int cannot be NaN: only floats are scanned
        check_tensor("positions", positions, min_dims=1)
    return positions
