"""The book's kernel-free explorers (chapters 01, 02, 07, 08, 09), computed in the browser.

Each explorer is a ``.attnlib-live[data-explorer=...]`` element with controls
``[data-control=...]`` and readout tables ``[data-readout=...]`` of 4-decimal ``<td>`` cells.
What they show must equal ``attnlib.reference`` rounded to 4 decimals, after every move.
The temperature control is an ``<input type=range>`` whose value x means temperature 10**x.

The explorers of chapters 07-09 (heads, positions, masks) are tested twice: on a small page
made here from ``attnlib`` (always), and on their chapter's book page (skipped while that page
is not in ``_build/html``). Either way the oracle's inputs are read back from the explorer's own
``data-*`` attributes, so the chapter may choose its tokens and weights. Chapters 04 and 05's
translators, the trained models run in the page, are tested in ``test_translator_explorer.py``.

On every page of the book, no control moves without what it shows changing: no ipywidgets
control (the book has no kernel to answer it), and each live explorer's every control redraws.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pytest

from attnlib import live, reference
from attnlib.widgets import parse_matrix

from .conftest import HTML, WatchedPage, explorer_page_url
from .helpers import (
    PHONE,
    assert_box_within,
    assert_page_within,
    cell_pattern,
    expect_cells,
    fresh_page,
    serve_page,
    toc_docnames,
    wait_for_widgets,
)

CHAPTER_01 = "notebooks/01_self_attention_by_hand"
CHAPTER_02 = "notebooks/02_scaled_dot_product"
WORKED_MATRICES = {
    "inputs": (reference.WORKED_INPUTS, (3, 4)),
    "W_K": (reference.WORKED_KEY_WEIGHTS, (4, 3)),
    "W_Q": (reference.WORKED_QUERY_WEIGHTS, (4, 3)),
    "W_V": (reference.WORKED_VALUE_WEIGHTS, (4, 3)),
}


@dataclass
class Explorer:
    watched: WatchedPage
    name: str

    @property
    def page(self):
        return self.watched.page

    @property
    def root(self):
        return self.page.locator(f'.attnlib-live[data-explorer="{self.name}"]')

    def control(self, name: str):
        return self.root.locator(f'[data-control="{name}"]')

    def cells(self, readout: str):
        return self.root.locator(f'[data-readout="{readout}"] td')

    def error(self):
        return self.root.locator('[data-readout="error"]')

    def type_into(self, name: str, text: str) -> None:
        """Replace a text control's content as a reader would, then leave the field."""
        control = self.control(name)
        control.fill(text)  # fires 'input'
        control.dispatch_event("change")  # what leaving the field fires

    def set_temperature_exponent(self, exponent: float) -> float:
        """Set the range input to ``exponent`` (fires 'input' and 'change'); return 10**value."""
        slider = self.control("temperature")
        slider.fill(f"{exponent:g}")
        return self.temperature()

    def temperature(self) -> float:
        return 10 ** float(self.control("temperature").input_value())


@pytest.fixture
def open_explorer(book_url: str, watched_page: WatchedPage) -> Iterator:
    from playwright.sync_api import TimeoutError as PlaywrightTimeoutError

    def open_(docname: str, name: str) -> Explorer:
        watched_page.page.goto(f"{book_url}{docname}.html", wait_until="load")
        explorer = Explorer(watched_page, name)
        try:
            explorer.root.first.wait_for(state="visible", timeout=5_000)
        except PlaywrightTimeoutError:
            pass
        count = explorer.root.count()
        if count != 1:
            hooks = f'.attnlib-live[data-explorer="{name}"]'
            raise AssertionError(f"{docname}: {count} live explorers {hooks}, expected one")
        return explorer

    yield from checked_afterwards(open_)


def checked_afterwards(open_: Callable[[str, str], Explorer]) -> Iterator:
    """Yield ``open_``, each explorer it opens scrolled into view; then check each stayed clean."""
    opened: list[Explorer] = []

    def open_in_view(first: str, name: str) -> Explorer:
        explorer = open_(first, name)
        explorer.root.scroll_into_view_if_needed()
        opened.append(explorer)
        return explorer

    yield open_in_view
    # No script error and no outside request while the reader plays with it (how the page
    # itself loads is test_book_in_browser's business).
    for explorer in opened:
        explorer.watched.watch.assert_clean(f"explorer {explorer.name}", scripts_only=True)


