"""Chapter 13's explorer on the built book: the shipped classifier, run in the reader's browser.

The page is served from _build/html on 127.0.0.1 (no request may leave it). The test presses the
button, types three reviews (clearly positive, clearly negative, mixed) and checks the shown
verdict and P(positive) against the PyTorch model, and that choosing another layer and head
redraws the heatmap. It prints the time to the first prediction and to each later one. What a
reader needs around the map is checked too: a colour bar with the map's own scale, a hover
readout that forgets a map once it is gone, a mark where a long review's middle was dropped, a
prompt instead of a prediction for an empty review, and the model kept by the browser (Cache
API) so that a second visit downloads nothing.
"""

from __future__ import annotations

from functools import cache

import pytest

from attnlib.live.imdb import EXAMPLE, shown_token
from attnlib.tasks import imdb as task
from attnlib.tasks.imdb_train import SHIPPED_MODEL, load_trained

from .conftest import HTML, WatchedPage, open_watched
from .helpers import HALF_UNIT, PHONE, assert_box_within, fresh_page

CHAPTER_13 = "notebooks/13_imdb_encoder"
REVIEWS = {
    "positive": "One of the best films I have seen in years: brilliant acting, a moving story and "
    "a wonderful score. I loved every minute of it.",
    "negative": "Awful. The worst movie I have ever sat through: boring, badly acted and stupid. "
    "A complete waste of time and money.",
    "mixed": "The cast does what it can and the photography is lovely, but the script is thin "
    "and the last hour drags badly.",
}
TOLERANCE = 1e-4
HOVER_HINT = "Point at (or tap) the map to read one weight."
# Longer than the model reads (511 subwords after [CLS]): its middle is dropped.
LONG = " ".join(["An endless review that keeps going, sentence after sentence."] * 70) + " Great!"


@cache
def python_reading(text: str) -> task.Reading:
    """What the shipped PyTorch model reads in ``text``: tokens, probability, weights."""
    model, tokenizer, config, _ = load_trained(SHIPPED_MODEL)
    return task.read_review(model, tokenizer, text, config.max_len, config.head_tokens)


def python_probability(text: str) -> float:
    """P(positive) of ``text`` by the shipped PyTorch model."""
    return python_reading(text).probability


@pytest.fixture
def chapter_13(book_url: str, watched_page: WatchedPage):
    """Chapter 13's page, scrolled to its explorer, the explorer not yet loaded."""
    page = watched_page.page
    page.goto(f"{book_url}{CHAPTER_13}.html", wait_until="load")
    root = page.locator('.attnlib-live[data-explorer="imdb"]')
    assert root.count() == 1, "chapter 13 should hold one live IMDB explorer"
    root.scroll_into_view_if_needed()
    yield page, root
    watched_page.watch.assert_clean("chapter 13's explorer", scripts_only=True)


def wait_for_prediction(page, root, count: int) -> None:
    """Wait until the explorer has made ``count`` predictions."""
    page.wait_for_function(
        "([node, count]) => Number(node.getAttribute('data-predictions') || 0) >= count",
        arg=[root.element_handle(), count],
        timeout=30_000,
    )


def shown(root) -> tuple[str, float, float]:
    """(verdict, P(positive) as shown with 4 decimals, full precision)."""
    label = root.locator('[data-readout="label"]').inner_text().strip()
    probability = float(root.locator('[data-readout="probability"]').inner_text())
    return label, probability, float(root.get_attribute("data-probability"))


def expect_python(root, text: str, what: str) -> None:
    expected = python_probability(text)
    label, rounded, exact = shown(root)
    assert label == ("positive" if expected >= 0.5 else "negative"), f"{what}: verdict {label}"
    assert abs(rounded - expected) <= HALF_UNIT + TOLERANCE, f"{what}: {rounded} vs {expected}"
    assert abs(exact - expected) <= TOLERANCE, f"{what}: {exact} vs {expected}"


def heatmap_pixels(root) -> str:
    return root.locator('[data-readout="heatmap"]').evaluate("(canvas) => canvas.toDataURL()")


