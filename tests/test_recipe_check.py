"""scripts/recipe_check.py: chapter 14's recipe runs, built as the chapter builds them."""

from __future__ import annotations

import pytest

from attnlib.seq2seq import count_parameters
from attnlib.tasks.dates import DateTaskConfig, prepare
from attnlib.tasks.dates_transformer import new_date_model
from tests.helpers import script_module

recipe_check = script_module("recipe_check")


def test_the_runs_are_both_baselines_and_the_chapters_six_recipes():
    config = DateTaskConfig(n_test=1_000)
    runs = recipe_check.runs(config)
    names = ["bahdanau", "transformer", "pre-LN", "warm-up over 24 steps", "lr 0.01", "lr 0.001"]
    assert list(runs) == [*names, "d_ff 128", "all three: pre-LN, warm-up, d_ff 128"]
    assert [run_config.lr for _, run_config, _, _ in runs.values()] == pytest.approx(
        [3e-3] * 4 + [1e-2, 1e-3] + [3e-3] * 2
    )
    assert [warmup for *_, warmup in runs.values()] == [0, 0, 0, 24, 0, 0, 0, 24]
    task = prepare(config)
    parameters = [
        count_parameters(new_date_model(kind, task, sizes)) for kind, _, sizes, _ in runs.values()
    ]
    # the counts chapter 14's tables print: d_ff 128 brings the Transformer to Bahdanau's size
    assert parameters == [60_495, 44_591, 44_719, 44_591, 44_591, 44_591, 61_231, 61_359]
