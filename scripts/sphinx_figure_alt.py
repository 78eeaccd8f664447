"""Sphinx extension for the book: give every notebook figure alt text that says where it is from.

Without it, a figure drawn by a code cell has its own file name as alt text (a hash, like
``../_images/2966e2f3...png``), which a screen reader spells out. The notebooks carry no
description of their pictures, so the text says only what the build knows, and says so:
which code cell drew it and under which section heading, e.g. ``Figure drawn by code cell 12
(figure 2 of 3), in the section "Large scores make the softmax saturate"``. An alt text that a
notebook sets itself (image metadata) is kept.
"""

from __future__ import annotations

from docutils import nodes
from sphinx.application import Sphinx

# Said in every alt text: the notebooks describe no figure, so the text only locates it.
NO_DESCRIPTION = "no description written"


def section_title(node: nodes.Node) -> str:
    """The title of the innermost section holding ``node``, or "" at the top of a page."""
    parent = node.parent
    while parent is not None:
        if isinstance(parent, nodes.section):
            titles = [child for child in parent.children if isinstance(child, nodes.title)]
            if titles:
                return " ".join(titles[0].astext().split())
        parent = parent.parent
    return ""


def cell_number(cell: nodes.Element, ordinal: int) -> int:
    """The cell's execution count (1..N in the stored notebooks), else its rank among code cells."""
    count = cell.get("exec_count")
    return count if isinstance(count, int) and count > 0 else ordinal


def describe(cell_no: int, index: int, total: int, section: str) -> str:
    """The alt text of figure ``index`` (1-based) of ``total`` drawn by one code cell."""
    which = f" (figure {index} of {total})" if total > 1 else ""
    where = f', in the section "{section}"' if section else ""
    return f"Figure drawn by code cell {cell_no}{which}{where}; {NO_DESCRIPTION}."


def add_alt_text(app: Sphinx, doctree: nodes.document) -> None:
    """Set the alt text of every output image of a notebook code cell that has none."""
    cells = [
        node for node in doctree.findall(nodes.container) if node.get("nb_element") == "cell_code"
    ]
    for ordinal, cell in enumerate(cells, start=1):
        images = [
            image
            for output in cell.findall(nodes.container)
            if output.get("nb_element") == "cell_code_output"
            for image in output.findall(nodes.image)
        ]
        section = section_title(cell)
        for index, image in enumerate(images, start=1):
            if not image.get("alt"):
                image["alt"] = describe(cell_number(cell, ordinal), index, len(images), section)


def setup(app: Sphinx) -> dict[str, bool]:
    """Register the doctree hook."""
    app.connect("doctree-read", add_alt_text)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