def matrices_shown(explorer: Explorer) -> dict[str, np.ndarray]:
    return {
        name: parse_matrix(explorer.control(name).input_value(), shape, name)
        for name, (_, shape) in WORKED_MATRICES.items()
    }


def expect_worked_example(explorer: Explorer, result: reference.WorkedExample, what: str) -> None:
    expect_cells(explorer.cells("scores"), result.scores, f"{what}: scores")
    expect_cells(explorer.cells("weights"), result.weights, f"{what}: weights")
    expect_cells(explorer.cells("outputs"), result.outputs, f"{what}: outputs")


# --- chapter 01: the worked example ---


def test_worked_example_starts_at_the_chapters_numbers(open_explorer) -> None:
    explorer = open_explorer(CHAPTER_01, "worked-example")
    shown = matrices_shown(explorer)
    for name, (matrix, _) in WORKED_MATRICES.items():
        np.testing.assert_array_equal(shown[name], matrix, err_msg=f"{name} starts elsewhere")
    slider = explorer.control("temperature")
    assert slider.get_attribute("type") == "range"
    limits = [float(slider.get_attribute(a) or "nan") for a in ("min", "max", "step")]
    assert limits == [-1.5, 1.5, 0.05], f"temperature slider min/max/step {limits}"
    assert float(slider.input_value()) == 0.0, "the temperature starts at 10**0 = 1"
    assert not explorer.control("scale").is_checked(), "scaling starts switched off"

    expect_worked_example(explorer, reference.worked_example(), "at start")
    expect_cells(explorer.cells("weights").nth(0), [0.0634], "input 1's weight on itself")


def test_temperature_slider_recomputes_the_weights(open_explorer) -> None:
    explorer = open_explorer(CHAPTER_01, "worked-example")
    for exponent in (-1.0, 0.5, 1.5, -1.5):
        temperature = explorer.set_temperature_exponent(exponent)
        assert temperature == pytest.approx(10**exponent)
        expected = reference.worked_example(temperature=temperature)
        expect_worked_example(explorer, expected, f"temperature {temperature:.3g}")

    # The keyboard moves it in steps of 0.05, as a reader's arrow keys would.
    slider = explorer.control("temperature")
    slider.fill("0")
    slider.focus()
    for _ in range(6):
        slider.press("ArrowRight")
    assert float(slider.input_value()) == pytest.approx(0.30)
    expected = reference.worked_example(temperature=10**0.30)
    expect_worked_example(explorer, expected, "temperature 10**0.3 (arrow keys)")


def test_scale_checkbox_divides_scores_by_sqrt_dk(open_explorer) -> None:
    explorer = open_explorer(CHAPTER_01, "worked-example")
    scale = explorer.control("scale")
    scale.check()
    assert scale.is_checked()
    scaled = reference.worked_example(scale=True)
    expect_worked_example(explorer, scaled, "scaled")
    expect_cells(explorer.cells("weights").nth(0), [0.1361], "scaled: input 1 on itself")

    temperature = explorer.set_temperature_exponent(-0.5)
    expected = reference.worked_example(scale=True, temperature=temperature)
    expect_worked_example(explorer, expected, "scaled, temperature 10**-0.5")

    scale.uncheck()
    expected = reference.worked_example(temperature=temperature)
    expect_worked_example(explorer, expected, "unscaled again, temperature 10**-0.5")


def test_editing_matrices_recomputes_everything(open_explorer) -> None:
    explorer = open_explorer(CHAPTER_01, "worked-example")
    # The chapter's first suggestion: shorten input 2.
    inputs = reference.WORKED_INPUTS.copy()
    inputs[1] = [0, 1, 0, 1]
    explorer.type_into("inputs", "1 0 1 0\n0 1 0 1\n1 1 1 1")
    expect_worked_example(explorer, reference.worked_example(inputs=inputs), "input 2 shortened")

    # Switch off the queries: every score 0, every weight 1/3, every output the mean value.
    explorer.type_into("W_Q", "0 0 0\n0 0 0\n0 0 0\n0 0 0")
    zero = np.zeros((4, 3))
    expected = reference.worked_example(inputs=inputs, query_weights=zero)
    np.testing.assert_allclose(expected.weights, 1 / 3)
    expect_worked_example(explorer, expected, "W_Q all zero")

    explorer.type_into("W_V", "1 0 0\n0 1 0\n0 0 1\n0 0 0")
    values = np.eye(4, 3)
    expected = reference.worked_example(inputs=inputs, query_weights=zero, value_weights=values)
    expect_worked_example(explorer, expected, "W_V edited")

    explorer.type_into("W_K", "1 0 0\n0 1 0\n0 0 1\n1 1 1")
    explorer.type_into("W_Q", "1 0 0\n0 1 0\n0 0 1\n1 1 1")
    same = np.array([[1, 0, 0], [0, 1, 0], [0, 0, 1], [1, 1, 1]], dtype=float)
    expected = reference.worked_example(inputs, same, same, values)
    expect_worked_example(explorer, expected, "W_K = W_Q")


