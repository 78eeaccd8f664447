"""Bag-of-n-grams baselines for IMDB: what an encoder must beat to be worth its cost.

Two classic linear models on word n-grams, with scikit-learn: logistic regression on tf-idf
unigrams and bigrams, and an NBSVM-style model (Wang and Manning, 2012): binary 1-3-gram
features scaled by their naive-Bayes log-count ratios, then logistic regression. Both are fitted
on the training reviews only and scored once on the test reviews.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from concurrent.futures import Future, ProcessPoolExecutor
from dataclasses import dataclass, field
from multiprocessing import get_context

import numpy as np

from attnlib.data.imdb import clean_review


@dataclass(frozen=True)
class BaselineResult:
    """One baseline's test accuracy, its number of features and its running time; ``correct``
    (n_test,) says which test reviews it got right, for a paired test against another model."""

    name: str
    accuracy: float
    features: int
    seconds: float
    correct: np.ndarray | None = field(default=None, repr=False, compare=False)


def _texts(texts: Sequence[str]) -> list[str]:
    return [clean_review(text).lower() for text in texts]


def tfidf_logistic(
    train_texts: Sequence[str],
    train_labels: np.ndarray,
    test_texts: Sequence[str],
    test_labels: np.ndarray,
    C: float = 4.0,
) -> BaselineResult:
    """Logistic regression on tf-idf weighted unigrams and bigrams."""
    from sklearn.feature_extraction.text import TfidfVectorizer
    from sklearn.linear_model import LogisticRegression

    start = time.perf_counter()
    vectorizer = TfidfVectorizer(ngram_range=(1, 2), min_df=2, sublinear_tf=True)
    train = vectorizer.fit_transform(_texts(train_texts))
    test = vectorizer.transform(_texts(test_texts))
    model = LogisticRegression(C=C, max_iter=1000).fit(train, train_labels)
    correct = model.predict(test) == np.asarray(test_labels)
    seconds = time.perf_counter() - start
    name = "tf-idf 1-2-grams + logistic regression"
    return BaselineResult(name, float(correct.mean()), train.shape[1], seconds, correct)


def nbsvm(
    train_texts: Sequence[str],
    train_labels: np.ndarray,
    test_texts: Sequence[str],
    test_labels: np.ndarray,
    C: float = 1.0,
    alpha: float = 1.0,
) -> BaselineResult:
    """NBSVM-style: binary 1-3-grams times their log-count ratio r, then logistic regression.

    r = log((α + Σ positive counts) / ‖·‖₁) − log((α + Σ negative counts) / ‖·‖₁), per feature.
    """
    from sklearn.feature_extraction.text import CountVectorizer
    from sklearn.linear_model import LogisticRegression

    start = time.perf_counter()
    labels = np.asarray(train_labels)
    if set(np.unique(labels)) - {0, 1}:
        raise ValueError(f"labels must be 0 or 1, got {sorted(set(np.unique(labels)))}")
    vectorizer = CountVectorizer(ngram_range=(1, 3), min_df=2, binary=True)
    train = vectorizer.fit_transform(_texts(train_texts)).tocsr()
    test = vectorizer.transform(_texts(test_texts)).tocsr()
    positive = alpha + np.asarray(train[labels == 1].sum(axis=0)).ravel()
    negative = alpha + np.asarray(train[labels == 0].sum(axis=0)).ravel()
    ratio = np.log(positive / positive.sum()) - np.log(negative / negative.sum())
    model = LogisticRegression(C=C, max_iter=1000)
    model.fit(train.multiply(ratio).tocsr(), labels)
    predicted = model.predict(test.multiply(ratio).tocsr())
    correct = predicted == np.asarray(test_labels)
    seconds = time.perf_counter() - start
    return BaselineResult(
        "NBSVM-style 1-3-grams", float(correct.mean()), train.shape[1], seconds, correct
    )


def run_baselines(
    train_texts: Sequence[str],
    train_labels: np.ndarray,
    test_texts: Sequence[str],
    test_labels: np.ndarray,
) -> list[BaselineResult]:
    """Both baselines, one after the other."""
    return [
        tfidf_logistic(train_texts, train_labels, test_texts, test_labels),
        nbsvm(train_texts, train_labels, test_texts, test_labels),
    ]


def start_baselines(
    train_texts: Sequence[str],
    train_labels: np.ndarray,
    test_texts: Sequence[str],
    test_labels: np.ndarray,
) -> Future:
    """Run :func:`run_baselines` in a separate process, so they use a CPU core while the GPU
    trains; ``.result()`` gives the list of results.

    The process is started with 'spawn', never 'fork': forking a process that holds a CUDA
    context is unsafe.
    """
    executor = ProcessPoolExecutor(max_workers=1, mp_context=get_context("spawn"))
    future = executor.submit(
        run_baselines, list(train_texts), train_labels, list(test_texts), test_labels
    )
    executor.shutdown(wait=False)
    return future