def test_loads_lazily_then_reads_typed_reviews_like_python(chapter_13, capsys) -> None:
    page, root = chapter_13
    assert root.get_attribute("data-state") == "idle"
    assert (
        page.evaluate(
            "() => performance.getEntriesByType('resource')"
            ".filter((e) => e.name.includes('model.safetensors')).length"
        )
        == 0
    ), "the weights must not download before the reader asks"
    button = root.locator('[data-control="load"]')
    assert "MB" in button.inner_text(), "the button should say how much it downloads"
    button.click()
    wait_for_prediction(page, root, 1)
    first_ms = float(root.get_attribute("data-first-ms"))
    assert root.locator('[data-control="review"]').input_value() == EXAMPLE
    expect_python(root, EXAMPLE, "the example")
    chips = root.locator('[data-readout="tokens"] span')
    model, tokenizer, config, _ = load_trained(SHIPPED_MODEL)
    reading = task.read_review(model, tokenizer, EXAMPLE, config.max_len, config.head_tokens)
    raw = [chips.nth(i).get_attribute("data-token") for i in range(chips.count())]
    assert raw == reading.tokens
    # A chip shows its token without "</w>" (a gap after it marks the word's end); the hover
    # text starts with the raw token.
    assert chips.all_inner_texts() == [shown_token(token)[0] for token in reading.tokens]
    assert "</w>" not in root.locator('[data-readout="tokens"]').inner_text()
    assert chips.nth(1).get_attribute("title").startswith(reading.tokens[1] + " (position 1)")

    later = []
    for count, (kind, text) in enumerate(REVIEWS.items(), start=2):
        root.locator('[data-control="review"]').fill(text)
        wait_for_prediction(page, root, count)
        expect_python(root, text, kind)
        later.append(float(root.get_attribute("data-last-ms")))
    with capsys.disabled():
        print(
            f"\nchapter 13 explorer: first prediction {first_ms:.0f} ms after the click "
            f"(download included); later ones {', '.join(f'{ms:.0f}' for ms in later)} ms"
        )


def test_choosing_a_layer_and_head_redraws_the_heatmap(chapter_13) -> None:
    page, root = chapter_13
    root.locator('[data-control="load"]').click()
    wait_for_prediction(page, root, 1)
    before = heatmap_pixels(root)
    assert root.get_attribute("data-heatmap").startswith("5,0,")  # last layer, head 1
    root.locator('[data-control="layer"]').select_option(index=0)
    root.locator('[data-control="head"]').select_option(index=2)
    assert root.get_attribute("data-heatmap").startswith("0,2,")
    after = heatmap_pixels(root)
    assert after != before, "another layer and head must draw another map"
    root.locator('[data-control="head"]').select_option(index=4)
    assert root.get_attribute("data-heatmap").startswith("0,mean,")
    assert heatmap_pixels(root) not in (before, after)
    rows = root.locator('[data-readout="most-read"] tbody tr')
    assert rows.count() == min(8, len(root.locator('[data-readout="tokens"] span').all()))


def test_an_empty_review_asks_for_one_instead_of_a_prediction(chapter_13) -> None:
    page, root = chapter_13
    root.locator('[data-control="load"]').click()
    wait_for_prediction(page, root, 1)
    review = root.locator('[data-control="review"]')
    prompt = root.locator('[data-readout="prompt"]')
    for count, blank in enumerate(("", "   \n  ", "<br /><br />"), start=2):
        review.fill(blank)
        page.wait_for_function(
            "(node) => node.getAttribute('data-state') === 'empty'",
            arg=root.element_handle(),
            timeout=10_000,
        )
        assert prompt.is_visible() and "Type a review" in prompt.inner_text()
        assert not root.locator('[data-readout="label"]').is_visible()
        assert root.get_attribute("data-probability") is None
        assert root.get_attribute("data-predictions") == str(count - 1)
        review.fill("A wonderful film.")
        wait_for_prediction(page, root, count)
        assert root.get_attribute("data-state") == "ready" and not prompt.is_visible()
        expect_python(root, "A wonderful film.", f"after the prompt for {blank!r}")


