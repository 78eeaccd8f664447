"""Chapter 19's harness: the tasks' checks (MQAR and dates), a loss and an accuracy on the query
positions only, a budget in steps or CPU seconds, and a run that reports what it trained."""

from __future__ import annotations

import json
import sys

import pytest
import torch

from attnlib.data.date_rows import date_rows, decode
from attnlib.data.mqar import mqar_batch
from attnlib.encoder import count_parameters
from attnlib.lm import DecoderOnlyLM
from attnlib.model_config import TransformerConfig
from attnlib.tasks import recall
from attnlib.tasks.recall import (
    DateRecallTask,
    RecallTask,
    date_splits,
    recall_accuracy,
    recall_config,
    recall_loss,
    rows_right,
)
from tests.helpers import script_module

# A small date task: 64 training pairs, 8 test pairs, rows of 80 (the longest date takes 79).
DATES = DateRecallTask(seq_len=80, batch_size=4, steps=5, probe_size=8, n_train=64)


class Oracle(torch.nn.Module):
    """Logits that name each row's own next target: a perfect recaller of one batch."""

    def __init__(self, targets: torch.Tensor, vocab: int) -> None:
        super().__init__()
        self.logits = torch.zeros(*targets.shape, vocab)
        self.logits.scatter_(-1, targets.clamp(min=0)[..., None], 10.0)

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        return self.logits.clone()


def test_the_loss_and_the_accuracy_read_the_query_positions_only():
    batch = mqar_batch(4, 24, 4, 32, seed=5)
    oracle = Oracle(batch.targets, 32)
    assert recall_accuracy(oracle, batch) == 1.0
    perfect = recall_loss(oracle, batch).item()
    oracle.logits[~batch.queries] = torch.randn(int((~batch.queries).sum()), 32)
    assert recall_loss(oracle, batch).item() == pytest.approx(perfect)  # the rest never counts
    first_query = batch.queries.nonzero()[0].tolist()
    oracle.logits[tuple(first_query)] = 0.0
    oracle.logits[(*first_query, 1)] = 10.0  # a key's id, never a value
    assert recall_accuracy(oracle, batch) == pytest.approx(1 - 1 / 16)  # 4 rows x 4 queries


def test_the_rows_are_fresh_each_step_and_fixed_by_the_seed():
    task = RecallTask(num_pairs=2, seq_len=12, vocab_size=16, batch_size=3, steps=4)
    rows = list(recall.batches(task, seed=1))
    assert len(rows) == 4 and not torch.equal(rows[0].ids, rows[1].ids)
    torch.testing.assert_close(next(recall.batches(task, seed=1)).ids, rows[0].ids)
    assert not torch.equal(next(recall.batches(task, seed=2)).ids, rows[0].ids)


def test_a_budget_in_seconds_ends_the_rows():
    ticks = iter(range(100))
    task = RecallTask(num_pairs=2, seq_len=12, vocab_size=16, steps=50, seconds=3.0)
    rows = list(recall.batches(task, seed=0, clock=lambda: float(next(ticks))))
    assert len(rows) == 2  # the clock reads 0 at the start, then 1, 2: the third read is 3


def test_a_run_reports_its_mixer_size_and_steps():
    task = RecallTask(num_pairs=2, seq_len=12, vocab_size=16, batch_size=4, steps=3, probe_size=8)
    config = recall_config("linear", vocab_size=16, d_model=16, num_heads=2)
    run = recall.train(config, task, seed=0, progress=False)
    model_size = sum(
        p.numel() for p in recall.DecoderOnlyLM(config, tie_weights=False).parameters()
    )
    assert (run.mixer, run.num_pairs, run.steps, run.parameters) == ("linear", 2, 3, model_size)
    assert 0.0 <= run.accuracy <= 1.0 and run.seconds > 0 and run.mean_loss > 0
    assert run.task == "mqar" and 0.0 <= run.rows_right <= 1.0


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        ({"lr": 0.0}, "lr must be positive, got 0.0"),
        ({"seconds": -1.0}, "seconds must be positive or None, got -1.0"),
        ({"num_pairs": 30}, "seq_len=64 cannot hold 30 pairs"),
        ({"steps": 0}, "steps must be positive"),
    ],
)
def test_a_task_names_a_bad_setting(changes, message):
    with pytest.raises(ValueError, match=message):
        RecallTask(**changes)


def test_a_run_needs_a_mixer_and_the_task_s_vocabulary():
    task = RecallTask(vocab_size=16, num_pairs=2, seq_len=12)
    attention = TransformerConfig(vocab_size=16, d_model=8, num_heads=2)
    with pytest.raises(ValueError, match="the harness compares mixers: give a config with mixer"):
        recall.train(attention, task, seed=0)
    with pytest.raises(ValueError, match="config.vocab_size=128 differs from task.vocab_size=16"):
        recall.train(recall_config("softmax"), task, seed=0)


