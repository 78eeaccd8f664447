"""The one training loop of the suite (its checkpoints: :mod:`attnlib.checkpoints`, re-exported).

``fit`` trains any model whose loss the caller's function computes from a batch (the loss
belongs to the task, see :mod:`attnlib.tasks`; this loop knows no model): device choice,
optional mixed precision on a GPU, gradient clipping, a learning-rate schedule, a history of
losses and metrics (per epoch, and every N steps for learning curves against training time),
tqdm progress bars, an optional early stop and checkpoints.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Iterable, Sized
from dataclasses import dataclass, field
from pathlib import Path

import torch
from torch import nn
from tqdm.auto import tqdm

from attnlib._checks import check_count, check_number
from attnlib.checkpoints import load_checkpoint as load_checkpoint  # re-exported, as before
from attnlib.checkpoints import save_checkpoint
from attnlib.config import choose_device, training_precision

LossFunction = Callable[[nn.Module, object], torch.Tensor]


@dataclass(frozen=True)
class Evaluation:
    """One call of ``evaluate``: after how many steps, in which epoch, at what training time."""

    step: int  # optimizer steps taken so far
    epoch: int  # the epoch it fell in, counted from 1
    seconds: float  # training time so far, the time spent evaluating left out
    metrics: dict[str, float]


@dataclass
class History:
    """What happened, epoch by epoch: mean training loss, metrics, elapsed seconds.

    ``seconds`` is the time since the start at each epoch's end, evaluations included;
    ``evaluations`` lists every evaluation (each epoch's, and those every ``evaluate_every``
    steps) with the training time alone, the clock to compare models of different cost by.
    Times are read from ``fit``'s ``clock``: wall time unless it was given another.
    """

    train_loss: list[float] = field(default_factory=list)
    metrics: dict[str, list[float]] = field(default_factory=dict)
    seconds: list[float] = field(default_factory=list)
    learning_rate: list[float] = field(default_factory=list)
    steps: int = 0
    evaluations: list[Evaluation] = field(default_factory=list)
    evaluation_seconds: float = 0.0  # the time spent in ``evaluate``, in all

    def record(self, loss: float, metrics: dict[str, float], seconds: float, lr: float) -> None:
        """Append one epoch's numbers."""
        self.train_loss.append(loss)
        for name, value in metrics.items():
            self.metrics.setdefault(name, []).append(value)
        self.seconds.append(seconds)
        self.learning_rate.append(lr)

    @property
    def epochs(self) -> int:
        """Number of epochs recorded."""
        return len(self.train_loss)

    def curve(self, name: str) -> tuple[list[int], list[float], list[float]]:
        """A learning curve from ``evaluations``: (steps, training seconds, values of ``name``)."""
        known = sorted({key for evaluation in self.evaluations for key in evaluation.metrics})
        if name not in known:
            raise ValueError(
                f"no metric {name!r} was evaluated; the evaluations hold "
                f"{', '.join(map(repr, known)) or 'nothing (fit was given no evaluate)'}"
            )
        chosen = [evaluation for evaluation in self.evaluations if name in evaluation.metrics]
        return (
            [evaluation.step for evaluation in chosen],
            [evaluation.seconds for evaluation in chosen],
            [evaluation.metrics[name] for evaluation in chosen],
        )


class Patience:
    """A ``stop_when`` for :func:`fit`: stop once ``metric`` has not beaten its best so far by
    more than ``min_delta`` for ``patience`` evaluations in a row (higher is better).

    Training then ends on a plateau by construction: the last ``patience`` epochs brought no
    gain larger than ``min_delta``. ``best`` and ``best_epoch`` say where the best value was.
    """

    def __init__(self, metric: str, patience: int, min_delta: float = 0.0):
        check_count("patience", patience)
        if check_number("min_delta", min_delta) < 0:  # check_number refuses NaN and inf
            raise ValueError(f"min_delta must be a finite number >= 0, got {min_delta}")
        self.metric, self.patience, self.min_delta = metric, patience, float(min_delta)
        self.best, self.best_epoch, self.epochs_seen = -math.inf, 0, 0

    def __call__(self, metrics: dict[str, float]) -> bool:
        """Record one epoch's metrics; whether training should stop now."""
        if self.metric not in metrics:
            raise ValueError(
                f"Patience watches {self.metric!r}, but evaluate returned "
                f"{sorted(metrics) or 'no metrics'}"
            )
        self.epochs_seen += 1
        if metrics[self.metric] > self.best + self.min_delta:
            self.best, self.best_epoch = metrics[self.metric], self.epochs_seen
        return self.epochs_seen - self.best_epoch >= self.patience


