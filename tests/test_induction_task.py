"""Chapter 17's task: seeded batches, the loss, and the measurements on the probe batch."""

from __future__ import annotations

import pytest
import torch

import attnlib
from attnlib.data.repeats import repeated_segments
from attnlib.lm import DecoderOnlyLM
from attnlib.tasks.induction import (
    PROBE_SEED,
    STEPS_PER_SEED,
    InductionTask,
    copying_scores,
    measure,
    next_token_loss,
    token_losses,
    train,
    train_seed,
)

SMALL = InductionTask(
    vocab_size=16, seq_len=20, min_segment=3, max_segment=6, batch_size=5, steps=3, probe_size=7
)


def test_a_batch_is_the_repeated_segments_of_its_seed_and_step():
    ids = SMALL.batch(seed=2, step=1)
    expected = repeated_segments(
        5, 20, 16, min_segment=3, max_segment=6, seed=2 * STEPS_PER_SEED + 1
    ).ids
    assert torch.equal(ids, expected)
    assert not torch.equal(ids, SMALL.batch(seed=3, step=1))
    assert not torch.equal(ids, SMALL.batch(seed=2, step=2))


def test_a_run_draws_steps_batches_in_order():
    batches = list(SMALL.batches(seed=4))
    assert len(batches) == 3
    assert [tuple(b.shape) for b in batches] == [(5, 20)] * 3
    assert torch.equal(batches[2], SMALL.batch(seed=4, step=2))


def test_the_probe_is_fixed_and_apart_from_training():
    probe = SMALL.probe()
    assert tuple(probe.ids.shape) == (7, 20)
    assert torch.equal(probe.ids, SMALL.probe().ids)
    assert torch.equal(
        probe.ids, repeated_segments(7, 20, 16, min_segment=3, max_segment=6, seed=PROBE_SEED).ids
    )
    assert PROBE_SEED > STEPS_PER_SEED * 100  # beyond every seed below 100's batches


def test_the_model_config_is_attention_only_unless_changed():
    config = SMALL.model_config()
    assert (config.num_layers, config.d_ff, config.vocab_size, config.max_len) == (2, 0, 16, 20)
    assert SMALL.model_config(num_layers=1, positions="rotary").positions == "rotary"


def test_losses_are_per_position_and_their_mean():
    torch.manual_seed(0)
    model = DecoderOnlyLM(SMALL.model_config())
    ids = SMALL.batch(seed=0, step=0)
    losses = token_losses(model, ids)
    assert tuple(losses.shape) == (5, 19)
    assert next_token_loss(model, ids).item() == pytest.approx(losses.mean().item())
    assert (losses > 0).all()


def test_measure_reports_the_split_losses_and_every_heads_scores():
    torch.manual_seed(0)
    model = DecoderOnlyLM(SMALL.model_config(num_layers=3)).train()
    probe = SMALL.probe()
    report = measure(model, probe)
    assert model.training  # measured in eval mode, handed back as it was
    assert tuple(report.previous_token.shape) == (3, 4)
    assert tuple(report.prefix_matching.shape) == (3, 4)
    losses = token_losses(model.eval(), probe.ids)
    mask = probe.repeat_mask[:, :-1]
    assert report.loss_repeated == pytest.approx(losses[mask].mean().item(), rel=1e-5)
    assert report.loss_other == pytest.approx(losses[~mask].mean().item(), rel=1e-5)
    assert report.gain == pytest.approx(report.loss_other - report.loss_repeated)


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        ({"lr": 0.0}, "lr must be positive"),
        ({"steps": STEPS_PER_SEED}, "steps must be below"),
        ({"max_segment": 10}, "does not fit twice"),
        ({"batch_size": 0}, "batch_size"),
    ],
)
def test_a_task_that_cannot_run_is_refused(changes, message):
    settings = {"vocab_size": 16, "seq_len": 20, "min_segment": 3, "max_segment": 6} | changes
    with pytest.raises(ValueError, match=message):
        InductionTask(**settings)


