"""Helpers shared by the browser tests: the book's table of contents, waits, table readouts,
opening an explorer, its fit on a phone and its text without JavaScript."""

from __future__ import annotations

import functools
import http.server
import math
import re
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import pytest

from attnlib import live
from tests.book.toc import toc_docnames  # noqa: F401  (re-exported for the tests)

if TYPE_CHECKING:
    from playwright.sync_api import Browser, Locator, Page

ROOT = Path(__file__).resolve().parents[2]
WIDGET_VIEW = "application/vnd.jupyter.widget-view+json"
# A number shown with 4 decimals is right when it is within half a unit of the last place.
HALF_UNIT = 0.5e-4 + 1e-12
PHONE = {"width": 375, "height": 800}
# Visible elements inside an explorer whose right edge passes the explorer's by over 1 px.
STICKING_OUT = """(root) => Array.from(root.querySelectorAll("*")).filter((el) =>
    el.getClientRects().length > 0 && el.getBoundingClientRect().right >
    root.getBoundingClientRect().right + 1).map((el) => el.tagName)"""
# How far each chart (an svg readout) is scaled from its viewBox; without an element, the page's.
CHART_SCALES = """(root) => Array.from((root || document).querySelectorAll("svg[data-readout]"))
    .map((svg) => svg.getBoundingClientRect().width / svg.viewBox.baseVal.width)"""


def wait_for_widgets(page: Page, timeout: float = 20_000) -> int:
    """Wait until html-manager has drawn a widget for every saved widget view; return how many.

    html-manager puts a ``div.widget-subarea`` holding the view's DOM right before each
    ``<script type="application/vnd.jupyter.widget-view+json">``.
    """
    count = page.locator(f'script[type="{WIDGET_VIEW}"]').count()
    if count == 0:
        return 0
    from playwright.sync_api import TimeoutError as PlaywrightTimeoutError

    try:
        page.wait_for_function(
            """(type) => Array.from(document.querySelectorAll(`script[type="${type}"]`))
                .every((script) => {
                  const area = script.previousElementSibling;
                  return area && area.classList.contains("widget-subarea")
                    && area.querySelector(":scope > .jupyter-widgets") !== null;
                })""",
            arg=WIDGET_VIEW,
            timeout=timeout,
        )
    except PlaywrightTimeoutError:
        pass  # the caller's assertions say what is missing
    return count


def widget_report(page: Page) -> dict:
    """For every widget-view script: whether a widget was drawn for it, and its size."""
    return page.evaluate(
        """(type) => {
          const scripts = Array.from(document.querySelectorAll(`script[type="${type}"]`));
          const roots = scripts.map((script) => {
            const area = script.previousElementSibling;
            const ok = area && area.classList.contains("widget-subarea");
            return ok ? area.querySelector(":scope > .jupyter-widgets") : null;
          });
          return {
            views: scripts.length,
            rendered: roots.filter((root) => root !== null).length,
            all_roots: document.querySelectorAll(".widget-subarea > .jupyter-widgets").length,
            empty: roots.filter((r) => r && (r.offsetWidth === 0 || r.offsetHeight === 0)).length,
            errors: Array.from(document.querySelectorAll(".jupyter-widgets-error-widget"))
              .map((e) => e.textContent.trim().slice(0, 200)),
          };
        }""",
        WIDGET_VIEW,
    )


def wait_for_mathjax(page: Page, timeout: float = 20_000) -> None:
    """Wait until MathJax 3 is loaded and its start-up typesetting has finished."""
    page.wait_for_function("() => window.MathJax?.startup?.promise", timeout=timeout)
    page.evaluate("() => window.MathJax.startup.promise.then(() => true)")


def numbers(expected: np.ndarray | list[float]) -> list[float]:
    return [float(x) for x in np.ravel(np.asarray(expected, dtype=np.float64))]


def four_decimals(value: float) -> list[str]:
    """The texts that show ``value`` rounded to 4 decimals (two only at an exact tie)."""
    base = math.floor(value * 10_000)
    texts = []
    for k in range(base - 1, base + 3):
        if abs(k / 10_000 - value) <= HALF_UNIT:
            sign = "-" if k < 0 else ""
            texts.append(f"{sign}{abs(k) // 10_000}.{abs(k) % 10_000:04d}")
            if k == 0:
                texts.append("-0.0000")
    return texts


def cell_pattern(value: float) -> re.Pattern[str]:
    return re.compile(r"^\s*(?:" + "|".join(map(re.escape, four_decimals(value))) + r")\s*$")