def fit(
    model: nn.Module,
    batches: Iterable | Callable[[int], Iterable],
    loss_fn: LossFunction,
    epochs: int = 1,
    optimizer: torch.optim.Optimizer | None = None,
    lr: float = 1e-3,
    clip_norm: float | None = 1.0,
    schedule: Callable[[int], float] | None = None,
    evaluate: Callable[[nn.Module], dict[str, float]] | None = None,
    stop_when: Callable[[dict[str, float]], bool] | None = None,
    device: torch.device | str | None = None,
    mixed_precision: bool | torch.dtype = True,
    checkpoint_path: str | Path | None = None,
    progress: bool | str = True,
    max_steps: int | None = None,
    evaluate_every: int | None = None,
    clock: Callable[[], float] = time.perf_counter,
    part_name: str = "epoch",
) -> History:
    """Train for ``epochs`` over ``batches`` (or ``batches(epoch)`` for a fresh order each epoch).

    ``loss_fn(model, batch)`` is the task's loss (a 0-d tensor); ``schedule(step)`` multiplies
    ``lr`` at each optimizer step; ``evaluate(model)`` returns metrics after each epoch, and
    also after every ``evaluate_every`` optimizer steps (counted over the whole run; each lands
    in ``History.evaluations`` with the training seconds so far, evaluation time left out);
    ``stop_when(metrics)`` (looked at after each epoch) ends training early, and so does
    ``max_steps`` optimizer steps; the last epoch's weights go to ``checkpoint_path``.
    ``clock()`` reads the time in seconds: ``time.perf_counter`` (wall time) by default, or
    e.g. ``time.process_time``, the CPU time of this process, which other programs sharing the
    cores do not inflate (on a CPU-only run, the compute spent). ``progress`` draws a bar per
    epoch (True), none (False), or ``"run"``: one bar over every step, for a run cut into many
    short epochs (a notebook then shows one bar, not one per part). ``part_name`` is what the
    bars and the lines printed after each epoch call one: "part" where an epoch is not a pass
    over the data (pretraining in fixed slices of steps). ``mixed_precision`` True
    autocasts to :func:`attnlib.config.training_precision` (bfloat16 or float16 on a GPU, none
    on MPS or the CPU), False never, a dtype always; float16 brings a gradient scaler with it.
    """
    check_count("epochs", epochs)
    if progress not in (True, False, "run"):
        raise ValueError(f"progress must be True, False or 'run', got {progress!r}")
    if max_steps is not None:
        check_count("max_steps", max_steps)
    if evaluate_every is not None:
        check_count("evaluate_every", evaluate_every)
        if evaluate is None:
            raise ValueError("evaluate_every was given without evaluate: nothing to evaluate")
    if not callable(clock):
        raise TypeError(f"clock must be a function returning seconds, got {clock!r}")
    if isinstance(batches, Sized) and not callable(batches) and len(batches) == 0:
        raise ValueError("fit was given no batches (an empty collection): nothing to train on")
    device = choose_device() if device is None else torch.device(device)
    model.to(device)
    optimizer = optimizer or torch.optim.Adam(model.parameters(), lr=lr)
    scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, schedule) if schedule else None
    # bf16 autocast needs no loss scaling; on CPU it would only slow the small models down.
    if isinstance(mixed_precision, torch.dtype):
        dtype = mixed_precision
    else:
        dtype = training_precision(device) if mixed_precision else None
    # float16 underflows small gradients to 0: scale the loss up, and the gradients back down.
    scaler = torch.amp.GradScaler(device.type) if dtype == torch.float16 else None
    history = History()
    timer = _TrainingClock(device, clock)
    run_bar = _run_bar(batches, epochs, max_steps, part_name) if progress == "run" else None
    for epoch in range(epochs):
        epoch_batches = batches(epoch) if callable(batches) else batches
        model.train()
        # The running loss stays on the device: reading it is a host sync, so it is read only
        # when the bar redraws and at the end of the epoch (and checked for NaN/inf then).
        running = _RunningLoss(device, history.steps)
        # Few redraws: each one is a message to the notebook front end (and to nbval).
        bar = run_bar or tqdm(
            epoch_batches,
            desc=f"{part_name} {epoch + 1}/{epochs}",
            disable=not progress,
            mininterval=_REDRAW_SECONDS,
        )
        for batch in epoch_batches if run_bar else bar:
            batch = batch.to(device) if hasattr(batch, "to") else batch
            optimizer.zero_grad(set_to_none=True)
            with torch.autocast(device.type, dtype=dtype, enabled=dtype is not None):
                loss = loss_fn(model, batch)
            _step(model, optimizer, loss, clip_norm, scaler)
            if scheduler is not None:
                scheduler.step()
            history.steps += 1
            if run_bar is not None:
                run_bar.update()
            running.add(loss)
            if progress and running.due():
                bar.set_postfix(loss=f"{running.read(history.steps):.4f}", refresh=False)
            if evaluate_every is not None and history.steps % evaluate_every == 0:
                _evaluate_now(model, evaluate, history, epoch + 1, timer)
                model.train()
            if max_steps is not None and history.steps >= max_steps:
                break
        if running.count == 0:
            raise ValueError(
                f"epoch {epoch + 1} of fit had no batches: the batches given "
                f"({type(epoch_batches).__name__}) yielded nothing, so there is no loss to record"
            )
        mean_loss = running.read(history.steps)
        last = history.evaluations[-1] if history.evaluations else None
        if last is not None and last.step == history.steps:  # evaluated at this very step
            metrics = dict(last.metrics)
        else:
            metrics = _evaluate_now(model, evaluate, history, epoch + 1, timer)
        history.record(mean_loss, metrics, timer.elapsed(), _lr(optimizer))
        if progress and metrics:
            shown = ", ".join(f"{name} {value:.4f}" for name, value in metrics.items())
            tqdm.write(f"{part_name} {epoch + 1}: loss {mean_loss:.4f}, {shown}")
        if stop_when is not None and stop_when(metrics):
            break
        if max_steps is not None and history.steps >= max_steps:
            break
    if run_bar is not None:
        run_bar.close()
    if checkpoint_path is not None:
        save_checkpoint(checkpoint_path, model, optimizer, epochs=history.epochs)
    return history