def test_train_measures_the_probe_every_few_steps():
    task = InductionTask(
        vocab_size=16,
        seq_len=20,
        min_segment=3,
        max_segment=6,
        batch_size=4,
        steps=6,
        warmup=2,
        probe_size=3,
    )
    torch.manual_seed(0)
    model = DecoderOnlyLM(task.model_config())
    run = train(model, task, seed=0, every=3, progress=False)
    assert run.history.steps == 6
    assert run.steps == [3, 6]
    assert len(run.reports) == 2
    last, now = run.reports[-1], measure(model, task.probe())  # the last is the trained model's
    assert last.loss_repeated == now.loss_repeated
    assert torch.equal(last.prefix_matching, now.prefix_matching)
    assert [e.step for e in run.history.evaluations] == [3, 6]


def test_train_seed_is_the_notebooks_seeded_run_and_fixed_by_its_seed():
    task = InductionTask(vocab_size=16, seq_len=20, min_segment=3, max_segment=6,
                         batch_size=4, steps=4, warmup=2, probe_size=3)  # fmt: skip
    run = train_seed(task, num_layers=1, seed=5, every=2)
    attnlib.seed_everything(5, threads=1)
    by_hand = train(DecoderOnlyLM(task.model_config(num_layers=1)), task, 5, 2, False)
    assert len(run.model.layers) == 1
    assert run.steps == by_hand.steps == [2, 4]
    assert [r.loss_repeated for r in run.reports] == [r.loss_repeated for r in by_hand.reports]
    again = train_seed(task, num_layers=1, seed=5, every=2)
    assert again.reports[-1].loss_other == run.reports[-1].loss_other
    assert train_seed(task, 1, 6, 2).reports[-1].loss_other != run.reports[-1].loss_other


def test_train_seed_refuses_a_model_without_layers():
    with pytest.raises(ValueError, match="num_layers must be positive, got 0"):
        train_seed(SMALL, num_layers=0, seed=0, every=1)


def test_train_refuses_reports_that_do_not_divide_the_steps():
    torch.manual_seed(0)
    model = DecoderOnlyLM(SMALL.model_config())
    with pytest.raises(ValueError, match="every=2 must divide the task's steps=3"):
        train(model, SMALL, seed=0, every=2, progress=False)


@pytest.mark.parametrize("num_kv_heads", [None, 2])
def test_copying_scores_read_each_heads_value_and_output_weights(num_kv_heads):
    torch.manual_seed(0)
    model = DecoderOnlyLM(SMALL.model_config(num_kv_heads=num_kv_heads))
    attention = model.layers[1].attention
    width = attention.head_dim
    with torch.no_grad():
        # layer 1, head 3 writes back what it reads (+1); head 0 writes its opposite (-1):
        # embedding W_v W_o embeddingᵀ = ±E P Eᵀ with P a projection, so every eigenvalue has
        # the sign of the head
        reads = 3 // (4 // attention.num_kv_heads)
        rows = slice(reads * width, (reads + 1) * width)
        attention.value_projection.weight[rows] = torch.eye(64)[rows]
        attention.output_projection.weight[:, 3 * width : 4 * width] = torch.eye(64)[:, rows]
        if attention.num_kv_heads == 4:
            attention.value_projection.weight[:width] = torch.eye(64)[:width]
            attention.output_projection.weight[:, :width] = -torch.eye(64)[:, :width]
    scores = copying_scores(model)
    assert tuple(scores.shape) == (2, 4)
    assert scores[1, 3].item() == pytest.approx(1.0, abs=1e-6)
    if attention.num_kv_heads == 4:
        assert scores[1, 0].item() == pytest.approx(-1.0, abs=1e-6)
    assert (scores[0].abs() < 1).all()  # layer 0 is untouched: random weights, no clean sign