def expect_cells(
    cells: Locator, expected: np.ndarray | list[float], what: str, timeout: float = 5_000
) -> None:
    """Wait (up to ``timeout`` ms) until the cells show ``expected`` (row-major) to 4 decimals."""
    from playwright.sync_api import expect

    want = numbers(expected)
    try:
        expect(cells).to_have_text([cell_pattern(x) for x in want], timeout=timeout)
    except AssertionError:
        shown = [text.strip() for text in cells.all_inner_texts()]
        rounded = [f"{x:.4f}" for x in want]
        raise AssertionError(f"{what}: shown {shown}, expected {rounded}") from None


@contextmanager
def serve_folder(folder: Path) -> Iterator[str]:
    """Serve ``folder`` over HTTP on 127.0.0.1 (a free port); yield its base URL, ending in '/'."""
    handler = functools.partial(_QuietHandler, directory=str(folder))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, name="folder-server", daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/"
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=10)


@contextmanager
def serve_page(factory: pytest.TempPathFactory, name: str, snippets: list[str]) -> Iterator[str]:
    """Serve a standalone page of ``snippets`` from a new folder ``name``; yield its base URL."""
    folder = factory.mktemp(name)
    standalone_page(folder, snippets)
    with serve_folder(folder) as url:
        yield url


class _QuietHandler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, format: str, *args: object) -> None:  # noqa: A002 (stdlib's name)
        pass


def standalone_page(folder: Path, snippets: list[str], name: str = "index.html") -> Path:
    """Write a minimal HTML page (phone-ready viewport) holding ``snippets``; return its path."""
    folder.mkdir(parents=True, exist_ok=True)
    page = folder / name
    page.write_text(
        "<!doctype html>\n<html lang='en'><head><meta charset='utf-8'>"
        "<meta name='viewport' content='width=device-width, initial-scale=1'>"
        "<title>attnlib live explorers</title></head>\n<body>\n"
        + "\n".join(snippets)
        + "\n</body></html>\n",
        encoding="utf-8",
    )
    return page


# --- an explorer on a page: opening it, its fit, its text without JavaScript --------------------


@contextmanager
def fresh_page(browser: Browser, **context_options: Any) -> Iterator[Page]:
    """A page in a new context (``browser.new_context(**context_options)``), closed after."""
    context = browser.new_context(**context_options)
    try:
        yield context.new_page()
    finally:
        context.close()


def mounted(page: Page, hook: str, url: str = "", *, what: str = "") -> Locator:
    """The one explorer ``hook`` mounted on ``page`` (``url`` loaded first if given), in view."""
    if url:
        page.goto(url, wait_until="load")
    root = page.locator(f"{hook}[data-mounted]")
    where = what or url
    assert root.count() == 1, f"{where}: {root.count()} mounted {hook} explorers, expected one"
    root.scroll_into_view_if_needed()
    return root


def assert_box_within(root: Locator, right: float, what: str) -> None:
    """The explorer starts on screen and ends ``right`` px from the left or before."""
    box = root.bounding_box()
    assert box is not None and box["x"] >= 0 and box["x"] + box["width"] <= right, (what, box)


def assert_page_within(page: Page, most: float, what: str) -> None:
    """The page is at most ``most`` px wide: nothing scrolls it sideways."""
    width = page.evaluate("() => document.documentElement.scrollWidth")
    assert width <= most, f"{what}: the page is {width}px wide, more than {most}px"


def assert_nothing_sticks_out(root: Locator, what: str) -> None:
    """No visible element inside the explorer passes its right edge (1 px for rounding)."""
    overflowing = root.evaluate(STICKING_OUT)
    assert overflowing == [], f"{what}: sticking out of the explorer: {overflowing}"


def assert_fits_phone(page: Page, root: Locator, what: str) -> None:
    """On a 375 px phone the explorer, all it holds and the page fit the screen (1 px spare)."""
    assert_box_within(root, PHONE["width"] + 1, what)
    assert_page_within(page, PHONE["width"] + 1, what)
    assert_nothing_sticks_out(root, what)


def chart_scales(scope: Page | Locator) -> list[float]:
    """Drawn width over viewBox width of every chart in ``scope`` (an explorer or a page)."""
    return scope.evaluate(CHART_SCALES)


def no_script_texts(browser: Browser, url: str, *hooks: str) -> list[str]:
    """Each ``hook``'s text, spaces collapsed, with JavaScript off; each has the fallback."""
    with fresh_page(browser, java_script_enabled=False) as page:
        page.goto(url, wait_until="load")
        texts = [" ".join(page.locator(hook).inner_text().split()) for hook in hooks]
    for hook, text in zip(hooks, texts, strict=True):
        assert live.FALLBACK in text, f"{hook}: no fallback text without JavaScript"
    return texts
