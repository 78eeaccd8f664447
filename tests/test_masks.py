"""Masks (True = may attend) and the masked softmax that never returns NaN."""

import torch

from attnlib.masks import causal_mask, combine_masks, masked_softmax, padding_mask


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