def test_unreadable_matrix_shows_an_error_and_recovers(open_explorer) -> None:
    explorer = open_explorer(CHAPTER_01, "worked-example")
    explorer.type_into("inputs", "1 0 1\n0 2 0 2\n1 1 1 1")  # a row too short
    error = explorer.error()
    error.wait_for(state="visible", timeout=5_000)
    assert error.inner_text().strip(), "the error readout is visible but says nothing"

    explorer.type_into("inputs", "1 0 1 0\n0 2 0 2\n1 1 1 1")
    expect_worked_example(explorer, reference.worked_example(), "after the fix")
    assert not error.is_visible() or not error.inner_text().strip(), (
        f"the error stays after the fix: {error.inner_text()!r}"
    )


# --- chapter 02: temperature ---


def scores_shown(explorer: Explorer) -> np.ndarray:
    text = explorer.control("scores").input_value()
    return np.array([float(x) for x in text.replace(",", " ").split()])


def test_temperature_explorer_matches_softmax(open_explorer) -> None:
    explorer = open_explorer(CHAPTER_02, "temperature")
    scores = scores_shown(explorer)
    assert scores.size >= 2, f"the explorer starts with scores {scores}"
    assert explorer.temperature() == pytest.approx(1.0)
    weights = explorer.cells("weights")
    expect_cells(weights, reference.softmax(scores), "softmax at T=1")

    for exponent in (-1.5, -0.25, 0.75, 1.5):
        temperature = explorer.set_temperature_exponent(exponent)
        expected = reference.softmax(scores, temperature=temperature)
        expect_cells(weights, expected, f"softmax at T={temperature:.3g}")


def test_temperature_explorer_reads_typed_scores(open_explorer) -> None:
    explorer = open_explorer(CHAPTER_02, "temperature")
    weights = explorer.cells("weights")
    explorer.type_into("scores", "1 2 3")
    expect_cells(weights, reference.softmax(np.array([1.0, 2.0, 3.0])), "scores 1 2 3")

    temperature = explorer.set_temperature_exponent(-0.5)
    explorer.type_into("scores", "0.5 -2 7 7")
    expected = reference.softmax(np.array([0.5, -2.0, 7.0, 7.0]), temperature=temperature)
    expect_cells(weights, expected, "four scores at T=10**-0.5")

    explorer.type_into("scores", "1 two 3")
    error = explorer.error()
    error.wait_for(state="visible", timeout=5_000)
    assert error.inner_text().strip(), "the error readout is visible but says nothing"
    explorer.type_into("scores", "4 4")
    expect_cells(weights, [0.5, 0.5], "two equal scores")


# --- chapters 07-09: heads, positions, masks ---

CHAPTER_PAGES = {
    "heads": "notebooks/07_multi_head_attention",
    "positions": "notebooks/08_positional_encoding",
    "masks": "notebooks/09_masking",
}
WHERE = ["standalone", "book"]
STANDALONE_TOKENS = ["the", "cat", "sat", "on", "the", "mat"]


def standalone_snippets() -> list[str]:
    """The three explorers as a chapter would show them, with data made here."""
    rng = np.random.default_rng(7)
    d_model = 8
    x = rng.normal(size=(len(STANDALONE_TOKENS), d_model))
    w_q, w_k, w_v = rng.normal(size=(3, d_model, d_model)) * 0.8
    return [
        live.heads_live(STANDALONE_TOKENS, x, w_q, w_k, w_v, 2).data,
        live.positions_live().data,
        live.masks_live().data,
    ]


