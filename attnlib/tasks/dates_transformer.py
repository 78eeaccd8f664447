"""Part II's date task with Part V's encoder–decoder Transformer, behind Part II's interface.

:class:`DateTransformer` wraps an :class:`~attnlib.generation.EncoderDecoder` so that it is
called like the recurrent models of :mod:`attnlib.seq2seq`: ``model(source, source_lengths,
target_in)`` gives the teacher-forced logits, ``model.greedy_decode(source, lengths, steps)``
the greedy tokens. So :mod:`attnlib.tasks.dates` trains, predicts and scores it unchanged, with
the same data, batches and loss as the models it is compared with. It builds its masks from a
:class:`~attnlib.data.text.Batch`: the source's padding from its lengths (True at real
characters), the target's from its pad id. :func:`train_budget_seed` trains any kind, recurrent
or Transformer, for a :class:`TimeBudget` of CPU seconds rather than epochs (one run of a
comparison at equal compute, for :func:`attnlib.parallel.run_parallel`); :func:`step_seconds`
times a training step of each model, for the budget, and :func:`recipes` lists chapter 14's
changes to Part II's recipe, for its check of the recipe against the size.
"""

from __future__ import annotations

import itertools
import statistics
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, replace

import torch
from torch import nn

from attnlib._checks import check_int, check_number
from attnlib.config import seed_everything
from attnlib.data.text import Batch, CharVocab
from attnlib.generation import EncoderDecoder, greedy_decode
from attnlib.masks import padding_mask
from attnlib.model_config import TransformerConfig
from attnlib.schedules import linear_warmup
from attnlib.seq2seq import Decoded, count_parameters
from attnlib.tasks.dates import (
    DateTask,
    DateTaskConfig,
    Seq2SeqTask,
    TrainedModel,
    new_model,
    prepare,
)
from attnlib.training import fit

TRANSFORMER = "transformer"  # the kind's name beside attnlib.seq2seq.MODEL_KINDS


@dataclass(frozen=True)
class TransformerSizes:
    """The encoder–decoder's sizes: both stacks have ``num_layers`` layers."""

    d_model: int = 32
    num_heads: int = 4
    num_layers: int = 2
    d_ff: int = 64
    dropout: float = 0.0
    norm_first: bool = False
    tie_weights: bool = True


class DateTransformer(nn.Module):
    """An :class:`EncoderDecoder` over character vocabularies, called like a Part II model."""

    def __init__(
        self,
        source_vocab: CharVocab,
        target_vocab: CharVocab,
        sizes: TransformerSizes | None = None,
    ) -> None:
        super().__init__()
        s = sizes or TransformerSizes()
        config = TransformerConfig(
            vocab_size=len(source_vocab),
            d_model=s.d_model,
            num_heads=s.num_heads,
            num_layers=s.num_layers,
            d_ff=s.d_ff,
            dropout=s.dropout,
            norm_first=s.norm_first,
            pad_id=source_vocab.pad_id,
            max_len=128,  # positions for the longest date (69 characters), with room to spare
        )
        self.sizes = s
        self.model = EncoderDecoder(
            config, len(target_vocab), target_vocab.pad_id, tie_weights=s.tie_weights
        )
        self.pad_id, self.sos_id = target_vocab.pad_id, target_vocab.sos_id
        self.eos_id = target_vocab.eos_id

    def forward(
        self, source: torch.Tensor, lengths: torch.Tensor, target_in: torch.Tensor
    ) -> tuple[torch.Tensor, None]:
        """Teacher forcing in one pass: source (batch, src), lengths (batch,), target_in
        (batch, tgt) -> logits (batch, tgt, target vocab) and None (no alignment to return)."""
        source_key_mask = self.source_key_mask(source, lengths)  # (batch, src)
        target_key_mask = target_in != self.pad_id  # (batch, tgt)
        logits, _ = self.model(source, target_in, source_key_mask, target_key_mask)
        return logits, None

    @staticmethod
    def source_key_mask(source: torch.Tensor, lengths: torch.Tensor) -> torch.Tensor:
        """(batch, src), True at the real characters of each source."""
        return padding_mask(lengths.to(source.device), source.shape[1])[:, 0]

    @torch.no_grad()
    def greedy_decode(
        self, source: torch.Tensor, lengths: torch.Tensor, max_steps: int = 20
    ) -> Decoded:
        """One token at a time from the start symbol: tokens (batch, steps); no alignments
        (the fused attention path forms no weights; see :func:`cross_attention`)."""
        generated = greedy_decode(
            self.model,
            source,
            self.source_key_mask(source, lengths),
            start_id=self.sos_id,
            end_id=self.eos_id,
            max_len=max_steps,
            need_weights=False,
        )
        return Decoded(generated.tokens, None)


