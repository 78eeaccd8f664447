"""Chapter 10's kernel-free explorers (the stack, and LayerNorm against BatchNorm) in a browser.

Each is tested on a small page made here from ``attnlib`` (always), on the chapter's book page
(skipped while that page is not in ``_build/html``) and in JupyterLab, in a trusted copy of the
stored notebook (the chapter is not run again). Every control is moved, and after each move the
numbers shown are compared with :mod:`attnlib.reference` in float64 (which
``tests/test_live_stack.py`` checks against torch and attnlib): each table cell's title holds
the whole number, its text the rounded one. On a phone the explorers fit the screen; with
JavaScript off, the page says what they would show.
"""

from __future__ import annotations

import json
import math
import time
from collections.abc import Callable, Iterator
from functools import cache
from pathlib import Path

import numpy as np
import pytest

from attnlib import reference
from attnlib.live.stack_explorer import INPUT_STDS, norms_live, stack_live

from .conftest import HTML, ROOT, WatchedPage, explorer_page_url
from .helpers import (
    assert_box_within,
    assert_nothing_sticks_out,
    assert_page_within,
    chart_scales,
    fresh_page,
    mounted,
    no_script_texts,
    serve_page,
)
from .test_jupyterlab import Lab, lab, open_stored, wait_for_idle_kernel  # noqa: F401 (fixture)

CHAPTER = ROOT / "notebooks" / "10_transformer_block.ipynb"
CHAPTER_PAGE = "notebooks/10_transformer_block"
STACK = '.attnlib-live[data-explorer="stack"]'
NORMS = '.attnlib-live[data-explorer="norms"]'
# The charts are drawn 360 units wide with 12-unit text: at 0.8 of that, text is 9.6 px.
LEAST_SCALE = 0.8
# A profile of 24 blocks takes about a second in a browser on a busy 2-core machine.
WAIT_S = 30
# Made-up measured profiles for the page made here (the chapter passes its own).
MEASURED = {
    "post-LN": {"W_2": [0.6, 0.54, 0.42, 0.65], "cosine": [0.13, 0.88, 0.997, 1.0]},
    "pre-LN": {"W_2": [0.67, 0.31, 0.2, 0.14], "cosine": [0.12, 0.58, 0.75, 0.86]},
}


def control(root, name: str):
    return root.locator(f'[data-control="{name}"]')


def readout(root, name: str):
    return root.locator(f'[data-readout="{name}"]')


def shown_table(root, name: str) -> tuple[np.ndarray, list[str]]:
    """A readout table's numbers (from each cell's title) and its cells' texts."""
    cells = readout(root, name).locator("td")
    titles = cells.evaluate_all("(tds) => tds.map((td) => Number(td.title))")
    return np.array(titles, dtype=np.float64), [t.strip() for t in cells.all_inner_texts()]


def wait_until(check: Callable[[], str | None], what: str) -> None:
    """Poll ``check`` (None when all is right, else what is wrong) for up to WAIT_S seconds."""
    deadline = time.monotonic() + WAIT_S
    while True:
        wrong = check()
        if wrong is None:
            return
        if time.monotonic() > deadline:
            raise AssertionError(f"{what}: {wrong}")
        time.sleep(0.1)


def compare(root, name: str, want: np.ndarray, rtol: float, text: Callable[[float], str]):
    """None if the table ``name`` holds ``want`` (row-major) and shows it as ``text`` does."""
    if readout(root, name).count() != 1:
        return f"{readout(root, name).count()} tables {name!r}"
    got, texts = shown_table(root, name)
    want = np.ravel(np.asarray(want, dtype=np.float64))
    if got.shape != want.shape or not np.allclose(got, want, rtol=rtol, atol=rtol):
        return f"{name}: shown {got.tolist()}, expected {want.tolist()}"
    if texts != [text(x) for x in want]:
        return f"{name}: texts {texts}, expected {[text(x) for x in want]}"
    return None


# --- the stack ----------------------------------------------------------------------------------


@cache
def profile(norm_first: bool, depth: int, seed: int, std: float) -> dict[str, np.ndarray]:
    return reference.stack_profile(norm_first, depth, seed, std)


def significant(x: float) -> str:
    """As stack_explorer.js prints a profile's number: 4 significant digits."""
    if x != 0 and (abs(x) < 1e-3 or abs(x) >= 1e5):
        mantissa, exponent = f"{x:.2e}".split("e")
        return f"{mantissa}e{int(exponent):+d}"
    return f"{float(f'{x:.4g}')!r}".removesuffix(".0")


