"""The one training loop of the suite, and checkpoints that are safe to write and to load.

``fit`` trains any model whose loss a function can compute from a batch: device choice,
optional mixed precision on a GPU, gradient clipping, a learning-rate schedule, a history of
losses and metrics, tqdm progress bars, an optional early stop and checkpoints.
"""

from __future__ import annotations

import os
import tempfile
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path

import torch
import torch.nn.functional as F
from torch import nn
from tqdm.auto import tqdm

from attnlib.config import choose_device

LossFunction = Callable[[nn.Module, object], torch.Tensor]


@dataclass
class History:
    """What happened, epoch by epoch: mean training loss, metrics, elapsed seconds."""

    train_loss: list[float] = field(default_factory=list)
    metrics: dict[str, list[float]] = field(default_factory=dict)
    seconds: list[float] = field(default_factory=list)
    learning_rate: list[float] = field(default_factory=list)
    steps: int = 0

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


def teacher_forcing_loss(model: nn.Module, batch, label_smoothing: float = 0.0) -> torch.Tensor:
    """Cross-entropy of next-symbol predictions given the true previous symbols (padding skipped).

    ``batch`` has ``source``, ``source_lengths``, ``target_in`` and ``target_out`` (id 0 = pad).
    """
    logits, _ = model(batch.source, batch.source_lengths, batch.target_in)
    return F.cross_entropy(
        logits.reshape(-1, logits.shape[-1]),
        batch.target_out.reshape(-1),
        ignore_index=0,
        label_smoothing=label_smoothing,
    )


def fit(
    model: nn.Module,
    batches: Iterable | Callable[[int], Iterable],
    loss_fn: LossFunction = teacher_forcing_loss,
    epochs: int = 1,
    optimizer: torch.optim.Optimizer | None = None,
    lr: float = 1e-3,
    clip_norm: float | None = 1.0,
    schedule: Callable[[int], float] | None = None,
    evaluate: Callable[[nn.Module], dict[str, float]] | None = None,
    stop_when: Callable[[dict[str, float]], bool] | None = None,
    device: torch.device | str | None = None,
    mixed_precision: bool = True,
    checkpoint_path: str | Path | None = None,
    progress: bool = True,
) -> History:
    """Train for ``epochs`` over ``batches`` (or ``batches(epoch)`` for a fresh order each epoch).

    ``schedule(step)`` multiplies ``lr`` at each optimizer step; ``evaluate(model)`` returns
    metrics after each epoch; ``stop_when(metrics)`` ends training early; the last epoch's
    weights go to ``checkpoint_path``.
    """
    if epochs < 1:
        raise ValueError(f"epochs must be positive, got {epochs}")
    device = choose_device() if device is None else torch.device(device)
    model.to(device)
    optimizer = optimizer or torch.optim.Adam(model.parameters(), lr=lr)
    scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, schedule) if schedule else None
    # bf16 autocast needs no loss scaling; on CPU it would only slow the small models down.
    autocast = mixed_precision and device.type == "cuda"
    history, start = History(), time.perf_counter()
    for epoch in range(epochs):
        epoch_batches = batches(epoch) if callable(batches) else batches
        model.train()
        total, count = 0.0, 0
        # Few redraws: each one is a message to the notebook front end (and to nbval).
        bar = tqdm(
            epoch_batches,
            desc=f"epoch {epoch + 1}/{epochs}",
            disable=not progress,
            mininterval=0.5,
        )
        for batch in bar:
            batch = batch.to(device) if hasattr(batch, "to") else batch
            optimizer.zero_grad(set_to_none=True)
            with torch.autocast(device.type, dtype=torch.bfloat16, enabled=autocast):
                loss = loss_fn(model, batch)
            if not torch.isfinite(loss):
                raise FloatingPointError(f"loss became {loss.item()} at step {history.steps}")
            loss.backward()
            if clip_norm is not None:
                nn.utils.clip_grad_norm_(model.parameters(), clip_norm)
            optimizer.step()
            if scheduler is not None:
                scheduler.step()
            history.steps += 1
            total, count = total + loss.item(), count + 1
            bar.set_postfix(loss=f"{total / count:.4f}", refresh=False)
        metrics = _evaluate(model, evaluate)
        history.record(total / max(count, 1), metrics, time.perf_counter() - start, _lr(optimizer))
        if progress and metrics:
            shown = ", ".join(f"{name} {value:.4f}" for name, value in metrics.items())
            tqdm.write(f"epoch {epoch + 1}: loss {total / max(count, 1):.4f}, {shown}")
        if stop_when is not None and stop_when(metrics):
            break
    if checkpoint_path is not None:
        save_checkpoint(checkpoint_path, model, optimizer, epochs=history.epochs)
    return history


def _evaluate(model: nn.Module, evaluate) -> dict[str, float]:
    if evaluate is None:
        return {}
    model.eval()
    with torch.no_grad():
        return {name: float(value) for name, value in evaluate(model).items()}


def _lr(optimizer: torch.optim.Optimizer) -> float:
    return float(optimizer.param_groups[0]["lr"])


def save_checkpoint(
    path: str | Path,
    model: nn.Module,
    optimizer: torch.optim.Optimizer | None = None,
    **extra: int | float | str,
) -> Path:
    """Write model (and optimizer) state atomically: a crash never leaves a half-written file."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    state = {"model": model.state_dict(), "extra": dict(extra)}
    if optimizer is not None:
        state["optimizer"] = optimizer.state_dict()
    handle, temporary = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(handle, "wb") as file:
            torch.save(state, file)
        os.replace(temporary, path)
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise
    return path


def load_checkpoint(
    path: str | Path, model: nn.Module, optimizer: torch.optim.Optimizer | None = None
) -> dict:
    """Load weights saved by :func:`save_checkpoint` (tensors only: ``weights_only=True``).

    Fails with the names of the missing, unexpected and mis-shaped parameters when the
    checkpoint belongs to another model. Returns the extra values saved with it.
    """
    state = torch.load(Path(path), map_location="cpu", weights_only=True)
    if not isinstance(state, dict) or "model" not in state:
        raise ValueError(f"{path} is not a checkpoint written by attnlib.training.save_checkpoint")
    _check_compatible(state["model"], model.state_dict(), path)
    model.load_state_dict(state["model"])
    if optimizer is not None and "optimizer" in state:
        optimizer.load_state_dict(state["optimizer"])
    return state.get("extra", {})


def _check_compatible(saved: dict, expected: dict, path: str | Path) -> None:
    missing = sorted(set(expected) - set(saved))
    unexpected = sorted(set(saved) - set(expected))
    shapes = [
        f"{name}: checkpoint {tuple(saved[name].shape)} vs model {tuple(expected[name].shape)}"
        for name in sorted(set(saved) & set(expected))
        if saved[name].shape != expected[name].shape
    ]
    if missing or unexpected or shapes:
        problems = []
        if missing:
            problems.append(f"missing from checkpoint: {', '.join(missing[:8])}")
        if unexpected:
            problems.append(f"not in model: {', '.join(unexpected[:8])}")
        if shapes:
            problems.append("shape mismatch: " + "; ".join(shapes[:8]))
        raise ValueError(f"checkpoint {path} does not match the model ({' | '.join(problems)})")
