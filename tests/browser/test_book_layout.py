"""The book's frame on a phone and on a desk, in Chromium (`make book` first).

- At 375 px, a tap on the menu button (☰) opens the chapters, a tap on "Contents" this page's
  sections; Escape closes the menu, a tapped section link closes the contents and goes there.
  pydata-sphinx-theme 0.17.1 binds both to hidden copies of the buttons; ``book_static/attnbook.js``
  hands the visible ones' taps on. Screenshots: ``_build/screenshots/menu_375.png`` and
  ``contents_375.png``.
- At 1280 px the text column is wide enough for most code lines (``book_static/attnbook.css``),
  and the menu button collapses the menu, widening the column, and opens it again.
- The search page's snippets are prose: no TeX, no code (``attnbook.js`` cleans what Sphinx's
  search shows).

Three page visits in all; the per-page measurements live in ``test_book_readability.py``.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from .conftest import WatchedPage, open_watched
from .helpers import toc_docnames

if TYPE_CHECKING:
    from playwright.sync_api import Browser, Page

DOCNAMES = toc_docnames()
PAGE = "notebooks/13_imdb_encoder"  # many sections, figures and an explorer
PHONE = {"width": 375, "height": 812}
DESKTOP = {"width": 1280, "height": 900}
# The text column at 1280 px: the theme gave 684 px; 776 px holds a 92-character code line.
MIN_COLUMN_1280 = 760
# A panel narrower than this would not show a chapter's title on one or two lines.
MIN_PANEL = 250
# Raw TeX in a search snippet: a control word or a math delimiter.
RAW_TEX = re.compile(r"\\[A-Za-z]+|\\[()\[\]]|\$\$")
# Python from a code cell (prose names functions, it does not call print or plt).
CODE = re.compile(r"\bprint\(|\bplt\.\w+\(|\bdef \w+\(")
SEARCH_TERM = "softmax"
MIN_RESULTS = 5

MENU_BUTTON = ".bd-header-article .primary-toggle"
CONTENTS_BUTTON = ".bd-header-article .secondary-toggle"
MENU_PANEL = "#pst-primary-sidebar-modal"
CONTENTS_PANEL = "#pst-secondary-sidebar-modal"

PANEL_JS = """(selector) => {
  const dialog = document.querySelector(selector);
  const box = dialog.getBoundingClientRect();
  const links = Array.from(dialog.querySelectorAll("a[href]"))
    .filter((a) => a.getClientRects().length > 0 && a.getBoundingClientRect().right > 0);
  return {
    open: dialog.open,
    width: Math.round(box.width),
    left: Math.round(box.left),
    links: links.length,
    texts: links.map((a) => a.textContent.trim()),
  };
}"""

COLUMN_JS = """() => {
  const article = document.querySelector("article.bd-article");
  const style = getComputedStyle(article);
  const menu = document.getElementById("pst-primary-sidebar");
  return {
    column: Math.round(article.clientWidth - parseFloat(style.paddingLeft)
      - parseFloat(style.paddingRight)),
    menu_visible: getComputedStyle(menu).visibility === "visible"
      && menu.getBoundingClientRect().right > 0,
  };
}"""


@pytest.fixture
def touch_phone(browser: Browser) -> Iterator[WatchedPage]:
    """A 375 x 812 touch screen, where a tap is a tap."""
    with open_watched(
        browser, viewport=PHONE, device_scale_factor=1, is_mobile=True, has_touch=True
    ) as watched:
        yield watched


@pytest.fixture
def touch_desk(browser: Browser) -> Iterator[WatchedPage]:
    """A 1280 x 900 screen that also takes taps (a touch laptop)."""
    with open_watched(browser, viewport=DESKTOP, has_touch=True) as watched:
        yield watched


def open_book_page(page: Page, url: str) -> None:
    """Open the page; at "load" the theme's deferred scripts have run."""
    response = page.goto(url, wait_until="load")
    assert response is not None and response.ok, f"{url}: HTTP {response and response.status}"


def panel_after_tap(page: Page, button: str, panel: str) -> dict:
    """Tap the button; the panel's state once it has had time to open."""
    page.locator(button).tap()
    try:
        page.wait_for_function(f"() => document.querySelector('{panel}').open", timeout=3_000)
    except Exception:  # noqa: BLE001 (Playwright's timeout: the state below says what happened)
        pass
    return page.evaluate(PANEL_JS, panel)