def cross_attention(
    model: DateTransformer, text: str, task: DateTask, max_steps: int = 20
) -> tuple[str, torch.Tensor]:
    """Translate one string greedily: the prediction and every layer's and head's
    cross-attention (layers, heads, steps, source_len), one row per output step, ``</s>``'s too."""
    if not text:
        raise ValueError("cross_attention needs a non-empty text")
    device = next(model.parameters()).device
    source = torch.tensor([task.source_vocab.encode(text)], device=device)
    generated = greedy_decode(
        model.model,
        source,
        start_id=model.sos_id,
        end_id=model.eos_id,
        max_len=max_steps,
        need_weights=True,
    )
    ids = generated.tokens[0].tolist()
    eos = task.target_vocab.eos_id
    steps = ids.index(eos) + 1 if eos in ids else len(ids)
    weights = generated.cross_weights[0, :, :, :steps].cpu()  # (layers, heads, steps, src)
    return task.target_vocab.decode(ids), weights


def new_date_model(kind: str, task: DateTask, sizes: TransformerSizes | None = None) -> nn.Module:
    """An untrained model: the :data:`TRANSFORMER` kind, or a kind of
    :func:`attnlib.tasks.dates.new_model` (sized by the task's configuration)."""
    if kind == TRANSFORMER:
        return DateTransformer(task.source_vocab, task.target_vocab, sizes)
    if sizes is not None:
        raise ValueError(f"sizes are for the {TRANSFORMER!r} kind, not {kind!r}")
    return new_model(kind, task)


class TimeBudget:
    """A task's training batches, epoch after epoch (each in its own seeded order), until
    ``seconds`` of ``clock`` are spent: counted from the first batch on, leaving out the time
    spent making each epoch's batches (as :func:`attnlib.training.fit` leaves out evaluations).
    The check comes before each batch, so the last step may end a little past the budget."""

    def __init__(self, seconds: float, clock: Callable[[], float] = time.process_time) -> None:
        if not check_number("seconds", seconds) > 0:
            raise ValueError(f"seconds must be positive, got {seconds}")
        if not callable(clock):
            raise TypeError(f"clock must be a function returning seconds, got {clock!r}")
        self.seconds, self.clock = float(seconds), clock
        self.start: float | None = None
        self.left_out = 0.0

    def spent(self) -> float:
        """Seconds of training so far: since the first batch, batch making left out."""
        return 0.0 if self.start is None else self.clock() - self.start - self.left_out

    def batches(self, task: Seq2SeqTask) -> Iterator[Batch]:
        """Yield ``task.train_batches(0)``, then epoch 1's, ..., until the budget is spent."""
        for epoch in itertools.count():
            began = None if self.start is None else self.clock()
            epoch_batches = task.train_batches(epoch)
            if began is not None:
                self.left_out += self.clock() - began
            for batch in epoch_batches:
                if self.start is None:
                    self.start = self.clock()
                elif self.spent() >= self.seconds:
                    return
                yield batch


