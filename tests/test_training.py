"""The training loop and checkpoints."""

from __future__ import annotations

import re
import time
from pathlib import Path

import numpy as np
import pytest
import torch
from torch import nn

from attnlib import seed_everything
from attnlib.config import training_precision
from attnlib.data.dates import make_splits
from attnlib.data.text import CharVocab, make_batches
from attnlib.seq2seq import build_model
from attnlib.tasks.dates import teacher_forcing_loss
from attnlib.training import (
    Evaluation,
    History,
    Patience,
    fit,
    load_checkpoint,
    save_checkpoint,
)

SOURCE, TARGET = CharVocab("abcdefgh"), CharVocab("abcdef")  # 12 and 10 symbols


def tiny_task():
    splits = make_splits(64, 8, 8, seed=0)
    source_vocab = CharVocab.from_texts(s for s, _ in splits.train)
    target_vocab = CharVocab.from_texts(t for _, t in splits.train)
    batches = make_batches(splits.train, source_vocab, target_vocab, batch_size=16)
    return source_vocab, target_vocab, batches


def loss(model: nn.Module, batch) -> torch.Tensor:
    """The date task's loss, padding skipped (the target vocabulary's pad id)."""
    return teacher_forcing_loss(model, batch, TARGET.pad_id)


def test_fit_lowers_the_loss_and_records_history():
    seed_everything(0)
    source_vocab, target_vocab, batches = tiny_task()
    model = build_model("bahdanau", source_vocab, target_vocab, 8, 16, 8)
    history = fit(model, batches, loss, epochs=3, lr=1e-2, progress=False, device="cpu")
    assert history.epochs == 3 and history.steps == 12
    assert history.train_loss[-1] < history.train_loss[0]
    assert len(history.seconds) == 3 and history.seconds[0] > 0


def test_schedule_multiplies_the_learning_rate_each_step():
    source_vocab, target_vocab, batches = tiny_task()
    model = build_model("none", source_vocab, target_vocab, 8, 16)
    history = fit(
        model, batches, loss, epochs=1, lr=0.1, schedule=lambda step: 0.5**step, progress=False
    )
    assert history.learning_rate == [pytest.approx(0.1 * 0.5**4)]


def test_stop_when_ends_training_early():
    source_vocab, target_vocab, batches = tiny_task()
    model = build_model("none", source_vocab, target_vocab, 8, 16)
    history = fit(
        model,
        batches,
        loss,
        epochs=5,
        evaluate=lambda m: {"score": 1.0},
        stop_when=lambda metrics: metrics["score"] >= 1.0,
        progress=False,
    )
    assert history.epochs == 1
    assert history.metrics == {"score": [1.0]}


def test_evaluate_every_logs_a_learning_curve_with_training_seconds():
    source_vocab, target_vocab, batches = tiny_task()  # 4 batches an epoch
    model = build_model("none", source_vocab, target_vocab, 8, 16)
    now = [0.0]  # a fake clock: each step takes 1 s, each evaluation 100 s
    calls = []

    def timed_loss(trained: nn.Module, batch) -> torch.Tensor:
        now[0] += 1.0
        return loss(trained, batch)

    def evaluate(trained: nn.Module) -> dict[str, float]:
        calls.append(trained.training)
        now[0] += 100.0
        return {"score": float(len(calls))}

    history = fit(
        model,
        batches,
        timed_loss,
        epochs=3,
        evaluate=evaluate,
        evaluate_every=3,
        progress=False,
        clock=lambda: now[0],
    )
    # steps 3, 6, 9 and 12 from evaluate_every, plus the ends of epochs 1 (step 4) and 2 (step 8);
    # epoch 3 ends at step 12, evaluated already, so it is not evaluated twice
    steps, seconds, scores = history.curve("score")
    assert steps == [3, 4, 6, 8, 9, 12]
    assert seconds == [3.0, 4.0, 6.0, 8.0, 9.0, 12.0]  # training time: evaluations left out
    assert [e.epoch for e in history.evaluations] == [1, 1, 2, 2, 3, 3]
    assert scores == [1.0, 2.0, 3.0, 4.0, 5.0, 6.0] and calls == [False] * 6
    assert history.metrics == {"score": [2.0, 4.0, 6.0]}  # each epoch's end, as without it
    assert history.seconds == [4.0 + 200, 8.0 + 400, 12.0 + 600]  # wall time, evaluations in
    assert history.evaluation_seconds == 600.0
    assert all(isinstance(e, Evaluation) for e in history.evaluations)
    assert model.training  # training resumed in train mode after each evaluation