@pytest.fixture(scope="session")
def standalone_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A page with the three explorers, outside the book, served on 127.0.0.1."""
    with serve_page(tmp_path_factory, "live-explorers", standalone_snippets()) as url:
        yield url


@pytest.fixture
def open_live(request: pytest.FixtureRequest, watched_page: WatchedPage) -> Iterator:
    """open_live(where, name): the explorer on the standalone page or on its chapter's page."""

    def open_(where: str, name: str) -> Explorer:
        url = explorer_page_url(request, where, CHAPTER_PAGES[name], "standalone_url")
        watched_page.page.goto(url, wait_until="load")
        explorer = Explorer(watched_page, name)
        hooks = f'.attnlib-live[data-explorer="{name}"][data-mounted]'
        count = watched_page.page.locator(hooks).count()
        if count != 1:
            raise AssertionError(f"{url}: {count} mounted explorers {hooks}, expected one")
        return explorer

    yield from checked_afterwards(open_)


def attribute_json(explorer: Explorer, name: str):
    return json.loads(explorer.root.get_attribute(f"data-{name}") or "null")


def expect_texts(cells, expected: list, what: str, timeout: float = 5_000) -> None:
    """Like expect_cells, but each expected item is a number (4 decimals) or an exact text."""
    from playwright.sync_api import expect

    patterns = [
        cell_pattern(x) if isinstance(x, float) else re.compile(rf"^\s*{re.escape(x)}\s*$")
        for x in expected
    ]
    try:
        expect(cells).to_have_text(patterns, timeout=timeout)
    except AssertionError:
        shown = [text.strip() for text in cells.all_inner_texts()]
        raise AssertionError(f"{what}: shown {shown}, expected {expected}") from None


def readout(explorer: Explorer, name: str):
    return explorer.root.locator(f'[data-readout="{name}"]')


def assert_no_nan(explorer: Explorer, what: str) -> None:
    text = explorer.root.inner_text()
    assert "NaN" not in text and "Infinity" not in text, f"{what}: NaN or Infinity shown"


# chapter 07: heads


def heads_inputs(explorer: Explorer) -> dict:
    return {
        "tokens": attribute_json(explorer, "tokens"),
        "x": np.array(attribute_json(explorer, "inputs")),
        "w_q": np.array(attribute_json(explorer, "w-q")),
        "w_k": np.array(attribute_json(explorer, "w-k")),
        "w_v": np.array(attribute_json(explorer, "w-v")),
    }


