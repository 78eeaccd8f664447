"""Chapters 15 and 16's kernel-free explorers (online softmax, rotary), computed in the browser.

Each is tested on a small page made here from ``attnlib`` (always) and on its chapter's book page
(skipped while that page is not in ``_build/html``); ``test_jupyterlab.py`` runs the same checks
in JupyterLab after the chapter has run. The checks themselves are in ``part5_checks.py``.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from attnlib.live.flash_explorer import flash_live
from attnlib.live.rotary_explorer import rotary_live

from .conftest import WatchedPage, explorer_page_url
from .helpers import serve_folder, standalone_page
from .part5_checks import check_online_softmax_explorer, check_rotary_explorer

CHAPTER_PAGES = {
    "online-softmax": "notebooks/15_flash_attention",
    "rotary": "notebooks/16_modern_attention",
}
CHECKS = {"online-softmax": check_online_softmax_explorer, "rotary": check_rotary_explorer}


@pytest.fixture(scope="module")
def part5_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A page with both explorers at their defaults, outside the book, on 127.0.0.1."""
    folder = tmp_path_factory.mktemp("part5-explorers")
    standalone_page(folder, [flash_live().data, rotary_live().data])
    with serve_folder(folder) as url:
        yield url


@pytest.mark.parametrize("where", ["standalone", "book"])
@pytest.mark.parametrize("name", list(CHAPTER_PAGES))
def test_part5_explorer_computes_what_attnlib_does(
    request: pytest.FixtureRequest, watched_page: WatchedPage, name: str, where: str
) -> None:
    url = explorer_page_url(request, where, CHAPTER_PAGES[name], "part5_url")
    page = watched_page.page
    page.goto(url, wait_until="load")
    root = page.locator(f'.attnlib-live[data-explorer="{name}"][data-mounted]')
    assert root.count() == 1, f"{url}: {root.count()} mounted {name} explorers, expected one"
    root.scroll_into_view_if_needed()
    CHECKS[name](root)
    watched_page.watch.assert_clean(f"explorer {name} ({where})", scripts_only=True)