def ends(values) -> list[float]:
    return [values[0], values[-1], values[0] / values[-1]]


def expect_stack(root, depth: int, quantity: str, seed: int, std: float) -> None:
    """The controls' echoes, the computed profile and the measured one, as the oracle has them."""
    measured = json.loads(root.get_attribute("data-measured") or "null")
    want = [ends(profile(nf, depth, seed, std)[quantity]) for nf in (False, True)]

    def check() -> str | None:
        echoes = {name: readout(root, name).inner_text() for name in ("depth", "seed", "input-std")}
        if echoes != {"depth": str(depth), "seed": str(seed), "input-std": f"{std:g}"}:
            return f"echoes {echoes}"
        if control(root, "quantity").input_value() != quantity:
            return f"quantity {control(root, 'quantity').input_value()}"
        wrong = compare(root, "profile", want, 1e-10, significant)
        if wrong:
            return wrong
        lines = readout(root, "chart").locator("polyline")
        points = lines.evaluate_all("(ls) => ls.map((l) => l.getAttribute('points').split(' '))")
        if [len(p) for p in points] != [depth, depth]:
            return f"the chart has {[len(p) for p in points]} points per line, expected {depth}"
        if measured and quantity in measured["post-LN"]:
            chapter = [ends(measured[order][quantity]) for order in ("post-LN", "pre-LN")]
            return compare(root, "measured-profile", chapter, 1e-12, significant)
        if (
            measured
            and "chapter's run did not record" not in readout(root, "measured-profile").inner_text()
        ):
            return "no note that the chapter did not measure this"
        return None

    wait_until(check, f"stack, {depth} blocks, {quantity}, draw {seed}, input std {std:g}")


def check_stack_explorer(root) -> None:
    """Move every control of the stack explorer; check the numbers after each move."""
    depth = int(root.get_attribute("data-depth"))
    quantity = root.get_attribute("data-quantity")
    seed = int(root.get_attribute("data-seed"))
    std = float(root.get_attribute("data-input-std"))
    expect_stack(root, depth, quantity, seed, std)
    for name in ("cosine", "stream std", "W_Q", "all", "stream gradient"):
        control(root, "quantity").select_option(name)
        expect_stack(root, depth, name, seed, std)
    control(root, "depth").fill("3")
    expect_stack(root, 3, "stream gradient", seed, std)
    control(root, "seed").fill("7")
    expect_stack(root, 3, "stream gradient", 7, std)
    control(root, "input-std").fill(str(INPUT_STDS.index(16.0)))
    expect_stack(root, 3, "stream gradient", 7, 16.0)
    control(root, "quantity").select_option("W_2")
    control(root, "depth").fill("24")
    expect_stack(root, 24, "W_2", 7, 16.0)
    # the chapter's lesson, live: post-LN's W_Q gradient vanishes towards the top of 24 blocks
    control(root, "input-std").fill(str(INPUT_STDS.index(1.0)))
    control(root, "quantity").select_option("W_Q")
    expect_stack(root, 24, "W_Q", 7, 1.0)
    got, _ = shown_table(root, "profile")
    assert got[2] > 1e3, f"post-LN W_Q, block 1 / block 24 = {got[2]}"


# --- LayerNorm against BatchNorm ------------------------------------------------------------------


def fixed2(x: float) -> str:
    text = f"{x:.2f}"
    return "0.00" if text == "-0.00" else text


