"""The NumPy oracle: the worked example's numbers and the laws of softmax."""

import math

import numpy as np
import pytest

from attnlib import reference
from attnlib.reference import scaled_dot_product_attention, softmax, worked_example

KEYS = np.array([[0, 1, 1], [4, 4, 0], [2, 3, 1]], dtype=float)
VALUES = np.array([[1, 2, 3], [2, 8, 0], [2, 6, 3]], dtype=float)
QUERIES = np.array([[1, 0, 2], [2, 2, 2], [2, 1, 3]], dtype=float)


def exact_weights_of_input_1() -> np.ndarray:
    """softmax([2, 4, 4]) from its formula: [e^2, e^4, e^4] / (e^2 + 2 e^4)."""
    total = math.exp(2) + 2 * math.exp(4)
    return np.array([math.exp(2), math.exp(4), math.exp(4)]) / total


@pytest.mark.parametrize(
    ("field", "expected"), [("keys", KEYS), ("values", VALUES), ("queries", QUERIES)]
)
def test_worked_example_projections(field, expected):
    np.testing.assert_array_equal(getattr(worked_example(), field), expected)


def test_worked_example_scores_of_input_1():
    np.testing.assert_array_equal(worked_example().scores[0], [2, 4, 4])


def test_exact_softmax_of_input_1_is_known():
    np.testing.assert_allclose(exact_weights_of_input_1(), [0.0634, 0.4683, 0.4683], atol=5e-5)


def test_worked_example_weights_of_input_1_match_formula():
    np.testing.assert_allclose(worked_example().weights[0], exact_weights_of_input_1(), atol=1e-12)


def test_worked_example_output_1_matches_formula():
    expected = exact_weights_of_input_1() @ VALUES
    np.testing.assert_allclose(expected, [1.9366, 6.6831, 1.5951], atol=5e-5)
    np.testing.assert_allclose(worked_example().outputs[0], expected, atol=5e-5)


def test_worked_example_output_1_is_not_the_rounded_article_value():
    assert not np.allclose(worked_example().outputs[0], [2.0, 7.0, 1.5], atol=1e-2)


def test_worked_example_is_dot_product_attention():
    output, weights = reference.dot_product_attention(QUERIES, KEYS, VALUES)
    np.testing.assert_allclose(output, worked_example().outputs, atol=1e-12)
    np.testing.assert_allclose(weights, worked_example().weights, atol=1e-12)


def test_softmax_rows_sum_to_one():
    rows = np.random.default_rng(0).normal(size=(6, 9)) * 5
    np.testing.assert_allclose(softmax(rows).sum(axis=-1), np.ones(6), atol=1e-12)


def test_softmax_invariant_to_adding_a_constant():
    row = np.array([0.5, -1.0, 3.0, 2.0])
    np.testing.assert_allclose(softmax(row + 100.0), softmax(row), atol=1e-12)


def test_softmax_small_temperature_approaches_one_hot_argmax():
    weights = softmax(np.array([1.0, 3.0, 2.9, -2.0]), temperature=1e-3)
    np.testing.assert_allclose(weights, [0.0, 1.0, 0.0, 0.0], atol=1e-12)


def test_softmax_large_temperature_approaches_uniform():
    weights = softmax(np.array([1.0, 3.0, 2.0, -2.0]), temperature=1e6)
    np.testing.assert_allclose(weights, np.full(4, 0.25), atol=1e-5)


def test_softmax_of_large_inputs_does_not_overflow():
    weights = softmax(np.array([1000.0, 1000.0, 999.0]))
    e = math.exp(-1.0)
    np.testing.assert_allclose(weights, np.array([1.0, 1.0, e]) / (2 + e), atol=1e-12)


@pytest.mark.parametrize("temperature", [0.0, -1.0, float("nan")])
def test_softmax_rejects_non_positive_temperature(temperature):
    with pytest.raises(ValueError, match="temperature must be positive"):
        softmax(np.array([1.0, 2.0]), temperature=temperature)


def test_scaled_dot_product_attention_equals_formula():
    rng = np.random.default_rng(1)
    q, k, v = rng.normal(size=(4, 5)), rng.normal(size=(6, 5)), rng.normal(size=(6, 3))
    scores = q @ k.T / np.sqrt(5)
    weights = np.exp(scores) / np.exp(scores).sum(axis=1, keepdims=True)
    output, got_weights = scaled_dot_product_attention(q, k, v)
    np.testing.assert_allclose(got_weights, weights, atol=1e-12)
    np.testing.assert_allclose(output, weights @ v, atol=1e-12)
