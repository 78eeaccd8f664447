"""Part II's shared recipe, on tiny configurations (the alignment explorer: test_widgets)."""

from __future__ import annotations

import ast
from dataclasses import replace
from pathlib import Path

import pytest
import torch.nn.functional as F

from attnlib import seed_everything
from attnlib.data.text import CharVocab, make_batches
from attnlib.seq2seq import build_model
from attnlib.tasks.dates import (
    DateTaskConfig,
    accuracy_by_length,
    exact_match,
    new_model,
    prepare,
    teacher_forcing_loss,
    train,
    train_seed,
)

TINY = DateTaskConfig(n_train=64, n_valid=16, n_test=16, epochs=1, hidden_size=16)


def test_accuracy_by_length_bins_by_source_length():
    pairs = [("1.1.01", "2001-01-01"), ("12/12/2012", "2012-12-12"), ("1 jan 2000", "2000-01-01")]
    predictions = ["2001-01-01", "2012-12-13", "2000-01-01"]
    rows = accuracy_by_length(predictions, pairs, edges=[0, 8, 20])
    assert rows == [("0-7", 1.0, 1), ("8-19", 0.5, 2)]


def test_quick_mode_shrinks_the_configuration(monkeypatch):
    monkeypatch.setenv("ATTNLIB_QUICK", "1")
    config = DateTaskConfig.for_mode()
    assert (config.n_train, config.epochs) == (5_000, 3)


def test_prepare_builds_vocabularies_from_training_data():
    task = prepare(TINY)
    assert len(task.splits.train) == 64
    assert set("0123456789-") <= set(task.target_vocab.itos)
    assert sum(len(batch) for batch in task.test_batches) == 16


def test_train_records_validation_accuracy():
    seed_everything(0)
    trained = train("bahdanau", prepare(TINY), progress=False)
    assert trained.history.epochs == 1
    assert 0.0 <= trained.history.metrics["valid_exact"][0] <= 1.0
    assert trained.parameters > 0


def test_train_seed_keeps_the_data_and_changes_weights_and_order():
    same = train_seed("luong-dot", TINY, 0).history.train_loss
    assert train_seed("luong-dot", TINY, 0).history.train_loss == same
    assert train_seed("luong-dot", TINY, 1).history.train_loss != same
    # seed 1 draws its own weights and batch order, not its own pairs: as done by hand
    seed_everything(1, threads=1)
    model = new_model("luong-dot", prepare(TINY))
    seeded = prepare(replace(TINY, seed=1))  # other pairs: must not be what train_seed used
    by_hand = train(
        "luong-dot", replace(prepare(TINY), config=replace(TINY, seed=1)), False, model=model
    )
    assert by_hand.history.train_loss == train_seed("luong-dot", TINY, 1).history.train_loss
    assert seeded.splits.train != prepare(TINY).splits.train


def test_train_seed_passes_options_to_the_model():
    run = train_seed("luong-general", TINY, 0, {"input_feeding": False})
    assert run.model.decoder.input_feeding is False
    assert train_seed("luong-general", TINY, 0).model.decoder.input_feeding is True


def test_new_model_passes_options_to_build_model():
    task = prepare(TINY)
    with_feeding = new_model("luong-general", task)
    without = new_model("luong-general", task, input_feeding=False)
    assert with_feeding.decoder.input_feeding and not without.decoder.input_feeding
    assert without.decoder.cell.weight_ih.shape == (3 * 16, 32)


def test_exact_match_counts_identical_strings():
    assert exact_match(["2026-11-21", "2026-11-22"], ["2026-11-21", "2026-11-21"]) == 0.5


def test_teacher_forcing_loss_skips_the_targets_padding():
    seed_everything(0)
    source, target = CharVocab("abc"), CharVocab("xyz")
    batch = make_batches([("ab", "x"), ("abc", "xyz")], source, target, batch_size=2)[0]
    model = build_model("none", source, target, embedding_dim=4, hidden_size=8)
    logits, _ = model(batch.source, batch.source_lengths, batch.target_in)
    real = batch.target_out != target.pad_id  # (2, 4): 2 and 4 real positions
    assert int(real.sum()) == 6
    expected = F.cross_entropy(logits[real], batch.target_out[real])
    loss = teacher_forcing_loss(model, batch, target.pad_id)
    assert loss.item() == pytest.approx(expected.item())


def test_task_loss_uses_the_target_vocabularys_pad_id():
    seed_everything(0)
    task = prepare(TINY)
    model, batch = new_model("none", task), task.valid_batches[0]
    expected = teacher_forcing_loss(model, batch, task.target_vocab.pad_id)
    assert task.loss(model, batch).item() == pytest.approx(expected.item())


def test_nothing_below_tasks_imports_a_task():
    package = Path(__file__).resolve().parents[1] / "attnlib"
    on_top = {"tasks", "widgets.py", "plots.py", "live"}
    offenders = []
    for path in package.rglob("*.py"):
        if path.relative_to(package).parts[0] in on_top:
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom):
                names = [f"{node.module}.{alias.name}" for alias in node.names]
            else:
                names = [alias.name for alias in getattr(node, "names", [])]
            if isinstance(node, ast.Import | ast.ImportFrom) and any(
                name.startswith("attnlib.tasks") for name in names
            ):
                offenders.append(str(path.relative_to(package)))
    assert offenders == []
