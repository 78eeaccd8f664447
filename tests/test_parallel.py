"""run_parallel: results in job order, the same numbers from one process or two, clear errors."""

from __future__ import annotations

import functools
import operator
import os
import sys

import pytest

from attnlib.parallel import default_workers, run_parallel
from attnlib.tasks import copy as copying

TINY = copying.CopyTaskConfig(
    max_length=4, n_train=64, n_valid=16, n_test_per_length=4, epochs=2, batch_size=32,
    embedding_dim=4, hidden_size=8, attention_size=4,
)  # fmt: skip


def test_results_come_back_in_job_order():
    jobs = [(2, 5), (3, 2), (10, 1), (2, 0)]
    assert run_parallel(operator.pow, jobs, workers=2, progress=False) == [32, 9, 10, 1]


def test_two_processes_train_exactly_as_one_does():
    jobs = [("none", TINY, 0), ("bahdanau", TINY, 1)]
    here = run_parallel(copying.train_seed, jobs, workers=1, progress=False)
    apart = run_parallel(copying.train_seed, jobs, workers=2, progress=False)
    for one, two in zip(here, apart, strict=True):
        assert (one.kind, one.seed) == (two.kind, two.seed)
        assert one.history.train_loss == two.history.train_loss
        assert one.predictions == two.predictions
        assert one.by_length == two.by_length
    assert [run.kind for run in apart] == ["none", "bahdanau"]
    assert len(apart[0].history.train_loss) == 2


def test_a_partial_of_a_module_function_can_be_sent():
    power_of_two = functools.partial(operator.pow, 2)
    assert run_parallel(power_of_two, [(3,), (4,)], workers=2, progress=False) == [8, 16]


def test_a_lambda_is_refused_with_what_to_do():
    with pytest.raises(
        ValueError,
        match="cannot send .*<lambda> to another process.*top level of an importable module",
    ):
        run_parallel(lambda x: x, [(1,)], workers=1, progress=False)


def test_a_function_from_main_is_refused(monkeypatch):
    # What a notebook's function is: pickled by name from __main__, which a new process lacks.
    def written_in_a_notebook(x):
        return x

    written_in_a_notebook.__module__ = "__main__"
    written_in_a_notebook.__qualname__ = "written_in_a_notebook"
    monkeypatch.setattr(
        sys.modules["__main__"], "written_in_a_notebook", written_in_a_notebook, raising=False
    )
    with pytest.raises(ValueError, match="written_in_a_notebook.*it lives in __main__"):
        run_parallel(written_in_a_notebook, [(1,)], progress=False)


@pytest.mark.parametrize("workers", [0, -1, 1.5, True])
def test_workers_must_be_a_positive_int(workers):
    with pytest.raises(ValueError, match="workers must be a positive int"):
        run_parallel(operator.neg, [(1,)], workers=workers, progress=False)


def test_no_jobs_is_an_error():
    with pytest.raises(ValueError, match="run_parallel was given no jobs"):
        run_parallel(operator.neg, [], progress=False)


def test_not_a_function_is_a_type_error():
    with pytest.raises(TypeError, match="run_parallel needs a function, got 3"):
        run_parallel(3, [(1,)], progress=False)


def test_default_workers_is_capped_by_jobs():
    assert default_workers(1) == 1
    assert 1 <= default_workers(1_000) <= 1_000


def test_a_worker_that_dies_is_reported_with_the_usual_causes():
    with pytest.raises(RuntimeError, match="worker process of run_parallel died.*__main__"):
        run_parallel(os._exit, [(3,), (4,)], workers=2, progress=False)
