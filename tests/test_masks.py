"""Masks (True = may attend) and the masked softmax that never returns NaN."""

import pytest
import torch

from attnlib.masks import (
    causal_mask,
    combine_masks,
    masked_softmax,
    padding_mask,
    sliding_window_mask,
    structure_mask,
)


def test_padding_mask_shape_is_batch_1_max_len():
    assert padding_mask([2, 4, 1], max_len=5).shape == (3, 1, 5)


def test_padding_mask_values():
    expected = [[[True, True, False, False]], [[True, True, True, True]], [[False] * 4]]
    assert padding_mask(torch.tensor([2, 4, 0])).tolist() == expected


def test_padding_mask_max_len_defaults_to_longest():
    assert padding_mask([3, 1]).shape == (2, 1, 3)


def test_causal_mask_is_lower_triangular():
    assert torch.equal(causal_mask(4), torch.tril(torch.ones(4, 4, dtype=torch.bool)))


def test_causal_mask_dtype_is_bool():
    assert causal_mask(3).dtype == torch.bool


def test_causal_mask_with_more_keys_offsets_queries_to_the_end():
    expected = [
        [True, True, True, False, False],
        [True, True, True, True, False],
        [True, True, True, True, True],
    ]
    assert causal_mask(3, 5).tolist() == expected


def test_combine_masks_is_logical_and_with_broadcast():
    pad = padding_mask([2, 3], max_len=3)  # (2, 1, 3)
    combined = combine_masks(pad, causal_mask(3))  # (3, 3)
    assert combined.shape == (2, 3, 3)
    assert combined[0].tolist() == [[True, False, False], [True, True, False], [True, True, False]]


def test_combine_masks_skips_none():
    mask = causal_mask(2)
    assert torch.equal(combine_masks(None, mask, None), mask)


def test_combine_masks_of_nothing_is_none():
    assert combine_masks(None, None) is None


def _scores_and_mask() -> tuple[torch.Tensor, torch.Tensor]:
    scores = torch.randn(2, 3, 4, generator=torch.Generator().manual_seed(0))
    mask = padding_mask([3, 0], max_len=4) & causal_mask(3, 4)
    return scores, mask


def test_masked_softmax_masked_entries_are_exactly_zero():
    scores, mask = _scores_and_mask()
    weights = masked_softmax(scores, mask)
    assert weights[~mask.expand_as(weights)].abs().max().item() == 0.0


def test_masked_softmax_rows_with_a_key_sum_to_one():
    scores, mask = _scores_and_mask()
    torch.testing.assert_close(masked_softmax(scores, mask)[0].sum(-1), torch.ones(3))


def test_masked_softmax_fully_masked_row_is_zero_not_nan():
    scores, mask = _scores_and_mask()
    weights = masked_softmax(scores, mask)
    assert not weights.isnan().any()
    assert weights[1].abs().sum().item() == 0.0


def test_masked_softmax_without_mask_is_softmax():
    scores, _ = _scores_and_mask()
    torch.testing.assert_close(masked_softmax(scores), torch.softmax(scores, dim=-1))


def test_masked_softmax_gradient_is_finite_with_fully_masked_row():
    scores, mask = _scores_and_mask()
    scores.requires_grad_(True)
    weights = masked_softmax(scores, mask)
    (weights * torch.arange(4.0)).sum().backward()
    assert torch.isfinite(scores.grad).all()
    assert scores.grad[1].abs().sum().item() == 0.0


# --- sliding_window_mask ----------------------------------------------------------------------


def test_sliding_window_mask_causal_sees_itself_and_window_minus_one_before():
    expected = [
        [True, False, False, False, False],
        [True, True, False, False, False],
        [False, True, True, False, False],
        [False, False, True, True, False],
        [False, False, False, True, True],
    ]
    mask = sliding_window_mask(5, window=2)
    assert mask.dtype == torch.bool and mask.tolist() == expected


def test_sliding_window_mask_not_causal_sees_window_minus_one_each_side():
    expected = [
        [True, True, True, False, False],
        [True, True, True, True, False],
        [True, True, True, True, True],
        [False, True, True, True, True],
        [False, False, True, True, True],
    ]
    assert sliding_window_mask(5, window=3, causal=False).tolist() == expected


def test_sliding_window_mask_with_more_keys_puts_queries_at_the_end():
    expected = [
        [False, False, True, True, True, False],
        [False, False, False, True, True, True],
    ]
    assert sliding_window_mask(2, window=3, n_keys=6).tolist() == expected
    expected_both_sides = [  # queries at positions 4 and 5: keys 2-5 and 3-5
        [False, False, True, True, True, True],
        [False, False, False, True, True, True],
    ]
    assert sliding_window_mask(2, 3, n_keys=6, causal=False).tolist() == expected_both_sides


def test_sliding_window_mask_of_window_one_is_the_diagonal():
    assert torch.equal(sliding_window_mask(4, 1), torch.eye(4, dtype=torch.bool))
    assert torch.equal(sliding_window_mask(4, 1, causal=False), torch.eye(4, dtype=torch.bool))


def test_sliding_window_mask_with_a_long_window_is_the_causal_mask():
    assert torch.equal(sliding_window_mask(4, window=4), causal_mask(4))
    assert torch.equal(sliding_window_mask(3, window=100, n_keys=7), causal_mask(3, 7))
    assert sliding_window_mask(4, window=4, causal=False).all()


def test_sliding_window_mask_causal_is_the_two_sided_window_and_the_causal_mask():
    for window in (1, 2, 5):
        both = sliding_window_mask(3, window, n_keys=8, causal=False) & causal_mask(3, 8)
        assert torch.equal(sliding_window_mask(3, window, n_keys=8), both)


def test_sliding_window_mask_errors_name_the_problem():
    with pytest.raises(ValueError, match="window must be positive, got 0"):
        sliding_window_mask(4, 0)
    with pytest.raises(TypeError, match="window must be an int, got float 2.0"):
        sliding_window_mask(4, 2.0)
    with pytest.raises(ValueError, match="needs n_keys >= n_queries, got 3 < 4"):
        sliding_window_mask(4, 2, n_keys=3)
    with pytest.raises(TypeError, match="causal must be True or False, got str 'no'"):
        sliding_window_mask(4, 2, causal="no")


# --- structure_mask -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("n_queries", "n_keys", "causal", "window", "expected"),
    [
        (4, 4, False, None, None),  # nothing to mask
        (1, 6, True, None, None),  # the last position sees all before it
        (1, 6, True, 6, None),  # ... and a window as long as the keys changes nothing
        (4, 4, False, 4, None),  # a two-sided window of 4 reaches every one of 4 keys
        (3, 5, True, None, "causal"),
        (3, 5, True, 2, "window"),
        (1, 6, True, 2, "window"),
        (4, 4, False, 2, "two-sided"),
    ],
)
def test_structure_mask_is_none_where_nothing_is_masked(
    n_queries, n_keys, causal, window, expected
):
    mask = structure_mask(n_queries, n_keys, causal, window)
    if expected is None:
        assert mask is None
    elif expected == "causal":
        assert torch.equal(mask, causal_mask(n_queries, n_keys))
    else:
        want = sliding_window_mask(n_queries, window, n_keys, causal=expected == "window")
        assert torch.equal(mask, want) and not bool(mask.all())
