"""The harness of chapter 19: one decoder-only model, its mixer chosen by the config, on MQAR
or on chapter 14's dates.

:func:`recall_config` builds the same model around any mixer of :data:`attnlib.mixers.MIXERS`
(pre-LN blocks, a short causal convolution before each mixer, no position table: the
convolution tells a token its neighbours). :func:`train` trains one on a task's rows, for
``steps`` optimizer steps or ``seconds`` of this process's CPU time, whichever ends first, and
measures it on a fixed batch that no training step sees. :class:`RecallTask` draws fresh
multi-query associative recall rows (:mod:`attnlib.data.mqar`) at every step;
:class:`DateRecallTask` samples ``human date <s> ISO date`` rows (:mod:`attnlib.data.date_rows`)
from a fixed training split. ``scripts/recall_harness.py`` runs it over mixers, pair counts,
head counts and seeds.
"""

from __future__ import annotations

import functools
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import ClassVar

import torch
import torch.nn.functional as F

from attnlib._checks import check_count, check_int, check_number
from attnlib.data.date_rows import VOCAB_SIZE, date_rows, row_length
from attnlib.data.dates import DateSplits, make_splits
from attnlib.data.mqar import IGNORE, MQARBatch, mqar_batch
from attnlib.encoder import count_parameters
from attnlib.lm import DecoderOnlyLM
from attnlib.model_config import TransformerConfig
from attnlib.schedules import cosine_decay
from attnlib.training import fit

PROBE_SEED = 2_000_000_011  # the measured rows: far from any training seed
STEPS_PER_SEED = 1_000_000  # training seed s draws step t's rows with seed s * this + t
# Chapter 14's validation split: never read here, but drawn, so that the test split is its.
VALID_PAIRS = 500


def _check_budget(task: RecallTask | DateRecallTask, counts: tuple[str, ...]) -> None:
    """Refuse counts that are not positive, an lr that is not, seconds neither positive nor None."""
    for name in counts:
        check_count(name, getattr(task, name))
    if check_number("lr", task.lr) <= 0:
        raise ValueError(f"lr must be positive, got {task.lr}")
    if task.seconds is not None and check_number("seconds", task.seconds) <= 0:
        raise ValueError(f"seconds must be positive or None, got {task.seconds}")


def _row_seed(seed: int, step: int) -> int:
    """The seed of step ``step``'s rows in the run of training seed ``seed``."""
    return check_int("seed", seed) * STEPS_PER_SEED + check_int("step", step)


@dataclass(frozen=True)
class RecallTask:
    """The rows and the budget of a run: AdamW at ``lr`` with a linear warm-up over a tenth of
    ``steps`` and a cosine decay, until ``steps`` or ``seconds`` (None: no limit) of CPU time.

    Every step draws fresh MQAR rows; the probe is one fixed batch drawn far from them."""

    name: ClassVar[str] = "mqar"
    num_pairs: int = 8
    seq_len: int = 64
    vocab_size: int = 128
    batch_size: int = 64
    steps: int = 1000
    seconds: float | None = None
    lr: float = 1e-2
    probe_size: int = 256

    def __post_init__(self) -> None:
        counts = ("num_pairs", "seq_len", "vocab_size", "batch_size", "steps", "probe_size")
        _check_budget(self, counts)
        mqar_batch(1, self.seq_len, self.num_pairs, self.vocab_size, 0)  # checks the sizes

    def rows(self, seed: int, step: int) -> MQARBatch:
        """Step ``step``'s training rows (batch_size, seq_len) in the run of seed ``seed``."""
        return mqar_batch(
            self.batch_size, self.seq_len, self.num_pairs, self.vocab_size, _row_seed(seed, step)
        )

    def probe(self) -> MQARBatch:
        """The fixed rows (probe_size, seq_len) every run of this task is measured on."""
        return mqar_batch(
            self.probe_size, self.seq_len, self.num_pairs, self.vocab_size, PROBE_SEED
        )


