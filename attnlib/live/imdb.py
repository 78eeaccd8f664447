"""Chapter 13's explorer: the shipped IMDB classifier, run in the reader's browser.

:func:`imdb_live` returns the HTML of the explorer: a root element whose content is a snapshot
of the model on one review (what a reader without JavaScript sees), then an inline script with
the browser port (``imdb.js``, ``imdb_explorer.js``, the DOM helpers and the WebAssembly kernel
of :mod:`attnlib.live.wasm`). The weights are not in the page: the script downloads them from
``base`` when the reader asks for them. The book serves ``attnlib/assets/imdb/`` there
(``book.yml``'s ``html_static_path``), so the page needs no server beyond the static files. The
browser keeps them for later visits in a cache named after :func:`files_hash`.
"""

from __future__ import annotations

import base64
import hashlib
import html
import io
import json
from functools import cache
from pathlib import Path

from IPython.display import HTML

from attnlib.data.bpe import END_OF_WORD
from attnlib.data.subwords import SPECIAL_TOKENS
from attnlib.live import IMDB_SCRIPTS, bundle, snippet
from attnlib.live.wasm import linear_module_base64

# What the browser downloads, from the shipped model's folder.
SERVED_FILES = ("config.json", "tokenizer.json", "model.safetensors")
# Where the book serves the shipped model, relative to a chapter's page.
BOOK_BASE = "../_static/imdb/"
EXAMPLE = (
    "The first half is gripping and beautifully shot, but the ending is rushed and the villain "
    "is a cliche."
)


def _served(folder: str | Path) -> list[Path]:
    """The served files of the model in ``folder``; the error names the missing ones."""
    folder = Path(folder)
    missing = [name for name in SERVED_FILES if not (folder / name).is_file()]
    if missing:
        raise FileNotFoundError(f"{folder} lacks {', '.join(missing)}: not a trained IMDB model")
    return [folder / name for name in SERVED_FILES]


def download_size(folder: str | Path) -> int:
    """Bytes the explorer downloads: the served files of the model in ``folder``."""
    return sum(path.stat().st_size for path in _served(folder))


def files_hash(folder: str | Path) -> str:
    """16 hex digits of the SHA-256 of the served files (names and bytes): the browser keeps
    the files in a cache of this name, so a new model is downloaded again and the old dropped."""
    digest = hashlib.sha256()
    for path in _served(folder):
        digest.update(f"{path.name}\0{hashlib.sha256(path.read_bytes()).hexdigest()}\0".encode())
    return digest.hexdigest()[:16]


@cache
def imdb_script() -> str:
    """The explorer's inline script: the kernel's bytes, then the browser port."""
    prelude = f"window.attnlibImdbWasm = {json.dumps(linear_module_base64())};"
    return bundle(IMDB_SCRIPTS, prelude)


def shown_token(token: str) -> tuple[str, bool]:
    """How a reader sees a token: (its text without the end-of-word suffix, whether it ends a
    word). Special tokens stand alone, so they end a word too (as ``imdb.js`` shows them)."""
    if token.endswith(END_OF_WORD) and token != END_OF_WORD:
        return token[: -len(END_OF_WORD)], True
    return token, token in SPECIAL_TOKENS


def token_chips(tokens: list[str]) -> str:
    """The tokens as ``<code>`` chips: a word's pieces side by side, a space after each word's
    last piece, the raw token (with its ``</w>``) in the hover text."""
    chips = []
    for token in tokens:
        text, word_end = shown_token(token)
        chips.append(
            f'<code title="{html.escape(token, quote=True)}">{html.escape(text)}</code>'
            + (" " if word_end else "")
        )
    return "".join(chips).rstrip()


def _heatmap_png(weights, tokens: list[str], title: str) -> str:
    """A (n, n) attention map as a base64 PNG, token labels when they fit."""
    from matplotlib.figure import Figure  # no pyplot: nothing is shown, no backend is chosen

    n = len(tokens)
    size = min(2.0 + 0.22 * n, 9.0)
    figure = Figure(figsize=(size + 1.2, size), dpi=80)
    ax = figure.add_subplot()
    image = ax.imshow(weights, cmap="viridis", vmin=0.0)
    figure.colorbar(image, ax=ax, fraction=0.046, pad=0.04, label="weight")
    if n <= 60:
        labels = [shown_token(token)[0] for token in tokens]
        ax.set_xticks(range(n), labels, rotation=90, fontsize=9)
        ax.set_yticks(range(n), labels, fontsize=9)
    ax.set_xlabel("key (the token read)")
    ax.set_ylabel("query (the token reading)")
    ax.set_title(title)
    figure.tight_layout()
    buffer = io.BytesIO()
    figure.savefig(buffer, format="png", metadata={"Software": None})
    return base64.b64encode(buffer.getvalue()).decode("ascii")


def snapshot(reading, text: str, layer: int, head: int) -> str:
    """The explorer as HTML without JavaScript: verdict, tokens and one stored attention map."""
    layers, heads = reading.weights.shape[:2]
    verdict = "positive" if reading.probability >= 0.5 else "negative"
    tokens = token_chips(reading.tokens)
    title = f"layer {layer % layers + 1}, head {head + 1}"
    picture = _heatmap_png(reading.weights[layer, head].numpy(), reading.tokens, title)
    return (
        "<p><strong>This explorer runs the trained model in your browser with JavaScript, "
        "which is off or did not run here.</strong> Below is a snapshot stored when the "
        "chapter was executed; with JavaScript on, you can type your own review.</p>"
        f"<p>Review: <em>{html.escape(text)}</em></p>"
        f"<p>Prediction: <strong>{verdict}</strong>, P(positive) = "
        f"{reading.probability:.4f}</p>"
        f"<p>{len(reading.tokens)} tokens: {tokens}</p>"
        f'<img alt="attention weights of {title}" style="max-width:100%;height:auto" '
        f'src="data:image/png;base64,{picture}">'
    )


def imdb_live(
    text: str = EXAMPLE,
    folder: str | Path | None = None,
    base: str = BOOK_BASE,
    layer: int = -1,
    head: int = 0,
) -> HTML:
    """Chapter 13's explorer for the model in ``folder`` (default: the shipped one), starting
    at ``text``; its snapshot shows the attention of ``layer`` (default: the last) and ``head``.
    ``base`` is the URL of the served files, relative to the page."""
    from attnlib.tasks.imdb import read_review
    from attnlib.tasks.imdb_train import SHIPPED_MODEL, load_trained

    if not isinstance(text, str) or not text.strip():
        raise ValueError("text must be a non-empty review")
    folder = Path(folder) if folder is not None else SHIPPED_MODEL
    size = download_size(folder)
    version = files_hash(folder)
    model, tokenizer, config, _ = load_trained(folder)
    if not -config.num_layers <= layer < config.num_layers:
        raise ValueError(
            f"layer must be in [-{config.num_layers}, {config.num_layers}), got {layer}"
        )
    if not 0 <= head < config.num_heads:
        raise ValueError(f"head must be in [0, {config.num_heads}), got {head}")
    reading = read_review(model, tokenizer, text, config.max_len, config.head_tokens)
    attributes = {"base": base, "size": str(size), "hash": version, "example": text}
    return HTML(snippet("imdb", attributes, snapshot(reading, text, layer, head), imdb_script()))
