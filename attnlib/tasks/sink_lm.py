"""Chapter 18's language model of IMDB text, and when its attention sinks appear in training.

A decoder-only model (:class:`~attnlib.lm.DecoderOnlyLM`, rotary positions, pre-LN) reads
windows cut at random places from one stream of reviews, each review followed by ``[SEP]``
(:func:`review_stream`), so the first token of a window is any token at all. Every ``every``
steps :func:`train` measures it on a fixed probe of windows from text it never trains on: its
loss, and every head's first-token score (:func:`attnlib.heads.first_token_score`), the share
of weight that goes to position 0. ``scripts/train_sink_lm.py`` runs it on IMDB and keeps a
checkpoint at every measurement.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from attnlib._checks import check_count, check_int, check_number
from attnlib.heads import first_token_score
from attnlib.lm import DecoderOnlyLM
from attnlib.model_config import TransformerConfig
from attnlib.schedules import cosine_decay
from attnlib.tasks.induction import next_token_loss
from attnlib.training import History, fit

PROBE_SEED = 1_000_000_009  # the probe's windows: far from any training seed
STEPS_PER_SEED = 1_000_000  # training seed s draws step t's windows with seed s * this + t


@dataclass(frozen=True)
class SinkLMTask:
    """The windows and the training budget of a run: AdamW (decoupled weight decay on the
    matrices only), a linear warm-up and a cosine decay over ``steps``."""

    seq_len: int = 128
    batch_size: int = 32
    steps: int = 20_000
    lr: float = 1e-3
    warmup: int = 500
    weight_decay: float = 0.1
    probe_size: int = 32
    every: int = 500

    def __post_init__(self) -> None:
        for name in ("seq_len", "batch_size", "steps", "warmup", "probe_size", "every"):
            check_count(name, getattr(self, name))
        if self.seq_len < 2:
            raise ValueError(f"seq_len must be >= 2 to predict a token, got {self.seq_len}")
        if check_number("lr", self.lr) <= 0:
            raise ValueError(f"lr must be positive, got {self.lr}")
        if check_number("weight_decay", self.weight_decay) < 0:
            raise ValueError(f"weight_decay must be >= 0, got {self.weight_decay}")
        if self.warmup >= self.steps:
            raise ValueError(f"warmup={self.warmup} leaves no steps in steps={self.steps}")
        if self.steps % self.every:
            raise ValueError(f"every={self.every} must divide steps={self.steps}")
        if self.steps >= STEPS_PER_SEED:
            raise ValueError(f"steps must be below {STEPS_PER_SEED:,}, got {self.steps}")


def review_stream(encoded: Sequence[Sequence[int]], sep_id: int) -> np.ndarray:
    """Token ids of each review, each followed by ``sep_id``, one after the other: (tokens,)."""
    if not encoded:
        raise ValueError("review_stream needs at least one review")
    check_int("sep_id", sep_id)
    return np.concatenate([np.append(np.asarray(ids, dtype=np.int64), sep_id) for ids in encoded])


def _windows(stream: np.ndarray, seq_len: int, count: int, generator: torch.Generator):
    """(count, seq_len) windows of ``stream`` at random starts."""
    if stream.ndim != 1 or len(stream) < seq_len:
        raise ValueError(f"the stream must be 1-D and hold at least {seq_len} tokens")
    starts = torch.randint(0, len(stream) - seq_len + 1, (count,), generator=generator)
    rows = np.stack([stream[s : s + seq_len] for s in starts.tolist()])
    return torch.from_numpy(rows)


def batches(stream: np.ndarray, task: SinkLMTask, seed: int) -> Iterator[torch.Tensor]:
    """Training batches (batch_size, seq_len): step t's windows drawn with seed s * 1e6 + t."""
    check_int("seed", seed)
    for step in range(task.steps):
        generator = torch.Generator().manual_seed(seed * STEPS_PER_SEED + step)
        yield _windows(stream, task.seq_len, task.batch_size, generator)