def expect_heads(explorer: Explorer, data: dict, heads: int, head: int, scale_by: str) -> None:
    what = f"{heads} heads, head {head}, scaled by d_{scale_by}"
    result = reference.multi_head_attention(
        data["x"], data["w_q"], data["w_k"], data["w_v"], heads, scale_by
    )
    expect_cells(explorer.cells("weights"), result.weights[head - 1], f"{what}: weights")
    summary = np.stack([reference.entropy(result.weights).mean(-1), result.weights.max((-2, -1))])
    expect_cells(explorer.cells("heads"), summary.T, f"{what}: per-head entropy, largest")
    d_model = data["x"].shape[1]
    scale = np.sqrt(d_model // heads if scale_by == "head" else d_model)
    expect_cells(readout(explorer, "scale"), [scale], f"{what}: scale")
    expect_texts(readout(explorer, "d-head"), [str(d_model // heads)], f"{what}: d_head")
    assert readout(explorer, "thumbnails").locator("svg[data-head]").count() == heads
    assert_no_nan(explorer, what)


@pytest.mark.parametrize("where", WHERE)
def test_heads_explorer_starts_at_its_data(open_live, where: str) -> None:
    explorer = open_live(where, "heads")
    data = heads_inputs(explorer)
    n, d_model = data["x"].shape
    assert len(data["tokens"]) == n
    options = explorer.control("heads").locator("option").all_inner_texts()
    assert [int(o) for o in options] == [k for k in range(1, d_model + 1) if d_model % k == 0]
    heads = int(explorer.control("heads").input_value())
    assert heads == int(explorer.root.get_attribute("data-heads") or 0)
    assert explorer.control("head").input_value() == "1"
    assert not explorer.control("scale-model").is_checked()
    tokens_shown = explorer.root.locator('[data-readout="weights"] thead th').all_inner_texts()
    assert [t.strip() for t in tokens_shown[1:]] == data["tokens"]
    expect_heads(explorer, data, heads, 1, "head")


@pytest.mark.parametrize("where", WHERE)
def test_heads_explorer_every_head_count_and_head(open_live, where: str) -> None:
    explorer = open_live(where, "heads")
    data = heads_inputs(explorer)
    counts = [int(o) for o in explorer.control("heads").locator("option").all_inner_texts()]
    for heads in counts:
        explorer.control("heads").select_option(str(heads))
        for head in sorted({1, (heads + 1) // 2, heads}):
            explorer.control("head").select_option(str(head))
            assert len(explorer.control("head").locator("option").all_inner_texts()) == heads
            expect_heads(explorer, data, heads, head, "head")
    # Fewer heads than the chosen one: the choice falls back to the last head there is.
    explorer.control("heads").select_option(str(counts[-1]))
    explorer.control("head").select_option(str(counts[-1]))
    explorer.control("heads").select_option(str(counts[1] if len(counts) > 1 else counts[0]))
    fewer = counts[1] if len(counts) > 1 else counts[0]
    assert explorer.control("head").input_value() == str(fewer)
    expect_heads(explorer, data, fewer, fewer, "head")


@pytest.mark.parametrize("where", WHERE)
def test_heads_explorer_scale_bug_and_thumbnails(open_live, where: str) -> None:
    explorer = open_live(where, "heads")
    data = heads_inputs(explorer)
    counts = [int(o) for o in explorer.control("heads").locator("option").all_inner_texts()]
    heads = counts[-2] if len(counts) > 1 else counts[0]
    explorer.control("heads").select_option(str(heads))
    explorer.control("scale-model").check()
    expect_heads(explorer, data, heads, 1, "model")
    right = reference.multi_head_attention(data["x"], data["w_q"], data["w_k"], data["w_v"], heads)
    bug = reference.multi_head_attention(
        data["x"], data["w_q"], data["w_k"], data["w_v"], heads, "model"
    )
    if heads > 1:
        assert reference.entropy(bug.weights).mean() > reference.entropy(right.weights).mean()
    # Clicking a head's thumbnail shows that head.
    readout(explorer, "thumbnails").locator(f'svg[data-head="{heads}"]').click()
    assert explorer.control("head").input_value() == str(heads)
    expect_heads(explorer, data, heads, heads, "model")
    explorer.control("scale-model").uncheck()
    expect_heads(explorer, data, heads, heads, "head")


# chapter 08: positions


def set_range(explorer: Explorer, name: str, value: int) -> None:
    explorer.control(name).fill(str(value))


def expect_positions(explorer: Explorer, d_model: int, k: int, pos: int, i: int) -> None:
    what = f"k={k}, pos={pos}, i={i}"
    expect_texts(readout(explorer, "k"), [str(k)], f"{what}: k")
    expect_texts(readout(explorer, "pos"), [str(pos)], f"{what}: pos")
    expect_texts(readout(explorer, "i"), [str(i)], f"{what}: i")
    rotation = reference.offset_rotation(k, d_model)[2 * i : 2 * i + 2, 2 * i : 2 * i + 2]
    expect_cells(explorer.cells("rotation"), rotation, f"{what}: M_i(k)")
    here, there = reference.positional_encoding(np.array([pos, pos + k]), d_model)
    pair = slice(2 * i, 2 * i + 2)
    expect_cells(
        explorer.cells("pair"), [here[pair], rotation @ here[pair], there[pair]], f"{what}: pairs"
    )
    omega = reference.frequencies(d_model)[i]
    expect_cells(readout(explorer, "angle"), [k * omega], f"{what}: k ω_i")
    shown_omega = float(readout(explorer, "frequency").inner_text())
    assert shown_omega == pytest.approx(omega, rel=1e-5), f"{what}: ω_i"
    similarity = reference.encoding_similarity(pos, [k], d_model)
    expect_cells(readout(explorer, "similarity"), similarity, f"{what}: PE(pos)·PE(pos+k)")
    error = float(readout(explorer, "max-error").inner_text())
    assert 0 <= error < 1e-12, f"{what}: max |PE(pos+k) - M(k)PE(pos)| = {error}"
    assert reference.rotation_error(pos, k, d_model) < 1e-12
    assert_no_nan(explorer, what)


@pytest.mark.parametrize("where", WHERE)
def test_positions_explorer_rotation_and_similarity(open_live, where: str) -> None:
    explorer = open_live(where, "positions")
    d_model = int(explorer.root.get_attribute("data-d-model") or 0)
    max_len = int(explorer.root.get_attribute("data-max-len") or 0)
    assert d_model >= 2 and max_len >= 2
    offset, position, pair = (explorer.control(n) for n in ("offset", "position", "pair"))
    assert offset.get_attribute("type") == "range"
    assert [int(pair.get_attribute(a) or -1) for a in ("min", "max")] == [0, d_model // 2 - 1]
    assert int(offset.get_attribute("max") or 0) == max_len - 1
    start = [int(c.input_value()) for c in (offset, position, pair)]
    expect_positions(explorer, d_model, *start)

    last_pair = d_model // 2 - 1
    for k, pos, i in [
        (1, 0, 0),
        (max_len - 1, max_len - 1, last_pair),
        (7, 3, min(3, last_pair)),
        (0, 20 % max_len, 1 % (last_pair + 1)),
        (max_len // 2, 1, last_pair // 2),
    ]:
        set_range(explorer, "offset", k)
        set_range(explorer, "position", pos)
        set_range(explorer, "pair", i)
        expect_positions(explorer, d_model, k, pos, i)

    # The arrow keys move the offset one step at a time, as a reader's would.
    set_range(explorer, "offset", 2)
    offset.focus()
    for _ in range(3):
        offset.press("ArrowRight")
    assert offset.input_value() == "5"
    expect_positions(explorer, d_model, 5, int(position.input_value()), int(pair.input_value()))
    chart = readout(explorer, "chart")
    assert chart.locator("polyline").count() == 1
    points = (chart.locator("polyline").get_attribute("points") or "").split()
    assert len(points) == max_len, "one point per distance 0 .. max_len - 1"


# chapter 09: masks

FILL_VALUES = {"-inf": -np.inf, "-1e9": -1e9, "0": 0.0}


def expect_masks(
    explorer: Explorer,
    scores: np.ndarray,
    kind: str,
    length: int,
    fill: str,
    row: int | None,
) -> None:
    what = f"{kind}, length {length}, fill {fill}, masked row {row}"
    n = scores.shape[0]
    mask = reference.attention_mask(kind, n, length, row)
    expect_texts(explorer.cells("mask"), ["1" if m else "0" for m in mask.ravel()], f"{what}: mask")
    filled = [
        float(x) if m else {"-inf": "-inf", "-1e9": "-1e9", "0": 0.0}[fill]
        for x, m in zip(scores.ravel(), mask.ravel(), strict=True)
    ]
    expect_texts(explorer.cells("scores"), filled, f"{what}: filled scores")
    weights = reference.masked_softmax(scores, mask, fill=FILL_VALUES[fill])
    expect_cells(explorer.cells("weights"), weights, f"{what}: weights")
    expect_cells(explorer.cells("row-sums"), weights.sum(-1), f"{what}: row sums")
    leak = np.where(mask, 0.0, weights).sum(-1).max()
    expect_cells(readout(explorer, "leak"), [leak], f"{what}: weight on masked keys")
    exact = reference.masked_softmax(scores, mask)
    difference = np.abs(weights - exact).max()
    expect_cells(readout(explorer, "difference"), [difference], f"{what}: difference")
    expect_texts(readout(explorer, "length"), [str(length)], f"{what}: length shown")
    if fill == "-inf" and row is not None:
        assert (weights[row] == 0).all()
    assert_no_nan(explorer, what)


@pytest.mark.parametrize("where", WHERE)
def test_masks_explorer_starts_at_its_data(open_live, where: str) -> None:
    explorer = open_live(where, "masks")
    scores = np.array(attribute_json(explorer, "scores"))
    n = scores.shape[0]
    if where == "standalone":
        np.testing.assert_array_equal(scores, live.example_scores(8))
    kinds = explorer.control("kind").locator("option").evaluate_all("(o) => o.map((x) => x.value)")
    assert kinds == list(reference.MASK_KINDS)
    fills = explorer.control("fill").locator("option").evaluate_all("(o) => o.map((x) => x.value)")
    assert fills == list(FILL_VALUES)
    kind = explorer.control("kind").input_value()
    length = int(explorer.control("length").input_value())
    assert kind == explorer.root.get_attribute("data-kind")
    assert length == int(explorer.root.get_attribute("data-length") or 0)
    assert 1 <= length <= n and explorer.control("fill").input_value() == "-inf"
    assert not explorer.control("mask-row").is_checked()
    expect_masks(explorer, scores, kind, length, "-inf", None)


@pytest.mark.parametrize("where", WHERE)
def test_masks_explorer_every_kind_fill_and_a_fully_masked_row(open_live, where: str) -> None:
    explorer = open_live(where, "masks")
    scores = np.array(attribute_json(explorer, "scores"))
    n = scores.shape[0]
    for kind in reference.MASK_KINDS:
        explorer.control("kind").select_option(kind)
        explorer.control("fill").select_option("-inf")
        for length in sorted({n, max(1, n - 3), 1}):
            set_range(explorer, "length", length)
            expect_masks(explorer, scores, kind, length, "-inf", None)
        set_range(explorer, "length", max(1, n - 3))
        for fill in ("-1e9", "0"):
            explorer.control("fill").select_option(fill)
            expect_masks(explorer, scores, kind, max(1, n - 3), fill, None)
    # One query with no key at all: zeros with the library's -inf, never NaN.
    explorer.control("kind").select_option("padding+causal")
    set_range(explorer, "length", max(1, n - 2))
    explorer.control("fill").select_option("-inf")
    explorer.control("mask-row").check()
    for row in sorted({0, n // 2, n - 1}):
        explorer.control("row").select_option(str(row))
        expect_masks(explorer, scores, "padding+causal", max(1, n - 2), "-inf", row)
        expect_cells(explorer.cells("row-sums").nth(row), [0.0], f"row {row} sums to 0")
    # -1e9 agrees with -inf to 4 decimals on every row that has a key, and 0 leaks weight.
    explorer.control("mask-row").uncheck()
    explorer.control("fill").select_option("-1e9")
    expect_cells(readout(explorer, "difference"), [0.0], "-1e9 against -inf")
    expect_masks(explorer, scores, "padding+causal", max(1, n - 2), "-1e9", None)
    explorer.control("fill").select_option("0")
    expect_masks(explorer, scores, "padding+causal", max(1, n - 2), "0", None)
    leak = float(readout(explorer, "leak").inner_text())
    assert leak > 0, "filling masked scores with 0 must show weight on masked keys"


def test_explorers_fit_a_phone_and_fall_back_without_javascript(
    standalone_url: str, browser
) -> None:
    """At 375 px the page does not scroll sideways; with JavaScript off the fallback shows."""
    with fresh_page(browser, viewport=PHONE) as page:
        page.goto(f"{standalone_url}index.html", wait_until="load")
        for name in CHAPTER_PAGES:
            root = page.locator(f'.attnlib-live[data-explorer="{name}"][data-mounted]')
            assert root.count() == 1, f"{name} did not mount at phone width"
            assert_box_within(root, PHONE["width"] + 1, name)
        assert_page_within(page, PHONE["width"] + 1, "on a phone")
    with fresh_page(browser, java_script_enabled=False) as page:
        page.goto(f"{standalone_url}index.html", wait_until="load")
        for name in CHAPTER_PAGES:
            text = page.locator(f'.attnlib-live[data-explorer="{name}"]').inner_text()
            assert live.FALLBACK in text, f"{name}: no fallback text without JavaScript"


@pytest.mark.parametrize("name", list(CHAPTER_PAGES))
def test_chapter_pages_hold_their_explorer(name: str) -> None:
    """Once a chapter 07-09 page is built, its explorer is in it (one root element; the
    inlined script may name the hook in its comments)."""
    page = HTML / f"{CHAPTER_PAGES[name]}.html"
    if not page.is_file():
        pytest.skip(f"{page} is not built yet")
    text = Path(page).read_text(encoding="utf-8")
    assert text.count(f'id="attnlib-live-{name}"') == 1, f"{page}: expected one {name} explorer"


# every chapter: no control moves without what it shows changing

WIDGET_CONTROLS = (
    ".jupyter-widgets input, .jupyter-widgets select, .jupyter-widgets textarea, "
    ".jupyter-widgets button, .jupyter-widgets .noUi-handle"
)
# What a reader sees change: tables, pictures, readouts; not a control's own echo of its value
# (the number beside a slider sits in the control's <label>, and moved in the frozen widgets too).
SHOWN_JS = """(root) => Array.from(root.querySelectorAll("[data-readout]"))
  .filter((el) => !el.closest("label") && !el.closest("[data-control]"))
  .map((el) => el.tagName === "CANVAS" ? el.toDataURL() : el.tagName + ":" +
    (el.namespaceURI.endsWith("svg") ? el.innerHTML : el.textContent))
  .join("\\n")"""
# One move per kind of control, as a reader would make it; false when there is none to make.
MOVE_JS = """(control) => {
  const fire = (name) => control.dispatchEvent(new Event(name, { bubbles: true }));
  if (control.disabled || control.getClientRects().length === 0) return false;
  if (control.tagName === "SELECT") {
    if (control.options.length < 2) return false;
    control.selectedIndex = control.selectedIndex === 0 ? control.options.length - 1 : 0;
  } else if (control.type === "checkbox") {
    control.checked = !control.checked;
  } else if (control.type === "range") {
    const { min, max, value } = control;
    control.value = Number(value) === Number(min) ? max : min;
  } else if (control.tagName === "TEXTAREA" || control.type === "text") {
    // a digit typed one higher (a matrix's entry), else a word typed at the end (free text)
    const bumped = /\\d/.test(control.value)
      ? control.value.replace(/\\d/, (d) => String((Number(d) + 1) % 10))
      : control.value + " and more";
    control.value = bumped;
  } else if (control.tagName === "BUTTON") {
    control.click();
    return true;
  } else {
    return false;
  }
  fire("input");
  fire("change");
  return true;
}"""
# Explorers whose controls wait for a download the reader asks for (tested in their own file).
ON_REQUEST = {"imdb"}
# Controls that matter only in a state the moves above undo, each moved with its numbers checked
# in its own file: chapter 10's example to scale needs a scale other than 1 and two examples in
# the batch, while moving the others sets the batch to one example and "reset" sets the scale to 1
# (test_stack_explorer.py).
IN_ITS_OWN_TEST = {("norms", "example")}


def built_pages_with_explorers() -> list[str]:
    return [
        docname
        for docname in toc_docnames()
        if (HTML / f"{docname}.html").is_file()
        and "attnlib-live" in (HTML / f"{docname}.html").read_text(encoding="utf-8")
    ]


def test_the_book_has_no_ipywidgets_control(book_url: str, watched_page: WatchedPage) -> None:
    """A control drawn from saved widget state moves, but no kernel answers it in the book."""
    page = watched_page.page
    found = {}
    for docname in toc_docnames():
        if not (HTML / f"{docname}.html").is_file():
            continue
        page.goto(f"{book_url}{docname}.html", wait_until="load")
        wait_for_widgets(page)
        count = page.locator(WIDGET_CONTROLS).count()
        if count:
            found[docname] = count
    assert found == {}, f"ipywidgets controls in the book, which cannot answer them: {found}"


def moved_and_changed(root, control) -> bool | None:
    """Move ``control`` once: None if a reader cannot (hidden, disabled), else whether what
    the explorer shows changed."""
    before = root.evaluate(SHOWN_JS)
    if not control.evaluate(MOVE_JS):
        return None
    return root.evaluate(SHOWN_JS) != before


@pytest.mark.parametrize("docname", built_pages_with_explorers() or ["(no built page)"])
def test_every_explorer_control_changes_what_it_shows(
    docname: str, book_url: str, watched_page: WatchedPage
) -> None:
    """Each control, from the explorer as the page opens: moved once, something it shows
    changes. A control that changes nothing there (a reset, an example already shown, a row
    choice that waits for its checkbox) is tried again after every other control has moved."""
    if docname == "(no built page)":
        pytest.skip(f"no page with a live explorer in {HTML}")
    page = watched_page.page

    def explorers():
        page.goto(f"{book_url}{docname}.html", wait_until="load")
        return page.locator(".attnlib-live[data-explorer][data-mounted]")

    count = explorers().count()
    assert count >= 1, f"{docname}: no mounted explorer"
    still = []
    for r in range(count):
        name = explorers().nth(r).get_attribute("data-explorer")
        if name in ON_REQUEST:
            continue
        n_controls = explorers().nth(r).locator("[data-control]").count()
        assert n_controls, f"{docname}: {name} has no control"
        for c in range(n_controls):
            root = explorers().nth(r)
            controls = root.locator("[data-control]")
            if (name, controls.nth(c).get_attribute("data-control")) in IN_ITS_OWN_TEST:
                continue
            if moved_and_changed(root, controls.nth(c)):
                continue
            root = explorers().nth(r)
            controls = root.locator("[data-control]")
            for other in range(n_controls):
                if other != c:
                    controls.nth(other).evaluate(MOVE_JS)
            if not moved_and_changed(root, controls.nth(c)):
                still.append(f"{name} [{controls.nth(c).get_attribute('data-control')}] #{c}")
    assert still == [], f"{docname}: controls that move while nothing they show changes: {still}"
    watched_page.watch.assert_clean(f"{docname}'s explorers", scripts_only=True)