def test_default_clock_is_wall_time_with_evaluations_left_out():
    _, _, batches = tiny_task()

    def slow_evaluate(model: nn.Module) -> dict[str, float]:
        time.sleep(0.05)
        return {"score": 1.0}

    history = fit(
        nn.Linear(1, 1),
        batches,
        lambda m, b: m.weight.sum() ** 2,
        epochs=2,
        evaluate=slow_evaluate,
        evaluate_every=2,
        progress=False,
        device="cpu",
    )
    assert history.evaluation_seconds >= 4 * 0.05
    assert history.evaluations[-1].seconds < history.seconds[-1] - 4 * 0.05 + 1e-6


def test_evaluations_are_logged_at_epoch_ends_without_evaluate_every():
    _, _, batches = tiny_task()
    history = fit(
        nn.Linear(1, 1),
        batches,
        lambda m, b: m.weight.sum() ** 2,
        epochs=2,
        evaluate=lambda m: {"score": 0.5},
        progress=False,
        device="cpu",
    )
    assert [(e.step, e.epoch, e.metrics) for e in history.evaluations] == [
        (4, 1, {"score": 0.5}),
        (8, 2, {"score": 0.5}),
    ]


def test_evaluate_every_needs_evaluate_and_a_positive_int():
    with pytest.raises(ValueError, match="evaluate_every was given without evaluate"):
        fit(nn.Linear(1, 1), [object()], loss, progress=False, evaluate_every=2)
    with pytest.raises(ValueError, match="evaluate_every must be positive, got 0"):
        fit(nn.Linear(1, 1), [object()], loss, progress=False, evaluate=dict, evaluate_every=0)
    with pytest.raises(TypeError, match="clock must be a function returning seconds, got 0.0"):
        fit(nn.Linear(1, 1), [object()], loss, progress=False, clock=0.0)


def test_curve_of_an_unknown_metric_names_the_known_ones():
    history = History(evaluations=[Evaluation(5, 1, 0.1, {"valid_exact": 0.5})])
    assert history.curve("valid_exact") == ([5], [0.1], [0.5])
    with pytest.raises(ValueError, match="no metric 'valid' was evaluated.*'valid_exact'"):
        history.curve("valid")
    with pytest.raises(ValueError, match="fit was given no evaluate"):
        History().curve("valid_exact")


def test_fit_rejects_zero_epochs():
    with pytest.raises(ValueError, match="epochs must be positive, got 0"):
        fit(nn.Linear(1, 1), [], loss, epochs=0)


def test_checkpoint_round_trip(tmp_path):
    seed_everything(0)
    model = build_model("luong-general", SOURCE, TARGET, 8, 16)
    path = save_checkpoint(tmp_path / "model.pt", model, note="hello", epochs=3)
    restored = build_model("luong-general", SOURCE, TARGET, 8, 16)
    extra = load_checkpoint(path, restored)
    assert extra == {"note": "hello", "epochs": 3}
    for name, tensor in model.state_dict().items():
        assert torch.equal(tensor, restored.state_dict()[name]), name
    assert [p.name for p in tmp_path.iterdir()] == ["model.pt"]  # no temporary file left


def test_checkpoint_of_another_model_is_refused_with_names(tmp_path):
    path = save_checkpoint(tmp_path / "model.pt", build_model("bahdanau", SOURCE, TARGET, 8, 16))
    with pytest.raises(ValueError, match="does not match the model") as error:
        load_checkpoint(path, build_model("bahdanau", SOURCE, TARGET, 8, 32))
    assert "shape mismatch: decoder.cell.bias_hh" in str(error.value)
    with pytest.raises(ValueError, match="missing from checkpoint: decoder.combine.weight"):
        load_checkpoint(path, build_model("luong-dot", SOURCE, TARGET, 8, 16))


