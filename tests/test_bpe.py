"""The toy BPE: the article's merge sequence, its ties, the plain rules, segmentation."""

from __future__ import annotations

import re

import pytest

from attnlib.data.bpe import (
    ARTICLE_CORPUS,
    ARTICLE_MERGES,
    apply_merges,
    follow,
    learn_bpe,
    merge_pair,
    pair_counts,
    word_counts,
)

ARTICLE_COUNTS = [9, 9, 9, 7, 7, 6, 6, 6, 5, 3]


def test_article_sequence_reproduced_exactly():
    steps = learn_bpe(ARTICLE_CORPUS, 10, tie_break=follow(ARTICLE_MERGES))
    assert [step.pair for step in steps] == ARTICLE_MERGES
    assert [step.count for step in steps] == ARTICLE_COUNTS
    assert steps[-1].words == {"low e r </w>": 2, "newest</w>": 6, "w id est</w>": 3, "low</w>": 5}


def test_ties_are_reported_at_six_of_ten_steps():
    steps = learn_bpe(ARTICLE_CORPUS, 10, tie_break=follow(ARTICLE_MERGES))
    assert [len(step.tied) for step in steps] == [3, 2, 1, 2, 1, 3, 2, 1, 1, 3]
    assert steps[0].tied == (("e", "s"), ("s", "t"), ("t", "</w>"))
    assert steps[6].tied == (("ne", "w"), ("w", "est</w>"))
    assert steps[9].tied == (("w", "i"), ("i", "d"), ("d", "est</w>"))
    assert all(step.pair in step.tied for step in steps)


def test_first_seen_rule_diverges_from_the_article_at_step_one():
    steps = learn_bpe(ARTICLE_CORPUS, 10, tie_break="first_seen")
    assert [step.pair for step in steps] == [
        ("e", "s"),
        ("es", "t"),
        ("est", "</w>"),
        ("l", "o"),
        ("lo", "w"),
        ("n", "e"),
        ("ne", "w"),
        ("new", "est</w>"),
        ("low", "</w>"),
        ("w", "i"),
    ]
    assert [step.count for step in steps] == ARTICLE_COUNTS  # same counts, other pairs


def test_lexicographic_rule_first_differs_from_the_article_at_step_one():
    plain = [step.pair for step in learn_bpe(ARTICLE_CORPUS, 10, tie_break="lexicographic")]
    first = next(i for i, (a, b) in enumerate(zip(plain, ARTICLE_MERGES, strict=True)) if a != b)
    assert (first, plain[first], ARTICLE_MERGES[first]) == (0, ("e", "s"), ("s", "t"))
    # ... and from the first-seen rule at step six, where it prefers (e, w) to (n, e)
    first_seen = [step.pair for step in learn_bpe(ARTICLE_CORPUS, 10)]
    assert plain[:5] == first_seen[:5] and (plain[5], first_seen[5]) == (("e", "w"), ("n", "e"))


def test_follow_refuses_a_pair_that_is_not_tied_for_the_top():
    with pytest.raises(ValueError, match=r"step 1: recorded \('l', 'o'\) is not among tied"):
        learn_bpe(ARTICLE_CORPUS, 1, tie_break=follow([("l", "o")]))
    with pytest.raises(ValueError, match="step 11: only 10 recorded merges"):
        learn_bpe(ARTICLE_CORPUS, 11, tie_break=follow(ARTICLE_MERGES))
    with pytest.raises(ValueError, match="tie_break must be one of"):
        learn_bpe(ARTICLE_CORPUS, 1, tie_break="random")


def test_pair_counts_and_merge():
    counts = pair_counts(ARTICLE_CORPUS)
    assert counts[("e", "s")] == counts[("s", "t")] == 9 and counts[("w", "e")] == 8
    assert list(counts)[:2] == [("l", "o"), ("o", "w")]  # first-seen order
    merged = merge_pair(("s", "t"), ARTICLE_CORPUS)
    assert merged["n e w e st </w>"] == 6 and merged["w i d e st </w>"] == 3


