"""Interactive explorers: each function returns an ipywidgets layout to display in a notebook.

The numbers an explorer shows are computed by :mod:`attnlib.reference`, the same code the
chapters check against, so what a reader sees when moving a control is the library's answer.
"""

from __future__ import annotations

from collections.abc import Callable

import ipywidgets as widgets
import matplotlib.pyplot as plt
import numpy as np

from attnlib import reference
from attnlib.plots import plot_attention


class Explorer(widgets.VBox):
    """A VBox that also names its controls and readout, so tests and readers can reach them."""

    def __init__(self, controls: dict[str, widgets.Widget], readout: widgets.HTML, **kwargs):
        super().__init__(**kwargs)
        self.controls = controls
        self.readout = readout


def parse_matrix(text: str, shape: tuple[int, int], name: str) -> np.ndarray:
    """Read a matrix written as rows separated by ';' or newlines, numbers by spaces or commas."""
    rows = [row for row in text.replace(";", "\n").splitlines() if row.strip()]
    try:
        values = [[float(x) for x in row.replace(",", " ").split()] for row in rows]
    except ValueError as error:
        raise ValueError(f"{name}: {error}") from None
    if len(values) != shape[0] or any(len(row) != shape[1] for row in values):
        widths = sorted({len(row) for row in values})
        raise ValueError(
            f"{name} must be {shape[0]}x{shape[1]}, got {len(values)} rows of {widths}"
        )
    return np.array(values, dtype=np.float64)


def format_matrix(matrix: np.ndarray) -> str:
    """Rows on lines, numbers with spaces: the text form :func:`parse_matrix` reads back."""
    return "\n".join(" ".join(f"{x:g}" for x in row) for row in matrix)


def html_table(matrix: np.ndarray, row_labels, column_labels, caption: str) -> str:
    """A small HTML table with 4-decimal numbers, labelled rows and columns."""
    head = "".join(f"<th>{label}</th>" for label in column_labels)
    body = "".join(
        f"<tr><th>{label}</th>" + "".join(f"<td>{x:.4f}</td>" for x in row) + "</tr>"
        for label, row in zip(row_labels, np.atleast_2d(matrix), strict=True)
    )
    style = "border-collapse:collapse;margin:4px 16px 4px 0;font-family:monospace"
    return (
        f"<table cellpadding='3' style='{style}'>"
        f"<caption style='text-align:left'><b>{caption}</b></caption>"
        f"<tr><th></th>{head}</tr>{body}</table>"
    )


def _temperature_slider(value: float = 1.0) -> widgets.FloatLogSlider:
    return widgets.FloatLogSlider(
        value=value,
        base=10,
        min=-1.5,
        max=1.5,
        step=0.05,
        description="temperature",
        readout_format=".3g",
        continuous_update=False,
        style={"description_width": "initial"},
    )


def _redraw(output: widgets.Output, draw: Callable[[], None]) -> None:
    with output:
        output.clear_output(wait=True)
        draw()
        plt.show()


def worked_example_explorer() -> Explorer:
    """Chapter 01's explorer: edit inputs and W_K, W_Q, W_V; toggle √d_k; move a temperature."""
    matrices = {
        "inputs (3x4)": (reference.WORKED_INPUTS, (3, 4)),
        "W_K (4x3)": (reference.WORKED_KEY_WEIGHTS, (4, 3)),
        "W_Q (4x3)": (reference.WORKED_QUERY_WEIGHTS, (4, 3)),
        "W_V (4x3)": (reference.WORKED_VALUE_WEIGHTS, (4, 3)),
    }
    editors = {
        name: widgets.Textarea(
            value=format_matrix(matrix),
            description=name,
            layout=widgets.Layout(width="190px", height="95px"),
            style={"description_width": "initial"},
            continuous_update=False,
        )
        for name, (matrix, _) in matrices.items()
    }
    scale = widgets.Checkbox(value=False, description="divide scores by √d_k")
    temperature = _temperature_slider()
    readout = widgets.HTML()
    picture = widgets.Output()
    labels = ["input 1", "input 2", "input 3"]

    def update(_change=None) -> None:
        try:
            parsed = {
                name: parse_matrix(editors[name].value, shape, name)
                for name, (_, shape) in matrices.items()
            }
        except ValueError as error:
            readout.value = f"<p style='color:#b00'>Cannot read {error}</p>"
            return
        result = reference.worked_example(
            *parsed.values(), scale=scale.value, temperature=temperature.value
        )
        tables = [
            html_table(result.scores, labels, labels, "scores (query · key)"),
            html_table(result.weights, labels, labels, "attention weights"),
            html_table(result.outputs, labels, ["d1", "d2", "d3"], "outputs"),
        ]
        readout.value = "<div style='display:flex;flex-wrap:wrap'>" + "".join(tables) + "</div>"
        _redraw(
            picture,
            lambda: plot_attention(result.weights, labels, labels, title="attention weights"),
        )

    for control in (*editors.values(), scale, temperature):
        control.observe(update, names="value")
    update()
    controls = {**editors, "scale": scale, "temperature": temperature}
    return Explorer(
        controls,
        readout,
        children=[
            widgets.HBox(list(editors.values())),
            widgets.HBox([scale, temperature]),
            widgets.HBox([readout, picture]),
        ],
    )