def expect_norms(root, batch: np.ndarray, used: int, example: int, exponent: float) -> None:
    """Every table of the normalisation explorer, as the oracle computes it."""
    scaled = batch[:used].copy()
    scaled[example] *= 10.0**exponent
    row_mean, row_std = reference.norm_statistics(scaled, 1)
    column_mean, column_std = reference.norm_statistics(scaled, 0)
    layer, batch_norm = reference.layer_norm(scaled), reference.batch_norm(scaled)
    tables = {
        "input": scaled,
        "row-stats": np.stack([row_mean, row_std], axis=1),
        "column-stats": np.stack([column_mean, column_std]),
        "layer-norm": layer,
        "layer-norm-check": np.stack(reference.norm_statistics(layer, 1), axis=1),
        "batch-norm": batch_norm,
        "batch-norm-check": np.stack(reference.norm_statistics(batch_norm, 0)),
    }

    def check() -> str | None:
        if not readout(root, "error").is_hidden():
            return f"error shown: {readout(root, 'error').inner_text()}"
        if readout(root, "used").inner_text() != str(used):
            return f"batch size shown {readout(root, 'used').inner_text()}"
        if control(root, "example").input_value() != str(example):
            return f"example {control(root, 'example').input_value()}"
        for name, want in tables.items():
            # the browser's sums run in another order: round-off, relative to the batch's size
            wrong = compare(root, name, want, 1e-12 * max(1.0, np.abs(scaled).max()), fixed2)
            if wrong:
                return wrong
        if readout(root, "batch-of-one").is_hidden() != (used > 1):
            return "the batch-of-one note is shown for a batch of more than one, or hidden for one"
        return None

    wait_until(check, f"norms, {used} examples, example {example} scaled by 10^{exponent}")


def check_norms_explorer(root) -> None:
    """Move every control of the normalisation explorer; check the numbers after each move."""
    batch = np.array(json.loads(root.get_attribute("data-batch")), dtype=np.float64)
    used = int(root.get_attribute("data-used"))
    example = int(root.get_attribute("data-example"))
    exponent = float(root.get_attribute("data-scale"))
    expect_norms(root, batch, used, example, exponent)
    control(root, "scale").fill("2")
    expect_norms(root, batch, used, example, 2.0)
    # scaling an example leaves its LayerNorm output and changes everyone's BatchNorm output
    ln, _ = shown_table(root, "layer-norm")
    want = reference.layer_norm(batch[:used])
    assert np.allclose(ln.reshape(want.shape)[example], want[example], atol=1e-6)
    other = (example + 1) % used
    control(root, "example").select_option(value=str(other))
    expect_norms(root, batch, used, other, 2.0)
    control(root, "scale").fill("-1.5")
    expect_norms(root, batch, used, other, -1.5)
    control(root, "used").fill("1")
    expect_norms(root, batch, 1, 0, -1.5)
    bn, _ = shown_table(root, "batch-norm")
    assert np.array_equal(bn, np.zeros(batch.shape[1])), f"BatchNorm of one example: {bn}"
    editor = control(root, "batch")
    editor.fill("1 2 3\n4, 6, 11\n-5 0 2.5")
    control(root, "used").fill("3")
    control(root, "scale").fill("0")
    control(root, "example").select_option(value="1")
    typed = np.array([[1, 2, 3], [4, 6, 11], [-5, 0, 2.5]], dtype=np.float64)
    expect_norms(root, typed, 3, 1, 0.0)
    editor.fill("1 2 3\n4 five 6")
    wait_until(
        lambda: (
            None
            if 'example 2: "five" is not a number' in readout(root, "error").inner_text()
            else f"error: {readout(root, 'error').inner_text()!r}"
        ),
        "a typo in the batch",
    )
    control(root, "reset").click()
    expect_norms(root, batch, used, example, exponent)


# --- the pages ------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def stack_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A page with both explorers at their defaults (the stack with made-up measured
    profiles), outside the book, on 127.0.0.1."""
    with serve_page(
        tmp_path_factory, "stack-explorer", [norms_live().data, stack_live(MEASURED, depth=4).data]
    ) as url:
        yield url


CHECKS = {"stack": (STACK, check_stack_explorer), "norms": (NORMS, check_norms_explorer)}


def page_url(request: pytest.FixtureRequest, where: str) -> str:
    """The page to test; the book's is skipped while it was built before the explorers."""
    url = explorer_page_url(request, where, CHAPTER_PAGE, "stack_url")
    if where == "book":
        built = (HTML / f"{CHAPTER_PAGE}.html").read_text(encoding="utf-8")
        if 'data-explorer="stack"' not in built or 'data-explorer="norms"' not in built:
            pytest.skip(f"{CHAPTER_PAGE}.html in {HTML} predates the explorers: rebuild the book")
    return url


@pytest.mark.parametrize("explorer", ["norms", "stack"])
@pytest.mark.parametrize("where", ["standalone", "book"])
def test_explorer_computes_what_the_oracle_does(
    request: pytest.FixtureRequest, watched_page: WatchedPage, where: str, explorer: str
) -> None:
    url = page_url(request, where)
    hook, check = CHECKS[explorer]
    root = mounted(watched_page.page, hook, url)
    check(root)
    watched_page.watch.assert_clean(f"explorer {explorer} ({where})", scripts_only=True)


