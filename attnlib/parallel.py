"""Independent runs side by side, one process each: the seeds of a comparison on a multi-core CPU.

Each run trains on one thread (as the notebooks do, for reproducible sums) and seeds itself, so
a run's result does not depend on how many processes share the work, nor on which one ran it:
``workers=1`` gives the same numbers in this process, only more slowly. Processes are started
with ``spawn`` on every system, so the function must be importable from a module (for example
:func:`attnlib.tasks.copy.train_seed`); a function written in a notebook cannot be sent.
"""

from __future__ import annotations

import os
import pickle
from collections.abc import Callable, Sequence
from concurrent.futures import ProcessPoolExecutor, as_completed
from concurrent.futures.process import BrokenProcessPool
from multiprocessing import get_context
from typing import Any

import torch
from tqdm.auto import tqdm


def default_workers(jobs: int) -> int:
    """One process per CPU core this process may use, and no more than there are jobs."""
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    return max(1, min(jobs, cores or 1))


def run_parallel(
    function: Callable[..., Any],
    jobs: Sequence[tuple],
    workers: int | None = None,
    progress: bool = True,
    description: str = "runs",
) -> list[Any]:
    """``function(*job)`` for every job, in ``workers`` processes; the results in job order.

    ``workers`` defaults to one per core (at most one per job); 1 runs every job here, in turn.
    """
    jobs = [tuple(job) for job in jobs]
    if not jobs:
        raise ValueError("run_parallel was given no jobs")
    if workers is None:
        workers = default_workers(len(jobs))
    if isinstance(workers, bool) or not isinstance(workers, int) or workers < 1:
        raise ValueError(f"workers must be a positive int, got {workers!r}")
    _check_sendable(function)
    bar = tqdm(total=len(jobs), desc=description, disable=not progress, leave=False)
    if workers == 1:
        results = []
        for job in jobs:
            results.append(function(*job))
            bar.update()
        bar.close()
        return results
    results: list[Any] = [None] * len(jobs)
    context = get_context("spawn")
    try:
        with ProcessPoolExecutor(workers, mp_context=context, initializer=_one_thread) as pool:
            futures = {pool.submit(function, *job): index for index, job in enumerate(jobs)}
            for future in as_completed(futures):
                results[futures[future]] = future.result()
                bar.update()
    except BrokenProcessPool as error:
        raise RuntimeError(
            "a worker process of run_parallel died before finishing its job. In a script, call "
            "run_parallel under `if __name__ == '__main__':` (each new process imports the "
            "script again); otherwise it may have run out of memory: try fewer workers"
        ) from error
    finally:
        bar.close()
    return results


def _one_thread() -> None:
    """Each worker computes on one thread: the workers, not the threads, share the cores."""
    torch.set_num_threads(1)


def _check_sendable(function: Callable[..., Any]) -> None:
    """Fail with a message that says what to do if ``function`` cannot reach another process."""
    if not callable(function):
        raise TypeError(f"run_parallel needs a function, got {function!r}")
    name = getattr(function, "__qualname__", repr(function))
    try:
        pickle.dumps(function)
        # __main__ pickles by name, but a spawned process has its own __main__ without it.
        problem = "it lives in __main__" if _module_of(function) == "__main__" else None
    except (pickle.PicklingError, AttributeError, TypeError) as error:
        problem = str(error)
    if problem:
        raise ValueError(
            f"run_parallel cannot send {name} to another process ({problem}); pass a function "
            "defined at the top level of an importable module, e.g. "
            "attnlib.tasks.copy.train_seed, not one written in a notebook or inside a function"
        )


def _module_of(function: Callable[..., Any]) -> str | None:
    """The module a function (or the function inside a functools.partial) comes from."""
    return getattr(getattr(function, "func", function), "__module__", None)
