"""Chapter 17's kernel-free explorer: the two-layer model with its heads switched on and off.

On a page made here from the chapter's shape of model (untrained, sharpened queries, as
tests/test_live_induction.py builds it), picking examples, typing tokens, switching heads off and
moving the position must show what PyTorch computes (:func:`run_with_weights`); the first run
must be ready within 1 s of the page's script starting and later ones within 100 ms. At 375 px
nothing sticks out; with JavaScript off the snapshot says what it would show.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

from attnlib.live.induction_explorer import induction_live, run_with_weights
from attnlib.tasks.induction import InductionTask
from tests.test_live_induction import models

from .conftest import WatchedPage
from .helpers import PHONE, assert_fits_phone, fresh_page, mounted, serve_page

HOOK = '.attnlib-live[data-explorer="induction"]'
FIRST_MS, LATER_MS = 1000.0, 100.0
TYPED = [5, 9, 13, 21, 30, 7, 5, 9, 13, 21]


def model():
    return models()["chapter"]


def examples() -> list[list[int]]:
    return InductionTask().probe().ids[:4].tolist()


@pytest.fixture(scope="module")
def induction_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    scores = {"previous token": np.full((2, 4), 0.25), "prefix matching": np.zeros((2, 4))}
    html = induction_live(model(), examples(), scores)
    with serve_page(tmp_path_factory, "induction", [html.data]) as url:
        yield url


def control(root, name: str):
    return root.locator(f'[data-control="{name}"]')


def readout(root, name: str):
    return root.locator(f'[data-readout="{name}"]')


def runs(root) -> int:
    return int(root.get_attribute("data-runs"))


def check_predictions(root, ids: list[int], off: list[tuple[int, int]]) -> None:
    """The shown tokens and likeliest next tokens are PyTorch's, with those heads off."""
    assert root.get_attribute("data-tokens") == " ".join(map(str, ids))
    logits, _ = run_with_weights(model(), ids, off)
    assert root.get_attribute("data-predicted") == " ".join(map(str, logits.argmax(-1).tolist()))
    assert root.get_attribute("data-off") == " ".join(
        f"L{layer + 1}H{head}" for layer, head in sorted(off)
    )


def check_row(root, ids: list[int], off: list[tuple[int, int]]) -> None:
    """The sequence's shading is the shown head's weights from the current position."""
    position = int(root.get_attribute("data-position"))
    layer = int(root.get_attribute("data-layer")) - 1
    head = int(root.get_attribute("data-head"))
    _, weights = run_with_weights(model(), ids, off)
    titles = (
        readout(root, "sequence")
        .locator("span")
        .evaluate_all("(spans) => spans.map((span) => span.title)")
    )
    shown = [float(title.rsplit(": weight ", 1)[1]) for title in titles]
    want = weights[layer, head, position].copy()
    assert len(shown) == len(ids)
    assert max(abs(a - b) for a, b in zip(shown, want, strict=True)) <= 0.0005 + 1e-9


def test_induction_explorer_computes_what_pytorch_does(
    watched_page: WatchedPage, induction_url: str, screenshots: Path
) -> None:
    page = watched_page.page
    root = mounted(page, HOOK, f"{induction_url}index.html")
    assert root.get_attribute("data-state") == "ready"
    assert float(root.get_attribute("data-first-ms")) < FIRST_MS
    first = examples()[0]
    check_predictions(root, first, [])
    assert root.get_attribute("data-position") == str(len(first) - 2)
    check_row(root, first, [])
    # Switching a head off runs the model again without it; the fastest of three runs is timed.
    control(root, "head").nth(5).uncheck()  # layer 2, head 1
    check_predictions(root, first, [(1, 1)])
    times = [float(root.get_attribute("data-last-ms"))]
    for _ in range(2):
        control(root, "run").click()
        times.append(float(root.get_attribute("data-last-ms")))
    assert min(times) < LATER_MS, f"runs took {times} ms"
    control(root, "head").nth(0).uncheck()  # layer 1, head 0
    check_predictions(root, first, [(0, 0), (1, 1)])
    control(root, "show-layer").select_option("0")
    control(root, "show-head").select_option("2")
    control(root, "position").fill("10")
    assert (root.get_attribute("data-layer"), root.get_attribute("data-head")) == ("1", "2")
    check_row(root, first, [(0, 0), (1, 1)])
    readout(root, "sequence").locator('span[data-position="20"]').click()
    assert root.get_attribute("data-position") == "20"
    check_row(root, first, [(0, 0), (1, 1)])
    control(root, "thumb").nth(5).click()  # layer 2, head 1
    assert (root.get_attribute("data-layer"), root.get_attribute("data-head")) == ("2", "1")
    assert control(root, "thumb").nth(5).get_attribute("aria-pressed") == "true"
    assert control(root, "thumb").count() == 8
    check_row(root, first, [(0, 0), (1, 1)])
    heat = readout(root, "heatmap")
    assert heat.locator("[data-frame]").get_attribute("y") == str(20 * 7 + 0.5)
    # Typed tokens: the start token comes first; the right guesses are counted where copying
    # can help (the second 5, 9 and 13 have a token after an earlier copy to check).
    count = runs(root)
    control(root, "tokens").fill(" ".join(map(str, TYPED)))
    assert runs(root) == count + 1
    ids = [0, *TYPED]
    check_predictions(root, ids, [(0, 0), (1, 1)])
    logits, _ = run_with_weights(model(), ids, [(0, 0), (1, 1)])
    guesses = logits.argmax(-1)
    right = sum(int(guesses[t] == ids[t + 1]) for t in (7, 8, 9))
    assert root.get_attribute("data-right") == f"{right}/3"
    assert f"right at {right} of 3 positions" in readout(root, "summary").inner_text()
    control(root, "all-on").click()
    check_predictions(root, ids, [])
    probabilities = readout(root, "probabilities").locator("td").all_inner_texts()
    assert len(probabilities) == 5
    # Bad tokens are refused with the reason; picking an example brings the model back.
    control(root, "tokens").fill("5 0 7")
    assert root.get_attribute("data-state") == "error"
    assert '"0" is not a token' in readout(root, "error").inner_text()
    control(root, "example").select_option("2")
    assert root.get_attribute("data-state") == "ready"
    check_predictions(root, examples()[2], [])
    page.screenshot(path=str(screenshots / "17_explorer_1280.png"), full_page=True)
    watched_page.watch.assert_clean("induction explorer", scripts_only=True)


def test_induction_explorer_fits_a_phone_and_shows_a_snapshot_without_javascript(
    browser, induction_url: str, screenshots: Path
) -> None:
    with fresh_page(browser, viewport=PHONE) as page:
        root = mounted(page, HOOK, f"{induction_url}index.html")
        assert_fits_phone(page, root, "chapter 17's explorer")
        page.screenshot(path=str(screenshots / "17_explorer_375.png"), full_page=True)
    with fresh_page(browser, java_script_enabled=False) as page:
        page.goto(f"{induction_url}index.html", wait_until="load")
        text = " ".join(page.locator(HOOK).inner_text().split())
    logits, _ = run_with_weights(model(), examples()[0])
    assert "runs the trained model in your browser with JavaScript" in text
    assert " ".join(map(str, logits.argmax(-1).tolist())) in text
