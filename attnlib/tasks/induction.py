"""Chapter 17's task: a decoder-only model learns to copy a repeated segment from its context.

Each training row is :func:`attnlib.data.repeats.repeated_segments`' ``BOS, noise, segment,
noise, segment, noise``, fresh at every step from the run's seed. The loss is the usual
next-token loss over every position; what the chapter watches is the loss on the positions whose
next token copying can predict (the second copy's) against the others, and every head's
previous-token and prefix-matching scores (:mod:`attnlib.heads`), measured on a fixed probe
batch that no training step sees.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from dataclasses import dataclass, field

import torch
import torch.nn.functional as F
from torch import nn

from attnlib._checks import check_count, check_int, check_number
from attnlib.config import seed_everything
from attnlib.data.repeats import RepeatedSegments, repeated_segments
from attnlib.heads import (
    copying_score,
    in_context_gain,
    prefix_matching_score,
    previous_token_score,
)
from attnlib.lm import DecoderOnlyLM
from attnlib.model_config import TransformerConfig
from attnlib.schedules import linear_warmup
from attnlib.training import History, fit

PROBE_SEED = 1_000_000_007  # the probe batch's seed: far from any training step's
STEPS_PER_SEED = 1_000_000  # training seed s draws its step t's batch with seed s * this + t


@dataclass(frozen=True)
class InductionTask:
    """The data and training budget of a run; ``seed`` sets the batches' order and content."""

    vocab_size: int = 64
    seq_len: int = 48
    min_segment: int = 10
    max_segment: int = 23
    batch_size: int = 32
    steps: int = 4000
    lr: float = 3e-3
    warmup: int = 200
    probe_size: int = 128

    def __post_init__(self) -> None:
        for name in ("vocab_size", "seq_len", "min_segment", "max_segment", "batch_size"):
            check_count(name, getattr(self, name))
        check_count("steps", self.steps)
        check_count("warmup", self.warmup)
        check_count("probe_size", self.probe_size)
        if check_number("lr", self.lr) <= 0:
            raise ValueError(f"lr must be positive, got {self.lr}")
        if self.steps >= STEPS_PER_SEED:
            raise ValueError(f"steps must be below {STEPS_PER_SEED}, got {self.steps}")
        repeated_segments(1, **self._shape(), seed=0)  # refuses a segment that does not fit

    def _shape(self) -> dict[str, int]:
        return {
            "seq_len": self.seq_len,
            "vocab_size": self.vocab_size,
            "min_segment": self.min_segment,
            "max_segment": self.max_segment,
        }

    def batch(self, seed: int, step: int) -> torch.Tensor:
        """Training step ``step``'s token ids (batch_size, seq_len) for the run ``seed``."""
        check_int("seed", seed)
        check_int("step", step)
        draw = seed * STEPS_PER_SEED + step
        return repeated_segments(self.batch_size, **self._shape(), seed=draw).ids

    def batches(self, seed: int) -> Iterator[torch.Tensor]:
        """The ``steps`` training batches of the run ``seed``, in order: (batch_size, seq_len)."""
        return (self.batch(seed, step) for step in range(self.steps))

    def probe(self) -> RepeatedSegments:
        """The fixed batch every measurement uses: (probe_size, seq_len), with its repeat_mask."""
        return repeated_segments(self.probe_size, **self._shape(), seed=PROBE_SEED)

    def model_config(self, num_layers: int = 2, **changes: object) -> TransformerConfig:
        """An attention-only decoder for this vocabulary and length; ``changes`` override it."""
        settings = {
            "vocab_size": self.vocab_size,
            "d_model": 64,
            "num_heads": 4,
            "num_layers": num_layers,
            "d_ff": 0,
            "dropout": 0.0,
            "max_len": self.seq_len,
            "positions": "learned",
            "norm_first": True,
            "pad_id": 0,
        }
        settings.update(changes)
        return TransformerConfig(**settings)


def _next_token_losses(logits: torch.Tensor, ids: torch.Tensor) -> torch.Tensor:
    """logits (batch, seq, vocab) of ids (batch, seq) -> each prediction's loss (batch, seq - 1)."""
    return F.cross_entropy(logits[:, :-1].transpose(1, 2), ids[:, 1:], reduction="none")


def token_losses(model: nn.Module, ids: torch.Tensor) -> torch.Tensor:
    """Each position's next-token loss: ids (batch, seq) -> (batch, seq - 1), in nats."""
    return _next_token_losses(model(ids), ids)


