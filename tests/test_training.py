"""The training loop and checkpoints."""

from __future__ import annotations

import pytest
import torch
from torch import nn

from attnlib import seed_everything
from attnlib.data.dates import make_splits
from attnlib.data.text import CharVocab, make_batches
from attnlib.seq2seq import build_model
from attnlib.training import fit, load_checkpoint, save_checkpoint


def tiny_task():
    splits = make_splits(64, 8, 8, seed=0)
    source_vocab = CharVocab.from_texts(s for s, _ in splits.train)
    target_vocab = CharVocab.from_texts(t for _, t in splits.train)
    batches = make_batches(splits.train, source_vocab, target_vocab, batch_size=16)
    return source_vocab, target_vocab, batches


def test_fit_lowers_the_loss_and_records_history():
    seed_everything(0)
    source_vocab, target_vocab, batches = tiny_task()
    model = build_model("bahdanau", len(source_vocab), len(target_vocab), 8, 16, 8)
    history = fit(model, batches, epochs=3, lr=1e-2, progress=False, device="cpu")
    assert history.epochs == 3 and history.steps == 12
    assert history.train_loss[-1] < history.train_loss[0]
    assert len(history.seconds) == 3 and history.seconds[0] > 0


def test_schedule_multiplies_the_learning_rate_each_step():
    source_vocab, target_vocab, batches = tiny_task()
    model = build_model("none", len(source_vocab), len(target_vocab), 8, 16)
    history = fit(model, batches, epochs=1, lr=0.1, schedule=lambda step: 0.5**step, progress=False)
    assert history.learning_rate == [pytest.approx(0.1 * 0.5**4)]


def test_stop_when_ends_training_early():
    source_vocab, target_vocab, batches = tiny_task()
    model = build_model("none", len(source_vocab), len(target_vocab), 8, 16)
    history = fit(
        model,
        batches,
        epochs=5,
        evaluate=lambda m: {"score": 1.0},
        stop_when=lambda metrics: metrics["score"] >= 1.0,
        progress=False,
    )
    assert history.epochs == 1
    assert history.metrics == {"score": [1.0]}


def test_fit_rejects_zero_epochs():
    with pytest.raises(ValueError, match="epochs must be positive, got 0"):
        fit(nn.Linear(1, 1), [], epochs=0)


def test_checkpoint_round_trip(tmp_path):
    seed_everything(0)
    model = build_model("luong-general", 12, 10, 8, 16)
    path = save_checkpoint(tmp_path / "model.pt", model, note="hello", epochs=3)
    restored = build_model("luong-general", 12, 10, 8, 16)
    extra = load_checkpoint(path, restored)
    assert extra == {"note": "hello", "epochs": 3}
    for name, tensor in model.state_dict().items():
        assert torch.equal(tensor, restored.state_dict()[name]), name
    assert [p.name for p in tmp_path.iterdir()] == ["model.pt"]  # no temporary file left


def test_checkpoint_of_another_model_is_refused_with_names(tmp_path):
    path = save_checkpoint(tmp_path / "model.pt", build_model("bahdanau", 12, 10, 8, 16))
    with pytest.raises(ValueError, match="does not match the model") as error:
        load_checkpoint(path, build_model("bahdanau", 12, 10, 8, 32))
    assert "shape mismatch: decoder.cell.bias_hh" in str(error.value)
    with pytest.raises(ValueError, match="missing from checkpoint: decoder.combine.weight"):
        load_checkpoint(path, build_model("luong-dot", 12, 10, 8, 16))


def test_fit_writes_a_checkpoint(tmp_path):
    source_vocab, target_vocab, batches = tiny_task()
    model = build_model("none", len(source_vocab), len(target_vocab), 8, 16)
    fit(model, batches, epochs=1, progress=False, checkpoint_path=tmp_path / "last.pt")
    assert load_checkpoint(tmp_path / "last.pt", model) == {"epochs": 1}
