"""A task whose difficulty is its length: copy a string of random digits.

``'7302915'`` → ``'7302915'``. Every symbol is drawn uniformly and independently, so an input of
length L carries L · log2(alphabet size) bits, and the output needs all of them. Nothing else
changes with the length: not the format, not the alphabet, not what is to be done. Chapter 03
uses it to measure what a fixed-size context vector costs as inputs grow, with the models of
:func:`attnlib.seq2seq.build_model` and the loop of :func:`attnlib.training.fit`, through the same
batches, vocabulary conventions and loss as :mod:`attnlib.tasks.dates`.
"""

from __future__ import annotations

import math
import random
import statistics
import time
from collections.abc import Sequence
from dataclasses import dataclass, replace

import torch
from torch import nn

from attnlib._checks import check_count, check_number
from attnlib.config import quick_mode, seed_everything
from attnlib.data.text import Batch, CharVocab, make_batches
from attnlib.seq2seq import Seq2Seq, count_parameters
from attnlib.tasks.dates import (
    Seq2SeqTask,
    TrainedModel,
    check_same_count,
    exact_match,
    new_model,
    predict,
)
from attnlib.training import History, Patience, fit

DIGITS = "0123456789"


def random_strings(
    n: int, min_length: int, max_length: int, alphabet: str = DIGITS, seed: int = 0
) -> list[str]:
    """``n`` strings, lengths uniform in [min_length, max_length], symbols uniform; seeded."""
    check_count("n", n)
    _check_lengths(min_length, max_length)
    _check_alphabet(alphabet)
    rng = random.Random(seed)
    strings = []
    for _ in range(n):
        length = rng.randint(min_length, max_length)
        strings.append("".join(rng.choice(alphabet) for _ in range(length)))
    return strings


def copy_pairs(strings: Sequence[str], reverse: bool = False) -> list[tuple[str, str]]:
    """(source, target) pairs: each string with itself, or with itself reversed."""
    if not strings:
        raise ValueError("copy_pairs needs at least one string")
    empty = [index for index, text in enumerate(strings) if not text]
    if empty:
        raise ValueError(f"copy_pairs needs non-empty strings; string {empty[0]} is empty")
    return [(text, text[::-1] if reverse else text) for text in strings]


@dataclass(frozen=True)
class CopyTaskConfig:
    """Sizes of data, model and training; input lengths uniform in [min_length, max_length].

    The training split is fixed (``n_train`` strings, reshuffled each epoch), as in the date
    task; the test split holds ``n_test_per_length`` strings of every length, so that each
    length is scored on as many strings as every other. Training stops early, on a plateau:
    once validation exact match has gained no more than ``min_delta`` for ``patience`` epochs
    (at most ``epochs``); the weights of its best validation epoch are kept.
    """

    min_length: int = 1
    max_length: int = 16
    alphabet: str = DIGITS
    reverse: bool = False
    n_train: int = 2_048
    n_valid: int = 500
    n_test_per_length: int = 50
    seed: int = 0
    epochs: int = 80
    patience: int = 8
    min_delta: float = 0.01
    batch_size: int = 256
    lr: float = 1e-2
    embedding_dim: int = 16
    hidden_size: int = 64
    attention_size: int = 32

    def __post_init__(self) -> None:
        counts = ("n_train", "n_valid", "n_test_per_length", "epochs", "patience", "batch_size")
        sizes = ("embedding_dim", "hidden_size", "attention_size")
        for name in counts + sizes:
            check_count(f"CopyTaskConfig.{name}", getattr(self, name))
        _check_lengths(self.min_length, self.max_length)
        _check_alphabet(self.alphabet)
        if isinstance(self.lr, bool) or not isinstance(self.lr, (int, float)) or self.lr <= 0:
            raise ValueError(f"CopyTaskConfig.lr must be a positive number, got {self.lr!r}")
        if not 0 <= check_number("CopyTaskConfig.min_delta", self.min_delta) < 1:
            raise ValueError(f"CopyTaskConfig.min_delta must be in [0, 1), got {self.min_delta}")
        if isinstance(self.seed, bool) or not isinstance(self.seed, int) or self.seed < 0:
            raise ValueError(f"CopyTaskConfig.seed must be a non-negative int, got {self.seed!r}")

    @property
    def lengths(self) -> range:
        """Every input length the task draws, shortest first."""
        return range(self.min_length, self.max_length + 1)

    @property
    def bits_per_symbol(self) -> float:
        """Information in one uniformly drawn symbol: log2 of the alphabet's size."""
        return math.log2(len(self.alphabet))

    @classmethod
    def for_mode(cls, **overrides) -> CopyTaskConfig:
        """The default configuration, shrunk when ``ATTNLIB_QUICK=1``."""
        config = cls(**overrides)
        if quick_mode():
            config = replace(
                config,
                n_train=min(config.n_train, 1_024),
                n_test_per_length=min(config.n_test_per_length, 20),
                epochs=min(config.epochs, 4),
            )
        return config


