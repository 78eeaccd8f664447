"""The heatmap helpers label both axes and refuse shapes they cannot draw."""

from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np
import pytest
import torch

from attnlib.plots import (
    attention_window,
    char_labels,
    plot_attention,
    plot_attention_grid,
    plot_curves,
    plot_review_attention,
    subword_labels,
)


def test_plot_attention_labels_queries_and_keys():
    ax = plot_attention(torch.full((2, 3), 1 / 3), ["a", "b"], ["x", "y", "z"])
    assert [t.get_text() for t in ax.get_xticklabels()] == ["x", "y", "z"]
    assert [t.get_text() for t in ax.get_yticklabels()] == ["a", "b"]
    assert len(ax.texts) == 6  # small matrices are annotated with their numbers
    assert ax.texts[0].get_text() == "0.33"


def test_plot_attention_rejects_wrong_label_count():
    with pytest.raises(ValueError, match="2 key_labels for 3 columns of weights"):
        plot_attention(np.ones((2, 3)), key_labels=["x", "y"])


def test_plot_attention_rejects_3d_weights():
    with pytest.raises(ValueError, match=r"needs \(n_queries, n_keys\), got shape \(2, 2, 2\)"):
        plot_attention(np.ones((2, 2, 2)))


def test_plot_attention_grid_draws_one_panel_per_head():
    figure = plot_attention_grid(torch.rand(6, 4, 5), ncols=4)
    drawn = [ax for ax in figure.axes if ax.images]
    assert len(drawn) == 6
    assert drawn[5].get_title() == "head 5"


def test_plot_curves_draws_each_named_curve():
    ax = plot_curves({"a": ([0, 1], [1, 2]), "b": ([0, 1], [2, 1])}, "step", "loss")
    assert [line.get_label() for line in ax.get_lines()] == ["a", "b"]


def test_subword_labels_drop_the_word_end_and_mark_continued_pieces():
    tokens = ["[CLS]", "a</w>", "wonder", "ful</w>", "film</w>", "[UNK]"]
    assert subword_labels(tokens) == ["[CLS]", "a", "wonder-", "ful", "film", "[UNK]"]


def review_weights(heads: int = 4, n: int = 50, seed: int = 0) -> np.ndarray:
    scores = np.random.default_rng(seed).normal(size=(heads, n, n))
    scores[:, :, 20:25] += 3.0  # keys 20-24 receive the most attention
    weights = np.exp(scores)
    return weights / weights.sum(-1, keepdims=True)


def test_attention_window_finds_the_most_attended_keys():
    weights = review_weights()
    assert attention_window(weights, 5) == 20
    assert attention_window(weights, 60) == 0  # the whole text fits


def test_review_attention_labels_every_token_of_its_window():
    weights = review_weights()
    tokens = [f"w{i}</w>" if i % 3 else f"w{i}" for i in range(50)]
    figure = plot_review_attention(weights, tokens, size=30, start=10, title="a review")
    maps, bars = figure.axes[:4], figure.axes[4]
    expected = subword_labels(tokens[10:40])
    for ax in maps:
        assert [t.get_text() for t in ax.get_xticklabels()] == expected
        assert [t.get_text() for t in ax.get_yticklabels()] == expected
    assert [t.get_text() for t in bars.get_xticklabels()] == expected
    assert not any("</w>" in label for label in expected)
    labels = [t for ax in figure.axes for t in ax.get_xticklabels() + ax.get_yticklabels()]
    assert min(t.get_fontsize() for t in labels) >= 9
    assert figure.get_figwidth() <= 9.5
    assert figure.get_suptitle() == "a review: tokens 10-39 of 50"
    plt.close(figure)


def test_review_attention_checks_its_inputs():
    weights = review_weights(n=8)
    with pytest.raises(ValueError, match="7 tokens for weights over 8 positions"):
        plot_review_attention(weights, ["a"] * 7)
    with pytest.raises(ValueError, match=r"weights must be \(heads, n, n\) of one layer"):
        plot_review_attention(weights[0], ["a"] * 8)
    with pytest.raises(ValueError, match=r"start must be in \[0, 8\), got 8"):
        plot_review_attention(weights, ["a"] * 8, start=8)


def test_char_labels_shows_spaces():
    assert char_labels("21 nov") == ["2", "1", "␣", "n", "o", "v"]
    assert char_labels("") == []