def test_fit_writes_a_checkpoint(tmp_path):
    source_vocab, target_vocab, batches = tiny_task()
    model = build_model("none", source_vocab, target_vocab, 8, 16)
    fit(model, batches, loss, epochs=1, progress=False, checkpoint_path=tmp_path / "last.pt")
    assert load_checkpoint(tmp_path / "last.pt", model) == {"epochs": 1}


def test_max_steps_ends_training_mid_epoch():
    source_vocab, target_vocab, batches = tiny_task()
    model = build_model("none", source_vocab, target_vocab, 8, 16)
    history = fit(model, batches, loss, epochs=3, max_steps=6, progress=False)
    assert (history.steps, history.epochs) == (6, 2)


def test_non_finite_loss_is_reported_with_its_step_range():
    _, _, batches = tiny_task()  # 4 batches an epoch
    model = nn.Linear(1, 1)
    calls = iter(range(100))

    def exploding(model: nn.Module, batch) -> torch.Tensor:
        step = next(calls) + 1
        value = model.weight.sum() * 0 + (float("inf") if step == 6 else 1.0)
        return value

    with pytest.raises(FloatingPointError, match=r"loss became (inf|nan) between steps 5 and 8"):
        fit(model, batches, exploding, epochs=3, progress=False, device="cpu")


def test_epoch_loss_is_the_mean_of_the_step_losses():
    _, _, batches = tiny_task()
    values = iter([1.0, 2.0, 3.0, 6.0])
    model = nn.Linear(1, 1)
    history = fit(model, batches, lambda m, b: m.weight.sum() * 0 + next(values), progress=False)
    assert history.train_loss == [pytest.approx(3.0)]


def test_fit_on_no_batches_is_refused_not_recorded_as_zero_loss():
    with pytest.raises(ValueError, match=r"fit was given no batches \(an empty collection\)"):
        fit(nn.Linear(1, 1), [], loss, progress=False)
    with pytest.raises(ValueError, match="epoch 1 of fit had no batches"):
        fit(nn.Linear(1, 1), lambda epoch: iter([]), loss, progress=False, device="cpu")


@pytest.mark.parametrize("name", ["epochs", "max_steps", "evaluate_every"])
def test_fit_refuses_float_counts(name):
    with pytest.raises(TypeError, match=f"{name} must be an int, got float 2.0"):
        fit(nn.Linear(1, 1), [object()], loss, progress=False, **{name: 2.0})


@pytest.mark.parametrize(
    ("value", "kind"),
    [(np.float64(0.5), "numpy.float64"), (np.int64(3), "numpy.int64"), (Path("x"), "PosixPath")],
)
def test_save_refuses_extras_that_load_could_not_read(tmp_path, value, kind):
    model = build_model("none", SOURCE, TARGET, 8, 16)
    with pytest.raises(TypeError, match=rf"checkpoint extra score for .* is a [\w.]*{kind} "):
        save_checkpoint(tmp_path / "model.pt", model, score=value)
    assert not list(tmp_path.iterdir())  # nothing written
    with pytest.raises(TypeError, match=r"checkpoint extra runs\[1\]\['loss'\] for "):
        save_checkpoint(tmp_path / "model.pt", model, runs=[{"loss": 1.0}, {"loss": value}])
    with pytest.raises(TypeError, match=r"checkpoint extra table for .* has a key .* of type"):
        save_checkpoint(tmp_path / "model.pt", model, table={value: 1.0})


def test_save_accepts_plain_extras_and_load_reads_them_back(tmp_path):
    model = build_model("none", SOURCE, TARGET, 8, 16)
    extra = {
        "a": 1,
        "b": 0.5,
        "c": "s",
        "d": True,
        "e": None,
        "f": [1, (2.0, "t")],
        "g": {3: [None]},
    }
    path = save_checkpoint(tmp_path / "model.pt", model, **extra)
    assert load_checkpoint(path, model) == extra


def _snapshot(model, optimizer):
    weights = {name: tensor.clone() for name, tensor in model.state_dict().items()}
    state = {
        index: {key: value.clone() for key, value in values.items()}
        for index, values in optimizer.state_dict()["state"].items()
    }
    return weights, state


