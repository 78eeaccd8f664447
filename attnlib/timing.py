"""Timing a callable: the fastest of a few runs, in milliseconds of CPU time.

CPU time (``time.process_time``) is the project's clock for timings: on one thread it is the work
done, and a run that another program pre-empted is not charged for the wait, as it would be on a
wall clock. The fastest of a few runs is the one least disturbed by caches and the scheduler.
"""

from __future__ import annotations

import time
from collections.abc import Callable

from attnlib._checks import check_count


def best_time_ms(function: Callable[[], object], repeats: int = 5) -> float:
    """The fastest of ``repeats`` calls of ``function()``, in milliseconds of CPU time."""
    repeats = check_count("repeats", repeats)
    best = float("inf")
    for _ in range(repeats):
        start = time.process_time()
        function()
        best = min(best, time.process_time() - start)
    return 1e3 * best