def temperature_explorer(scores: tuple[float, ...] = (2.0, 4.0, 4.0, 1.0, -1.0)) -> Explorer:
    """Chapter 02's explorer: how temperature sharpens or flattens softmax of a score vector."""
    scores_text = widgets.Text(
        value=" ".join(f"{s:g}" for s in scores),
        description="scores",
        continuous_update=False,
        style={"description_width": "initial"},
    )
    temperature = _temperature_slider()
    readout = widgets.HTML()
    picture = widgets.Output()

    def update(_change=None) -> None:
        try:
            values = np.array([float(x) for x in scores_text.value.replace(",", " ").split()])
        except ValueError as error:
            readout.value = f"<p style='color:#b00'>Cannot read scores: {error}</p>"
            return
        if values.size == 0:
            readout.value = "<p style='color:#b00'>Type at least one score.</p>"
            return
        weights = reference.softmax(values, temperature=temperature.value)
        entropy = float(-(weights * np.log(np.clip(weights, 1e-300, None))).sum())
        columns = [f"k{i + 1}" for i in range(values.size)]
        readout.value = html_table(weights[None, :], ["weight"], columns, "softmax(scores / T)") + (
            f"<p>largest weight {weights.max():.4f}; entropy {entropy:.4f} nats "
            f"(uniform would be {np.log(values.size):.4f})</p>"
        )

        def draw() -> None:
            _, ax = plt.subplots(figsize=(4.5, 2.6))
            ax.bar(columns, weights, color="tab:blue")
            ax.set_ylim(0, 1)
            ax.set_ylabel("weight")
            ax.set_title(f"softmax at temperature {temperature.value:.3g}")

        _redraw(picture, draw)

    scores_text.observe(update, names="value")
    temperature.observe(update, names="value")
    update()
    return Explorer(
        {"scores": scores_text, "temperature": temperature},
        readout,
        children=[widgets.HBox([scores_text, temperature]), widgets.HBox([readout, picture])],
    )


def alignment_explorer(models: dict, examples: list[str], source_vocab, target_vocab) -> Explorer:
    """Chapter 05's explorer: pick (or type) a date and a trained model; see its alignment."""
    from attnlib.tasks.dates import translate  # widgets sit on top; import tasks only when used

    if not models or not examples:
        raise ValueError("alignment_explorer needs at least one model and one example")
    example = widgets.Dropdown(options=examples, description="example")
    typed = widgets.Text(
        placeholder="or type a date, e.g. 3 march 1999",
        description="your date",
        continuous_update=False,
    )
    model_name = widgets.Dropdown(options=list(models), description="model")
    readout = widgets.HTML()
    picture = widgets.Output()

    def update(_change=None) -> None:
        text = typed.value.strip().lower() or example.value
        prediction, alignment = translate(
            models[model_name.value], text, source_vocab, target_vocab
        )
        readout.value = f"<p><code>{text}</code> → <code>{prediction}</code></p>"
        if alignment is None:
            readout.value += "<p>This model has no attention, so there is no alignment.</p>"
            return
        output_labels = [*prediction, "</s>"]
        if len(output_labels) != alignment.shape[0]:  # the model emitted special symbols
            output_labels = [f"step {i + 1}" for i in range(alignment.shape[0])]

        def draw() -> None:
            _, ax = plt.subplots(figsize=(min(12, 1 + 0.32 * len(text)), 4.2))
            # An open-box symbol makes spaces visible on the axis.
            input_labels = [char if char != " " else "␣" for char in text]
            plot_attention(alignment, output_labels, input_labels, ax=ax, annotate=False)
            ax.set_ylabel("output characters")
            ax.set_xlabel("input characters")

        _redraw(picture, draw)

    for control in (example, typed, model_name):
        control.observe(update, names="value")
    update()
    return Explorer(
        {"example": example, "typed": typed, "model": model_name},
        readout,
        children=[widgets.HBox([example, typed, model_name]), readout, picture],
    )
