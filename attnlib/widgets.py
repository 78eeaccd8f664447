"""The Python side of the explorers: what only Python can compute, handed to the browser.

Every explorer runs in the browser (:mod:`attnlib.live`), so it answers in JupyterLab and in the
published book alike, with no kernel. Where a trained Python model must answer (chapter 05's
translations), :func:`alignment_live` asks it ahead of time for every choice the explorer offers
and inlines the answers as JSON; a date of the reader's own then needs Python. :func:`parse_matrix`
reads the matrix text of chapter 01's explorer, the oracle ``attention.js`` is tested against.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from functools import cache
from importlib import resources

import numpy as np
from IPython.display import HTML

from attnlib.diagrams import alignment_rows
from attnlib.live import bundle, snippet

ALIGNMENT_SCRIPT = "alignment.js"
# What the alignment explorer's own script needs first: the softmax port and the DOM helpers.
ALIGNMENT_NEEDS = ("attention.js", "explorers.js")


def parse_matrix(text: str, shape: tuple[int, int], name: str) -> np.ndarray:
    """Read a matrix written as rows separated by ';' or newlines, numbers by spaces or commas."""
    rows = [row for row in text.replace(";", "\n").splitlines() if row.strip()]
    values = []
    for row in rows:
        values.append([])
        for word in row.replace(",", " ").split():
            try:
                values[-1].append(float(word))
            except ValueError:
                raise ValueError(f"{name}: '{word}' is not a number") from None
    n_rows, n_cols = shape
    if len(values) != n_rows:
        plural = "row" if len(values) == 1 else "rows"
        raise ValueError(
            f"{name} needs {n_rows} rows of {n_cols} numbers, one row per line; "
            f"it has {len(values)} {plural}"
        )
    for i, row in enumerate(values, start=1):
        if len(row) != n_cols:
            raise ValueError(f"{name} needs {n_cols} numbers in each row; row {i} has {len(row)}")
    return np.array(values, dtype=np.float64)


def alignment_answers(
    models: Mapping[str, object],
    examples: Mapping[str, tuple[str, str | None]],
    source_vocab,
    target_vocab,
) -> dict:
    """Every model's translation and alignment of every example, JSON-ready: ``examples`` maps
    a label to (source, target or None); the weights (output steps, source length) are stored
    in thousandths, rounded, for a page of a few tens of kilobytes."""
    from attnlib.tasks.dates import translate  # explorers sit on top: import tasks when used

    if not models or not examples:
        raise ValueError("the alignment explorer needs at least one model and one example")
    answers, listed = [], []
    for label, (source, target) in examples.items():
        if not isinstance(source, str) or not source:
            raise ValueError(f"example {label!r} needs a non-empty date, got {source!r}")
        listed.append({"label": str(label), "source": source, "target": target})
        row = []
        for name, model in models.items():
            prediction, weights = translate(model, source, source_vocab, target_vocab)
            permille = None
            if weights is not None:
                if weights.shape[1] != len(source):
                    raise ValueError(
                        f"{name} aligned {weights.shape[1]} characters of {label!r}, "
                        f"which has {len(source)}"
                    )
                permille = np.rint(weights.numpy() * 1000).astype(int).tolist()
            steps = len(permille) if permille is not None else len(prediction) + 1
            row.append(
                {
                    "prediction": prediction,
                    "rows": alignment_rows(prediction, steps),
                    "permille": permille,
                }
            )
        answers.append(row)
    return {"models": [str(name) for name in models], "examples": listed, "answers": answers}


@cache
def alignment_script() -> str:
    """The explorer's inline script: the shared bundle, then ``alignment.js``, mounted."""
    own = resources.files("attnlib.live").joinpath(ALIGNMENT_SCRIPT).read_text(encoding="utf-8")
    if "</script" in own.lower() or "<!--" in own:
        raise ValueError(f"{ALIGNMENT_SCRIPT} contains text that would end an inline <script>")
    return (
        f"{bundle(ALIGNMENT_NEEDS)}\n(function () {{\n"
        # never a CommonJS module in a page: alignment.js registers its explorer
        "var module;\n"
        f"{own}\n"
        "window.attnlibLive.mountAll(document);\n})();"
    )


def alignment_live(
    models: Mapping[str, object],
    examples: Mapping[str, tuple[str, str | None]],
    source_vocab,
    target_vocab,
    start: str | None = None,
) -> HTML:
    """Chapter 05's explorer: pick a date (a label of ``examples``: label -> (source, target))
    and a model of ``models`` (name -> trained model) and see its translation and alignment,
    answered ahead of time by :func:`alignment_answers`, so no kernel is needed to explore.
    ``start`` is the label the explorer opens at (default: the first)."""
    if start is not None and start not in examples:
        raise ValueError(f"start must be one of the examples' labels, got {start!r}")
    answers = alignment_answers(models, examples, source_vocab, target_vocab)
    attributes = {
        "answers": json.dumps(answers, separators=(",", ":"), ensure_ascii=False),
        "start": str(list(examples).index(start) if start is not None else 0),
    }
    return HTML(snippet("alignment", attributes, script=alignment_script()))
