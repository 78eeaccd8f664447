"""The harness of chapter 19: one decoder-only model, its mixer chosen by the config, on MQAR.

:func:`recall_config` builds the same model around any mixer of :data:`attnlib.mixers.MIXERS`
(pre-LN blocks, a short causal convolution before each mixer, no position table: the
convolution tells a token its neighbours). :func:`train` trains one on fresh multi-query
associative recall rows (:mod:`attnlib.data.mqar`) at every step, for ``steps`` optimizer steps
or ``seconds`` of this process's CPU time, whichever ends first, and measures recall on a fixed
batch that no training step sees. ``scripts/recall_harness.py`` runs it over mixers, pair counts
and seeds.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass

import torch
import torch.nn.functional as F

from attnlib._checks import check_count, check_int, check_number
from attnlib.data.mqar import IGNORE, MQARBatch, mqar_batch
from attnlib.encoder import count_parameters
from attnlib.lm import DecoderOnlyLM
from attnlib.model_config import TransformerConfig
from attnlib.schedules import cosine_decay
from attnlib.training import fit

PROBE_SEED = 2_000_000_011  # the measured rows: far from any training seed
STEPS_PER_SEED = 1_000_000  # training seed s draws step t's rows with seed s * this + t


@dataclass(frozen=True)
class RecallTask:
    """The rows and the budget of a run: AdamW at ``lr`` with a linear warm-up over a tenth of
    ``steps`` and a cosine decay, until ``steps`` or ``seconds`` (None: no limit) of CPU time."""

    num_pairs: int = 8
    seq_len: int = 64
    vocab_size: int = 128
    batch_size: int = 64
    steps: int = 1000
    seconds: float | None = None
    lr: float = 1e-2
    probe_size: int = 256

    def __post_init__(self) -> None:
        for name in ("num_pairs", "seq_len", "vocab_size", "batch_size", "steps", "probe_size"):
            check_count(name, getattr(self, name))
        if check_number("lr", self.lr) <= 0:
            raise ValueError(f"lr must be positive, got {self.lr}")
        if self.seconds is not None and check_number("seconds", self.seconds) <= 0:
            raise ValueError(f"seconds must be positive or None, got {self.seconds}")
        mqar_batch(1, self.seq_len, self.num_pairs, self.vocab_size, 0)  # checks the sizes


def recall_config(
    mixer: str,
    vocab_size: int = 128,
    d_model: int = 64,
    num_heads: int = 4,
    num_layers: int = 2,
    d_ff: int = 128,
    short_convolution: int | None = 4,
) -> TransformerConfig:
    """The harness's model around ``mixer``: pre-LN, no dropout, no position table."""
    return TransformerConfig(
        vocab_size=vocab_size,
        d_model=d_model,
        num_heads=num_heads,
        num_layers=num_layers,
        d_ff=d_ff,
        dropout=0.0,
        positions="none",
        norm_first=True,
        mixer=mixer,
        short_convolution=short_convolution,
    )


def recall_loss(model: torch.nn.Module, batch: MQARBatch) -> torch.Tensor:
    """Cross-entropy at the query positions only (a 0-d tensor)."""
    logits = model(batch.ids)  # (batch, seq_len, vocab)
    return F.cross_entropy(logits.flatten(0, 1), batch.targets.flatten(), ignore_index=IGNORE)


@torch.no_grad()
def recall_accuracy(model: torch.nn.Module, batch: MQARBatch) -> float:
    """The share of query positions whose likeliest next token is the key's value."""
    was_training = model.training
    model.eval()
    try:
        guesses = model(batch.ids).argmax(dim=-1)  # (batch, seq_len)
    finally:
        model.train(was_training)
    queries = batch.queries
    return (guesses[queries] == batch.targets[queries]).float().mean().item()


def probe(task: RecallTask) -> MQARBatch:
    """The fixed rows every run of ``task`` is measured on."""
    return mqar_batch(task.probe_size, task.seq_len, task.num_pairs, task.vocab_size, PROBE_SEED)


def batches(
    task: RecallTask, seed: int, clock: Callable[[], float] = time.process_time
) -> Iterator[MQARBatch]:
    """Fresh rows for every step of seed ``seed``'s run, until ``task.seconds`` of ``clock``
    have passed since the first."""
    check_int("seed", seed)
    start = clock()
    for step in range(task.steps):
        if task.seconds is not None and clock() - start >= task.seconds:
            return
        yield mqar_batch(
            task.batch_size,
            task.seq_len,
            task.num_pairs,
            task.vocab_size,
            seed * STEPS_PER_SEED + step,
        )


@dataclass
class RecallRun:
    """One trained model: its mixer, size, recall on the probe, steps and CPU seconds taken."""

    mixer: str
    num_pairs: int
    seed: int
    parameters: int
    accuracy: float
    steps: int
    seconds: float
    mean_loss: float  # the training loss over the whole run


def train(
    config: TransformerConfig, task: RecallTask, seed: int, progress: bool = True
) -> RecallRun:
    """Build the model of ``config`` from ``seed``, train it on ``task`` and measure it."""
    if config.mixer is None:
        raise ValueError("the harness compares mixers: give a config with mixer set")
    if config.vocab_size != task.vocab_size:
        raise ValueError(
            f"config.vocab_size={config.vocab_size} differs from task.vocab_size={task.vocab_size}"
        )
    torch.manual_seed(check_int("seed", seed))
    model = DecoderOnlyLM(config, tie_weights=False)
    rows = probe(task)
    started = time.process_time()
    history = fit(
        model,
        batches(task, seed),
        recall_loss,
        optimizer=torch.optim.AdamW(model.parameters(), lr=task.lr, weight_decay=0.1),
        lr=task.lr,
        clip_norm=1.0,
        schedule=cosine_decay(task.steps, max(1, task.steps // 10), final=0.0),
        device="cpu",
        progress="run" if progress else False,
        max_steps=task.steps,
    )
    seconds = time.process_time() - started
    return RecallRun(
        mixer=config.mixer,
        num_pairs=task.num_pairs,
        seed=seed,
        parameters=count_parameters(model, trainable_only=True),
        accuracy=recall_accuracy(model, rows),
        steps=history.steps,
        seconds=seconds,
        mean_loss=history.train_loss[-1],
    )
