"""Part II's task end to end: date pairs, vocabularies, a model, training and evaluation.

Chapters 03-05 and ``benchmarks/seq2seq.py`` share this recipe, so that the models they compare
differ only in their attention.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass, replace

from torch import nn

from attnlib.config import quick_mode
from attnlib.data.dates import DateSplits, make_splits
from attnlib.data.text import Batch, CharVocab, make_batches
from attnlib.seq2seq import Seq2Seq, build_model, count_parameters, exact_match, predict
from attnlib.training import History, fit


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

    @classmethod
    def for_mode(cls, **overrides) -> DateTaskConfig:
        """The default configuration, shrunk when ``ATTNLIB_QUICK=1``."""
        config = cls(**overrides)
        if quick_mode():
            # Half the data still reaches about 98% with attention, in half the time.
            config = replace(config, n_train=min(config.n_train, 5_000))
        return config


@dataclass
class DateTask:
    """Data and vocabularies of one configuration, with batches ready for evaluation."""

    config: DateTaskConfig
    splits: DateSplits
    source_vocab: CharVocab
    target_vocab: CharVocab
    valid_batches: list[Batch]
    test_batches: list[Batch]

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


@dataclass
class TrainedModel:
    """A trained model with its history, size and training time."""

    kind: str
    model: Seq2Seq
    history: History
    parameters: int
    seconds: float


def new_model(kind: str, task: DateTask, **options) -> Seq2Seq:
    """An untrained model of the named kind, sized by the task's configuration.

    ``options`` go to :func:`attnlib.seq2seq.build_model`, e.g. ``input_feeding=False``.
    """
    c = task.config
    sizes = {
        "embedding_dim": c.embedding_dim,
        "hidden_size": c.hidden_size,
        "attention_size": c.attention_size,
    }
    return build_model(kind, len(task.source_vocab), len(task.target_vocab), **(sizes | options))


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
        epochs=task.config.epochs,
        lr=task.config.lr,
        evaluate=evaluate,
        stop_when=(lambda m: m["valid_exact"] >= stop_at) if stop_at is not None else None,
        device="cpu",
        progress=progress,
    )
    return TrainedModel(kind, model, history, count_parameters(model), time.perf_counter() - start)


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
