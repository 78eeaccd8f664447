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