@pytest.mark.parametrize("where", ["standalone", "book"])
def test_explorers_fit_1280_and_a_phone(
    request: pytest.FixtureRequest, browser, screenshots: Path, where: str
) -> None:
    """At 1280 and 375 px nothing scrolls sideways and the charts keep readable text."""
    url = page_url(request, where)
    for width in (1280, 375):
        with fresh_page(browser, viewport={"width": width, "height": 900}) as page:
            page.goto(url, wait_until="load")
            for explorer, (hook, _) in CHECKS.items():
                what = f"{explorer} at {width} px ({where})"
                root = mounted(page, hook, what=what)
                assert_box_within(root, width + 1, what)
                assert_nothing_sticks_out(root, what)
                if where == "standalone":
                    name = "10_explorer" if explorer == "stack" else "10_norms_explorer"
                    root.screenshot(path=str(screenshots / f"{name}_{width}.png"))
            scales = chart_scales(page)
            assert len(scales) >= 2 and min(scales) >= LEAST_SCALE, f"charts shrunk to {scales}"
            fonts = page.evaluate(
                """() => Array.from(document.querySelectorAll(".attnlib-live td"))
                    .map((td) => parseFloat(getComputedStyle(td).fontSize))"""
            )
            assert min(fonts) >= 11, f"table text at {min(fonts)} px"
            assert_page_within(page, width, f"at {width} px ({where})")


def test_without_javascript_the_snapshots_say_what_they_would_show(browser, stack_url) -> None:
    stack, norms = no_script_texts(browser, f"{stack_url}index.html", STACK, NORMS)
    post, pre = (profile(nf, 4, 0, 1.0)["W_2"] for nf in (False, True))
    assert f"post-LN {post[0]:.4g} at block 1 and {post[-1]:.4g} at block 4" in stack, stack
    assert f"pre-LN {pre[0]:.4g} at block 1 and {pre[-1]:.4g} at block 4" in stack, stack
    assert "its own mean (7.16, 7.43, 7.52)" in norms, norms
    assert "means (-0.03, 5.53, 1.30, 29.31, 1.23, 6.89)" in norms, norms


def test_significant_prints_as_the_page_does() -> None:
    """The checks' own formatter: JavaScript's String(Number(x.toPrecision(4))) and
    toExponential(2) for the tiny and the huge."""
    assert [significant(x) for x in (18.412, 5.0, 0.1433, 2.4e-7, 123456.0)] == [
        "18.41",
        "5",
        "0.1433",
        "2.40e-7",
        "1.23e+5",
    ]
    assert math.isclose(float(significant(2.4e-7)), 2.4e-7)


# --- JupyterLab: the stored chapter, trusted, not run again ------------------------------------


def test_chapter_10_explorers_recompute_in_jupyterlab(
    lab: Lab,  # noqa: F811 (the fixture imported above)
    watched_page: WatchedPage,
    screenshots: Path,
) -> None:
    page = watched_page.page
    before = CHAPTER.read_bytes()
    open_stored(lab, page, CHAPTER, "stack")
    for hook, check in CHECKS.values():
        check(mounted(page, f".jp-OutputArea-output {hook}", what="chapter 10's outputs"))
    # the keyboard reaches the explorer's own slider, not JupyterLab's shortcuts
    slider = page.locator(f".jp-OutputArea-output {STACK} [data-control='seed']")
    before_value = slider.input_value()
    slider.focus()
    slider.press("ArrowRight" if before_value != slider.get_attribute("max") else "ArrowLeft")
    assert slider.input_value() != before_value, "the arrow key did not move the draw slider"
    # Enter types a line break in the batch, instead of running the cell
    editor = page.locator(f".jp-OutputArea-output {NORMS} [data-control='batch']")
    editor.fill("1 2")
    editor.press("End")
    editor.press("Enter")
    editor.type("3 5")
    assert editor.input_value() == "1 2\n3 5"
    wait_for_idle_kernel(page)
    page.locator(f".jp-OutputArea-output {STACK}").scroll_into_view_if_needed()
    page.screenshot(path=str(screenshots / "jupyterlab_10.png"))
    watched_page.watch.assert_clean("JupyterLab", scripts_only=True)
    assert CHAPTER.read_bytes() == before, f"{CHAPTER} changed"