def next_token_loss(model: nn.Module, ids: torch.Tensor) -> torch.Tensor:
    """The training loss: mean next-token cross-entropy over every position (a 0-d tensor)."""
    return token_losses(model, ids).mean()


@dataclass(frozen=True)
class HeadReport:
    """One measurement on the probe: the in-context losses and every head's scores."""

    loss_repeated: float
    loss_other: float
    previous_token: torch.Tensor  # (layers, heads)
    prefix_matching: torch.Tensor  # (layers, heads)

    @property
    def gain(self) -> float:
        """How much lower the loss is where copying can predict: other minus repeated, nats."""
        return self.loss_other - self.loss_repeated


@torch.no_grad()
def measure(model: DecoderOnlyLM, probe: RepeatedSegments) -> HeadReport:
    """The model's in-context losses and head scores on the probe batch (in eval mode)."""
    was_training = model.training
    model.eval()
    try:
        logits, weights = model.attention_weights(probe.ids)
    finally:
        model.train(was_training)
    split = in_context_gain(_next_token_losses(logits, probe.ids), probe.repeat_mask[:, :-1])
    return HeadReport(
        loss_repeated=split.repeated,
        loss_other=split.other,
        previous_token=previous_token_score(weights),
        prefix_matching=prefix_matching_score(weights, probe.ids),
    )


@dataclass
class InductionRun:
    """A trained model, its training history and a :class:`HeadReport` every ``every`` steps."""

    model: DecoderOnlyLM
    history: History
    every: int
    reports: list[HeadReport] = field(default_factory=list)

    @property
    def steps(self) -> list[int]:
        """The optimizer step of each report."""
        return [self.every * (index + 1) for index in range(len(self.reports))]


def train(
    model: DecoderOnlyLM, task: InductionTask, seed: int, every: int = 100, progress: bool = True
) -> InductionRun:
    """Train ``model`` on the run ``seed``'s batches (Adam, the task's learning rate after a
    linear warm-up, gradients not clipped), measuring it on the probe every ``every``
    steps; the clock is CPU time."""
    check_count("every", every)
    if task.steps % every:
        raise ValueError(f"every={every} must divide the task's steps={task.steps}")
    probe = task.probe()
    run = InductionRun(model, History(), every)

    def evaluate(trained: nn.Module) -> dict[str, float]:
        report = measure(trained, probe)
        run.reports.append(report)
        return {"loss_repeated": report.loss_repeated, "loss_other": report.loss_other}

    run.history = fit(
        model,
        task.batches(seed),
        next_token_loss,
        lr=task.lr,
        clip_norm=None,
        schedule=linear_warmup(task.warmup),
        evaluate=evaluate,
        evaluate_every=every,
        clock=time.process_time,
        device="cpu",
        progress="run" if progress else False,
        max_steps=task.steps,
    )
    return run


def train_seed(task: InductionTask, num_layers: int, seed: int, every: int = 100) -> InductionRun:
    """A fresh :class:`DecoderOnlyLM` of ``num_layers`` layers, built after seeding ``seed`` on
    one thread and trained by :func:`train` without a progress bar: one run of chapter 17, a
    function of this module so that :func:`attnlib.parallel.run_parallel` can send it to
    another process."""
    seed_everything(check_int("seed", seed), threads=1)
    model = DecoderOnlyLM(task.model_config(num_layers=check_count("num_layers", num_layers)))
    return train(model, task, seed, every=every, progress=False)


@torch.no_grad()
def copying_scores(model: DecoderOnlyLM) -> torch.Tensor:
    """Every head's copying score (:func:`attnlib.heads.copying_score`) -> (layers, heads).

    Each head's OV circuit is read from the token embedding through its value and output
    weights to the output layer, as Elhage et al. do: the LayerNorms and the other heads are
    left out, so the score says what the head writes about the token it reads, not more.
    """
    embedding, unembedding = model.embedding.weight, model.output.weight
    scores = torch.zeros(len(model.layers), model.config.num_heads)
    for index, layer in enumerate(model.layers):
        attention = layer.attention
        width = attention.head_dim
        shared = attention.num_heads // attention.num_kv_heads  # query heads per value head
        for head in range(attention.num_heads):
            value_head = head // shared
            w_v = attention.value_projection.weight[value_head * width : (value_head + 1) * width]
            w_o = attention.output_projection.weight[:, head * width : (head + 1) * width]
            scores[index, head] = copying_score(embedding, w_v.T, w_o.T, unembedding)
    return scores