@functools.lru_cache(maxsize=4)
def date_splits(n_train: int, probe_size: int, data_seed: int) -> DateSplits:
    """Chapter 14's splits: ``n_train`` training pairs, its validation split, ``probe_size`` test
    pairs; no human string in two splits. Cached: every step of a run samples the same pairs."""
    return make_splits(n_train, VALID_PAIRS, probe_size, seed=data_seed)


@functools.lru_cache(maxsize=4)
def _date_batches(
    n_train: int, probe_size: int, data_seed: int, seq_len: int
) -> tuple[MQARBatch, MQARBatch]:
    """The training split's rows (n_train, seq_len) and the test split's (probe_size, seq_len)."""
    splits = date_splits(n_train, probe_size, data_seed)
    return date_rows(splits.train, seq_len), date_rows(splits.test, seq_len)


def date_seq_len(n_train: int = 10_000, probe_size: int = 256, data_seed: int = 0) -> int:
    """The smallest seq_len whose rows hold every training and test pair of these splits."""
    splits = date_splits(n_train, probe_size, data_seed)
    return max(row_length(pair) for pair in splits.train + splits.test)


@dataclass(frozen=True)
class DateRecallTask:
    """Chapter 14's dates for a decoder-only model, ``human date <s> ISO date``, with
    :class:`RecallTask`'s budget.

    The pairs come from :func:`date_splits` as chapter 14 draws them (``n_train`` 10 000 and
    seed 0 give its training pairs). Step t of the run of seed s samples ``batch_size`` training
    pairs with replacement, fixed by (s, t); the probe is the whole test split, ``probe_size``
    pairs whose human strings no training pair holds. The loss reads the ISO date's characters.
    """

    name: ClassVar[str] = "dates"
    seq_len: int = 80  # the longest row of the default splits takes 77 positions
    batch_size: int = 64
    steps: int = 1000
    seconds: float | None = None
    lr: float = 1e-2
    probe_size: int = 256
    n_train: int = 10_000
    data_seed: int = 0

    def __post_init__(self) -> None:
        _check_budget(self, ("seq_len", "batch_size", "steps", "probe_size", "n_train"))
        check_int("data_seed", self.data_seed)
        self._batches()  # every pair must fit seq_len: say so now, not at some step of a run

    @property
    def vocab_size(self) -> int:
        """Padding, the separator and every character of the date formats."""
        return VOCAB_SIZE

    def _batches(self) -> tuple[MQARBatch, MQARBatch]:
        """The training and test splits as rows (cached, shared: never modify them)."""
        return _date_batches(self.n_train, self.probe_size, self.data_seed, self.seq_len)

    def rows(self, seed: int, step: int) -> MQARBatch:
        """Step ``step``'s training rows (batch_size, seq_len) in the run of seed ``seed``."""
        generator = torch.Generator().manual_seed(_row_seed(seed, step))
        chosen = torch.randint(self.n_train, (self.batch_size,), generator=generator)
        training, _ = self._batches()
        return MQARBatch(training.ids[chosen], training.targets[chosen])

    def probe(self) -> MQARBatch:
        """The test split's rows (probe_size, seq_len), every run's measure."""
        _, test = self._batches()
        return MQARBatch(test.ids.clone(), test.targets.clone())


HarnessTask = RecallTask | DateRecallTask


def recall_config(
    mixer: str,
    vocab_size: int = 128,
    d_model: int = 64,
    num_heads: int = 4,
    num_layers: int = 2,
    d_ff: int = 128,
    short_convolution: int | None = 4,
    num_kv_heads: int | None = None,
) -> TransformerConfig:
    """The harness's model around ``mixer``: pre-LN, no dropout, no position table;
    ``num_kv_heads`` groups softmax attention's heads (GQA, or MQA with 1)."""
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
        num_kv_heads=num_kv_heads,
    )


def recall_loss(model: torch.nn.Module, batch: MQARBatch) -> torch.Tensor:
    """Cross-entropy at the query positions only (a 0-d tensor)."""
    logits = model(batch.ids)  # (batch, seq_len, vocab)
    return F.cross_entropy(logits.flatten(0, 1), batch.targets.flatten(), ignore_index=IGNORE)