def test_learning_stops_when_no_pair_is_left():
    steps = learn_bpe(ARTICLE_CORPUS, 100)
    assert len(steps) == 15 and set(steps[-1].words) == {
        "lower</w>",
        "newest</w>",
        "widest</w>",
        "low</w>",
    }


@pytest.mark.parametrize(
    ("word", "segments"),
    [
        ("lowest", ["low", "est</w>"]),
        ("newer", ["ne", "w", "e", "r", "</w>"]),
        ("wider", ["w", "id", "e", "r", "</w>"]),
        ("slowest", ["s", "low", "est</w>"]),
        ("low", ["low</w>"]),
        ("newest", ["newest</w>"]),
        ("xyz", ["x", "y", "z", "</w>"]),
    ],
)
def test_segmentation_of_new_words(word, segments):
    assert apply_merges(word, ARTICLE_MERGES) == segments


def test_word_counts_both_end_conventions():
    assert word_counts(["low", "low", "new"]) == {"l o w </w>": 2, "n e w </w>": 1}
    assert word_counts({"low": 5}, separate_end=False) == {"l o w</w>": 5}
    assert apply_merges("low", [("l", "o"), ("lo", "w</w>")], separate_end=False) == ["low</w>"]


# --- bad input ------------------------------------------------------------------------------


def test_learn_bpe_refuses_a_negative_number_of_merges():
    with pytest.raises(ValueError, match="num_merges must be an int >= 0, got -1"):
        learn_bpe(ARTICLE_CORPUS, -1)  # before: []


def test_learn_bpe_refuses_a_float_number_of_merges():
    with pytest.raises(TypeError, match="num_merges must be an int >= 0, got float 2.0"):
        learn_bpe(ARTICLE_CORPUS, 2.0)


def test_learn_bpe_refuses_words_that_are_not_space_separated_symbols():
    message = (
        "no word has two symbols to merge (the first is 'low'): the toy BPE takes words as "
        "space-separated symbols, such as 'l o w </w>'; word_counts(words) writes them so"
    )
    with pytest.raises(ValueError, match=re.escape(message)):
        learn_bpe({"low": 5}, 3)  # before: []


def test_learn_bpe_refuses_negative_counts():
    with pytest.raises(ValueError, match="the count of 'l o w </w>' must be an int >= 1, got -5"):
        learn_bpe({"l o w </w>": -5, "n e w </w>": 2}, 3)


def test_learn_bpe_refuses_a_list_of_words():
    with pytest.raises(TypeError, match="words must be a mapping word -> count such as"):
        learn_bpe(["l o w </w>"], 3)


def test_apply_merges_refuses_a_word_that_is_not_a_str():
    with pytest.raises(TypeError, match="word must be a str, got NoneType None"):
        apply_merges(None, ARTICLE_MERGES)  # before: "can only join an iterable"


def test_apply_merges_refuses_merges_that_are_not_pairs():
    message = "merges[1] must be a pair of symbols (str, str), got ('l', 'o', 'w')"
    with pytest.raises(ValueError, match=re.escape(message)):
        apply_merges("low", [("l", "o"), ("l", "o", "w")])


def test_follow_refuses_merges_that_are_not_pairs():
    with pytest.raises(ValueError, match=re.escape("merges[0] must be a pair of symbols")):
        follow([("s", "t", "x")])


def test_word_counts_refuses_words_that_are_not_strings():
    with pytest.raises(TypeError, match="words\\[0\\] must be a str, got int 1"):
        word_counts([1, 2])  # before: "can only join an iterable"


def test_word_counts_refuses_one_str_for_a_list_of_words():
    with pytest.raises(TypeError, match="words must be a list of words .* got str"):
        word_counts("lower")


def test_word_counts_refuses_a_word_with_a_space():
    with pytest.raises(ValueError, match="words\\[0\\] must be one word without spaces"):
        word_counts(["new york"])
