"""Part II's shared recipe and the alignment explorer, on tiny configurations."""

from __future__ import annotations

import pytest

from attnlib import seed_everything
from attnlib.date_task import DateTaskConfig, accuracy_by_length, new_model, prepare, train
from attnlib.widgets import alignment_explorer

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


def test_alignment_explorer_shows_prediction_and_reacts_to_the_model():
    seed_everything(0)
    task = prepare(TINY)
    models = {kind: new_model(kind, task) for kind in ("bahdanau", "none")}
    explorer = alignment_explorer(models, ["21 nov 2026"], task.source_vocab, task.target_vocab)
    assert "<code>21 nov 2026</code> →" in explorer.readout.value
    explorer.controls["model"].value = "none"
    assert "no attention" in explorer.readout.value


def test_alignment_explorer_needs_models():
    with pytest.raises(ValueError, match="at least one model and one example"):
        alignment_explorer({}, ["x"], None, None)


def test_new_model_passes_options_to_build_model():
    task = prepare(TINY)
    with_feeding = new_model("luong-general", task)
    without = new_model("luong-general", task, input_feeding=False)
    assert with_feeding.decoder.input_feeding and not without.decoder.input_feeding
    assert without.decoder.cell.weight_ih.shape == (3 * 16, 32)
