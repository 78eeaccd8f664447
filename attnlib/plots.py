"""Pictures: one heatmap helper for every attention picture, plus curves.

Weights may be NumPy arrays or torch tensors; tensors are detached and moved to the CPU.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import matplotlib.pyplot as plt
import numpy as np
from matplotlib.axes import Axes
from matplotlib.figure import Figure


def to_numpy(array) -> np.ndarray:
    """A NumPy copy of an array or a (possibly GPU, possibly grad-tracking) tensor."""
    if hasattr(array, "detach"):
        array = array.detach().float().cpu().numpy()
    return np.asarray(array)


def plot_attention(
    weights,
    query_labels: Sequence[str] | None = None,
    key_labels: Sequence[str] | None = None,
    ax: Axes | None = None,
    title: str | None = None,
    annotate: bool | None = None,
    cmap: str = "viridis",
    vmax: float | None = 1.0,
    colorbar: bool = True,
) -> Axes:
    """Heatmap of (n_queries, n_keys) weights: queries down the side, keys along the top."""
    matrix = to_numpy(weights)
    if matrix.ndim != 2:
        raise ValueError(f"plot_attention needs (n_queries, n_keys), got shape {matrix.shape}")
    n_queries, n_keys = matrix.shape
    _check_labels(query_labels, n_queries, "query_labels", "rows")
    _check_labels(key_labels, n_keys, "key_labels", "columns")
    if ax is None:
        width = min(12.0, 1.2 + 0.45 * n_keys)
        height = min(10.0, 1.0 + 0.45 * n_queries)
        _, ax = plt.subplots(figsize=(max(width, 3.0), max(height, 2.5)))
    image = ax.imshow(matrix, cmap=cmap, vmin=0.0, vmax=vmax, aspect="auto")
    ax.set_xticks(range(n_keys), labels=key_labels if key_labels is not None else range(n_keys))
    ax.set_yticks(
        range(n_queries), labels=query_labels if query_labels is not None else range(n_queries)
    )
    ax.xaxis.tick_top()
    ax.set_xlabel("keys (attended to)")
    ax.xaxis.set_label_position("top")
    ax.set_ylabel("queries (attending)")
    if title:
        ax.set_title(title, pad=28 if key_labels is not None or n_keys else 8)
    if annotate is None:
        annotate = n_queries * n_keys <= 64
    if annotate:
        _annotate(ax, matrix, vmax if vmax is not None else float(matrix.max()))
    if colorbar:
        ax.figure.colorbar(image, ax=ax, fraction=0.046, pad=0.04)
    return ax


def plot_attention_grid(
    weights,
    query_labels: Sequence[str] | None = None,
    key_labels: Sequence[str] | None = None,
    titles: Sequence[str] | None = None,
    ncols: int | None = None,
    suptitle: str | None = None,
    cmap: str = "viridis",
) -> Figure:
    """A grid of heatmaps, one per head or layer: weights (grid, n_queries, n_keys)."""
    stack = to_numpy(weights)
    if stack.ndim != 3:
        raise ValueError(
            f"plot_attention_grid needs (heads, n_queries, n_keys), got shape {stack.shape}"
        )
    count = stack.shape[0]
    if titles is not None and len(titles) != count:
        raise ValueError(f"{len(titles)} titles for {count} heatmaps")
    ncols = ncols or min(count, 4)
    nrows = -(-count // ncols)
    figure, axes = plt.subplots(
        nrows, ncols, figsize=(3.2 * ncols, 3.0 * nrows), squeeze=False, layout="constrained"
    )
    for index, ax in enumerate(axes.flat):
        if index >= count:
            ax.axis("off")
            continue
        title = titles[index] if titles is not None else f"head {index}"
        plot_attention(
            stack[index],
            query_labels,
            key_labels,
            ax=ax,
            title=title,
            cmap=cmap,
            colorbar=False,
            annotate=False,
        )
    if suptitle:
        figure.suptitle(suptitle)
    return figure


def char_labels(text: str) -> list[str]:
    """Axis labels (len(text),) for a string's characters, spaces drawn as ␣ so that they show."""
    return ["␣" if symbol == " " else symbol for symbol in text]


