"""Rotary positions (RoPE): rotate queries and keys by their position instead of adding a table.

Pairs of features are rotated, each by its own angle ``position * base^(-2i/dim)`` for pair i.
The pairs are the interleaved ones of RoFormer, (0, 1), (2, 3), ...: the same pairs and
frequencies as the sinusoidal table of :mod:`attnlib.transformer`, whose ``offset_rotation(k)``
is exactly this rotation (``apply_rotary(x, k) == x @ offset_rotation(k, dim)`` for a row x).
GPT-NeoX and Llama pair feature i with i + dim/2 instead ("rotate half"): the same rotation
of a permuted feature order, chosen there because contiguous halves are cheaper to slice;
weights trained one way need their query and key projection rows permuted to run the other.

Because a rotation by m then by -n is a rotation by m - n, the score of a query at m and a key
at n depends on the offset m - n only. :class:`RotaryMultiHeadAttention` applies the rotation
inside self-attention, between the projections and the scores, in place of a position table
added to the input.
"""

from __future__ import annotations

import torch

from attnlib._checks import check_count, check_number, check_tensor
from attnlib.attention import MultiHeadAttention, attend_unchecked


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
    :class:`RotaryMultiHeadAttention` rotates with :func:`apply_rotary_unchecked` instead.
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


class RotaryMultiHeadAttention(MultiHeadAttention):
    """:class:`MultiHeadAttention` whose queries and keys are rotated by their positions, head by
    head, after the projections: the scores see offsets only, and no table is added to x.

    Keys stand at positions 0 .. n_keys - 1 and the n_queries queries at the last positions
    (as :func:`attnlib.masks.causal_mask` places them), so it is meant for self-attention.
    Swap it into a model with :meth:`from_attention`, which keeps the weights.
    """

    def __init__(
        self,
        d_model: int,
        num_heads: int,
        bias: bool = True,
        dropout: float = 0.0,
        num_kv_heads: int | None = None,
        base: float = 10000.0,
    ) -> None:
        super().__init__(d_model, num_heads, bias, dropout, num_kv_heads)
        rotary_frequencies(self.head_dim, base)  # checks: an even head_dim, a positive base
        self.base = float(base)

    @classmethod
    def from_attention(
        cls, attention: MultiHeadAttention, base: float = 10000.0
    ) -> RotaryMultiHeadAttention:
        """A rotary copy of ``attention``: the same sizes, dropout and weights (copied)."""
        if not isinstance(attention, MultiHeadAttention):
            raise TypeError(
                f"attention must be a MultiHeadAttention, got {type(attention).__name__}"
            )
        bias = attention.query_projection.bias is not None
        rotary = cls(
            attention.d_model,
            attention.num_heads,
            bias,
            attention.dropout_p,
            attention.num_kv_heads,
            base,
        )
        rotary.load_state_dict(attention.state_dict())
        weight = attention.query_projection.weight
        return rotary.to(device=weight.device, dtype=weight.dtype).train(attention.training)

    def forward_prepared(
        self,
        query: torch.Tensor,
        key: torch.Tensor,
        value: torch.Tensor,
        mask4d: torch.Tensor | None,
        fused: bool = False,
    ) -> tuple[torch.Tensor, torch.Tensor | None]:
        """As :meth:`MultiHeadAttention.forward_prepared`, with queries and keys rotated:
        output (batch, n_queries, d_model), weights (batch, heads, n_queries, n_keys) or None."""
        n_queries, n_keys = query.shape[1], key.shape[1]
        if n_queries > n_keys:
            raise ValueError(
                f"rotary attention places the queries at the last of the key positions 0 .. "
                f"n_keys - 1, so it needs n_queries <= n_keys: got query of {n_queries} "
                f"positions and key of {n_keys}"
            )
        positions = torch.arange(n_keys, device=key.device)
        queries = self.split_heads(self.query_projection(query))  # (batch, heads, n_q, hd)
        keys = self.split_kv_heads(self.key_projection(key))  # (batch, kv_heads, n_keys, hd)
        values = self.split_kv_heads(self.value_projection(value))
        queries = apply_rotary_unchecked(queries, positions[n_keys - n_queries :], self.base)
        keys = apply_rotary_unchecked(keys, positions, self.base)
        if fused:
            heads, weights = self._fused_attention(queries, keys, values, mask4d), None
        else:
            keys, values = self.repeat_kv_heads(keys), self.repeat_kv_heads(values)
            heads, weights = attend_unchecked(queries, keys, values, mask4d, dropout=self.dropout)
        return self.output_projection(self.merge_heads(heads)), weights