def probe(stream: np.ndarray, task: SinkLMTask) -> torch.Tensor:
    """The fixed windows (probe_size, seq_len) every measurement reads."""
    return _windows(
        stream, task.seq_len, task.probe_size, torch.Generator().manual_seed(PROBE_SEED)
    )


def new_model(vocab_size: int, attention_sink: str | None = None, **sizes) -> DecoderOnlyLM:
    """Chapter 18's model: rotary, pre-LN, no dropout; ``sizes`` override d_model=128,
    num_heads=4, num_layers=4, d_ff=512."""
    options = {"d_model": 128, "num_heads": 4, "num_layers": 4, "d_ff": 512} | sizes
    config = TransformerConfig(
        vocab_size=vocab_size,
        dropout=0.0,
        positions="rotary",
        norm_first=True,
        activation="gelu",
        attention_sink=attention_sink,
        **options,
    )
    return DecoderOnlyLM(config)


@dataclass(frozen=True)
class SinkReport:
    """One measurement: the probe's mean next-token loss and every head's first-token score
    (layers, heads)."""

    step: int
    loss: float
    first_token: torch.Tensor


@torch.no_grad()
def measure(model: DecoderOnlyLM, windows: torch.Tensor, step: int = 0) -> SinkReport:
    """The model on ``windows`` (n, seq_len), in eval mode (its mode comes back)."""
    was_training = model.training
    model.eval()
    try:
        logits, weights = model.attention_weights(windows)
        loss = F.cross_entropy(logits[:, :-1].flatten(0, 1), windows[:, 1:].flatten()).item()
        return SinkReport(step, loss, first_token_score(weights))
    finally:
        model.train(was_training)


@dataclass
class SinkLMRun:
    """A trained model, its history and a :class:`SinkReport` every ``task.every`` steps."""

    model: DecoderOnlyLM
    history: History
    reports: list[SinkReport] = field(default_factory=list)


def optimizer_for(model: nn.Module, task: SinkLMTask) -> torch.optim.Optimizer:
    """AdamW: weight decay on matrices (embeddings and projections), none on biases, norms and
    sink logits, as is usual (Loshchilov & Hutter's decoupled decay)."""
    decayed = [p for p in model.parameters() if p.dim() >= 2]
    kept = [p for p in model.parameters() if p.dim() < 2]
    groups = [
        {"params": decayed, "weight_decay": task.weight_decay},
        {"params": kept, "weight_decay": 0.0},
    ]
    return torch.optim.AdamW(groups, lr=task.lr, betas=(0.9, 0.95))


def train(
    model: DecoderOnlyLM,
    stream: np.ndarray,
    held_out: np.ndarray,
    task: SinkLMTask,
    seed: int,
    progress: bool = True,
    on_report: Callable[[SinkReport, DecoderOnlyLM], None] | None = None,
) -> SinkLMRun:
    """Train on windows of ``stream``, measuring on the probe of ``held_out`` every
    ``task.every`` steps (then ``on_report(report, model)``, e.g. to keep a checkpoint); the
    clock is CPU time."""
    windows = probe(held_out, task)
    run = SinkLMRun(model, History())

    def evaluate(trained: nn.Module) -> dict[str, float]:
        step = task.every * (len(run.reports) + 1)
        report = measure(trained, windows, step)
        run.reports.append(report)
        if on_report is not None:
            on_report(report, trained)
        return {"probe_loss": report.loss, "first_token_max": report.first_token.max().item()}

    run.history = fit(
        model,
        batches(stream, task, seed),
        next_token_loss,
        optimizer=optimizer_for(model, task),
        lr=task.lr,
        clip_norm=1.0,
        schedule=cosine_decay(task.steps, task.warmup, final=0.1),
        evaluate=evaluate,
        evaluate_every=task.every,
        clock=time.process_time,
        device="cpu",
        progress="run" if progress else False,
        max_steps=task.steps,
    )
    return run
