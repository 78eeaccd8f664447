"""Score functions: shapes, numbers against the reference, and the hand-computed additive score."""

import math

import pytest
import torch

from attnlib.reference import worked_example
from attnlib.scores import (
    SCORES,
    AdditiveScore,
    GeneralScore,
    dot_score,
    make_score,
    resolve_score,
    scaled_dot_score,
)


def _batched(seed: int = 0) -> tuple[torch.Tensor, torch.Tensor]:
    generator = torch.Generator().manual_seed(seed)
    queries = torch.randn(2, 5, 8, generator=generator, dtype=torch.float64)
    keys = torch.randn(2, 7, 8, generator=generator, dtype=torch.float64)
    return queries, keys


@pytest.mark.parametrize("name", ["dot", "scaled_dot", "general", "additive"])
def test_every_score_has_shape_batch_queries_keys(name):
    queries, keys = _batched()
    score = make_score(name, d_query=8, d_key=8, d_hidden=6).double()
    assert score(queries, keys).shape == (2, 5, 7)


def test_general_score_with_different_widths_has_right_shape():
    queries, keys = torch.randn(3, 4, 6), torch.randn(3, 9, 10)
    assert GeneralScore(6, 10)(queries, keys).shape == (3, 4, 9)


def test_dot_score_matches_worked_example():
    example = worked_example()
    queries, keys = torch.from_numpy(example.queries), torch.from_numpy(example.keys)
    torch.testing.assert_close(dot_score(queries, keys), torch.from_numpy(example.scores))


def test_dot_score_of_input_1_is_2_4_4():
    example = worked_example()
    scores = dot_score(torch.from_numpy(example.queries), torch.from_numpy(example.keys))
    assert scores[0].tolist() == [2.0, 4.0, 4.0]


def test_scaled_dot_is_dot_over_sqrt_dk():
    queries, keys = _batched(1)
    expected = dot_score(queries, keys) / math.sqrt(8)
    torch.testing.assert_close(scaled_dot_score(queries, keys), expected)


def test_general_with_identity_weight_equals_dot():
    queries, keys = _batched(2)
    score = GeneralScore(8, 8).double()
    with torch.no_grad():
        score.key_projection.weight.copy_(torch.eye(8, dtype=torch.float64))
    torch.testing.assert_close(score(queries, keys), dot_score(queries, keys))


def test_additive_matches_hand_computation_for_one_pair():
    queries, keys = _batched(3)
    score = AdditiveScore(8, 8, 5).double()
    q, k = queries[1, 2], keys[1, 4]
    w_q, w_k = score.query_projection.weight, score.key_projection.weight
    b, v = score.key_projection.bias, score.vector.weight[0]
    expected = v @ torch.tanh(w_q @ q + w_k @ k + b)
    torch.testing.assert_close(score(queries, keys)[1, 2, 4], expected)


def test_make_score_additive_hidden_defaults_to_d_query():
    assert make_score("additive", d_query=6, d_key=4).vector.in_features == 6


def test_one_registry_with_one_name_per_score():
    assert list(SCORES) == ["dot", "scaled_dot", "general", "additive"]
    for name, kind in SCORES.items():
        assert type(make_score(name, d_query=4, d_key=4)) is kind


@pytest.mark.parametrize("name", ["dot", "scaled_dot"])
def test_named_parameter_free_scores_resolve_to_one_shared_module(name):
    assert resolve_score(name) is resolve_score(name)
    queries, keys = _batched()
    expected = {"dot": dot_score, "scaled_dot": scaled_dot_score}[name](queries, keys)
    torch.testing.assert_close(resolve_score(name)(queries, keys), expected, rtol=0, atol=0)


@pytest.mark.parametrize("name", ["dot", "scaled_dot", "general", "additive"])
def test_unchecked_score_equals_the_checked_one(name):
    queries, keys = _batched()
    score = make_score(name, d_query=8, d_key=8, d_hidden=6).double()
    torch.testing.assert_close(score.unchecked(queries, keys), score(queries, keys), rtol=0, atol=0)