@torch.no_grad()
def guesses(model: torch.nn.Module, batch: MQARBatch) -> torch.Tensor:
    """The likeliest next token (batch, seq_len) at every position, read in eval mode."""
    was_training = model.training
    model.eval()
    try:
        return model(batch.ids).argmax(dim=-1)
    finally:
        model.train(was_training)


def _positions_right(guessed: torch.Tensor, batch: MQARBatch) -> float:
    """The share of query positions where ``guessed`` (batch, seq_len) is the target."""
    queries = batch.queries
    return (guessed[queries] == batch.targets[queries]).float().mean().item()


def _rows_right(guessed: torch.Tensor, batch: MQARBatch) -> float:
    """The share of rows where ``guessed`` (batch, seq_len) is the target at every query."""
    wrong = (guessed != batch.targets) & batch.queries
    return (~wrong.any(dim=1)).float().mean().item()


def recall_accuracy(model: torch.nn.Module, batch: MQARBatch) -> float:
    """The share of query positions whose likeliest next token is the target (a key's value)."""
    return _positions_right(guesses(model, batch), batch)


def rows_right(model: torch.nn.Module, batch: MQARBatch) -> float:
    """The share of rows whose every query position's likeliest next token is the target.

    On MQAR a row is right when every key is recalled. On dates it is exact match of the whole
    ISO date: the targets are read with teacher forcing, and when every argmax is right, greedy
    decoding from the separator feeds back exactly the true characters, so it writes the target.
    """
    return _rows_right(guesses(model, batch), batch)


def probe(task: HarnessTask) -> MQARBatch:
    """The fixed rows every run of ``task`` is measured on."""
    return task.probe()


def batches(
    task: HarnessTask, seed: int, clock: Callable[[], float] = time.process_time
) -> Iterator[MQARBatch]:
    """The rows (batch_size, seq_len) of every step of seed ``seed``'s run, until
    ``task.seconds`` of ``clock`` have passed since the first."""
    check_int("seed", seed)
    start = clock()
    for step in range(task.steps):
        if task.seconds is not None and clock() - start >= task.seconds:
            return
        yield task.rows(seed, step)


@dataclass
class RecallRun:
    """One trained model: its mixer and task, size, scores on the probe, steps and CPU seconds.

    ``accuracy`` is the share of the probe's query positions right, ``rows_right`` the share of
    its rows right at every query (:func:`rows_right`: on dates, the whole ISO date exactly).
    ``num_pairs`` is None on a task without pairs (dates)."""

    mixer: str
    task: str
    num_pairs: int | None
    seed: int
    parameters: int
    accuracy: float
    rows_right: float
    steps: int
    seconds: float
    mean_loss: float  # the training loss over the whole run


def train(
    config: TransformerConfig, task: HarnessTask, seed: int, progress: bool = True
) -> RecallRun:
    """Build the model of ``config`` from ``seed``, train it on ``task`` and measure it."""
    if not isinstance(task, RecallTask | DateRecallTask):
        raise TypeError(f"task must be a RecallTask or a DateRecallTask, got {type(task).__name__}")
    if config.mixer is None:
        raise ValueError("the harness compares mixers: give a config with mixer set")
    if config.vocab_size != task.vocab_size:
        raise ValueError(
            f"config.vocab_size={config.vocab_size} differs from task.vocab_size={task.vocab_size}"
        )
    torch.manual_seed(check_int("seed", seed))
    model = DecoderOnlyLM(config, tie_weights=False)
    rows = task.probe()
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
    guessed = guesses(model, rows)
    return RecallRun(
        mixer=config.mixer,
        task=task.name,
        num_pairs=task.num_pairs if isinstance(task, RecallTask) else None,
        seed=seed,
        parameters=count_parameters(model, trainable_only=True),
        accuracy=_positions_right(guessed, rows),
        rows_right=_rows_right(guessed, rows),
        steps=history.steps,
        seconds=seconds,
        mean_loss=history.train_loss[-1],
    )
