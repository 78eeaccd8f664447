"""The heatmap helpers label both axes and refuse shapes they cannot draw."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from attnlib.plots import plot_attention, plot_attention_grid, plot_curves, subword_labels


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