def test_fits_a_phone_and_shows_the_snapshot_without_javascript(book_url: str, browser) -> None:
    with fresh_page(browser, viewport=PHONE) as page:
        page.goto(f"{book_url}{CHAPTER_13}.html", wait_until="load")
        root = page.locator('.attnlib-live[data-explorer="imdb"]')
        root.scroll_into_view_if_needed()
        root.locator('[data-control="load"]').click()
        wait_for_prediction(page, root, 1)
        assert_box_within(root, PHONE["width"] + 1, "on a phone")
        canvas = root.locator('[data-readout="heatmap"]').bounding_box()
        assert canvas is not None and canvas["x"] + canvas["width"] <= 376
    with fresh_page(browser, java_script_enabled=False) as page:
        page.goto(f"{book_url}{CHAPTER_13}.html", wait_until="load")
        text = page.locator('.attnlib-live[data-explorer="imdb"]').inner_text()
        assert "JavaScript" in text and "snapshot" in text
        assert f"P(positive) = {python_probability(EXAMPLE):.4f}" in text
        assert page.locator('.attnlib-live[data-explorer="imdb"] img').count() == 1


def test_chapter_13_page_holds_the_explorer_and_the_model_files() -> None:
    page = HTML / f"{CHAPTER_13}.html"
    if not page.is_file():
        pytest.skip(f"{page} is not built yet")
    assert page.read_text(encoding="utf-8").count('id="attnlib-live-imdb"') == 1
    for name in ("config.json", "tokenizer.json", "model.safetensors"):
        served = HTML / "_static" / "imdb" / name
        assert served.stat().st_size == (SHIPPED_MODEL / name).stat().st_size, name


def model_downloads(page) -> int:
    """How many times this page fetched the weights over the network."""
    return page.evaluate(
        "() => performance.getEntriesByType('resource')"
        ".filter((e) => e.name.includes('model.safetensors')).length"
    )


def test_the_colour_bar_gives_each_maps_own_scale(chapter_13) -> None:
    page, root = chapter_13
    root.locator('[data-control="load"]').click()
    wait_for_prediction(page, root, 1)
    reading = python_reading(EXAMPLE)
    colorbar = root.locator('[data-readout="colorbar"]')
    assert colorbar.is_visible(), "the map needs its colour bar"
    for layer, head in ((5, 0), (0, 2), (3, 1)):
        # By index (= value): Playwright matches a value string against labels too, and the
        # labels count from 1.
        root.locator('[data-control="layer"]').select_option(index=layer)
        root.locator('[data-control="head"]').select_option(index=head)
        assert root.get_attribute("data-heatmap").startswith(f"{layer},{head},")
        largest = float(reading.weights[layer, head].max())
        shown = float(colorbar.get_attribute("data-max"))
        assert abs(shown - largest) <= TOLERANCE, f"layer {layer}, head {head}: {shown}"
        ticks = colorbar.inner_text().split()
        assert ticks == [f"{shown:.4f}", f"{shown / 2:.4f}", "0"], ticks
        assert f"{shown:.4f}" in root.locator('[data-readout="legend"]').inner_text()


def test_the_hover_readout_forgets_a_map_once_it_is_gone(chapter_13) -> None:
    page, root = chapter_13
    root.locator('[data-control="load"]').click()
    wait_for_prediction(page, root, 1)
    hover = root.locator('[data-readout="hover"]')
    canvas = root.locator('[data-readout="heatmap"]')
    assert hover.inner_text() == HOVER_HINT

    def point_at_the_map() -> None:
        box = canvas.bounding_box()
        assert box is not None
        canvas.hover(position={"x": box["width"] * 0.7, "y": box["height"] * 0.7})
        assert hover.inner_text().startswith("query "), hover.inner_text()
        # Off the map again, so that only the change below, not a pointer over the redrawn
        # map, decides what the readout says.
        hover.hover()
        assert hover.inner_text().startswith("query "), hover.inner_text()

    point_at_the_map()
    root.locator('[data-control="review"]').fill(REVIEWS["positive"])
    wait_for_prediction(page, root, 2)
    assert hover.inner_text() == HOVER_HINT, "a weight of the last review's map stays"
    point_at_the_map()
    root.locator('[data-control="head"]').select_option(index=4)  # the mean of the heads
    assert root.get_attribute("data-heatmap").startswith("5,mean,")
    assert hover.inner_text() == HOVER_HINT, "a weight of the last head's map stays"
    # The example buttons and the selects each change what is shown.
    for count, name in enumerate(("positive", "negative", "mixed"), start=3):
        before = root.get_attribute("data-probability")
        root.locator(f'[data-control="example"][data-example="{name}"]').click()
        wait_for_prediction(page, root, count)
        assert root.get_attribute("data-probability") != before, name


