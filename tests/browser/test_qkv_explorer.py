"""Chapter 06's kernel-free explorer (queries, keys and values of a sentence), in the browser.

It is tested on a small page made here from ``attnlib`` with the chapter's data (always), on
the chapter's book page (skipped while that page is not in ``_build/html``) and in JupyterLab,
on a trusted copy of the chapter with its stored outputs (the chapter is not run: the explorer
needs no kernel). :func:`check_qkv_explorer` moves every control and, after every move,
compares what is shown with :func:`attnlib.reference.sentence_attention` in float64 (which
``tests/test_live_qkv.py`` checks against ``attnlib.attend``). On a phone the explorer fits
the screen with readable text; with JavaScript off, the page says what it would show.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

from attnlib import reference
from attnlib.live.qkv_explorer import qkv_live
from tests.test_live_qkv import CHAPTER, chapter_sentences

from .conftest import WatchedPage, explorer_page_url
from .helpers import (
    PHONE,
    assert_fits_phone,
    expect_cells,
    four_decimals,
    fresh_page,
    mounted,
    no_script_texts,
    serve_page,
)
from .test_jupyterlab import Lab, lab, open_stored  # noqa: F401 (lab: the fixture)

CHAPTER_PAGE = "notebooks/06_self_attention_qkv"
HOOK = '.attnlib-live[data-explorer="qkv"]'
SMALLEST_TEXT_PX = 11
ROUNDING = 1e-12


def control(root, name: str):
    return root.locator(f'[data-control="{name}"]')


def readout(root, name: str):
    return root.locator(f'[data-readout="{name}"]')


def text(root, name: str) -> str:
    return readout(root, name).first.inner_text().strip()


def wait_for_text(root, name: str, accepted: list[str], what: str, timeout_ms: int = 5_000):
    """Wait until readout ``name`` shows one of ``accepted``."""
    left = timeout_ms
    while text(root, name) not in accepted:
        if left <= 0:
            raise AssertionError(f"{what}: {name} shows {text(root, name)!r}, not {accepted}")
        root.page.wait_for_timeout(100)
        left -= 100


def shown_state(root) -> dict:
    """The sentence, query word, question strengths, positions and word order the page holds."""
    examples = json.loads(root.get_attribute("data-examples"))
    example = examples[int(control(root, "example").input_value())]
    strengths = np.ones(len(example["wQ"][0]))
    sliders = root.locator('input[data-control^="strength-"]')
    for k in range(sliders.count()):  # those of the sentence shown; the others are hidden
        slider = sliders.nth(k)
        if slider.is_visible():
            strengths[int(slider.get_attribute("data-column"))] = float(slider.input_value())
    order = json.loads(readout(root, "sentence").get_attribute("data-order"))
    return {
        "example": example,
        "query": int(control(root, "query").input_value()),
        "strengths": strengths,
        "positions": control(root, "positions").is_checked(),
        "order": order,
    }


def expect_explorer(root, what: str) -> dict:
    """Every number shown, for the controls as they stand, against the oracle; returns them."""
    state = shown_state(root)
    example, order, query = state["example"], state["order"], state["query"]
    tokens, n = example["tokens"], len(example["tokens"])
    assert sorted(order) == list(range(n)), f"{what}: order {order}"
    maps = [np.array(example[key]) for key in ("x", "wQ", "wK", "wV")]
    args = (state["strengths"], order, state["positions"])
    a = reference.sentence_attention(*maps, *args)
    i = order.index(query)
    what = f"{what}: {tokens[query]!r}, strengths {state['strengths'].tolist()}, order {order}"
    assert text(root, "sentence") == " ".join(tokens[k] for k in order), what

    def cells(table: str, column: str):
        return root.locator(f'[data-readout="{table}"] td[data-col="{column}"]')

    expect_cells(cells("row", "score"), a.scores[i], f"{what}: scores")
    expect_cells(cells("row", "weight"), a.weights[i], f"{what}: weights")
    asking = [c for c in range(maps[1].shape[1]) if maps[1][:, c].any()] or list(
        range(maps[1].shape[1])
    )
    expect_cells(cells("query", "query"), a.queries[i][asking], f"{what}: query")
    expect_cells(cells("output", "input"), a.inputs[i], f"{what}: input")
    expect_cells(cells("output", "output"), a.outputs[i], f"{what}: output")
    squares = readout(root, "heatmap").locator("rect[data-weight]")
    every = squares.evaluate_all("(rs) => rs.map((r) => Number(r.getAttribute('data-weight')))")
    np.testing.assert_allclose(
        np.reshape(every, (n, n)), a.weights, rtol=1e-12, atol=1e-12, err_msg=what
    )
    shown_sliders = root.locator('input[data-control^="strength-"]:visible')
    assert shown_sliders.count() == len(asking), what
    top = int(np.argmax(a.weights[i]))
    assert text(root, "top") == tokens[order[top]], what
    assert text(root, "top-weight") in four_decimals(a.weights[i, top]), what
    assert text(root, "self-weight") in four_decimals(a.weights[i, i]), what
    shifts = reference.permutation_shift(*maps, order, *args[:1], state["positions"])
    written = order == list(range(n))
    for name, value in zip(("shift-outputs", "shift-weights"), shifts, strict=True):
        shown = float(text(root, name))
        if value < ROUNDING:
            assert shown < ROUNDING, f"{what}: {name} {shown}"
        else:
            assert text(root, name) in four_decimals(value), f"{what}: {name}"
    verdict = text(root, "verdict")
    if written:
        assert verdict.startswith("the same order"), f"{what}: {verdict}"
    elif max(shifts) < ROUNDING:
        assert verdict.startswith("the outputs followed their words"), f"{what}: {verdict}"
    else:
        assert verdict.startswith("the outputs changed"), f"{what}: {verdict}"
    for c in asking:
        assert text(root, f"strength-{c}") == f"{state['strengths'][c]:.2f}", what
    assert readout(root, "error").is_hidden(), f"{what}: {text(root, 'error')}"
    shown = root.inner_text()
    assert "NaN" not in shown and "Infinity" not in shown, f"{what}: NaN or Infinity shown"
    return {**state, "attention": a, "shifts": shifts}


def click_order(root, button: str, what: str) -> list[int]:
    """Press an order button; the order the page shows then, after checking every number."""
    before = json.loads(readout(root, "sentence").get_attribute("data-order"))
    control(root, button).click()
    order = expect_explorer(root, f"{what} ({button})")["order"]
    n = len(order)
    assert sorted(order) == list(range(n)), f"{what}: {order}"
    if button == "shuffle":
        assert order != before, f"{what}: a shuffle kept the order {order}"
    else:
        assert order == before[::-1], f"{what}: {before} reversed is not {order}"
    return order


def check_qkv_explorer(root) -> None:
    """Move every control: each query word, each question's strength, positions, shuffle and
    reverse, each sentence, and reset."""
    examples = json.loads(root.get_attribute("data-examples"))
    start_positions = root.get_attribute("data-positions") == "true"
    state = expect_explorer(root, "as it opens")
    assert state["example"]["name"] == examples[0]["name"]
    assert state["query"] == examples[0]["query"] and state["positions"] == start_positions
    assert state["order"] == list(range(len(examples[0]["tokens"])))
    assert (state["strengths"] == 1).all()

    # every query word of the first sentence
    values = (
        control(root, "query")
        .locator("option")
        .evaluate_all("(options) => options.map((option) => option.value)")
    )
    assert len(values) == len(examples[0]["tokens"])
    for value in values:
        control(root, "query").select_option(value)
        expect_explorer(root, f"query {value}")
    control(root, "query").select_option(str(examples[0]["query"]))

    # each question, off, doubled and back; with the first off the query is zero: uniform row
    sliders = root.locator('input[data-control^="strength-"]:visible')
    names = [sliders.nth(k).get_attribute("data-control") for k in range(sliders.count())]
    assert names, "no question to move"
    for name in names:
        for value in ("0", "2", "0.35", "1"):
            control(root, name).fill(value)
            found = expect_explorer(root, f"{name} at {value}")
            if name == names[0] and value == "0":
                n = len(found["example"]["tokens"])
                wait_for_text(root, "top-weight", four_decimals(1 / n), "first question off")

    # positions on and off, with the words as written: nothing to compare yet
    control(root, "positions").check()
    expect_explorer(root, "positions on")
    control(root, "positions").uncheck()
    expect_explorer(root, "positions off")

    # the order: shuffled, the outputs follow their words; with positions they do not
    click_order(root, "shuffle", "no positions")
    control(root, "positions").check()
    moved = expect_explorer(root, "shuffled, positions on")
    assert min(moved["shifts"]) > 1e-3, moved["shifts"]
    click_order(root, "shuffle", "positions on")
    click_order(root, "reverse", "positions on")
    control(root, "positions").uncheck()
    click_order(root, "reverse", "no positions")

    # every other sentence, its questions and a shuffle
    for index in range(1, len(examples)):
        control(root, "example").select_option(str(index))
        found = expect_explorer(root, f"sentence {index}")
        assert found["query"] == examples[index]["query"]
        assert found["order"] == list(range(len(examples[index]["tokens"])))
        names = root.locator('input[data-control^="strength-"]:visible')
        for k in range(names.count()):
            name = names.nth(k).get_attribute("data-control")
            control(root, name).fill("0")
            expect_explorer(root, f"sentence {index}, {name} off")
            control(root, name).fill("1")
        click_order(root, "shuffle", f"sentence {index}")
        control(root, "query").select_option("0")
        expect_explorer(root, f"sentence {index}, first word, shuffled")

    # reset: the first sentence as it opened
    root.locator('input[data-control^="strength-"]:visible').first.fill("0.5")  # to be reset
    control(root, "reset").click()
    state = expect_explorer(root, "after reset")
    assert state["example"]["name"] == examples[0]["name"] and state["positions"] == start_positions
    assert state["query"] == examples[0]["query"] and (state["strengths"] == 1).all()
    assert state["order"] == list(range(len(examples[0]["tokens"])))


def check_chapter_story(root) -> None:
    """The chapter's lesson in the page: 'it' reads 'cat'; 'animal' when tired, 'street' when
    narrow (0.9562); the second sentence is the tired one."""
    wait_for_text(root, "top", ["cat"], "as it opens")
    assert text(root, "top-weight") == "0.6528"
    for index, referent in ((1, "animal"), (2, "street")):
        control(root, "example").select_option(str(index))
        wait_for_text(root, "top", [referent], f"sentence {index}")
        assert text(root, "top-weight") == "0.9562"
    control(root, "reset").click()
    wait_for_text(root, "top", ["cat"], "after reset")


# --- a page made here, and the book's page ------------------------------------------------------


@pytest.fixture(scope="module")
def qkv_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A page with the explorer on the chapter's data, outside the book, on 127.0.0.1."""
    with serve_page(tmp_path_factory, "qkv-explorer", [qkv_live(*chapter_sentences()).data]) as url:
        yield url


