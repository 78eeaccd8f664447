"""Chapter 18's language-model task on a small synthetic stream: windows, measurements, training."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from attnlib.heads import first_token_score
from attnlib.tasks.induction import next_token_loss
from attnlib.tasks.sink_lm import (
    SinkLMTask,
    batches,
    measure,
    new_model,
    optimizer_for,
    probe,
    review_stream,
    train,
)

STREAM = np.arange(2, 302, dtype=np.int64) % 37 + 2  # 300 tokens of a vocabulary of 40
TINY = SinkLMTask(seq_len=12, batch_size=3, steps=4, warmup=1, probe_size=5, every=2)


def tiny_model(sink: str | None = None):
    torch.manual_seed(0)
    return new_model(40, sink, d_model=16, num_heads=2, num_layers=2, d_ff=32)


def test_review_stream_puts_sep_after_every_review():
    stream = review_stream([[5, 6], [7], [8, 9, 10]], sep_id=3)
    assert stream.tolist() == [5, 6, 3, 7, 3, 8, 9, 10, 3] and stream.dtype == np.int64


def test_batches_are_windows_of_the_stream_fixed_by_seed_and_step():
    first = list(batches(STREAM, TINY, seed=0))
    assert len(first) == 4 and first[0].shape == (3, 12)
    starts = range(len(STREAM) - 11)
    for row in first[0]:
        assert any(np.array_equal(STREAM[s : s + 12], row.numpy()) for s in starts)
    again = list(batches(STREAM, TINY, seed=0))
    assert all(torch.equal(a, b) for a, b in zip(first, again, strict=True))
    assert not torch.equal(first[0], next(iter(batches(STREAM, TINY, seed=1))))
    assert not torch.equal(first[0], first[1])
    assert torch.equal(probe(STREAM, TINY), probe(STREAM, TINY))


def test_measure_reads_the_loss_and_first_token_scores_of_the_probe():
    model, windows = tiny_model(), probe(STREAM, TINY)
    report = measure(model.train(), windows, step=7)
    assert model.training  # the mode comes back
    model.eval()
    with torch.no_grad():
        _, weights = model.attention_weights(windows)
        loss = next_token_loss(model, windows).item()
    assert report.step == 7 and report.loss == pytest.approx(loss, rel=1e-5)
    torch.testing.assert_close(report.first_token, first_token_score(weights))
    assert report.first_token.shape == (2, 2)


def test_training_reports_every_few_steps_and_decays_only_matrices():
    model, seen = tiny_model("learned"), []
    run = train(model, STREAM, STREAM[::-1].copy(), TINY, seed=0, progress=False,
                on_report=lambda report, trained: seen.append(report.step))  # fmt: skip
    assert [report.step for report in run.reports] == seen == [2, 4]
    assert run.history.steps == 4 and all(np.isfinite(r.loss) for r in run.reports)
    groups = optimizer_for(model, TINY).param_groups
    assert all(p.dim() >= 2 for p in groups[0]["params"]) and groups[0]["weight_decay"] == 0.1
    assert all(p.dim() < 2 for p in groups[1]["params"]) and groups[1]["weight_decay"] == 0.0
    assert any(p is model.layers[0].attention.sink_logits for p in groups[1]["params"])
    config = model.config
    assert (config.positions, config.norm_first, config.attention_sink) == (
        "rotary",
        True,
        "learned",
    )


@pytest.mark.parametrize(
    ("call", "error", "message"),
    [
        (lambda: SinkLMTask(seq_len=1), ValueError, "seq_len must be >= 2"),
        (
            lambda: SinkLMTask(steps=10, warmup=1, every=3),
            ValueError,
            "every=3 must divide steps=10",
        ),
        (lambda: SinkLMTask(steps=10, warmup=10, every=5), ValueError, "leaves no steps"),
        (lambda: SinkLMTask(lr=0), ValueError, "lr must be positive"),
        (lambda: SinkLMTask(weight_decay=-1), ValueError, "weight_decay must be >= 0"),
        (lambda: review_stream([], 3), ValueError, "at least one review"),
        (lambda: next(batches(STREAM[:5], TINY, 0)), ValueError, "at least 12 tokens"),
    ],
)
def test_the_task_says_what_is_wrong(call, error, message):
    with pytest.raises(error, match=message):
        call()