def test_the_script_writes_one_line_a_run(tmp_path, monkeypatch, capsys):
    harness = script_module("recall_harness")
    assert harness.numbers("0-2") == [0, 1, 2] and harness.numbers("4,12") == [4, 12]
    out = tmp_path / "runs.jsonl"
    argv = ["recall_harness.py", "--out", str(out), "--mixers", "softmax,delta", "--pairs", "2",
            "--seeds", "0", "--steps", "2", "--seq-len", "12", "--vocab-size", "16",
            "--d-model", "16", "--heads", "2"]  # fmt: skip
    monkeypatch.setattr(sys, "argv", argv)
    harness.main()
    runs = [json.loads(line) for line in out.read_text().splitlines()]
    assert [(r["mixer"], r["heads"], r["steps"]) for r in runs] == [
        ("softmax", 2, 2),
        ("delta", 2, 2),
    ]
    assert "softmax      2     2    0" in capsys.readouterr().out
    monkeypatch.setattr(sys, "argv", [*argv[:4], "mamba"])
    with pytest.raises(SystemExit, match="unknown mixers \\['mamba'\\]"):
        harness.main()


def test_a_row_is_right_only_when_every_query_is():
    batch = date_rows([("1.2.03", "2003-02-01"), ("may 5 21", "2021-05-05")], seq_len=20)
    oracle = Oracle(batch.targets, DATES.vocab_size)
    assert (rows_right(oracle, batch), recall_accuracy(oracle, batch)) == (1.0, 1.0)
    last = batch.queries.cumsum(dim=1).argmax(dim=1)  # each row's last query: its last digit
    oracle.logits[torch.arange(2), last] = 0.0
    oracle.logits[torch.arange(2), last, 4] = 10.0  # '-', never a date's last character
    assert rows_right(oracle, batch) == 0.0
    assert recall_accuracy(oracle, batch) == pytest.approx(0.9)  # 18 of 20 characters


def test_the_date_rows_are_training_pairs_fixed_by_seed_and_step():
    first = DATES.rows(seed=0, step=0)
    assert first.ids.shape == (4, 80) and first.queries.sum().item() == 40
    torch.testing.assert_close(DATES.rows(seed=0, step=0).ids, first.ids)
    assert not torch.equal(DATES.rows(seed=0, step=1).ids, first.ids)
    assert not torch.equal(DATES.rows(seed=1, step=0).ids, first.ids)
    training = {source for source, _ in date_splits(64, 8, 0).train}
    sources = {decode(row[: row.index(1)]) for row in first.ids.tolist()}
    assert sources <= training
    assert [len(rows.ids) for rows in recall.batches(DATES, seed=0)] == [4] * 5


def test_the_date_probe_is_the_test_split_and_no_training_pair():
    splits = date_splits(64, 8, 0)
    probe = recall.probe(DATES)
    torch.testing.assert_close(probe.ids, date_rows(splits.test, 80).ids)
    sources = {decode(row[: row.index(1)]) for row in probe.ids.tolist()}
    assert len(sources) == 8 and not sources & {source for source, _ in splits.train}


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        ({"seq_len": 40}, "needs seq_len >= "),
        ({"n_train": 0}, "n_train must be positive, got 0"),
        ({"lr": -1.0}, "lr must be positive, got -1.0"),
    ],
)
def test_a_date_task_names_a_bad_setting(changes, message):
    with pytest.raises(ValueError, match=message):
        DateRecallTask(**{"n_train": 64, "probe_size": 8, **changes})


def test_a_run_on_dates_reports_its_task():
    config = recall_config("softmax", vocab_size=DATES.vocab_size, d_model=16, num_heads=2)
    run = recall.train(config, DATES, seed=0, progress=False)
    assert (run.task, run.num_pairs, run.steps, run.mixer) == ("dates", None, 5, "softmax")
    assert 0.0 <= run.rows_right <= run.accuracy <= 1.0 and run.mean_loss > 0
    with pytest.raises(TypeError, match="task must be a RecallTask or a DateRecallTask, got dict"):
        recall.train(config, {"steps": 5}, seed=0)


def test_the_script_runs_the_date_task(tmp_path, monkeypatch, capsys):
    harness = script_module("recall_harness")
    out = tmp_path / "dates.jsonl"
    argv = ["recall_harness.py", "--out", str(out), "--task", "dates", "--mixers", "linear",
            "--seeds", "0", "--steps", "2", "--batch-size", "2", "--d-model", "8", "--heads", "2",
            "--pairs", "3"]  # fmt: skip
    monkeypatch.setattr(sys, "argv", argv)
    harness.main()
    (run,) = [json.loads(line) for line in out.read_text().splitlines()]
    assert (run["task"], run["num_pairs"], run["steps"]) == ("dates", None, 2)
    printed = capsys.readouterr().out
    assert "rows" in printed.splitlines()[0] and "linear       -     2    0" in printed


def test_the_harness_groups_softmax_attention_heads():
    config = recall_config("softmax", vocab_size=16, d_model=16, num_heads=4, num_kv_heads=1)
    assert config.num_kv_heads == 1
    full = DecoderOnlyLM(recall_config("softmax", vocab_size=16, d_model=16, num_heads=4))
    grouped = DecoderOnlyLM(config)
    # each layer's key and value projections shrink from 16 x 16 to 4 x 16 (and their biases)
    assert count_parameters(full) - count_parameters(grouped) == 2 * 2 * (12 * 16 + 12)
    with pytest.raises(ValueError, match="num_kv_heads belongs to an attention block"):
        recall_config("linear", num_kv_heads=1)