@pytest.mark.parametrize("where", ["standalone", "book"])
def test_qkv_explorer_computes_what_the_oracle_does(
    request: pytest.FixtureRequest, watched_page: WatchedPage, screenshots: Path, where: str
) -> None:
    url = explorer_page_url(request, where, CHAPTER_PAGE, "qkv_url")
    root = mounted(watched_page.page, HOOK, url)
    check_chapter_story(root)
    check_qkv_explorer(root)
    if where == "standalone":
        control(root, "positions").check()
        control(root, "shuffle").click()
        expect_explorer(root, "for the picture")
        root.screenshot(path=str(screenshots / "06_explorer_1280.png"))
    watched_page.watch.assert_clean(f"explorer qkv ({where})", scripts_only=True)


def assert_fits(page, root, what: str) -> None:
    """Nothing wider than the phone, nothing sticking out of the explorer, text readable."""
    assert_fits_phone(page, root, what)
    smallest = root.evaluate(
        """(root) => Math.min(...Array.from(root.querySelectorAll("td, th, label, p, span"))
            .filter((el) => el.getClientRects().length > 0 && el.textContent.trim())
            .map((el) => parseFloat(getComputedStyle(el).fontSize)))"""
    )
    assert smallest >= SMALLEST_TEXT_PX, f"{what}: text as small as {smallest}px"


