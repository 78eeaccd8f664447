"""Drawn figures: boxes joined by arrows (data flow, decoder steps) and rows of alignment maps.

Every box and arrow gets a gid (the box's name, ``"start->end"`` for an arrow), so that a test,
or a reader, can ask a drawn figure which arrows it holds; see :func:`arrow_names`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import matplotlib.pyplot as plt
from matplotlib.axes import Axes
from matplotlib.figure import Figure
from matplotlib.text import Annotation, Text

from attnlib.plots import plot_attention

ATTENTION, RECURRENT, STATE, OUTPUT = "#ffd8a8", "#d0e4f5", "#f2f2f2", "#d8f0d0"
TICK_SIZE = 10  # points: tick labels of the alignment maps, readable in the book


@dataclass(frozen=True)
class Box:
    """A rounded box with centred text, at (x, y) in axes data coordinates (0 to 1)."""

    x: float
    y: float
    text: str
    colour: str = STATE


@dataclass(frozen=True)
class Arrow:
    """An arrow between two named boxes; ``curvature`` bends it, ``label`` sits at its middle."""

    start: str
    end: str
    style: str = "-"
    curvature: float = 0.0
    label: str | None = None


def draw_flow(
    ax: Axes,
    boxes: Mapping[str, Box],
    arrows: Sequence[Arrow],
    notes: Sequence[tuple[float, float, str]] = (),
    title: str | None = None,
) -> dict[str, Text]:
    """Draw named boxes, the arrows between them and italic notes on ``ax``; return the boxes."""
    unknown = sorted({name for a in arrows for name in (a.start, a.end)} - set(boxes))
    if unknown:
        raise ValueError(f"arrows name boxes that do not exist: {', '.join(unknown)}")
    texts = {name: _draw_box(ax, name, box) for name, box in boxes.items()}
    for arrow in arrows:
        _draw_arrow(ax, texts, boxes, arrow)
    for x, y, text in notes:
        ax.text(x, y, text, ha="center", fontsize=10, style="italic", color="0.25")
    ax.set_xlim(0, 1)
    ax.set_ylim(-0.12, 1.08)
    ax.axis("off")
    if title:
        ax.set_title(title, loc="left", fontsize=12)
    return texts


def _draw_box(ax: Axes, name: str, box: Box) -> Text:
    """One rounded, filled box whose gid is its name."""
    text = ax.text(
        box.x,
        box.y,
        box.text,
        ha="center",
        va="center",
        fontsize=10,
        bbox={"boxstyle": "round,pad=0.45", "facecolor": box.colour, "edgecolor": "0.3"},
    )
    text.set_gid(name)
    return text


def _draw_arrow(
    ax: Axes, texts: Mapping[str, Text], boxes: Mapping[str, Box], arrow: Arrow
) -> None:
    """One arrow from box edge to box edge (gid ``start->end``), with its optional label."""
    start, end = texts[arrow.start], texts[arrow.end]
    annotation = ax.annotate(
        "",
        xy=(0.5, 0.5),
        xycoords=end,
        xytext=(0.5, 0.5),
        textcoords=start,
        arrowprops={
            "arrowstyle": "-|>",
            "linestyle": arrow.style,
            "color": "0.25",
            "connectionstyle": f"arc3,rad={arrow.curvature}",
            "patchA": start.get_bbox_patch(),
            "patchB": end.get_bbox_patch(),
            "shrinkA": 2,
            "shrinkB": 2,
        },
    )
    annotation.set_gid(f"{arrow.start}->{arrow.end}")
    if arrow.label:
        a, b = boxes[arrow.start], boxes[arrow.end]
        ax.text(
            (a.x + b.x) / 2,
            (a.y + b.y) / 2,
            arrow.label,
            ha="center",
            va="center",
            fontsize=10,
            bbox={"boxstyle": "square,pad=0.1", "facecolor": "white", "edgecolor": "none"},
        )


def arrow_names(ax: Axes) -> list[str]:
    """The arrows drawn on ``ax`` by :func:`draw_flow`, as ``"start->end"`` in drawing order."""
    return [t.get_gid() for t in ax.texts if isinstance(t, Annotation) and t.get_gid()]


def box_texts(ax: Axes) -> dict[str, str]:
    """The boxes drawn on ``ax`` by :func:`draw_flow`: name -> text."""
    return {
        t.get_gid(): t.get_text()
        for t in ax.texts
        if not isinstance(t, Annotation) and t.get_gid() is not None
    }


def self_attention_flow(n: int = 3, d_in: int = 4, d_k: int = 3, d_v: int = 3) -> Figure:
    """One self-attention layer as data flow: X -> Q, K, V -> scores -> weights -> outputs."""
    boxes = {
        "inputs": Box(0.07, 0.5, f"inputs $X$\n({n}, {d_in})"),
        "queries": Box(0.33, 0.88, f"queries $Q = XW_Q$\n({n}, {d_k})", RECURRENT),
        "keys": Box(0.33, 0.5, f"keys $K = XW_K$\n({n}, {d_k})", RECURRENT),
        "values": Box(0.33, 0.12, f"values $V = XW_V$\n({n}, {d_v})", RECURRENT),
        "scores": Box(0.56, 0.69, f"scores $S = QK^\\top$\n({n}, {n})", ATTENTION),
        "weights": Box(
            0.78, 0.69, f"weights $A = $softmax$(S)$\nrows sum to 1\n({n}, {n})", ATTENTION
        ),
        "outputs": Box(0.91, 0.2, f"outputs $Y = AV$\n({n}, {d_v})", OUTPUT),
    }
    arrows = [
        Arrow("inputs", "queries", label=f"$W_Q$ ({d_in}, {d_k})"),
        Arrow("inputs", "keys", label=f"$W_K$ ({d_in}, {d_k})"),
        Arrow("inputs", "values", label=f"$W_V$ ({d_in}, {d_v})"),
        Arrow("queries", "scores"),
        Arrow("keys", "scores"),
        Arrow("scores", "weights"),
        Arrow("weights", "outputs"),
        Arrow("values", "outputs"),
    ]
    figure, ax = plt.subplots(figsize=(11, 4.2))
    draw_flow(
        ax,
        boxes,
        arrows,
        notes=[(0.56, 0.3, "row $i$ of $S$, $A$ and $Y$ belongs to input $i$")],
        title="One self-attention layer: what flows where, with its shapes",
    )
    ax.set_ylim(0.0, 1.02)  # no notes below the lowest box
    return figure


def bahdanau_step(ax: Axes) -> dict[str, Text]:
    """Bahdanau's decoder step: attend with s_{t-1}, then run the GRU; c_t and e(y) reach W_o."""
    boxes = {
        "previous": Box(0.05, 0.55, r"$s_{t-1}$"),
        "encoder": Box(0.22, 0.98, r"encoder states $h_1 \ldots h_m$"),
        "attention": Box(
            0.22,
            0.55,
            "attention\n" + r"score$(s_{t-1}, h_j)$" + "\n" + r"$\to \alpha_t$",
            ATTENTION,
        ),
        "context": Box(0.4, 0.55, "context\n" + r"$c_t = \sum_j \alpha_{tj} h_j$", ATTENTION),
        "embedding": Box(0.58, 0.02, r"$e(y_{t-1})$"),
        "gru": Box(0.58, 0.55, "GRU\n" + r"input $[e(y_{t-1}); c_t]$", RECURRENT),
        "state": Box(0.74, 0.55, r"$s_t$"),
        "output": Box(0.9, 0.55, "output layer\n" + r"$W_o[s_t; c_t; e(y_{t-1})]$", OUTPUT),
    }
    arrows = [
        Arrow("previous", "attention"),
        Arrow("encoder", "attention"),
        Arrow("attention", "context"),
        Arrow("context", "gru"),
        Arrow("previous", "gru", curvature=0.3),
        Arrow("embedding", "gru"),
        Arrow("gru", "state"),
        Arrow("state", "output"),
        Arrow("context", "output", curvature=-0.3),
        Arrow("embedding", "output", curvature=0.25),
    ]
    notes = [
        (0.3, 0.16, "$s_{t-1}$ is also the GRU's state"),
        (0.66, 0.93, "$c_t$ also enters $W_o$"),
    ]
    return draw_flow(ax, boxes, arrows, notes, "Bahdanau: attend with $s_{t-1}$, then step")


