"""Helpers shared by the browser tests: the book's table of contents, waits, table readouts."""

from __future__ import annotations

import functools
import http.server
import math
import re
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from tests.book.toc import toc_docnames  # noqa: F401  (re-exported for the tests)

if TYPE_CHECKING:
    from playwright.sync_api import Locator, Page

ROOT = Path(__file__).resolve().parents[2]
WIDGET_VIEW = "application/vnd.jupyter.widget-view+json"
# A number shown with 4 decimals is right when it is within half a unit of the last place.
HALF_UNIT = 0.5e-4 + 1e-12


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