@pytest.mark.parametrize("where", ["standalone", "book"])
def test_qkv_explorer_fits_a_phone_and_says_what_it_shows_without_javascript(
    request: pytest.FixtureRequest, browser, screenshots: Path, where: str
) -> None:
    """At 375 px nothing scrolls sideways, for every sentence; with JavaScript off, the
    snapshot names the numbers the explorer shows."""
    url = explorer_page_url(request, where, CHAPTER_PAGE, "qkv_url")
    with fresh_page(browser, viewport=PHONE) as page:
        root = mounted(page, HOOK, url, what=f"phone width ({where})")
        assert_fits(page, root, "as it opens")
        firsts = []
        examples = json.loads(root.get_attribute("data-examples"))
        for index in range(len(examples)):
            control(root, "example").select_option(str(index))
            expect_explorer(root, f"phone, sentence {index}")
            firsts.append((text(root, "top-weight"), text(root, "top")))
            control(root, "shuffle").click()
            expect_explorer(root, f"phone, sentence {index}, shuffled")
            assert_fits(page, root, f"sentence {index}, shuffled")
        control(root, "reset").click()
        control(root, "positions").check()
        control(root, "reverse").click()
        reversed_shift = expect_explorer(root, "phone, reversed with positions")
        placed = text(root, "shift-outputs")
        assert reversed_shift["shifts"][0] > 1e-3
        if where == "standalone":
            page.screenshot(path=str(screenshots / "06_explorer_375.png"), full_page=True)
    [snapshot] = no_script_texts(browser, url, HOOK)
    for weight, word in firsts:
        phrase = f"puts its largest weight, {weight}, on \u201c{word}\u201d"
        assert phrase in snapshot, f"the snapshot does not say {phrase!r}: {snapshot}"
    phrase = f"with positions added as well, it moves by up to {placed}"
    assert phrase in snapshot, f"the snapshot does not say {phrase!r}: {snapshot}"
    assert "stays the same, to rounding" in snapshot