def _assert_unchanged(model, optimizer, snapshot):
    weights, state = snapshot
    for name, tensor in model.state_dict().items():
        assert torch.equal(tensor, weights[name]), name
    now = optimizer.state_dict()["state"]
    assert now.keys() == state.keys()
    for index, values in state.items():
        for key, value in values.items():
            assert torch.equal(now[index][key], value), (index, key)


def _trained(hidden, optimizer_groups=1, seed=0):
    seed_everything(seed)
    source_vocab, target_vocab, batches = tiny_task()
    model = build_model("none", source_vocab, target_vocab, 8, hidden)
    parameters = list(model.parameters())
    groups = [{"params": parameters[i::optimizer_groups]} for i in range(optimizer_groups)]
    optimizer = torch.optim.Adam(groups, lr=1e-2)
    fit(model, batches, loss, optimizer=optimizer, progress=False, device="cpu")
    return model, optimizer


def test_failed_load_leaves_model_and_optimizer_untouched(tmp_path):
    saved_model, saved_optimizer = _trained(16)
    path = save_checkpoint(tmp_path / "model.pt", saved_model, saved_optimizer)
    # Shape mismatch: the model check fails before anything is loaded.
    model, optimizer = _trained(32, seed=1)
    before = _snapshot(model, optimizer)
    with pytest.raises(ValueError, match="does not match the model"):
        load_checkpoint(path, model, optimizer)
    _assert_unchanged(model, optimizer, before)
    # Same model, optimizer with another grouping: neither the optimizer nor the model changes.
    model, optimizer = _trained(16, optimizer_groups=2, seed=2)
    before = _snapshot(model, optimizer)
    with pytest.raises(ValueError, match=f"checkpoint {path} does not match the optimizer"):
        load_checkpoint(path, model, optimizer)
    _assert_unchanged(model, optimizer, before)


def test_load_with_optimizer_round_trip(tmp_path):
    saved_model, saved_optimizer = _trained(16)
    path = save_checkpoint(tmp_path / "model.pt", saved_model, saved_optimizer)
    model, optimizer = _trained(16, seed=3)
    load_checkpoint(path, model, optimizer)
    _assert_unchanged(model, optimizer, _snapshot(saved_model, saved_optimizer))


@pytest.mark.parametrize("keep", [0, 10, 200, -20])
def test_truncated_or_corrupt_checkpoint_names_the_file(tmp_path, keep):
    path = save_checkpoint(tmp_path / "model.pt", build_model("none", SOURCE, TARGET, 8, 16))
    data = path.read_bytes()
    path.write_bytes(data[:keep] if keep >= 0 else data[:keep] + b"garbage")
    model = build_model("none", SOURCE, TARGET, 8, 16)
    before = {name: tensor.clone() for name, tensor in model.state_dict().items()}
    with pytest.raises(ValueError, match=f"cannot read checkpoint {re.escape(str(path))}"):
        load_checkpoint(path, model)
    assert all(torch.equal(t, before[n]) for n, t in model.state_dict().items())


def test_missing_checkpoint_names_the_file(tmp_path):
    path = tmp_path / "absent.pt"
    with pytest.raises(FileNotFoundError, match=f"no checkpoint at {re.escape(str(path))}"):
        load_checkpoint(path, build_model("none", SOURCE, TARGET, 8, 16))


def test_patience_stops_after_patience_epochs_without_a_gain_above_min_delta():
    stop = Patience("valid", patience=3, min_delta=0.01)
    decisions = [stop({"valid": value}) for value in (0.1, 0.2, 0.205, 0.21, 0.209)]
    assert decisions == [False, False, False, False, True]
    assert (stop.best, stop.best_epoch) == (0.2, 2)


def test_patience_ends_fit_on_a_plateau():
    model = nn.Linear(2, 1)
    scores = iter([0.5, 0.6, 0.6, 0.6, 0.9, 0.9])
    history = fit(
        model,
        [torch.ones(4, 2)],
        lambda model, batch: model(batch).pow(2).mean(),
        epochs=6,
        evaluate=lambda model: {"valid": next(scores)},
        stop_when=Patience("valid", patience=2),
        progress=False,
        device="cpu",
    )
    assert history.epochs == 4


