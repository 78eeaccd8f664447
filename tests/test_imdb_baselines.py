"""Chapter 13's n-gram baselines: what they return, on a corpus small enough to reason about."""

from __future__ import annotations

import numpy as np
import pytest

from attnlib.stats import mcnemar
from attnlib.tasks.imdb_baselines import nbsvm, tfidf_logistic

GOOD = ["a great film", "great acting and a great story", "i loved it", "wonderful and great"]
BAD = ["a terrible film", "awful acting and a dull story", "i hated it", "dull and terrible"]
TRAIN = (GOOD + BAD) * 3
TRAIN_LABELS = np.array(([1] * 4 + [0] * 4) * 3)
TEST = ["great story", "terrible acting", "loved it great", "dull film", "great but terrible"]
TEST_LABELS = np.array([1, 0, 1, 0, 0])


@pytest.mark.parametrize("baseline", [tfidf_logistic, nbsvm])
def test_baselines_say_which_test_reviews_they_got_right(baseline):
    result = baseline(TRAIN, TRAIN_LABELS, TEST, TEST_LABELS)
    assert result.correct.dtype == np.bool_ and result.correct.shape == (5,)
    assert result.accuracy == pytest.approx(result.correct.mean())
    assert result.correct[:4].all()  # the four plain reviews; the mixed one may go either way
    assert "correct" not in repr(result)  # printed results stay one line


def test_two_baselines_can_be_compared_review_by_review():
    first = tfidf_logistic(TRAIN, TRAIN_LABELS, TEST, TEST_LABELS)
    second = nbsvm(TRAIN, TRAIN_LABELS, TEST, TEST_LABELS)
    result = mcnemar(first.correct, second.correct)
    assert result.only_first + result.only_second <= 1
    assert result.p_value == 1.0
