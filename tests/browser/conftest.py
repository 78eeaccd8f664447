"""Browser tests: the built book and JupyterLab, driven by Playwright in a headless Chromium.

The browser is Debian's Chromium, /usr/bin/chromium, unless the environment variable CHROMIUM
names another Chromium or Chrome executable (the GitHub workflow points it at the Chromium that
Playwright installs there). The whole folder is skipped, with the reason, when that executable
or the ``playwright`` package is missing (``make browser`` runs it only where the browser is
installed). Playwright never downloads a browser here: every launch names that executable.

The book tests FAIL, rather than skip, when ``_build/html`` is missing: build it with
``make book`` first. The JupyterLab test needs no book.
"""

from __future__ import annotations

import importlib.util
import os
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

import pytest

from .helpers import serve_folder

if TYPE_CHECKING:
    from playwright.sync_api import Browser, BrowserContext, Page

ROOT = Path(__file__).resolve().parents[2]
# The built book; BROWSER_TEST_BOOK=<folder> tests a book built elsewhere (--path-output).
HTML = Path(os.environ.get("BROWSER_TEST_BOOK") or ROOT / "_build" / "html").resolve()
SCREENSHOTS = ROOT / "_build" / "screenshots"
CHROMIUM = Path(os.environ.get("CHROMIUM") or "/usr/bin/chromium")
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--no-first-run",
    "--disable-sync",
    "--disable-quic",
]
LOCAL_HOST = "127.0.0.1"
HERE = Path(__file__).resolve().parent


def skip_reason() -> str | None:
    """Why this machine cannot run the browser tests, or None when it can."""
    if not CHROMIUM.is_file():
        return (
            f"{CHROMIUM} is missing (apt-get install -y chromium, or set CHROMIUM to a Chromium "
            "executable); browser tests skipped"
        )
    try:
        found = importlib.util.find_spec("playwright") is not None
    except (ImportError, ValueError):
        found = False
    if not found:
        return "the playwright package is missing (pip install playwright); browser tests skipped"
    return None


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    reason = skip_reason()
    if reason is None:
        return
    for item in items:
        if HERE in Path(str(item.path)).resolve().parents:
            item.add_marker(pytest.mark.skip(reason=reason))


# --- the browser --------------------------------------------------------------------------------


@pytest.fixture(scope="session")
def browser() -> Iterator[Browser]:
    """One headless Chromium for the whole session."""
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        chromium = playwright.chromium.launch(
            executable_path=str(CHROMIUM), headless=True, args=CHROMIUM_ARGS
        )
        try:
            yield chromium
        finally:
            chromium.close()


def is_local(url: str) -> bool:
    """True for data:/blob:/about: URLs and for http(s)/ws(s) URLs on 127.0.0.1."""
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https", "ws", "wss"):
        return True
    return parts.hostname == LOCAL_HOST


@dataclass(repr=False)
class PageWatch:
    """Everything that went wrong while a page was open, as readable lines."""

    page_errors: list[str] = field(default_factory=list)
    console_errors: list[str] = field(default_factory=list)
    failed_requests: list[str] = field(default_factory=list)
    bad_statuses: list[str] = field(default_factory=list)
    external_requests: list[str] = field(default_factory=list)

    def __repr__(self) -> str:
        return f"<PageWatch: {len(self.problems())} problem(s)>"

    def problems(self, scripts_only: bool = False) -> list[str]:
        """Every problem; with ``scripts_only``, just script errors and outside requests."""
        problems = [f"page error: {e}" for e in self.page_errors]
        if not scripts_only:
            problems += [f"console error: {e}" for e in self.console_errors]
            problems += [f"failed request: {e}" for e in self.failed_requests]
            problems += [f"HTTP status: {e}" for e in self.bad_statuses]
        problems += [f"request outside {LOCAL_HOST} (blocked): {e}" for e in self.external_requests]
        return problems

    def assert_clean(self, what: str, scripts_only: bool = False) -> None:
        problems = self.problems(scripts_only)
        if problems:
            raise AssertionError(f"{what}: {len(problems)} problem(s):\n" + "\n".join(problems))


def watch(context: BrowserContext, page: Page) -> PageWatch:
    """Record page errors, console errors, failed and non-local requests, HTTP errors."""
    seen = PageWatch()

    def on_console(message: Any) -> None:
        if message.type != "error":
            return
        location = message.location.get("url", "") if message.location else ""
        # Chromium asks a site for /favicon.ico by itself when a page names no icon (the book
        # names book_static/favicon.svg; an older build may not); that request is the browser's,
        # not the page's (it never shows up as a page request).
        if urlsplit(location).path == "/favicon.ico":
            return
        seen.console_errors.append(f"{message.text} (at {location or 'unknown'})")

    def on_response(response: Any) -> None:
        if response.status >= 400:
            seen.bad_statuses.append(f"{response.status} {response.url}")

    def on_failed(request: Any) -> None:
        if is_local(request.url):  # blocked external requests are reported as such below
            seen.failed_requests.append(f"{request.url}: {request.failure}")

    def block(route: Any) -> None:
        seen.external_requests.append(route.request.url)
        route.abort("blockedbyclient")

    context.route(lambda url: not is_local(url), block)
    page.on("pageerror", lambda error: seen.page_errors.append(str(error)))
    page.on("console", on_console)
    page.on("response", on_response)
    page.on("requestfailed", on_failed)
    return seen


@dataclass
class WatchedPage:
    page: Page
    watch: PageWatch

    def __repr__(self) -> str:
        return f"<WatchedPage {self.page.url} {self.watch!r}>"


@contextmanager
def open_watched(browser: Browser, **context_options: Any) -> Iterator[WatchedPage]:
    """A fresh context (``browser.new_context(**context_options)``) and page, all recorded."""
    context = browser.new_context(**context_options)
    context.set_default_timeout(15_000)
    page = context.new_page()
    seen = watch(context, page)
    try:
        yield WatchedPage(page, seen)
    finally:
        context.close()


@pytest.fixture
def watched_page(browser: Browser) -> Iterator[WatchedPage]:
    """A fresh context and page on the shared browser, with everything recorded."""
    with open_watched(browser, viewport={"width": 1280, "height": 900}) as watched:
        yield watched


# --- the built book, served over HTTP -----------------------------------------------------------


@pytest.fixture(scope="session")
def built_book() -> Path:
    """The built book's folder; fails (never skips) with the fix when it is missing."""
    if not (HTML / "index.html").is_file():
        pytest.fail(
            f"{HTML / 'index.html'} is missing: build the book first with `make book`, "
            "then run `make browser` (or `pytest tests/browser`).",
            pytrace=False,
        )
    return HTML


@pytest.fixture(scope="session")
def book_url(built_book: Path) -> Iterator[str]:
    """Base URL (ending in '/') of a local HTTP server for _build/html on a free port."""
    with serve_folder(built_book) as url:
        yield url


@pytest.fixture(scope="session")
def screenshots() -> Path:
    """_build/screenshots/ (git-ignored with the rest of _build)."""
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    return SCREENSHOTS


def explorer_page_url(
    request: pytest.FixtureRequest, where: str, docname: str, standalone: str
) -> str:
    """An explorer's page: its chapter in the built book (skipped while that page is not built)
    for ``where == "book"``, else the page made here that the fixture ``standalone`` serves."""
    if where == "book":
        if not (HTML / f"{docname}.html").is_file():
            pytest.skip(f"{docname}.html is not in {HTML} yet (build the book with it)")
        return f"{request.getfixturevalue('book_url')}{docname}.html"
    return f"{request.getfixturevalue(standalone)}index.html"