# --- JupyterLab, on a trusted copy of the chapter with its stored outputs ----------------------


def test_qkv_explorer_in_jupyterlab_on_the_stored_chapter(
    lab: Lab,  # noqa: F811 (test_jupyterlab's fixture, imported above)
    watched_page: WatchedPage,
    screenshots: Path,
) -> None:
    """The stored output of the trusted chapter mounts the explorer in JupyterLab, without
    running a cell; every control recomputes there, and the keyboard reaches its sliders."""
    before = CHAPTER.read_bytes()
    page = watched_page.page
    open_stored(lab, page, CHAPTER, "qkv")
    root = mounted(page, f".jp-OutputArea-output {HOOK}", what="the chapter's outputs")
    check_chapter_story(root)
    check_qkv_explorer(root)
    # The keyboard moves the explorer's own slider, not JupyterLab's command-mode shortcuts.
    slider = control(root, "strength-0")
    slider.focus()
    slider.press("ArrowLeft")
    assert float(slider.input_value()) == pytest.approx(0.95)
    expect_explorer(root, "Lab, keyboard")
    root.scroll_into_view_if_needed()
    page.screenshot(path=str(screenshots / "jupyterlab_06.png"))
    watched_page.watch.assert_clean("JupyterLab", scripts_only=True)
    assert CHAPTER.read_bytes() == before, f"{CHAPTER} changed during the test"