def test_a_long_review_shows_where_its_middle_was_dropped(chapter_13) -> None:
    page, root = chapter_13
    root.locator('[data-control="load"]').click()
    wait_for_prediction(page, root, 1)
    root.locator('[data-control="review"]').fill(LONG)
    wait_for_prediction(page, root, 2)
    expect_python(root, LONG, "the long review")
    _, tokenizer, config, _ = load_trained(SHIPPED_MODEL)
    dropped = len(tokenizer.encode(LONG)) - (config.max_len - 1)
    assert dropped > 0
    marker = root.locator('[data-readout="dropped"]')
    assert marker.count() == 1 and marker.is_visible()
    assert f"{dropped} subwords dropped" in marker.inner_text()
    # Between the head ([CLS] and the first head_tokens) and the tail.
    before, after = marker.evaluate(
        """(m) => [m.previousElementSibling, m.nextElementSibling].map((e) => e.dataset.token)"""
    )
    tokens = python_reading(LONG).tokens
    place = root.locator('[data-readout="tokens"]').evaluate(
        "(box) => Array.from(box.children).indexOf(box.querySelector('[data-readout=dropped]'))"
    )
    assert place == 1 + config.head_tokens
    assert (before, after) == (tokens[config.head_tokens], tokens[config.head_tokens + 1])
    assert "where the middle of the review was dropped" in (
        root.locator('[data-readout="legend"]').inner_text()
    )
    root.locator('[data-control="review"]').fill("A short one.")
    wait_for_prediction(page, root, 3)
    assert marker.count() == 0, "a short review has nothing dropped"


def test_the_browser_keeps_the_model_for_the_next_visit(
    book_url: str, browser, screenshots
) -> None:
    with open_watched(browser, viewport={"width": 1280, "height": 900}) as watched:
        page = watched.page
        for visit, (cache, downloads) in enumerate((("stored", 1), ("hit", 0)), start=1):
            page.goto(f"{book_url}{CHAPTER_13}.html", wait_until="load")
            root = page.locator('.attnlib-live[data-explorer="imdb"]')
            root.scroll_into_view_if_needed()
            button = root.locator('[data-control="load"]')
            if visit == 2:
                page.wait_for_function(
                    "(b) => b.textContent.includes('kept by your browser')",
                    arg=button.element_handle(),
                    timeout=10_000,
                )
            button.click()
            wait_for_prediction(page, root, 1)
            assert root.get_attribute("data-cache") == cache, f"visit {visit}"
            assert model_downloads(page) == downloads, f"visit {visit}"
            expect_python(root, EXAMPLE, f"visit {visit}")
        root.screenshot(path=str(screenshots / "imdb_explorer_kept.png"))
        watched.watch.assert_clean("the second visit", scripts_only=True)
    # Without the Cache API (a page opened from a file, some private windows): downloaded.
    with open_watched(browser) as watched:
        page = watched.page
        page.add_init_script(
            "Object.defineProperty(window, 'caches', { value: undefined, configurable: true })"
        )
        page.goto(f"{book_url}{CHAPTER_13}.html", wait_until="load")
        root = page.locator('.attnlib-live[data-explorer="imdb"]')
        root.locator('[data-control="load"]').click()
        wait_for_prediction(page, root, 1)
        assert root.get_attribute("data-cache") == "off"
        assert model_downloads(page) == 1
        expect_python(root, EXAMPLE, "without the Cache API")
        watched.watch.assert_clean("no Cache API", scripts_only=True)
