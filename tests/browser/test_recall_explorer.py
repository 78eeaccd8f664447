"""Chapter 19's kernel-free recall explorer (a growing cache against a fixed state) in a browser.

On a small page made here from ``attnlib``, every control is moved, and after each move the
recall shown (each key's recalled value, each memory's share right, the numbers each keeps) is
compared with :func:`attnlib.reference.associative_recall` in float64, which
``tests/test_live_recall.py`` checks against attnlib's own steps. On a phone the explorer fits
the screen; with JavaScript off, the page says what it would show.
"""

from __future__ import annotations

import json
from collections.abc import Iterator

import numpy as np
import pytest

from attnlib import reference
from attnlib.live.recall_explorer import recall_live

from .conftest import WatchedPage
from .helpers import PHONE, assert_fits_phone, fresh_page, mounted, no_script_texts, serve_page

RECALL = '.attnlib-live[data-explorer="recall"]'
MEMORIES = ("cache", "linear", "delta")


@pytest.fixture(scope="module")
def recall_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A page with the explorer at its defaults, outside the book, on 127.0.0.1."""
    with serve_page(tmp_path_factory, "recall-explorer", [recall_live().data]) as url:
        yield f"{url}index.html"


def expect_recall(root, written: int, d: int) -> None:
    """What the explorer shows after ``written`` pairs at key size ``d`` is the reference's."""
    keys, table = (np.array(json.loads(root.get_attribute(f"data-{n}"))) for n in ("keys", "table"))
    values = json.loads(root.get_attribute("data-values"))
    sharpness = float(root.get_attribute("data-sharpness"))
    keys, table = reference.unit_rows(keys, d), reference.unit_rows(table, d)
    want = reference.associative_recall(keys, table, values, written, sharpness)
    readout = root.locator('[data-readout="written"]')
    assert readout.inner_text() == str(written)
    assert root.locator('[data-readout="cache-numbers"]').inner_text() == str(2 * written * d)
    assert root.locator('[data-readout="state-numbers"]').inner_text() == str(d * d)
    rows = root.locator('[data-readout="recall"] tbody tr')
    assert rows.count() == written
    for j in range(written):
        cells = rows.nth(j).locator("td").all_inner_texts()
        assert cells[0] == str(values[j])
        for name, cell in zip(MEMORIES, cells[1:], strict=True):
            mark = "✓" if want[name][j] == values[j] else "✗"
            assert cell == f"{want[name][j]} {mark}", (name, j, cell)
    for name in MEMORIES:
        right = np.mean(np.array(want[name]) == np.array(values[:written]))
        shown = root.locator(f'[data-readout="accuracy-{name}"]').inner_text()
        assert shown == f"{100 * right:.0f}%", (name, shown)
    assert root.locator('[data-readout="cache"] tbody tr').count() == written
    assert root.locator('[data-readout="state"] rect').count() == d * d
    assert root.locator('[data-readout="curve"] polyline').count() == 3


def test_the_recall_explorer_computes_what_the_reference_does(
    watched_page: WatchedPage, recall_url: str
) -> None:
    root = mounted(watched_page.page, RECALL, recall_url)
    expect_recall(root, written=6, d=8)
    for written, d in ((1, 8), (24, 8), (24, 4), (3, 4), (17, 16)):
        if root.locator('[data-control="dim"]').input_value() != str(d):
            root.locator('[data-control="dim"]').select_option(str(d))
        root.locator('[data-control="written"]').fill(str(written))
        expect_recall(root, written, d)
    watched_page.watch.assert_clean("recall explorer", scripts_only=True)


def test_the_recall_explorer_fits_a_phone_and_speaks_without_javascript(
    browser, recall_url: str
) -> None:
    with fresh_page(browser, viewport=PHONE) as page:
        root = mounted(page, RECALL, recall_url)
        root.locator('[data-control="written"]').fill("24")
        assert_fits_phone(page, root, "recall explorer on a phone")
    no_script_texts(browser, recall_url, RECALL)
