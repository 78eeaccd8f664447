"""Chapter 12's kernel-free explorer (schedules and label smoothing), computed in the browser.

It is tested on a small page made here from ``attnlib`` (always) and on the chapter's book page
(skipped while that page is not in ``_build/html``); ``test_jupyterlab.py`` runs the same check
in JupyterLab after the chapter has run. The check itself is in ``recipe_checks.py``. On a
phone the explorer fits the screen with readable pictures; with JavaScript off, the page says
what it would show.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from attnlib import live
from attnlib.live.recipe_explorer import recipe_live

from .conftest import WatchedPage, explorer_page_url
from .helpers import serve_folder, standalone_page
from .recipe_checks import check_recipe_explorer, readout

CHAPTER_PAGE = "notebooks/12_training_recipe"
HOOK = '.attnlib-live[data-explorer="recipe"]'
PHONE = {"width": 375, "height": 800}
# The pictures are drawn 360 units wide with 12-unit text: at 0.8 of that, text is 9.6 px.
LEAST_SCALE = 0.8


@pytest.fixture(scope="module")
def recipe_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A page with the explorer at its defaults, outside the book, on 127.0.0.1."""
    folder = tmp_path_factory.mktemp("recipe-explorer")
    standalone_page(folder, [recipe_live().data])
    with serve_folder(folder) as url:
        yield url


@pytest.mark.parametrize("where", ["standalone", "book"])
def test_recipe_explorer_computes_what_attnlib_does(
    request: pytest.FixtureRequest, watched_page: WatchedPage, where: str
) -> None:
    url = explorer_page_url(request, where, CHAPTER_PAGE, "recipe_url")
    page = watched_page.page
    page.goto(url, wait_until="load")
    root = page.locator(f"{HOOK}[data-mounted]")
    assert root.count() == 1, f"{url}: {root.count()} mounted recipe explorers, expected one"
    root.scroll_into_view_if_needed()
    check_recipe_explorer(root)
    watched_page.watch.assert_clean(f"explorer recipe ({where})", scripts_only=True)


@pytest.mark.parametrize("where", ["standalone", "book"])
def test_recipe_explorer_fits_a_phone_and_says_what_it_shows_without_javascript(
    request: pytest.FixtureRequest, browser, where: str
) -> None:
    """At 375 px nothing scrolls sideways and the pictures keep readable text; with JavaScript
    off, the snapshot names the numbers the explorer opens with."""
    url = explorer_page_url(request, where, CHAPTER_PAGE, "recipe_url")
    phone = browser.new_context(viewport=PHONE)
    try:
        page = phone.new_page()
        page.goto(url, wait_until="load")
        root = page.locator(f"{HOOK}[data-mounted]")
        assert root.count() == 1, f"the explorer did not mount at phone width ({where})"
        root.scroll_into_view_if_needed()
        box = root.bounding_box()
        assert box is not None and box["x"] >= 0 and box["x"] + box["width"] <= 376, box
        width = page.evaluate("() => document.documentElement.scrollWidth")
        assert width <= 376, f"the page is {width}px wide on a 375px phone"
        scales = root.evaluate(
            """(root) => Array.from(root.querySelectorAll("svg[data-readout]")).map((svg) =>
                svg.getBoundingClientRect().width / svg.viewBox.baseVal.width)"""
        )
        assert len(scales) == 3 and min(scales) >= LEAST_SCALE, f"pictures shrunk to {scales}"
        overflowing = root.evaluate(
            """(root) => Array.from(root.querySelectorAll("*")).filter((el) =>
                el.getClientRects().length > 0 && el.getBoundingClientRect().right >
                root.getBoundingClientRect().right + 1).map((el) => el.tagName)"""
        )
        assert overflowing == [], f"sticking out of the explorer at 375 px: {overflowing}"
        shown = {
            name: readout(root, name).inner_text().strip()
            for name in ("peak", "peak-step", "target-true", "target-other", "floor", "best-gap")
        }
    finally:
        phone.close()
    off = browser.new_context(java_script_enabled=False)
    try:
        page = off.new_page()
        page.goto(url, wait_until="load")
        text = " ".join(page.locator(HOOK).inner_text().split())
        assert live.FALLBACK in text, "no fallback text without JavaScript"
        snapshot = (
            f"peaks at {shown['peak']} at step s = {shown['peak-step']}",
            f"puts {shown['target-true']} on the true class and {shown['target-other']}",
            f"H(q') = {shown['floor']} nats, reached at a logit gap of {shown['best-gap']}",
        )
        for phrase in snapshot:
            assert phrase in text, f"the snapshot does not say {phrase!r}: {text}"
    finally:
        off.close()