def subword_labels(tokens: Sequence[str], suffix: str = "</w>") -> list[str]:
    """Axis labels for subword tokens, as the explorer shows them: the end-of-word ``suffix``
    dropped, and a trailing "-" on a piece that a further piece continues ("wonder-", "ful")."""
    labels = []
    for token in tokens:
        if token.endswith(suffix) and len(token) > len(suffix):
            labels.append(token[: -len(suffix)])
        elif token.startswith("[") and token.endswith("]"):  # [CLS], [SEP], [UNK] stand alone
            labels.append(token)
        else:
            labels.append(token + "-")
    return labels


def attention_window(weights, size: int) -> int:
    """Where the ``size`` keys that receive the most attention in all start: weights
    (heads, n_queries, n_keys) of one layer; 0 when the review is no longer than ``size``."""
    received = to_numpy(weights).mean(0).sum(0)  # (n_keys,)
    if len(received) <= size:
        return 0
    return int(np.convolve(received, np.ones(size), mode="valid").argmax())


def plot_review_attention(
    weights,
    tokens: Sequence[str],
    size: int = 30,
    start: int | None = None,
    title: str | None = None,
) -> Figure:
    """One layer's attention on a text, every token labelled: weights (heads, n, n) cut to a
    window of ``size`` tokens from ``start`` (default :func:`attention_window`), a map per head,
    and under them the attention each token of the window receives (mean over heads and over
    every query of the text)."""
    stack = to_numpy(weights)
    if stack.ndim != 3 or stack.shape[1] != stack.shape[2]:
        raise ValueError(f"weights must be (heads, n, n) of one layer, got shape {stack.shape}")
    heads, n, _ = stack.shape
    if len(tokens) != n:
        raise ValueError(f"{len(tokens)} tokens for weights over {n} positions")
    start = attention_window(stack, size) if start is None else start
    if not 0 <= start < n:
        raise ValueError(f"start must be in [0, {n}), got {start}")
    window = slice(start, min(n, start + size))
    labels = subword_labels(tokens[window])
    part = stack[:, window, window]
    ncols = min(heads, 2)
    map_rows = -(-heads // ncols)
    figure = plt.figure(figsize=(9.5, 4.6 * map_rows + 2.6), layout="constrained")
    grid = figure.add_gridspec(map_rows + 1, ncols, height_ratios=[4.6] * map_rows + [2.6])
    for head in range(heads):
        ax = figure.add_subplot(grid[head // ncols, head % ncols])
        plot_attention(
            part[head],
            labels,
            labels,
            ax=ax,
            title=f"head {head}",
            annotate=False,
            vmax=float(part.max()),
            colorbar=False,
        )
        ax.tick_params(axis="x", labelrotation=90, labelsize=9)
        ax.tick_params(axis="y", labelsize=9)
        ax.set_xlabel("")
        ax.set_ylabel("")
    bars = figure.add_subplot(grid[map_rows, :])
    received = stack.mean(0).mean(0)[window]  # (window,) mean weight a key gets from a query
    bars.bar(range(len(labels)), received, color="tab:orange")
    bars.set_xticks(range(len(labels)), labels=labels, rotation=90, fontsize=9)
    bars.set_xlim(-0.5, len(labels) - 0.5)
    bars.set_ylabel("attention received")
    shown = f"tokens {window.start}-{window.stop - 1} of {n}"
    figure.suptitle(f"{title}: {shown}" if title else shown)
    return figure


def plot_curves(
    curves: Mapping[str, tuple[Sequence[float], Sequence[float]]],
    xlabel: str,
    ylabel: str,
    ax: Axes | None = None,
    title: str | None = None,
    logy: bool = False,
) -> Axes:
    """Line plot of named (x, y) curves on one axes, with a legend."""
    if ax is None:
        _, ax = plt.subplots(figsize=(6, 3.6))
    for name, (x, y) in curves.items():
        ax.plot(to_numpy(x), to_numpy(y), label=name)
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    if logy:
        ax.set_yscale("log")
    if title:
        ax.set_title(title)
    ax.grid(alpha=0.3)
    ax.legend()
    return ax


def _check_labels(labels: Sequence[str] | None, expected: int, name: str, axis: str) -> None:
    if labels is not None and len(labels) != expected:
        raise ValueError(f"{len(labels)} {name} for {expected} {axis} of weights")


def _annotate(ax: Axes, matrix: np.ndarray, top: float) -> None:
    for (row, column), value in np.ndenumerate(matrix):
        # Light text on dark cells, dark text on light ones, so every number stays readable.
        color = "white" if value < 0.6 * top else "black"
        ax.text(column, row, f"{value:.2f}", ha="center", va="center", color=color, fontsize=9)