@pytest.mark.parametrize(
    "kwargs, error, message",
    [
        ({"patience": 0}, ValueError, "patience must be positive"),
        ({"patience": 2, "min_delta": -0.1}, ValueError, "min_delta must be a finite number"),
        ({"patience": 2, "min_delta": "0"}, TypeError, "min_delta must be a number"),
    ],
)
def test_patience_refuses_bad_settings(kwargs, error, message):
    with pytest.raises(error, match=message):
        Patience("valid", **kwargs)


def test_patience_names_a_missing_metric():
    with pytest.raises(ValueError, match="Patience watches 'valid', but evaluate returned"):
        Patience("valid", 2)({"loss": 1.0})


def test_progress_run_draws_one_bar_over_every_epoch(capsys):
    torch.manual_seed(0)
    model = nn.Linear(2, 1)
    batches = [(torch.randn(4, 2), torch.randn(4, 1)) for _ in range(3)]

    def loss(model, batch):
        x, y = batch
        return nn.functional.mse_loss(model(x), y)

    history = fit(model, batches, loss, epochs=4, lr=1e-2, progress="run", device="cpu")
    assert history.steps == 12
    bars = capsys.readouterr().err
    # one bar, "4 epochs", that ends at 12 of 12 steps; no bar per epoch
    assert "4 epochs" in bars and "12/12" in bars and "epoch 1/4" not in bars


def test_part_name_labels_the_bar_and_the_lines(capsys):
    model = nn.Linear(2, 1)
    batches = [(torch.randn(4, 2), torch.randn(4, 1)) for _ in range(2)]

    def loss(model, batch):
        x, y = batch
        return nn.functional.mse_loss(model(x), y)

    def evaluate(model):
        return {"valid": 0.5}

    fit(
        model,
        batches,
        loss,
        epochs=3,
        progress="run",
        evaluate=evaluate,
        device="cpu",
        part_name="part",
    )
    printed = capsys.readouterr()
    assert "3 parts" in printed.err and "epoch" not in printed.err + printed.out
    assert "part 3: loss" in printed.out + printed.err


def test_progress_must_be_a_flag_or_run():
    with pytest.raises(ValueError, match="progress must be True, False or 'run', got 'epochs'"):
        fit(nn.Linear(1, 1), [object()], lambda m, b: None, progress="epochs")


def test_training_precision_follows_the_device(monkeypatch):
    assert training_precision(torch.device("cpu")) is None
    assert training_precision(torch.device("mps")) is None
    for capability, dtype in (
        ((7, 5), torch.float16),
        ((8, 0), torch.bfloat16),
        ((9, 0), torch.bfloat16),
    ):
        monkeypatch.setattr(torch.cuda, "get_device_capability", lambda device, c=capability: c)
        assert training_precision(torch.device("cuda")) == dtype, capability


def test_float16_training_scales_the_loss(monkeypatch):
    """The float16 path, run on the CPU: a GradScaler steps the optimizer, and the model learns."""
    made = []

    class CountingScaler(torch.amp.GradScaler):
        def __init__(self, *args, **kwargs):
            super().__init__(*args, **kwargs)
            made.append(self)

    monkeypatch.setattr(torch.amp, "GradScaler", CountingScaler)
    torch.manual_seed(0)
    model = nn.Linear(3, 1)
    x = torch.randn(64, 3)
    batches = [(x[i : i + 16], x[i : i + 16].sum(1, keepdim=True)) for i in range(0, 64, 16)]

    def loss(model, batch):
        inputs, targets = batch
        return nn.functional.mse_loss(model(inputs).float(), targets)

    history = fit(
        model,
        batches,
        loss,
        epochs=20,
        lr=5e-2,
        progress=False,
        device="cpu",
        mixed_precision=torch.float16,
    )
    assert len(made) == 1 and made[0].get_scale() > 1.0  # scaled, never collapsed to 0
    assert history.train_loss[-1] < 0.1 * history.train_loss[0]
    torch.manual_seed(0)
    fit(
        nn.Linear(3, 1),
        batches,
        loss,
        epochs=1,
        progress=False,
        device="cpu",
        mixed_precision=torch.bfloat16,
    )
    assert len(made) == 1  # bfloat16 needs no scaler