def train_budget(
    kind: str,
    task: DateTask,
    seconds: float,
    model: nn.Module | None = None,
    sizes: TransformerSizes | None = None,
    warmup: int = 0,
    clock: Callable[[], float] = time.process_time,
) -> TrainedModel:
    """Train for ``seconds`` of ``clock`` (by default this process's CPU time; see
    :class:`TimeBudget`) with the recipe of :func:`attnlib.tasks.dates.train`: Adam at the
    task's lr, clipping at 1; ``warmup`` > 0 raises the lr linearly over that many first steps
    (then constant, since a budget of time fixes no last step). The steps it buys are
    ``history.steps``; the result's ``seconds`` is the training time it used."""
    check_int("warmup", warmup, 0)
    budget = TimeBudget(seconds, clock)
    model = model or new_date_model(kind, task, sizes)
    # One "epoch" of fit that runs through as many passes over the data as the budget buys.
    history = fit(
        model,
        budget.batches(task),
        task.loss,
        epochs=1,
        lr=task.config.lr,
        schedule=linear_warmup(warmup) if warmup else None,
        device="cpu",
        progress=False,
    )
    return TrainedModel(kind, model, history, count_parameters(model), budget.spent())


def train_budget_seed(
    kind: str,
    config: DateTaskConfig,
    seed: int,
    seconds: float,
    sizes: TransformerSizes | None = None,
    warmup: int = 0,
    clock: Callable[[], float] = time.process_time,
) -> TrainedModel:
    """:func:`train_budget` on the pairs of ``config`` at its lr, with the starting weights and
    batch order of ``seed`` (the data stay those of ``config.seed``), as
    :func:`attnlib.tasks.dates.train_seed` does for epochs."""
    task = prepare(config)
    seed_everything(seed, threads=1)
    model = new_date_model(kind, task, sizes)
    seeded = replace(task, config=replace(config, seed=seed))  # same pairs, new order
    return train_budget(kind, seeded, seconds, model=model, clock=clock, warmup=warmup)


def step_seconds(
    models: dict[str, nn.Module], task: DateTask, batch: Batch, repeats: int = 25
) -> dict[str, float]:
    """Median CPU seconds of one training step (forward, backward, Adam at the task's lr) on
    ``batch``, for each model by name. The models take turns, step by step, so that a moment
    when the machine runs slower slows them alike; the first two turns warm up and are dropped.
    """
    check_int("repeats", repeats, 1)
    if not models:
        raise ValueError("step_seconds was given no models")
    optimizers = {
        name: torch.optim.Adam(model.parameters(), lr=task.config.lr)
        for name, model in models.items()
    }
    times: dict[str, list[float]] = {name: [] for name in models}
    for _ in range(repeats + 2):
        for name, model in models.items():
            model.train()
            start = time.process_time()
            optimizers[name].zero_grad(set_to_none=True)
            task.loss(model, batch).backward()
            optimizers[name].step()
            times[name].append(time.process_time() - start)
    return {name: statistics.median(seconds[2:]) for name, seconds in times.items()}


Recipe = tuple[DateTaskConfig, TransformerSizes, int]  # task config (its lr), sizes, warm-up


def recipes(config: DateTaskConfig, sizes: TransformerSizes, warmup: int) -> dict[str, Recipe]:
    """Chapter 14's recipe check: each change to Part II's recipe, by name, as (task
    configuration with its lr, sizes, warm-up steps); ``warmup`` is the warm-up's length."""
    check_int("warmup", warmup, 1)
    # twice the feed-forward width: at chapter 14's sizes, about Bahdanau's parameter count
    wide = replace(sizes, d_ff=2 * sizes.d_ff)
    return {
        "pre-LN": (config, replace(sizes, norm_first=True), 0),
        f"warm-up over {warmup} steps": (config, sizes, warmup),
        "lr 0.01": (replace(config, lr=1e-2), sizes, 0),
        "lr 0.001": (replace(config, lr=1e-3), sizes, 0),
        f"d_ff {wide.d_ff}": (config, wide, 0),
        f"all three: pre-LN, warm-up, d_ff {wide.d_ff}": (
            config,
            replace(wide, norm_first=True),
            warmup,
        ),
    }
