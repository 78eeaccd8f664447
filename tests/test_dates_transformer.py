"""attnlib.tasks.dates_transformer: the Transformer on Part II's dates, and training by budget."""

from __future__ import annotations

from dataclasses import replace

import pytest
import torch

from attnlib import seed_everything
from attnlib.generation import greedy_decode
from attnlib.tasks.dates import DateTaskConfig, exact_match, predict, prepare, translate
from attnlib.tasks.dates_transformer import (
    TRANSFORMER,
    DateTransformer,
    TimeBudget,
    TransformerSizes,
    cross_attention,
    new_date_model,
    recipes,
    step_seconds,
    train_budget,
    train_budget_seed,
)

TINY = DateTaskConfig(n_train=128, n_valid=16, n_test=16, batch_size=32, hidden_size=16)
SIZES = TransformerSizes(d_model=16, num_heads=2, num_layers=2, d_ff=32)


@pytest.fixture(scope="module")
def task():
    return prepare(TINY)


def _model(task, seed: int = 0) -> DateTransformer:
    seed_everything(seed)
    return new_date_model(TRANSFORMER, task, SIZES).eval()


def test_forward_is_the_encoder_decoder_with_the_batchs_masks(task):
    model = _model(task)
    batch = task.valid_batches[0]
    logits, alignments = model(batch.source, batch.source_lengths, batch.target_in)
    assert alignments is None
    assert logits.shape == (16, 11, len(task.target_vocab))  # every ISO date: 10 + </s>
    source_key_mask = torch.arange(batch.source.shape[1]) < batch.source_lengths[:, None]
    expected, _ = model.model(batch.source, batch.target_in, source_key_mask, None)
    torch.testing.assert_close(logits, expected)
    # What sits in a source's padding does not matter: it is masked.
    scribbled = batch.source.masked_fill(~source_key_mask, 7)
    again, _ = model(scribbled, batch.source_lengths, batch.target_in)
    torch.testing.assert_close(again, logits, rtol=0, atol=1e-6)


def test_the_output_projection_is_the_target_embedding(task):
    tied = _model(task)
    assert tied.model.output.weight is tied.model.decoder.embedding.weight
    untied = DateTransformer(task.source_vocab, task.target_vocab, TransformerSizes(16, 2, 1, 32))
    assert (
        DateTransformer(
            task.source_vocab,
            task.target_vocab,
            TransformerSizes(16, 2, 1, 32, tie_weights=False),
        ).model.output.weight
        is not untied.model.decoder.embedding.weight
    )


def test_greedy_decode_is_attnlibs_from_the_start_symbol(task):
    model = _model(task)
    batch = task.valid_batches[0]
    decoded = model.greedy_decode(batch.source, batch.source_lengths, max_steps=12)
    mask = torch.arange(batch.source.shape[1]) < batch.source_lengths[:, None]
    vocab = task.target_vocab
    expected = greedy_decode(
        model.model, batch.source, mask, start_id=vocab.sos_id, end_id=vocab.eos_id, max_len=12
    )
    assert decoded.alignments is None
    assert torch.equal(decoded.tokens, expected.tokens)
    predictions = predict(model, task.valid_batches, vocab, max_steps=12)
    assert len(predictions) == 16 and all(isinstance(p, str) for p in predictions)


def test_cross_attention_has_a_row_per_output_step_and_every_head(task):
    model = _model(task)
    text = task.splits.test[0][0]
    prediction, weights = cross_attention(model, text, task, max_steps=5)
    assert weights.shape == (2, 2, 5, len(text))  # (layers, heads, steps, source)
    torch.testing.assert_close(weights.sum(-1), torch.ones(2, 2, 5))
    expected, _ = translate(model, text, task.source_vocab, task.target_vocab, max_steps=5)
    assert prediction == expected
    with pytest.raises(ValueError, match="cross_attention needs a non-empty text"):
        cross_attention(model, "", task)


class _Ticks:
    """A clock that advances one second each time it is read."""

    def __init__(self) -> None:
        self.now = -1.0

    def __call__(self) -> float:
        self.now += 1.0
        return self.now


class _Manual:
    """A clock that only moves when told to."""

    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


class _SlowBatches:
    """A task whose batch making takes 100 s of the given clock, each epoch."""

    def __init__(self, task, clock: _Manual) -> None:
        self.task, self.clock = task, clock

    def train_batches(self, epoch: int):
        self.clock.now += 100.0
        return self.task.train_batches(epoch)


def test_time_budget_stops_when_the_training_time_is_spent(task):
    clock = _Manual()
    budget = TimeBudget(10, clock)
    got = []
    for batch in budget.batches(_SlowBatches(task, clock)):
        got.append(batch.sources)
        clock.now += 1.0  # each step takes one second
    # batch k starts after k - 1 seconds of training: the 11th finds 10 s spent. The 100 s of
    # each epoch's batch making are left out, and the first epoch's come before the start.
    assert len(got) == 10
    assert budget.spent() == 10.0 and budget.left_out == 200.0
    assert len(task.train_batches(0)) == 4  # so 10 batches run into a third epoch
    expected = [b.sources for epoch in range(3) for b in task.train_batches(epoch)][:10]
    assert got == expected  # each epoch in its own seeded order


