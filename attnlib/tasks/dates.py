"""Part II's task end to end: date pairs, vocabularies, a model, its loss, training, prediction
and evaluation.

Chapters 03-05 and ``benchmarks/seq2seq.py`` share this recipe, so that the models they compare
differ only in their attention. Special ids (padding, start, end) come from the vocabularies.
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace

import torch
import torch.nn.functional as F
from torch import nn

from attnlib._checks import check_count
from attnlib.config import quick_mode, seed_everything
from attnlib.data.dates import DateSplits, make_splits
from attnlib.data.text import Batch, CharVocab, make_batches
from attnlib.seq2seq import Seq2Seq, build_model, count_parameters
from attnlib.training import History, fit


def teacher_forcing_loss(
    model: nn.Module, batch: Batch, pad_id: int, label_smoothing: float = 0.0
) -> torch.Tensor:
    """Cross-entropy of next-symbol predictions given the true previous symbols: a 0-d tensor.

    Logits (batch, target_len, vocab) against ``batch.target_out`` (batch, target_len); padded
    positions (``pad_id``, the target vocabulary's) do not count.
    """
    logits, _ = model(batch.source, batch.source_lengths, batch.target_in)
    return F.cross_entropy(
        logits.reshape(-1, logits.shape[-1]),
        batch.target_out.reshape(-1),
        ignore_index=pad_id,
        label_smoothing=label_smoothing,
    )


@dataclass(frozen=True)
class DateTaskConfig:
    """Sizes of data, model and training; the defaults train in seconds on one CPU thread."""

    n_train: int = 10_000
    n_valid: int = 500
    n_test: int = 2_000
    seed: int = 0
    epochs: int = 3
    batch_size: int = 64
    lr: float = 3e-3
    embedding_dim: int = 32
    hidden_size: int = 64
    attention_size: int = 64

    def __post_init__(self) -> None:
        counts = ("n_train", "n_valid", "n_test", "epochs", "batch_size")
        sizes = ("embedding_dim", "hidden_size", "attention_size")
        for name in counts + sizes:
            check_count(f"DateTaskConfig.{name}", getattr(self, name))

    @classmethod
    def for_mode(cls, **overrides) -> DateTaskConfig:
        """The default configuration, shrunk when ``ATTNLIB_QUICK=1``."""
        config = cls(**overrides)
        if quick_mode():
            # Half the data still reaches about 98% with attention, in half the time.
            config = replace(config, n_train=min(config.n_train, 5_000))
        return config


class Seq2SeqTask:
    """What every sequence-to-sequence task here shares: its loss and its training batches.

    A subclass has ``config`` (with ``batch_size`` and ``seed``), ``splits`` (with ``train``
    pairs), ``source_vocab`` and ``target_vocab``.
    """

    def loss(self, model: nn.Module, batch: Batch) -> torch.Tensor:
        """The task's training loss, :func:`teacher_forcing_loss` with the target's pad id."""
        return teacher_forcing_loss(model, batch, self.target_vocab.pad_id)

    def train_batches(self, epoch: int) -> list[Batch]:
        """Training batches in a fresh, seeded order for each epoch."""
        c = self.config
        return make_batches(
            self.splits.train,
            self.source_vocab,
            self.target_vocab,
            c.batch_size,
            shuffle=True,
            seed=c.seed * 1_000 + epoch,
        )


@dataclass
class DateTask(Seq2SeqTask):
    """Data and vocabularies of one configuration, with batches ready for evaluation."""

    config: DateTaskConfig
    splits: DateSplits
    source_vocab: CharVocab
    target_vocab: CharVocab
    valid_batches: list[Batch]
    test_batches: list[Batch]


def prepare(config: DateTaskConfig | None = None) -> DateTask:
    """Generate the splits and vocabularies (built from the training split only)."""
    config = config or DateTaskConfig.for_mode()
    splits = make_splits(config.n_train, config.n_valid, config.n_test, seed=config.seed)
    source_vocab = CharVocab.from_texts(source for source, _ in splits.train)
    target_vocab = CharVocab.from_texts(target for _, target in splits.train)
    return DateTask(
        config,
        splits,
        source_vocab,
        target_vocab,
        make_batches(splits.valid, source_vocab, target_vocab, 256),
        make_batches(splits.test, source_vocab, target_vocab, 256),
    )


def predict(
    model: Seq2Seq, batches: Iterable[Batch], target_vocab: CharVocab, max_steps: int = 20
) -> list[str]:
    """Greedy translations of every batch, as strings, in order."""
    model.eval()
    device = next(model.parameters()).device
    predictions = []
    for batch in batches:
        decoded = model.greedy_decode(
            batch.source.to(device), batch.source_lengths.to(device), max_steps
        )
        predictions.extend(target_vocab.decode(row) for row in decoded.tokens.tolist())
    return predictions


def exact_match(predictions: Sequence[str], targets: Sequence[str]) -> float:
    """Fraction of predictions equal to their target, symbol for symbol."""
    check_same_count(predictions, targets)
    return sum(p == t for p, t in zip(predictions, targets, strict=True)) / len(targets)


def check_same_count(predictions: Sequence, targets: Sequence) -> None:
    """Require as many predictions as targets, and at least one."""
    if len(predictions) != len(targets):
        raise ValueError(f"{len(predictions)} predictions for {len(targets)} targets")
    if not targets:
        raise ValueError("scoring needs at least one target")


def translate(
    model: Seq2Seq,
    text: str,
    source_vocab: CharVocab,
    target_vocab: CharVocab,
    max_steps: int = 20,
) -> tuple[str, torch.Tensor | None]:
    """Translate one string: the prediction and its alignment (output_len, source_len) or None."""
    if not text:
        raise ValueError("translate needs a non-empty text")
    model.eval()
    device = next(model.parameters()).device
    source = torch.tensor([source_vocab.encode(text)], device=device)
    decoded = model.greedy_decode(source, torch.tensor([len(text)]), max_steps)
    ids = decoded.tokens[0].tolist()
    # Keep the steps up to and including the end symbol: they are the rows of the picture.
    steps = ids.index(target_vocab.eos_id) + 1 if target_vocab.eos_id in ids else len(ids)
    alignment = decoded.alignments[0, :steps].cpu() if decoded.alignments is not None else None
    return target_vocab.decode(ids), alignment


@dataclass
class TrainedModel:
    """A trained model with its history, size and training time."""

    kind: str
    model: Seq2Seq
    history: History
    parameters: int
    seconds: float


def new_model(kind: str, task: Seq2SeqTask, **options) -> Seq2Seq:
    """An untrained model of the named kind, sized by the task's configuration (which has
    ``embedding_dim``, ``hidden_size`` and ``attention_size``).

    ``options`` go to :func:`attnlib.seq2seq.build_model`, e.g. ``input_feeding=False``.
    """
    c = task.config
    sizes = {
        "embedding_dim": c.embedding_dim,
        "hidden_size": c.hidden_size,
        "attention_size": c.attention_size,
    }
    return build_model(kind, task.source_vocab, task.target_vocab, **(sizes | options))


def train(
    kind: str,
    task: DateTask,
    progress: bool = True,
    stop_at: float | None = None,
    model: nn.Module | None = None,
) -> TrainedModel:
    """Train a model of the named kind; stop early once validation accuracy reaches ``stop_at``."""
    model = model or new_model(kind, task)
    valid_targets = [target for _, target in task.splits.valid]

    def evaluate(trained: nn.Module) -> dict[str, float]:
        return {
            "valid_exact": exact_match(
                predict(trained, task.valid_batches, task.target_vocab), valid_targets
            )
        }

    start = time.perf_counter()
    history = fit(
        model,
        task.train_batches,
        task.loss,
        epochs=task.config.epochs,
        lr=task.config.lr,
        evaluate=evaluate,
        stop_when=(lambda m: m["valid_exact"] >= stop_at) if stop_at is not None else None,
        device="cpu",
        progress=progress,
    )
    return TrainedModel(kind, model, history, count_parameters(model), time.perf_counter() - start)


def train_seed(
    kind: str, config: DateTaskConfig, seed: int, options: Mapping[str, object] | None = None
) -> TrainedModel:
    """Train ``kind`` on the pairs of ``config`` with the starting weights and batch order of
    ``seed``: the data stay those of ``config.seed``. ``options`` go to :func:`new_model`.

    One run of a comparison over seeds, for :func:`attnlib.parallel.run_parallel`: each job is
    ``(kind, config, seed)`` or ``(kind, config, seed, options)``, so one pool can train models
    built with different options.
    """
    task = prepare(config)
    seed_everything(seed, threads=1)
    model = new_model(kind, task, **(options or {}))
    seeded_task = replace(task, config=replace(config, seed=seed))  # same pairs, new order
    return train(kind, seeded_task, progress=False, model=model)


def predict_test_split(trained: Seq2Seq, task: DateTask) -> list[str]:
    """Greedy translations of the held-out test split."""
    return predict(trained, task.test_batches, task.target_vocab)


def accuracy_by_length(
    predictions: Sequence[str], pairs: Sequence[tuple[str, str]], edges: Sequence[int]
) -> list[tuple[str, float, int]]:
    """Exact-match accuracy per source-length bin [edges[i], edges[i+1]): (label, accuracy, n)."""
    if len(predictions) != len(pairs):
        raise ValueError(f"{len(predictions)} predictions for {len(pairs)} pairs")
    rows = []
    for low, high in zip(edges[:-1], edges[1:], strict=True):
        chosen = [
            (p, t) for p, (s, t) in zip(predictions, pairs, strict=True) if low <= len(s) < high
        ]
        if chosen:
            accuracy = exact_match([p for p, _ in chosen], [t for _, t in chosen])
            rows.append((f"{low}-{high - 1}", accuracy, len(chosen)))
    return rows
