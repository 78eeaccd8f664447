"""Sphinx extension for the book: hide nbval's test markers from the code readers see.

Cells whose output follows a training run begin with ``# NBVAL_IGNORE_OUTPUT`` so that nbval
skips comparing it. The marker is for the tests, not the reader, so the book leaves it out;
the notebooks themselves keep it.
"""

from __future__ import annotations

import re

from docutils import nodes

MARKER_LINE = re.compile(r"^[ \t]*#[ \t]*NBVAL_\w+[ \t]*(?:\n|$)", re.MULTILINE)


def strip_markers(app, doctree: nodes.document) -> None:
    """Remove marker lines from the code of every notebook cell's input."""
    for container in doctree.findall(nodes.container):
        if "cell_input" not in container["classes"]:
            continue
        for block in container.findall(nodes.literal_block):
            text = block.astext()
            cleaned = MARKER_LINE.sub("", text)
            if cleaned != text:
                block.rawsource = cleaned
                block.children = [nodes.Text(cleaned)]


def setup(app) -> dict[str, bool]:
    """Register the doctree hook."""
    app.connect("doctree-read", strip_markers)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