def test_train_budget_takes_the_steps_its_clock_allows_on_either_kind(task):
    seed_everything(0, threads=1)
    for kind, sizes in ((TRANSFORMER, SIZES), ("bahdanau", None)):
        trained = train_budget(kind, task, 3, sizes=sizes, clock=_Ticks())
        # readings 0 (start), 1, 2, 3 before batches 2, 3, 4 (the 4th finds 3 s spent), 4 (end)
        assert trained.kind == kind
        assert trained.history.steps == 3 and trained.history.epochs == 1
        assert trained.seconds == 4.0
        predictions = predict(trained.model, task.valid_batches, task.target_vocab)
        assert 0.0 <= exact_match(predictions, [t for _, t in task.splits.valid]) <= 1.0
    real = train_budget(TRANSFORMER, task, 0.05, sizes=SIZES)  # CPU time by default
    assert real.history.steps >= 1 and real.seconds >= 0.05


def test_train_budget_seed_seeds_weights_and_order_and_keeps_the_data():
    def losses(seed: int) -> list[float]:
        history = train_budget_seed(TRANSFORMER, TINY, seed, 3, SIZES, clock=_Ticks()).history
        assert history.steps == 3
        return history.train_loss

    assert losses(3) == losses(3)
    assert losses(4) != losses(3)
    # as done by hand: seed 3's weights and batch order, the pairs of TINY (its seed 0)
    task = prepare(TINY)
    seed_everything(3, threads=1)
    model = new_date_model(TRANSFORMER, task, SIZES)
    seeded = replace(task, config=replace(TINY, seed=3))
    by_hand = train_budget(TRANSFORMER, seeded, 3, model=model, clock=_Ticks())
    assert by_hand.history.train_loss == losses(3)


def test_train_budget_warms_the_lr_up_linearly_then_holds_it(task):
    lr = task.config.lr
    for warmup, last_lr in ((0, lr), (8, lr * 4 / 8), (2, lr)):
        seed_everything(0, threads=1)
        trained = train_budget(TRANSFORMER, task, 3, sizes=SIZES, clock=_Ticks(), warmup=warmup)
        assert trained.history.steps == 3
        # the rate after 3 steps, as the 4th would use it: min(1, (3 + 1) / warmup) of lr
        assert trained.history.learning_rate == [pytest.approx(last_lr)]
    with pytest.raises(ValueError, match="warmup must be an int >= 0, got -1"):
        train_budget(TRANSFORMER, task, 3, sizes=SIZES, warmup=-1)


def test_step_seconds_times_each_model_and_takes_turns_of_adam_steps(task):
    batch = task.train_batches(0)[0]
    models = {"first": _model(task, 0), "second": _model(task, 1)}
    timed = step_seconds(models, task, batch, repeats=3)
    assert list(timed) == ["first", "second"]
    assert all(seconds > 0 for seconds in timed.values())
    # each model took 3 + 2 Adam steps at the task's lr on the batch, in train mode
    for seed, model in zip((0, 1), models.values(), strict=True):
        assert model.training
        by_hand = _model(task, seed).train()
        optimizer = torch.optim.Adam(by_hand.parameters(), lr=task.config.lr)
        for _ in range(5):
            optimizer.zero_grad(set_to_none=True)
            task.loss(by_hand, batch).backward()
            optimizer.step()
        for got, expected in zip(model.parameters(), by_hand.parameters(), strict=True):
            torch.testing.assert_close(got, expected, rtol=0, atol=0)
    with pytest.raises(ValueError, match="repeats must be an int >= 1, got 0"):
        step_seconds(models, task, batch, repeats=0)
    with pytest.raises(ValueError, match="step_seconds was given no models"):
        step_seconds({}, task, batch)


def test_recipes_change_one_thing_each_then_the_three_that_might_help():
    found = recipes(TINY, SIZES, warmup=5)
    assert list(found) == [
        "pre-LN",
        "warm-up over 5 steps",
        "lr 0.01",
        "lr 0.001",
        "d_ff 64",
        "all three: pre-LN, warm-up, d_ff 64",
    ]
    lrs = [config.lr for config, _, _ in found.values()]
    assert lrs == pytest.approx([TINY.lr, TINY.lr, 1e-2, 1e-3, TINY.lr, TINY.lr])
    assert [warmup for *_, warmup in found.values()] == [0, 5, 0, 0, 0, 5]
    assert [sizes.norm_first for _, sizes, _ in found.values()] == [True] + [False] * 4 + [True]
    assert [sizes.d_ff for _, sizes, _ in found.values()] == [32] * 4 + [64] * 2
    # nothing else differs from Part II's recipe
    assert {replace(config, lr=TINY.lr) for config, _, _ in found.values()} == {TINY}
    with pytest.raises(ValueError, match="warmup must be an int >= 1, got 0"):
        recipes(TINY, SIZES, warmup=0)


def test_translate_of_part_two_works_on_the_transformer(task):
    model = _model(task)
    prediction, alignment = translate(model, "1.2.03", task.source_vocab, task.target_vocab)
    assert isinstance(prediction, str) and alignment is None


def test_refusals(task):
    with pytest.raises(ValueError, match="sizes are for the 'transformer' kind, not 'bahdanau'"):
        new_date_model("bahdanau", task, SIZES)
    with pytest.raises(ValueError, match="seconds must be positive, got 0"):
        train_budget(TRANSFORMER, task, 0, sizes=SIZES)
    with pytest.raises(TypeError, match="clock must be a function returning seconds, got 3"):
        TimeBudget(1, clock=3)
    with pytest.raises(ValueError, match="num_heads=3 does not divide d_model=16"):
        new_date_model(TRANSFORMER, task, TransformerSizes(d_model=16, num_heads=3))
    with pytest.raises(ValueError, match="unknown model kind 'gpt'"):
        new_date_model("gpt", task)