_REDRAW_SECONDS = 0.5


def _step(model, optimizer, loss: torch.Tensor, clip_norm: float | None, scaler) -> None:
    """Backward and one optimizer step, through ``scaler`` (float16) when there is one."""
    if scaler is None:
        loss.backward()
        if clip_norm is not None:
            nn.utils.clip_grad_norm_(model.parameters(), clip_norm)
        optimizer.step()
        return
    scaler.scale(loss).backward()
    if clip_norm is not None:
        scaler.unscale_(optimizer)  # clip the true gradients, not the scaled ones
        nn.utils.clip_grad_norm_(model.parameters(), clip_norm)
    scaler.step(optimizer)  # skipped, and the scale lowered, if a gradient overflowed
    scaler.update()


def _run_bar(batches, epochs: int, max_steps: int | None, part_name: str) -> tqdm:
    """One bar for the whole run, its total the steps when they can be known."""
    total = epochs * len(batches) if isinstance(batches, Sized) and not callable(batches) else None
    if max_steps is not None:
        total = max_steps if total is None else min(total, max_steps)
    desc = f"{epochs} {part_name}" + ("" if epochs == 1 else "s")
    return tqdm(total=total, desc=desc, mininterval=_REDRAW_SECONDS, unit="step")


class _RunningLoss:
    """An epoch's loss summed on the device; read (a host sync) only when it is shown."""

    def __init__(self, device: torch.device, first_step: int):
        self.total = torch.zeros((), device=device)
        self.count, self.checked_step = 0, first_step
        self.shown_at = time.monotonic()

    def add(self, loss: torch.Tensor) -> None:
        """Add one step's 0-d loss without waiting for it."""
        self.total += loss.detach().float()
        self.count += 1

    def due(self) -> bool:
        """Whether the progress bar may redraw (at most every ``_REDRAW_SECONDS``)."""
        return time.monotonic() - self.shown_at >= _REDRAW_SECONDS

    def read(self, step: int) -> float:
        """The mean loss so far; fails naming the steps since the last read if it is not finite."""
        total = float(self.total)
        if not math.isfinite(total):
            raise FloatingPointError(
                f"loss became {total} between steps {self.checked_step + 1} and {step} "
                "(steps count from 1)"
            )
        self.checked_step, self.shown_at = step, time.monotonic()
        return total / max(self.count, 1)


class _TrainingClock:
    """Time since the start, and training time: the same with evaluations left out."""

    def __init__(self, device: torch.device, clock: Callable[[], float]):
        self.device, self.clock = device, clock
        self.start, self.evaluating = clock(), 0.0

    def elapsed(self) -> float:
        """Seconds since the start, evaluations included (queued GPU work finished first)."""
        if self.device.type == "cuda":
            torch.cuda.synchronize(self.device)
        return self.clock() - self.start


def _evaluate_now(
    model: nn.Module, evaluate, history: History, epoch: int, timer: _TrainingClock
) -> dict[str, float]:
    """Evaluate (if there is an ``evaluate``), log it in ``history``, keep its time apart."""
    if evaluate is None:
        return {}
    began = timer.elapsed()
    trained_for = began - timer.evaluating
    metrics = _evaluate(model, evaluate)
    spent = timer.elapsed() - began
    timer.evaluating += spent
    history.evaluation_seconds += spent
    history.evaluations.append(Evaluation(history.steps, epoch, trained_for, dict(metrics)))
    return metrics


def _evaluate(model: nn.Module, evaluate) -> dict[str, float]:
    """The metrics of ``evaluate(model)`` as floats, in eval mode and without gradients."""
    if evaluate is None:
        return {}
    model.eval()
    with torch.no_grad():
        return {name: float(value) for name, value in evaluate(model).items()}


def _lr(optimizer: torch.optim.Optimizer) -> float:
    return float(optimizer.param_groups[0]["lr"])
