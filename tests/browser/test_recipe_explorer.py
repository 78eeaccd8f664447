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

from attnlib.live.recipe_explorer import recipe_live

from .conftest import WatchedPage, explorer_page_url
from .helpers import (
    PHONE,
    assert_fits_phone,
    chart_scales,
    fresh_page,
    mounted,
    no_script_texts,
    serve_page,
)
from .recipe_checks import check_recipe_explorer, readout

CHAPTER_PAGE = "notebooks/12_training_recipe"
HOOK = '.attnlib-live[data-explorer="recipe"]'
# The pictures are drawn 360 units wide with 12-unit text: at 0.8 of that, text is 9.6 px.
LEAST_SCALE = 0.8


@pytest.fixture(scope="module")
def recipe_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A page with the explorer at its defaults, outside the book, on 127.0.0.1."""
    with serve_page(tmp_path_factory, "recipe-explorer", [recipe_live().data]) as url:
        yield url


@pytest.mark.parametrize("where", ["standalone", "book"])
def test_recipe_explorer_computes_what_attnlib_does(
    request: pytest.FixtureRequest, watched_page: WatchedPage, where: str
) -> None:
    url = explorer_page_url(request, where, CHAPTER_PAGE, "recipe_url")
    root = mounted(watched_page.page, HOOK, url)
    check_recipe_explorer(root)
    watched_page.watch.assert_clean(f"explorer recipe ({where})", scripts_only=True)


@pytest.mark.parametrize("where", ["standalone", "book"])
def test_recipe_explorer_fits_a_phone_and_says_what_it_shows_without_javascript(
    request: pytest.FixtureRequest, browser, where: str
) -> None:
    """At 375 px nothing scrolls sideways and the pictures keep readable text; with JavaScript
    off, the snapshot names the numbers the explorer opens with."""
    url = explorer_page_url(request, where, CHAPTER_PAGE, "recipe_url")
    with fresh_page(browser, viewport=PHONE) as page:
        root = mounted(page, HOOK, url, what=f"phone width ({where})")
        assert_fits_phone(page, root, f"phone width ({where})")
        scales = chart_scales(root)
        assert len(scales) == 3 and min(scales) >= LEAST_SCALE, f"pictures shrunk to {scales}"
        shown = {
            name: readout(root, name).inner_text().strip()
            for name in ("peak", "peak-step", "target-true", "target-other", "floor", "best-gap")
        }
    [text] = no_script_texts(browser, url, HOOK)
    snapshot = (
        f"peaks at {shown['peak']} at step s = {shown['peak-step']}",
        f"puts {shown['target-true']} on the true class and {shown['target-other']}",
        f"H(q') = {shown['floor']} nats, reached at a logit gap of {shown['best-gap']}",
    )
    for phrase in snapshot:
        assert phrase in text, f"the snapshot does not say {phrase!r}: {text}"