def test_menu_and_contents_open_on_a_phone(
    book_url: str, touch_phone: WatchedPage, screenshots: Path
) -> None:
    """At 375 px: ☰ opens every chapter, "Contents" this page's sections; both close again."""
    page = touch_phone.page
    open_book_page(page, f"{book_url}{PAGE}.html")
    problems = []

    menu = panel_after_tap(page, MENU_BUTTON, MENU_PANEL)
    page.screenshot(path=str(screenshots / "menu_375.png"))
    if not menu["open"] or menu["width"] < MIN_PANEL or menu["left"] < 0:
        problems.append(f"the menu did not open on a tap: {menu}")
    chapters = [name for name in DOCNAMES if name.rsplit("/", 1)[-1][:2].isdigit()]
    if menu["links"] < len(chapters):
        problems.append(f"the open menu shows {menu['links']} links for {len(chapters)} chapters")
    page.keyboard.press("Escape")
    if page.evaluate(f"() => document.querySelector('{MENU_PANEL}').open"):
        problems.append("Escape did not close the menu")

    contents = panel_after_tap(page, CONTENTS_BUTTON, CONTENTS_PANEL)
    page.screenshot(path=str(screenshots / "contents_375.png"))
    sections = page.locator("article.bd-article section > h2").count()
    if not contents["open"] or contents["width"] < MIN_PANEL:
        problems.append(f"the contents did not open on a tap: {contents}")
    elif contents["links"] < sections:
        problems.append(f"the contents list {contents['links']} links for {sections} sections")
    else:
        # A section's link: the panel closes and the page is scrolled to that section.
        link = page.locator(f"{CONTENTS_PANEL} a[href^='#']").nth(3)
        target = link.get_attribute("href") or ""
        link.tap()
        top_js = "(id) => document.getElementById(id).getBoundingClientRect().top"
        try:  # the page may scroll smoothly
            page.wait_for_function(
                f"(id) => ({top_js})(id) < {PHONE['height'] / 2}", arg=target[1:], timeout=3_000
            )
        except Exception:  # noqa: BLE001 (Playwright's timeout: measured below)
            pass
        if page.evaluate(f"() => document.querySelector('{CONTENTS_PANEL}').open"):
            problems.append("tapping a section in the contents left the panel open")
        top = page.evaluate(top_js, target[1:])
        if not 0 <= top < PHONE["height"] / 2:
            problems.append(f"the section {target} is {top:.0f} px from the top after its link")
    problems += touch_phone.watch.problems()
    assert problems == [], "\n".join(problems)


def test_menu_collapses_on_a_desk(book_url: str, touch_desk: WatchedPage) -> None:
    """At 1280 px: a wide text column; the menu button hides the menu and shows it again."""
    page = touch_desk.page
    open_book_page(page, f"{book_url}{PAGE}.html")
    before = page.evaluate(COLUMN_JS)
    page.locator(MENU_BUTTON).tap()
    page.wait_for_timeout(500)  # the theme's transition
    collapsed = page.evaluate(COLUMN_JS)
    page.locator(MENU_BUTTON).tap()
    page.wait_for_timeout(500)
    again = page.evaluate(COLUMN_JS)
    problems = []
    if before["column"] < MIN_COLUMN_1280 or not before["menu_visible"]:
        problems.append(f"at 1280 px the column is {before['column']} px: {before}")
    if collapsed["menu_visible"] or collapsed["column"] < before["column"] + 200:
        problems.append(f"the menu button did not collapse the menu: {before} -> {collapsed}")
    if again != before:
        problems.append(f"a second tap did not bring the menu back: {before} -> {again}")
    problems += [
        f"a panel opened at 1280 px: {selector}"
        for selector in (MENU_PANEL, CONTENTS_PANEL)
        if page.evaluate(f"() => document.querySelector('{selector}').open")
    ]
    problems += touch_desk.watch.problems()
    assert problems == [], "\n".join(problems)


def test_search_snippets_are_prose(book_url: str, watched_page: WatchedPage) -> None:
    """The search page's snippets hold the search term, with formulas as text and no TeX."""
    page = watched_page.page
    open_book_page(page, f"{book_url}search.html?q={SEARCH_TERM}")
    page.wait_for_function(
        f"() => document.querySelectorAll('ul.search li p.context').length >= {MIN_RESULTS}",
        timeout=30_000,
    )
    page.wait_for_timeout(500)  # the last snippets' fetches
    snippets = page.eval_on_selector_all(
        "ul.search li p.context", "(ps) => ps.map((p) => p.textContent)"
    )
    raw = [s for s in snippets if RAW_TEX.search(s)]
    code = [s for s in snippets if CODE.search(s)]
    with_term = [s for s in snippets if SEARCH_TERM in s.lower()]
    problems = [f"raw TeX in a snippet: {s!r}" for s in raw]
    problems += [f"code in a snippet: {s!r}" for s in code]
    if len(with_term) < MIN_RESULTS:
        problems.append(f"{len(with_term)} of {len(snippets)} snippets show {SEARCH_TERM!r}")
    problems += watched_page.watch.problems()
    assert problems == [], "\n".join(problems)
