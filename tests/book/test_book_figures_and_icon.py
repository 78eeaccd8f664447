"""Figures' alt text (scripts/sphinx_figure_alt.py) and the book's icon (book_static/favicon.svg).

The first tests need no build: they run the extension on a small document tree. The others read
the built book in _build/html (`make book` first) and fail, rather than skip, without it.
"""

from __future__ import annotations

import importlib.util
import re
import xml.etree.ElementTree as ET
from pathlib import Path
from types import ModuleType

import pytest
from docutils import nodes
from docutils.frontend import get_default_settings
from docutils.parsers.rst import Parser
from docutils.utils import new_document

from tests.book.toc import toc_docnames

ROOT = Path(__file__).resolve().parents[2]
HTML = ROOT / "_build" / "html"
DOCNAMES = toc_docnames(ROOT / "notebooks" / "_toc.yml")
ICON = ROOT / "book_static" / "favicon.svg"
IMG = re.compile(r"<img\b[^>]*>")
ATTRIBUTE = re.compile(r'(\w[\w-]*)="([^"]*)"')
ICON_LINK = re.compile(r'<link rel="icon" href="([^"]+)"\s*/?>')
# What an alt text that is only a file's name looks like (the writer's fallback).
FILE_NAME = re.compile(r"\.(?:png|jpe?g|gif|svg|webp)$", re.IGNORECASE)
ALT_START = "Figure drawn by code cell "


def load_extension() -> ModuleType:
    """scripts/sphinx_figure_alt.py, imported from its file (scripts/ is not a package)."""
    spec = importlib.util.spec_from_file_location(
        "sphinx_figure_alt", ROOT / "scripts" / "sphinx_figure_alt.py"
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def notebook_tree(exec_count: int | None, images: int) -> nodes.document:
    """A document like MyST-NB's: a section holding one code cell with ``images`` outputs."""
    document = new_document("test", get_default_settings(Parser))
    section = nodes.section()
    section += nodes.title(text="Large scores make the softmax saturate")
    cell = nodes.container(nb_element="cell_code", exec_count=exec_count)
    output = nodes.container(nb_element="cell_code_output", classes=["cell_output"])
    for index in range(images):
        output += nodes.image(uri=f"../_images/{index:064x}.png")
    cell += output
    section += cell
    document += section
    return document


def test_alt_text_names_the_cell_and_the_section() -> None:
    module = load_extension()
    tree = notebook_tree(exec_count=12, images=2)
    module.add_alt_text(None, tree)
    alts = [image["alt"] for image in tree.findall(nodes.image)]
    assert alts == [
        f'{ALT_START}12 (figure {n} of 2), in the section "Large scores make the softmax '
        'saturate"; no description written.'
        for n in (1, 2)
    ]


def test_alt_text_counts_cells_when_no_execution_count() -> None:
    module = load_extension()
    tree = notebook_tree(exec_count=None, images=1)
    module.add_alt_text(None, tree)
    [image] = tree.findall(nodes.image)
    assert image["alt"].startswith(f"{ALT_START}1, in the section")


def test_alt_text_that_a_notebook_set_is_kept() -> None:
    module = load_extension()
    tree = notebook_tree(exec_count=3, images=1)
    [image] = tree.findall(nodes.image)
    image["alt"] = "Attention weights of head 2"
    module.add_alt_text(None, tree)
    assert image["alt"] == "Attention weights of head 2"


def test_icon_is_a_32_pixel_svg() -> None:
    root = ET.fromstring(ICON.read_text(encoding="utf-8"))
    assert root.tag == "{http://www.w3.org/2000/svg}svg"
    assert (root.get("viewBox"), root.get("width"), root.get("height")) == ("0 0 32 32", "32", "32")
    # Drawn, not fetched: no reference to another file or address.
    assert "href" not in ICON.read_text(encoding="utf-8")


def built_page(docname: str) -> str:
    page = HTML / f"{docname}.html"
    if not page.is_file():
        pytest.fail(f"{page} is missing: build the book first with `make book`", pytrace=False)
    return page.read_text(encoding="utf-8")


@pytest.mark.parametrize("docname", DOCNAMES)
def test_figures_have_alt_text_not_file_names(docname: str) -> None:
    images = [dict(ATTRIBUTE.findall(tag)) for tag in IMG.findall(built_page(docname))]
    figures = [image for image in images if "/_images/" in image.get("src", "")]
    bad = [
        f"{image.get('src', '')[-20:]}: alt {image.get('alt')!r}"
        for image in figures
        if not image.get("alt") or FILE_NAME.search(image["alt"])
    ]
    assert bad == [], f"{docname}: figures whose alt text is a file name or missing:\n" + "\n".join(
        bad
    )
    unnamed = [image["alt"] for image in figures if not image["alt"].startswith(ALT_START)]
    assert unnamed == [], f"{docname}: alt text not from sphinx_figure_alt: {unnamed}"


@pytest.mark.parametrize("docname", DOCNAMES)
def test_page_names_the_book_icon(docname: str) -> None:
    links = ICON_LINK.findall(built_page(docname))
    assert len(links) == 1, f"{docname}: {len(links)} icon links"
    icon = (HTML / docname).parent / links[0]
    assert icon.resolve() == (HTML / "_static" / "favicon.svg").resolve() and icon.is_file(), (
        f"{docname}: the icon link {links[0]} is not the book's favicon.svg"
    )
