"""McNemar's exact test: the discordant counts, the p-value and the checks on its inputs."""

from __future__ import annotations

import math

import numpy as np
import pytest

from attnlib.stats import mcnemar, mean_sd, pack_labels, unpack_labels


def pairs(both: int, only_first: int, only_second: int, neither: int):
    first = [True] * both + [True] * only_first + [False] * only_second + [False] * neither
    second = [True] * both + [False] * only_first + [True] * only_second + [False] * neither
    return np.array(first), np.array(second)


def test_counts_only_the_items_the_models_disagree_on():
    result = mcnemar(*pairs(both=90, only_first=1, only_second=5, neither=4))
    assert (result.only_first, result.only_second) == (1, 5)
    # 2 * (C(6, 0) + C(6, 1)) / 2**6 = 2 * 7 / 64
    assert result.p_value == pytest.approx(0.21875, abs=1e-15)


def test_agreement_and_a_tie_give_p_one():
    assert mcnemar(*pairs(10, 0, 0, 3)).p_value == 1.0
    assert mcnemar(*pairs(10, 7, 7, 3)).p_value == 1.0


def test_a_lopsided_split_is_significant():
    result = mcnemar(*pairs(1000, 0, 12, 0))
    assert result.p_value == pytest.approx(2 / 2**12, rel=1e-12)  # 0.00049


def test_large_counts_agree_with_the_normal_approximation():
    result = mcnemar(*pairs(5000, 300, 360, 335))
    z = (abs(300 - 360) - 1) / math.sqrt(300 + 360)  # with the continuity correction
    assert result.p_value == pytest.approx(math.erfc(z / math.sqrt(2)), rel=0.05)


def test_inputs_are_checked():
    with pytest.raises(ValueError, match=r"same length, got shapes \(3,\) and \(2,\)"):
        mcnemar(np.array([True, False, True]), np.array([True, False]))
    with pytest.raises(TypeError, match="correctness must be boolean, got int64"):
        mcnemar(np.array([1, 0]), np.array([True, False]))


def test_packed_labels_come_back_unchanged():
    labels = np.random.default_rng(0).random(25_000) > 0.5
    text = pack_labels(labels)
    assert len(text) == 4_168  # 3,125 bytes in base64
    assert (unpack_labels(text, 25_000) == labels).all()
    assert unpack_labels(pack_labels(np.array([True, False, True])), 3).tolist() == [1, 0, 1]


def test_packed_labels_refuse_the_wrong_count_and_type():
    text = pack_labels(np.ones(20, dtype=bool))  # 3 bytes
    with pytest.raises(ValueError, match="holds 3 bytes, not the labels of 30 items"):
        unpack_labels(text, 30)
    with pytest.raises(TypeError, match="1-D boolean array, got float64"):
        pack_labels(np.array([0.7, 0.2]))


def test_mean_sd_is_mean_and_sample_standard_deviation():
    mean, sd = mean_sd({0: 0.5, 1: 0.7, 2: 0.9}.values())
    assert mean == pytest.approx(0.7, abs=1e-15)
    assert sd == pytest.approx(0.2, abs=1e-15)  # n - 1 = 2 in the denominator: sqrt(0.08 / 2)


def test_mean_sd_reads_a_generator_once():
    assert mean_sd(x for x in [1.0, 2.0, 3.0, 4.0]) == pytest.approx((2.5, math.sqrt(5 / 3)))


@pytest.mark.parametrize("values", [[], [0.7]])
def test_mean_sd_refuses_fewer_than_two_values(values):
    with pytest.raises(ValueError, match=f"needs at least 2 values, got {len(values)}"):
        mean_sd(values)
