"""Every page of the built book, opened in Chromium: no errors, nothing fetched from outside,
every figure drawn, every formula typeset, every saved widget rendered (run `make book` first)."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from .conftest import HTML, WatchedPage
from .helpers import toc_docnames, wait_for_mathjax, wait_for_widgets, widget_report

if TYPE_CHECKING:
    from playwright.sync_api import Page

DOCNAMES = toc_docnames()
# What raw, untypeset TeX looks like in a page's text: a dollar sign (a `$$` block that MyST did
# not take for display math, inside a list item's paragraph, say), a control word (\frac,
# \mathbb, \alpha, \begin, ...) or a delimiter (\( \) \[ \] \{ \}).
RAW_TEX = r"\$|\\[A-Za-z]+|\\[()\[\]{}]"
# Code, program output and MathJax's own markup may hold these characters legitimately.
NOT_PROSE = "pre, code, script, style, textarea, mjx-container, .highlight"


def source_has_math(docname: str) -> bool:
    """Whether the page as built holds math for MathJax (Sphinx marks it class="math ...")."""
    return 'class="math notranslate nohighlight"' in (HTML / f"{docname}.html").read_text(
        encoding="utf-8"
    )


def open_page(watched: WatchedPage, url: str) -> None:
    response = watched.page.goto(url, wait_until="load")
    assert response is not None and response.ok, f"{url}: HTTP {response and response.status}"


def image_problems(page: Page) -> list[str]:
    """Every <img> loaded (naturalWidth > 0), lazy ones included."""
    page.evaluate("() => document.querySelectorAll('img').forEach((i) => (i.loading = 'eager'))")
    page.wait_for_function("() => Array.from(document.images).every((i) => i.complete)")
    broken = page.evaluate(
        """() => Array.from(document.images)
            .filter((i) => i.naturalWidth === 0)
            .map((i) => (i.currentSrc || i.src).slice(0, 120))"""
    )
    return [f"image did not load: {src}" for src in broken]


def math_problems(page: Page, docname: str) -> list[str]:
    """Every formula typeset by MathJax; no raw TeX left in the article's prose (folded cells
    included: their text is in the page, hidden)."""
    problems = []
    if source_has_math(docname):
        wait_for_mathjax(page)
        math = page.evaluate(
            """() => {
              const all = Array.from(document.querySelectorAll("article.bd-article .math"));
              return {
                math: all.length,
                typeset: all.filter((m) => m.querySelector("mjx-container") !== null).length,
                containers: document.querySelectorAll("article.bd-article mjx-container").length,
                errors: Array.from(document.querySelectorAll("mjx-merror"))
                  .map((e) => e.textContent),
              };
            }"""
        )
        if math["math"] == 0:
            problems.append("the built page has math, the browser shows none")
        if math["typeset"] != math["math"] or math["containers"] < math["math"]:
            problems.append(f"formulas left untypeset: {math}")
        problems += [f"MathJax error: {error}" for error in math["errors"]]
    raw = page.evaluate(
        """([notProse, rawTex]) => {
          const article = document.querySelector("article.bd-article");
          if (!article) return ["(no article.bd-article in the page)"];
          const tex = new RegExp(rawTex);
          const walker = document.createTreeWalker(article, NodeFilter.SHOW_TEXT, {
            acceptNode: (node) => node.parentElement.closest(notProse)
              ? NodeFilter.FILTER_REJECT : NodeFilter.FILTER_ACCEPT,
          });
          const found = [];
          for (let node = walker.nextNode(); node; node = walker.nextNode()) {
            const text = node.nodeValue;
            if (tex.test(text)) found.push(text.trim().slice(0, 120));
          }
          return found;
        }""",
        [NOT_PROSE, RAW_TEX],
    )
    return problems + [f"raw TeX in the text: {text!r}" for text in raw]


# Widgets hidden on purpose (tqdm hides its finished bars with visibility: hidden) and the height
# they still take in the page; attnbook.css folds them away.
HIDDEN_WIDGETS_JS = """() => Array.from(document.querySelectorAll(".cell_output .widget-subarea"))
  .filter((area) => {
    const root = area.querySelector(":scope > .jupyter-widgets");
    return root && getComputedStyle(root).visibility === "hidden";
  })
  .map((area) => Math.round(area.getBoundingClientRect().height))"""


def hidden_widget_problems(page: Page) -> list[str]:
    """A line for every hidden widget that still leaves a gap in the page."""
    return [
        f"a hidden widget (a finished progress bar) leaves a {height} px gap"
        for height in page.evaluate(HIDDEN_WIDGETS_JS)
        if height > 0
    ]


def widget_problems(page: Page) -> list[str]:
    """A rendered widget for every saved widget view, with a size and no error view."""
    views = wait_for_widgets(page)
    report = widget_report(page)
    problems = []
    if report["rendered"] != views or report["all_roots"] < views:
        problems.append(f"{views} widget views, {report['rendered']} rendered: {report}")
    if report["empty"]:
        problems.append(f"{report['empty']} widgets rendered with no size")
    return problems + [f"widget error: {error}" for error in report["errors"]]


@pytest.mark.parametrize("docname", DOCNAMES)
def test_page_renders_cleanly(
    docname: str, book_url: str, watched_page: WatchedPage, screenshots: Path
) -> None:
    page = watched_page.page
    open_page(watched_page, f"{book_url}{docname}.html")
    problems = widget_problems(page) + math_problems(page, docname) + image_problems(page)
    problems += hidden_widget_problems(page)
    if docname == "notebooks/01_self_attention_by_hand":
        page.screenshot(path=str(screenshots / "book_01.png"), full_page=True)
    problems += watched_page.watch.problems()
    if problems:
        raise AssertionError(f"{docname}: {len(problems)} problem(s):\n" + "\n".join(problems))


def test_top_level_index_redirects_to_landing_page(
    book_url: str, watched_page: WatchedPage
) -> None:
    page = watched_page.page
    open_page(watched_page, f"{book_url}index.html")
    landing = f"{book_url}{DOCNAMES[0]}.html"
    page.wait_for_url(landing, timeout=10_000)
    assert page.locator("article.bd-article h1").first.is_visible()
    watched_page.watch.assert_clean("index.html")


def test_every_toc_chapter_is_linked_from_the_landing_page(
    book_url: str, watched_page: WatchedPage
) -> None:
    """The landing page's links, as the browser resolves them, reach every chapter page."""
    page = watched_page.page
    open_page(watched_page, f"{book_url}{DOCNAMES[0]}.html")
    hrefs = page.eval_on_selector_all(
        "article.bd-article a[href]", "(links) => links.map((a) => a.href.split('#')[0])"
    )
    missing = [name for name in DOCNAMES[1:] if f"{book_url}{name}.html" not in hrefs]
    assert missing == [], f"the landing page does not link to {missing}"
    watched_page.watch.assert_clean(DOCNAMES[0])


def test_the_book_has_its_favicon(book_url: str, watched_page: WatchedPage) -> None:
    """The page names an icon of the book's own, served by the book, that draws at 32 x 32."""
    page = watched_page.page
    open_page(watched_page, f"{book_url}{DOCNAMES[1]}.html")
    href = page.evaluate("() => document.querySelector('link[rel~=\"icon\"]')?.href || ''")
    assert href.startswith(book_url), f"no icon served by the book: {href!r}"
    response = page.request.get(href)
    assert response.ok and response.headers.get("content-type", "").startswith("image/svg+xml"), (
        f"{href}: HTTP {response.status} {response.headers.get('content-type')}"
    )
    size = page.evaluate(
        """(href) => new Promise((done) => {
          const img = new Image();
          img.onload = () => done([img.naturalWidth, img.naturalHeight]);
          img.onerror = () => done([0, 0]);
          img.src = href;
        })""",
        href,
    )
    assert size == [32, 32], f"the icon draws at {size}, not 32 x 32"
    watched_page.watch.assert_clean(DOCNAMES[1])