@dataclass(frozen=True)
class CopySplits:
    """Training, validation and test pairs of one seed; the test pairs come shortest first."""

    train: list[tuple[str, str]]
    valid: list[tuple[str, str]]
    test: list[tuple[str, str]]


def make_copy_splits(config: CopyTaskConfig) -> CopySplits:
    """The three splits of ``config``: random lengths for train and valid, equal counts for test."""
    c = config
    seed = c.seed * 1_000
    train = random_strings(c.n_train, c.min_length, c.max_length, c.alphabet, seed=seed)
    valid = random_strings(c.n_valid, c.min_length, c.max_length, c.alphabet, seed=seed + 1)
    test = [
        text
        for length in c.lengths
        for text in random_strings(
            c.n_test_per_length, length, length, c.alphabet, seed=seed + 100 + length
        )
    ]
    return CopySplits(
        copy_pairs(train, c.reverse), copy_pairs(valid, c.reverse), copy_pairs(test, c.reverse)
    )


@dataclass
class CopyTask(Seq2SeqTask):
    """Data and vocabulary of one configuration, with batches ready for evaluation."""

    config: CopyTaskConfig
    splits: CopySplits
    vocab: CharVocab
    valid_batches: list[Batch]
    test_batches: list[Batch]

    @property
    def source_vocab(self) -> CharVocab:
        """The source vocabulary: the alphabet and the special symbols."""
        return self.vocab

    @property
    def target_vocab(self) -> CharVocab:
        """The target vocabulary, the same as the source's."""
        return self.vocab

    @property
    def max_steps(self) -> int:
        """Greedy decoding steps: the longest target and its end symbol."""
        return self.config.max_length + 1


def prepare(config: CopyTaskConfig | None = None) -> CopyTask:
    """Generate the splits; source and target share one vocabulary, the alphabet's."""
    config = config or CopyTaskConfig.for_mode()
    splits = make_copy_splits(config)
    vocab = CharVocab(config.alphabet)
    return CopyTask(
        config,
        splits,
        vocab,
        make_batches(splits.valid, vocab, vocab, 256),
        make_batches(splits.test, vocab, vocab, 256),
    )


def token_accuracy(predictions: Sequence[str], targets: Sequence[str]) -> float:
    """Fraction of target symbols predicted right at their position; an output too short misses
    the rest, and symbols beyond the target's length are not counted."""
    check_same_count(predictions, targets)
    right = sum(
        sum(p == t for p, t in zip(prediction, target, strict=False))
        for prediction, target in zip(predictions, targets, strict=True)
    )
    return right / sum(len(target) for target in targets)


def copy_marks(output: str, expected: str) -> str:
    """A line as long as the longer string: ``^`` under each position where ``output`` differs
    from ``expected`` (a wrong symbol, a missing one or an extra one), a space elsewhere."""
    if not isinstance(output, str) or not isinstance(expected, str):
        raise TypeError(
            f"copy_marks compares two strings, got {type(output).__name__} and "
            f"{type(expected).__name__}"
        )
    width = max(len(output), len(expected))
    return "".join(
        " " if i < len(output) and i < len(expected) and output[i] == expected[i] else "^"
        for i in range(width)
    )


def evaluate(
    model: Seq2Seq, batches: Sequence[Batch], task: CopyTask
) -> tuple[list[str], dict[str, float]]:
    """Greedy predictions of ``batches``, with their ``exact`` match and ``token`` accuracy."""
    predictions = predict(model, batches, task.vocab, task.max_steps)
    targets = [target for batch in batches for target in batch.targets]
    scores = {
        "exact": exact_match(predictions, targets),
        "token": token_accuracy(predictions, targets),
    }
    return predictions, scores


def train(
    kind: str, task: CopyTask, progress: bool = True, model: nn.Module | None = None
) -> TrainedModel:
    """Train a model of the named kind until its validation exact match reaches a plateau
    (:class:`~attnlib.training.Patience`, at most the configured epochs), scoring the validation
    split greedily after each epoch (metrics ``valid_exact`` and ``valid_token``); the model
    returned holds the weights of its best validation epoch."""
    best = _BestWeights()

    def score(trained: nn.Module) -> dict[str, float]:
        _, scores = evaluate(trained, task.valid_batches, task)
        best.offer(trained, scores["exact"])
        return {f"valid_{name}": value for name, value in scores.items()}

    config = task.config
    model = model or new_model(kind, task)
    start = time.perf_counter()
    history = fit(
        model,
        task.train_batches,
        task.loss,
        epochs=config.epochs,
        lr=config.lr,
        evaluate=score,
        stop_when=Patience("valid_exact", config.patience, config.min_delta),
        device="cpu",
        progress=progress,
    )
    best.restore(model)
    return TrainedModel(kind, model, history, count_parameters(model), time.perf_counter() - start)


