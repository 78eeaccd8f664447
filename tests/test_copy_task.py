"""The copy task of chapter 03: seeded data, lengths, scores, early stopping and clear errors."""

from __future__ import annotations

from collections import Counter
from dataclasses import replace

import pytest

from attnlib import seed_everything
from attnlib.tasks.copy import (
    DIGITS,
    CopyTaskConfig,
    best_epoch,
    copy_marks,
    copy_pairs,
    evaluate,
    make_copy_splits,
    mean_and_sd,
    new_model,
    prepare,
    random_strings,
    scores_by_length,
    token_accuracy,
    train,
    train_seed,
)

TINY = CopyTaskConfig(
    min_length=2, max_length=5, n_train=32, n_valid=8, n_test_per_length=3, epochs=1,
    hidden_size=8, embedding_dim=4, attention_size=4,
)  # fmt: skip


def test_random_strings_are_the_same_for_the_same_seed_and_differ_across_seeds():
    first = random_strings(3, 3, 6, seed=7)
    assert first == ["26018", "590", "0166"]  # pinned: a change here changes chapter 03's data
    assert first == random_strings(3, 3, 6, seed=7)
    assert first != random_strings(3, 3, 6, seed=8)


def test_random_strings_draw_every_length_about_equally_often_from_the_alphabet():
    strings = random_strings(8_000, 1, 16, seed=0)
    counts = Counter(len(text) for text in strings)
    assert sorted(counts) == list(range(1, 17))
    assert max(counts.values()) < 1.2 * 8_000 / 16 and min(counts.values()) > 0.8 * 8_000 / 16
    assert set("".join(strings)) == set(DIGITS)


def test_copy_pairs_copy_or_reverse():
    assert copy_pairs(["123", "45"]) == [("123", "123"), ("45", "45")]
    assert copy_pairs(["123"], reverse=True) == [("123", "321")]


def test_splits_are_seeded_and_the_test_split_has_equal_counts_per_length():
    splits = make_copy_splits(TINY)
    assert splits == make_copy_splits(TINY)
    assert splits.train != make_copy_splits(CopyTaskConfig(**{**vars(TINY), "seed": 1})).train
    assert (len(splits.train), len(splits.valid)) == (32, 8)
    assert Counter(len(source) for source, _ in splits.test) == {2: 3, 3: 3, 4: 3, 5: 3}
    assert all(source == target for source, target in splits.train + splits.test)


def test_prepare_shares_one_vocabulary_of_the_alphabet_and_the_specials():
    task = prepare(TINY)
    assert task.source_vocab is task.target_vocab
    assert len(task.vocab) == 4 + 10
    assert task.max_steps == 6
    assert [len(batch) for batch in task.train_batches(0)] == [32]


def test_training_batches_are_reshuffled_each_epoch_but_hold_the_same_strings():
    task = prepare(TINY)
    first, second = task.train_batches(0)[0].sources, task.train_batches(1)[0].sources
    assert first != second and sorted(first) == sorted(second)
    assert first == task.train_batches(0)[0].sources


def test_token_accuracy_counts_symbols_at_their_positions():
    assert token_accuracy(["1234", "99"], ["1234", "98"]) == pytest.approx(5 / 6)
    assert token_accuracy(["12"], ["1234"]) == 0.5  # too short: the rest is missed
    assert token_accuracy(["123456"], ["1234"]) == 1.0  # extra symbols are not counted


def test_copy_marks_point_at_wrong_missing_and_extra_symbols():
    assert copy_marks("1234", "1234") == "    "
    assert copy_marks("1243", "1234") == "  ^^"
    assert copy_marks("12", "1234") == "  ^^"  # too short: the missing digits are wrong
    assert copy_marks("12345", "1234") == "    ^"  # too long: the extra digit is wrong
    assert copy_marks("", "") == ""


def test_a_seed_run_keeps_its_trained_model():
    run = train_seed("bahdanau", TINY, 0)
    task = prepare(TINY)
    predictions, scores = evaluate(run.model(task), task.test_batches, task)
    assert predictions == run.predictions and scores == run.scores
    assert run.model(task).training is False


