"""Explorers that run in the browser: they work in the published book, with no Python kernel.

The arithmetic lives in ``attention.js`` (a port of :mod:`attnlib.reference`, checked against it
number for number by ``tests/test_live.py``) and the controls in ``explorers.js``. Each function
here returns an HTML snippet: a root ``<div>`` with a fixed id and an inline ``<script>`` holding
both files, so a notebook output carries everything it needs and stays the same from run to run.
"""

from __future__ import annotations

import hashlib
import html
import json
from functools import cache
from importlib import resources

from IPython.display import HTML

SCRIPTS = ("attention.js", "explorers.js")
FALLBACK = (
    "This explorer runs in your browser with JavaScript. If you can read this, the script did "
    "not run: in JupyterLab, run the cell (or trust the notebook) to start it."
)


@cache
def script_source(name: str) -> str:
    """The text of one of the package's JavaScript files."""
    if name not in SCRIPTS:
        raise ValueError(f"unknown script {name!r}; expected one of {SCRIPTS}")
    return resources.files(__name__).joinpath(name).read_text(encoding="utf-8")


@cache
def bundle() -> str:
    """Both scripts in one ``<script>`` body, defined once per page however often it appears."""
    sources = [script_source(name) for name in SCRIPTS]
    for name, source in zip(SCRIPTS, sources, strict=True):
        if "</script" in source.lower() or "<!--" in source:
            raise ValueError(f"{name} contains text that would end an inline <script>")
    version = hashlib.sha256("\n".join(sources).encode()).hexdigest()[:12]
    body = "\n".join(sources)
    return (
        "(function () {\n"
        '"use strict";\n'
        "var module;  // never a CommonJS module in a page: define window.attnlibLive\n"
        f"var version = {json.dumps(version)};\n"
        "if (!window.attnlibLive || window.attnlibLive.version !== version) {\n"
        f"{body}\n"
        "window.attnlibLive.version = version;\n"
        "}\n"
        "var here = document.currentScript;\n"
        "window.attnlibLive.mountAll(here && here.parentNode ? here.parentNode : document);\n"
        "window.attnlibLive.mountAll(document);\n"
        "})();"
    )


def snippet(explorer: str, attributes: dict[str, str] | None = None) -> str:
    """The HTML of one explorer: its root element, then the script that builds it."""
    extra = "".join(
        f' data-{key}="{html.escape(value, quote=True)}"'
        for key, value in (attributes or {}).items()
    )
    return (
        f'<div class="attnlib-live tex2jax_ignore mathjax_ignore" id="attnlib-live-{explorer}" '
        f'data-explorer="{explorer}"{extra}><p>{FALLBACK}</p></div>\n'
        f"<script>\n{bundle()}\n</script>"
    )


def worked_example_live() -> HTML:
    """Chapter 01's explorer (inputs, W_K, W_Q, W_V, √d_k, temperature) computed in the browser."""
    return HTML(snippet("worked-example"))


def temperature_live(scores: tuple[float, ...] = (2, 4, 4, 1, -1)) -> HTML:
    """Chapter 02's temperature explorer, computed in the browser, starting from ``scores``."""
    if len(scores) == 0:
        raise ValueError("temperature_live needs at least one score")
    text = " ".join(f"{float(score):g}" for score in scores)
    return HTML(snippet("temperature", {"scores": text}))
