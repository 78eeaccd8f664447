"""The drawn figures hold the boxes, arrows, shapes, colour bars and tick sizes they promise."""

from __future__ import annotations

import matplotlib.pyplot as plt
import pytest
import torch

from attnlib.diagrams import (
    Arrow,
    Box,
    alignment_rows,
    arrow_names,
    bahdanau_step,
    box_texts,
    decoder_steps,
    draw_flow,
    luong_step,
    plot_alignments,
    self_attention_flow,
)


def test_self_attention_flow_has_every_arrow_of_the_layer():
    ax = self_attention_flow().axes[0]
    assert sorted(arrow_names(ax)) == sorted(
        [
            "inputs->queries",
            "inputs->keys",
            "inputs->values",
            "queries->scores",
            "keys->scores",
            "scores->weights",
            "weights->outputs",
            "values->outputs",
        ]
    )


def test_self_attention_flow_labels_the_shapes():
    ax = self_attention_flow(n=5, d_in=8, d_k=2, d_v=6).axes[0]
    boxes = box_texts(ax)
    assert boxes["inputs"].endswith("(5, 8)")
    assert boxes["queries"].endswith("(5, 2)") and boxes["keys"].endswith("(5, 2)")
    assert boxes["values"].endswith("(5, 6)")
    assert boxes["scores"].endswith("(5, 5)") and boxes["weights"].endswith("(5, 5)")
    assert boxes["outputs"].endswith("(5, 6)")
    labels = {t.get_text() for t in ax.texts}
    assert {"$W_Q$ (8, 2)", "$W_K$ (8, 2)", "$W_V$ (8, 6)"} <= labels


def test_bahdanau_output_layer_reads_state_context_and_embedding():
    _, ax = plt.subplots()
    bahdanau_step(ax)
    into_output = {name.split("->")[0] for name in arrow_names(ax) if name.endswith("->output")}
    assert into_output == {"state", "context", "embedding"}
    assert len(arrow_names(ax)) == 10


def test_luong_output_layer_reads_only_the_attentional_state():
    _, ax = plt.subplots()
    luong_step(ax)
    names = arrow_names(ax)
    assert [n for n in names if n.endswith("->output")] == ["attentional->output"]
    assert "attentional->gru" in names  # input feeding
    assert {"embedding->gru", "state->attention", "state->attentional"} <= set(names)


def test_decoder_steps_draws_both_panels():
    figure = decoder_steps()
    titles = [ax.get_title(loc="left") for ax in figure.axes]
    assert [t.split(":")[0] for t in titles] == ["Bahdanau", "Luong"]


def test_draw_flow_refuses_arrows_to_missing_boxes():
    _, ax = plt.subplots()
    with pytest.raises(ValueError, match="do not exist: ghost"):
        draw_flow(ax, {"a": Box(0.2, 0.5, "a")}, [Arrow("a", "ghost")])


def test_alignment_rows_name_characters_or_steps():
    assert alignment_rows("12", 3) == ["1", "2", "</s>"]
    assert alignment_rows("12", 2) == ["step 1", "step 2"]


def test_plot_alignments_gives_each_map_a_colour_bar_and_readable_ticks():
    source = "1 may 99"
    weights = torch.softmax(torch.randn(4, len(source)), dim=-1)
    figure = plot_alignments({"a: 123": ("123", weights), "b: 12": ("12", weights)}, source)
    maps = [ax for ax in figure.axes if ax.images]
    colour_bars = [ax for ax in figure.axes if not ax.images]
    assert len(maps) == 2 and len(colour_bars) == 2
    assert [t.get_text() for t in maps[0].get_xticklabels()][:3] == ["1", "␣", "m"]
    assert [t.get_text() for t in maps[0].get_yticklabels()] == ["1", "2", "3", "</s>"]
    assert [t.get_text() for t in maps[1].get_yticklabels()][0] == "step 1"
    sizes = {t.get_fontsize() for ax in maps for t in ax.get_xticklabels() + ax.get_yticklabels()}
    assert min(sizes) >= 9
