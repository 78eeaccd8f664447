"""The book's kernel-free explorers (chapters 01 and 02), computed in the browser.

Each explorer is a ``.attnlib-live[data-explorer=...]`` element with controls
``[data-control=...]`` and readout tables ``[data-readout=...]`` of 4-decimal ``<td>`` cells.
What they show must equal ``attnlib.reference`` rounded to 4 decimals, after every move.
The temperature control is an ``<input type=range>`` whose value x means temperature 10**x.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

import numpy as np
import pytest

from attnlib import reference
from attnlib.widgets import parse_matrix

from .conftest import WatchedPage
from .helpers import expect_cells

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

    opened: list[Explorer] = []

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
        explorer.root.scroll_into_view_if_needed()
        opened.append(explorer)
        return explorer

    yield open_
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
