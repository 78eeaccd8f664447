"""best_time_ms: the fastest of a few runs, in milliseconds of CPU time."""

from __future__ import annotations

import time

import pytest

from attnlib.timing import best_time_ms


def test_calls_the_function_repeats_times():
    calls = []
    best_time_ms(lambda: calls.append(1), repeats=3)
    assert len(calls) == 3


def test_charges_cpu_time_not_a_sleep():
    # a pre-empted run waits like a sleep; CPU time does not count the wait
    assert best_time_ms(lambda: time.sleep(0.05), repeats=1) < 20


def test_counts_work_in_milliseconds():
    def busy():  # about 30 ms of CPU time
        end = time.process_time() + 0.03
        while time.process_time() < end:
            pass

    assert 25 <= best_time_ms(busy, repeats=2) < 1000


@pytest.mark.parametrize(("repeats", "error"), [(0, ValueError), (2.0, TypeError)])
def test_rejects_a_repeat_count_that_is_not_positive_int(repeats, error):
    with pytest.raises(error, match="repeats must be"):
        best_time_ms(lambda: None, repeats=repeats)