def luong_step(ax: Axes) -> dict[str, Text]:
    """Luong's decoder step: run the GRU, attend with s_t, predict from s̃_t (input feeding)."""
    boxes = {
        "previous": Box(0.04, 0.55, r"$s_{t-1}$"),
        "embedding": Box(0.19, 0.02, r"$e(y_{t-1})$"),
        "gru": Box(0.19, 0.55, "GRU\n" + r"input $[e(y_{t-1}); \tilde{s}_{t-1}]$", RECURRENT),
        "state": Box(0.35, 0.55, r"$s_t$"),
        "encoder": Box(0.5, 0.98, r"encoder states $h_1 \ldots h_m$"),
        "attention": Box(
            0.5,
            0.55,
            "attention\n" + r"score$(s_t, h_j)$" + "\n" + r"$\to \alpha_t \to c_t$",
            ATTENTION,
        ),
        "attentional": Box(
            0.72, 0.55, "attentional state\n" + r"$\tilde{s}_t = \tanh(W_c[c_t; s_t])$", OUTPUT
        ),
        "output": Box(0.92, 0.55, "output layer\n" + r"$W_o \tilde{s}_t$", OUTPUT),
    }
    arrows = [
        Arrow("previous", "gru"),
        Arrow("embedding", "gru"),
        Arrow("gru", "state"),
        Arrow("state", "attention"),
        Arrow("encoder", "attention"),
        Arrow("attention", "attentional"),
        Arrow("attentional", "output"),
        Arrow("state", "attentional", curvature=0.35),
        Arrow("attentional", "gru", style="--", curvature=-0.45),
    ]
    notes = [
        (0.55, -0.1, r"input feeding (dashed): $\tilde{s}_t$ joins the input of step $t+1$"),
    ]
    return draw_flow(ax, boxes, arrows, notes, "Luong: step, then attend with $s_t$")