class _BestWeights:
    """The weights of the best-scoring evaluation so far (the first one, on ties)."""

    def __init__(self) -> None:
        self.score, self.state = -math.inf, None

    def offer(self, model: nn.Module, score: float) -> None:
        """Keep a copy of ``model``'s weights if ``score`` beats every earlier one."""
        if score > self.score:
            self.score = score
            self.state = {
                name: value.detach().clone() for name, value in model.state_dict().items()
            }

    def restore(self, model: nn.Module) -> None:
        """Load the kept weights into ``model``."""
        if self.state is not None:
            model.load_state_dict(self.state)


def best_epoch(history: History) -> int:
    """The epoch (from 1) whose weights :func:`train` kept: the first best validation score."""
    curve = history.metrics["valid_exact"]
    return 1 + curve.index(max(curve))


@dataclass
class SeedRun:
    """One kind trained on one seed's data: what chapter 03 keeps of each of its runs.

    ``scores`` holds the test split's ``exact`` match and ``token`` accuracy, ``by_length`` the
    same per input length, shortest first; ``predictions`` are the test outputs, in order;
    ``state`` the trained weights (those of the best validation epoch), for :meth:`model`.
    """

    kind: str
    seed: int
    history: History
    seconds: float
    predictions: list[str]
    scores: dict[str, float]
    by_length: list[LengthScores]
    state: dict[str, torch.Tensor]

    def model(self, task: CopyTask) -> Seq2Seq:
        """The trained model again, rebuilt for ``task`` (whose sizes it was trained with)."""
        model = new_model(self.kind, task)
        model.load_state_dict(self.state)
        return model.eval()


def train_seed(kind: str, config: CopyTaskConfig, seed: int) -> SeedRun:
    """Train ``kind`` on the strings of ``seed``, its weights seeded by ``seed`` too, and score
    it on that seed's test split; for :func:`attnlib.parallel.run_parallel`, one seed a process."""
    task = prepare(replace(config, seed=seed))
    seed_everything(seed, threads=1)
    run = train(kind, task, progress=False)
    predictions, scores = evaluate(run.model, task.test_batches, task)
    by_length = scores_by_length(predictions, task.splits.test)
    state = {name: value.detach().clone() for name, value in run.model.state_dict().items()}
    return SeedRun(kind, seed, run.history, run.seconds, predictions, scores, by_length, state)


@dataclass(frozen=True)
class LengthScores:
    """Scores of the test strings of one length."""

    length: int
    exact: float
    token: float
    count: int


def scores_by_length(
    predictions: Sequence[str], pairs: Sequence[tuple[str, str]]
) -> list[LengthScores]:
    """Exact match and token accuracy for each source length present, shortest first."""
    check_same_count(predictions, pairs)
    groups: dict[int, tuple[list[str], list[str]]] = {}
    for prediction, (source, target) in zip(predictions, pairs, strict=True):
        guesses, targets = groups.setdefault(len(source), ([], []))
        guesses.append(prediction)
        targets.append(target)
    return [
        LengthScores(
            length, exact_match(guesses, targets), token_accuracy(guesses, targets), len(targets)
        )
        for length, (guesses, targets) in sorted(groups.items())
    ]


def mean_and_sd(values: Sequence[float]) -> tuple[float, float]:
    """Mean and sample standard deviation of runs (sd 0 for a single run)."""
    if not values:
        raise ValueError("mean_and_sd needs at least one value")
    sd = statistics.stdev(values) if len(values) > 1 else 0.0
    return statistics.fmean(values), sd


def _check_lengths(min_length: int, max_length: int) -> None:
    """Require ints with 1 <= min_length <= max_length."""
    check_count("min_length", min_length)
    check_count("max_length", max_length)
    if min_length > max_length:
        raise ValueError(f"min_length {min_length} is larger than max_length {max_length}")


def _check_alphabet(alphabet: object) -> None:
    """Require a string of at least two symbols, none of them repeated."""
    if not isinstance(alphabet, str) or len(alphabet) < 2:
        raise ValueError(f"alphabet must be a string of at least 2 symbols, got {alphabet!r}")
    repeated = sorted({symbol for symbol in alphabet if alphabet.count(symbol) > 1})
    if repeated:
        raise ValueError(f"alphabet {alphabet!r} repeats the symbols {repeated}")