def test_scores_by_length_groups_by_source_length():
    pairs = [("12", "12"), ("34", "34"), ("567", "567")]
    rows = scores_by_length(["12", "35", "567"], pairs)
    assert [(row.length, row.exact, row.token, row.count) for row in rows] == [
        (2, 0.5, 0.75, 2),
        (3, 1.0, 1.0, 1),
    ]


def test_mean_and_sd_of_runs():
    assert mean_and_sd([0.5, 0.7, 0.9]) == pytest.approx((0.7, 0.2))
    assert mean_and_sd([0.4]) == (0.4, 0.0)


def test_a_tiny_model_trains_and_is_scored_on_the_test_split():
    seed_everything(0)
    task = prepare(TINY)
    trained = train("bahdanau", task, progress=False)
    assert trained.history.epochs == 1
    assert set(trained.history.metrics) == {"valid_exact", "valid_token"}
    predictions, scores = evaluate(trained.model, task.test_batches, task)
    assert len(predictions) == 12 and 0.0 <= scores["token"] <= 1.0
    assert new_model("none", task).decoder.uses_attention is False


def test_training_stops_on_a_plateau_and_keeps_the_best_validation_weights():
    seed_everything(0)
    # min_delta 0.99: after the first epoch no gain can count, so patience 2 stops at epoch 3.
    task = prepare(replace(TINY, epochs=10, patience=2, min_delta=0.99))
    trained = train("none", task, progress=False)
    curve = trained.history.metrics["valid_exact"]
    assert trained.history.epochs == 3
    _, scores = evaluate(trained.model, task.valid_batches, task)
    assert scores["exact"] == max(curve)
    assert best_epoch(trained.history) == 1 + curve.index(max(curve))


def test_quick_mode_shrinks_the_configuration(monkeypatch):
    monkeypatch.setenv("ATTNLIB_QUICK", "1")
    config = CopyTaskConfig.for_mode()
    assert (config.n_train, config.epochs, config.n_test_per_length) == (1_024, 4, 20)
    monkeypatch.delenv("ATTNLIB_QUICK")
    assert CopyTaskConfig.for_mode().epochs == CopyTaskConfig().epochs


@pytest.mark.parametrize(
    ("call", "error", "message"),
    [
        (lambda: random_strings(0, 1, 5), ValueError, "n must be positive, got 0"),
        (lambda: random_strings(3, 6, 5), ValueError, "min_length 6 is larger than max_length 5"),
        (lambda: random_strings(3, 1, 5, alphabet="7"), ValueError, "at least 2 symbols"),
        (
            lambda: random_strings(3, 1, 5, alphabet="abca"),
            ValueError,
            r"repeats the symbols \['a'\]",
        ),
        (lambda: random_strings(3.0, 1, 5), TypeError, "n must be an int, got float 3.0"),
        (lambda: copy_pairs([]), ValueError, "needs at least one string"),
        (lambda: copy_pairs(["12", ""]), ValueError, "string 1 is empty"),
        (lambda: CopyTaskConfig(epochs=0), ValueError, "CopyTaskConfig.epochs must be positive"),
        (lambda: CopyTaskConfig(n_train=True), TypeError, "CopyTaskConfig.n_train must be an int"),
        (lambda: CopyTaskConfig(lr=0), ValueError, "CopyTaskConfig.lr must be a positive number"),
        (lambda: CopyTaskConfig(seed=-1), ValueError, "seed must be a non-negative int"),
        (lambda: CopyTaskConfig(min_length=0), ValueError, "min_length must be positive"),
        (lambda: token_accuracy(["1"], ["1", "2"]), ValueError, "1 predictions for 2 targets"),
        (lambda: scores_by_length([], []), ValueError, "at least one target"),
        (lambda: mean_and_sd([]), ValueError, "at least one value"),
        (lambda: copy_marks("12", 12), TypeError, "compares two strings, got str and int"),
        (
            lambda: CopyTaskConfig(patience=0),
            ValueError,
            "CopyTaskConfig.patience must be positive",
        ),
        (lambda: CopyTaskConfig(min_delta=1), ValueError, r"min_delta must be in \[0, 1\), got 1"),
        (lambda: CopyTaskConfig(min_delta="0"), TypeError, "min_delta must be a number"),
    ],
)
def test_bad_input_fails_with_a_message_naming_the_fault(call, error, message):
    with pytest.raises(error, match=message):
        call()