def decoder_steps() -> Figure:
    """Bahdanau's step above Luong's, attention in orange, the output side in green."""
    figure, (top, bottom) = plt.subplots(2, 1, figsize=(12, 7.5))
    bahdanau_step(top)
    luong_step(bottom)
    return figure


def alignment_rows(prediction: str, steps: int) -> list[str]:
    """Row labels of an alignment: the predicted characters and ``</s>``, or ``step i``."""
    if len(prediction) + 1 == steps:
        return [*prediction, "</s>"]
    return [f"step {i + 1}" for i in range(steps)]


def plot_alignments(
    alignments: Mapping[str, tuple[str, Any]],
    source: str,
    tick_size: float = TICK_SIZE,
    width: float = 11.0,
) -> Figure:
    """One alignment map per row, each with its colour bar: title -> (prediction, weights).

    Weights are (output steps, source length); spaces in ``source`` are drawn as ``␣``.
    """
    columns = [c if c != " " else "␣" for c in source]
    panel_height = 1.2 + 0.22 * max(len(weights) for _, weights in alignments.values())
    figure, axes = plt.subplots(
        len(alignments),
        1,
        figsize=(width, panel_height * len(alignments)),
        squeeze=False,
        layout="constrained",
    )
    for ax, (title, (prediction, weights)) in zip(axes[:, 0], alignments.items(), strict=True):
        rows = alignment_rows(prediction, len(weights))
        plot_attention(weights, rows, columns, ax=ax, title=title, annotate=False)
        ax.tick_params(labelsize=tick_size)
        ax.set_xlabel("input characters")
        ax.set_ylabel("output characters")
    return figure
