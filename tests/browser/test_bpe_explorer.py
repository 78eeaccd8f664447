"""Chapter 11's kernel-free explorer: byte-pair encoding applied merge by merge in the browser.

It is tested on a small page made here from ``attnlib`` (always), on the chapter's book page
(skipped while that page is not in ``_build/html``) and in JupyterLab, in a trusted copy of the
stored chapter (not run again). :func:`check_bpe_explorer` types text, moves every control and
compares the chips with :func:`attnlib.reference.bpe_steps` after every move (whose final
tokens ``tests/test_live_bpe.py`` checks against attnlib's own). On a phone the explorer fits
the screen; with JavaScript off, the page says what it would show; a pasted 200,000-character
word never keeps the page busy for long.
"""

from __future__ import annotations

import statistics
from collections.abc import Iterator
from pathlib import Path

import pytest

from attnlib import reference
from attnlib.data.bpe import ARTICLE_MERGES
from attnlib.live.bpe_explorer import bpe_live, real_words, shipped_tokenizer

from .conftest import ROOT, WatchedPage, explorer_page_url
from .helpers import (
    PHONE,
    assert_nothing_sticks_out,
    assert_page_within,
    fresh_page,
    mounted,
    no_script_texts,
    serve_page,
)
from .test_jupyterlab import lab, open_stored, wait_for_idle_kernel  # noqa: F401

CHAPTER = ROOT / "notebooks" / "11_tokenization_bpe.ipynb"
CHAPTER_PAGE = "notebooks/11_tokenization_bpe"
HOOK = '.attnlib-live[data-explorer="bpe"]'
# A sentence for every part of the pipeline: capitals, punctuation, an accent, a word the toy
# merges cut, an emoji (no token: [UNK]) and a special token typed as text.
TYPED = "The lowest, NEWEST café: lovingly \U0001f600 [MASK] widest"
LONG_WORD = ("supercalifragilisticexpialidocious" * 6000)[:200_000]
# Keystrokes must not keep the page busy longer than this (ms), and no slice of the merging
# that follows either.
KEYSTROKE_MS = 100
LEAST_FONT_PX = 11
CHAPTER_BYTES = CHAPTER.read_bytes()  # never written


def control(root, name: str):
    return root.locator(f'[data-control="{name}"]')


def readout(root, name: str):
    return root.locator(f'[data-readout="{name}"]')


def merges_of(vocabulary: str) -> list[tuple[str, str]]:
    return ARTICLE_MERGES if vocabulary == "toy" else shipped_tokenizer().merges


def oracle(vocabulary: str, text: str) -> tuple[list[str], list[reference.BpeStep]]:
    """The starting symbols (flat) and every step of ``text``, from attnlib.reference."""
    if vocabulary == "toy":
        words = reference.bpe_words(text)
    else:
        words = real_words(shipped_tokenizer(), text)
    return [s for word in words for s in word], reference.bpe_steps(words, merges_of(vocabulary))


def final_tokens(vocabulary: str, text: str) -> list[str]:
    start, steps = oracle(vocabulary, text)
    return tokens_after(start, steps, len(steps))


def tokens_after(start: list[str], steps: list[reference.BpeStep], step: int) -> list[str]:
    return start if step == 0 else [token for word in steps[step - 1].words for token in word]


def chips(root) -> list[str]:
    return (
        readout(root, "tokens")
        .locator(".al-token")
        .evaluate_all("(chips) => chips.map((chip) => chip.dataset.token)")
    )


def fresh(root) -> list[bool]:
    return (
        readout(root, "tokens")
        .locator(".al-token")
        .evaluate_all("(chips) => chips.map((chip) => chip.classList.contains('al-fresh'))")
    )


def expect_chips(root, want: list[str], what: str, timeout: float = 10_000) -> None:
    """Wait until the explorer is ready and its chips are ``want``."""
    page = root.page
    left = timeout
    while True:
        ready = root.get_attribute("data-state") == "ready"
        shown = chips(root)
        if ready and shown == want:
            return
        if left <= 0:
            raise AssertionError(f"{what}: chips {shown[:40]}, expected {want[:40]}")
        page.wait_for_timeout(100)
        left -= 100


def set_step(root, step: int) -> None:
    control(root, "step").evaluate(
        "(slider, value) => { slider.value = String(value); "
        "slider.dispatchEvent(new Event('input', {bubbles: true})); }",
        step,
    )


def expect_step(root, vocabulary: str, text: str, step: int, what: str) -> None:
    """Chips, counts and the merge named at ``step``, as the oracle has them."""
    start, steps = oracle(vocabulary, text)
    want = tokens_after(start, steps, step)
    expect_chips(root, want, f"{what}: step {step}")
    assert readout(root, "step").inner_text() == f"{step} of {len(steps)}", what
    assert readout(root, "tokens-count").inner_text() == f"{len(want):,}", what
    assert readout(root, "start-count").inner_text() == f"{len(start):,}", what
    assert readout(root, "characters").inner_text() == f"{len(text):,}", what
    if step:
        merge = steps[step - 1]
        shown = readout(root, "merge").inner_text()
        assert f"merge {merge.rank + 1} of the learned list, {' + '.join(merge.pair)}" in shown
        assert sum(fresh(root)) == merge.places, f"{what}: highlighted chips at step {step}"
        made = "".join(merge.pair)
        assert all(token == made for token, new in zip(want, fresh(root), strict=True) if new)
    else:
        assert not any(fresh(root)), f"{what}: nothing is merged at step 0"


def check_bpe_explorer(root) -> None:
    """Type, pick each vocabulary, move the slider, step back and forward, play and pause."""
    text = root.get_attribute("data-text") or ""
    vocabulary = root.get_attribute("data-vocabulary") or "toy"
    _, steps = oracle(vocabulary, text)
    expect_step(root, vocabulary, text, len(steps), "as it opens")

    other = "toy" if vocabulary == "real" else "real"
    control(root, "vocabulary").select_option(other)
    expect_step(root, other, text, len(oracle(other, text)[1]), f"the opening text, {other}")

    control(root, "text").fill(TYPED)
    expect_step(root, other, TYPED, len(oracle(other, TYPED)[1]), f"typed, {other}")
    for name in ("toy", "real"):
        control(root, "vocabulary").select_option(name)
        start, steps = oracle(name, TYPED)
        expect_step(root, name, TYPED, len(steps), f"typed, {name}")
        assert root.get_attribute("data-steps") == str(len(steps))
    assert chips(root) == shipped_tokenizer().tokens(TYPED), "the real tokenizer's own tokens"

    middle = len(steps) // 2
    for step in (0, middle, 1):
        set_step(root, step)
        expect_step(root, "real", TYPED, step, "the slider")
    assert control(root, "back").is_disabled() is False
    control(root, "back").click()
    expect_step(root, "real", TYPED, 0, "back")
    assert control(root, "back").is_disabled()
    control(root, "forward").click()
    control(root, "forward").click()
    expect_step(root, "real", TYPED, 2, "forward twice")
    set_step(root, len(steps))
    assert control(root, "forward").is_disabled()

    # Play from the end starts again at step 0 and moves on by itself; pause holds the step.
    control(root, "play").click()
    root.page.wait_for_function(
        "(root) => Number(root.dataset.shownStep) >= 2", arg=root.element_handle(), timeout=15_000
    )
    control(root, "play").click()
    held = int(root.get_attribute("data-shown-step") or -1)
    assert 2 <= held < len(steps), held
    expect_step(root, "real", TYPED, held, "paused")
    root.page.wait_for_timeout(1_500)
    assert int(root.get_attribute("data-shown-step") or -1) == held, "pause did not hold"


@pytest.fixture(scope="module")
def bpe_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A page with the explorer at its defaults, outside the book, on 127.0.0.1."""
    with serve_page(tmp_path_factory, "bpe-explorer", [bpe_live().data]) as url:
        yield url


@pytest.mark.parametrize("where", ["standalone", "book"])
def test_bpe_explorer_cuts_text_as_attnlib_does(
    request: pytest.FixtureRequest, watched_page: WatchedPage, screenshots: Path, where: str
) -> None:
    url = explorer_page_url(request, where, CHAPTER_PAGE, "bpe_url")
    root = mounted(watched_page.page, HOOK, url)
    check_bpe_explorer(root)
    if where == "standalone":
        set_step(root, 3)
        root.screenshot(path=str(screenshots / "11_explorer_1280.png"))
    watched_page.watch.assert_clean(f"explorer bpe ({where})", scripts_only=True)


@pytest.mark.parametrize("where", ["standalone", "book"])
def test_bpe_explorer_fits_a_phone_and_says_what_it_shows_without_javascript(
    request: pytest.FixtureRequest, browser, screenshots: Path, where: str
) -> None:
    """At 375 px nothing scrolls sideways and the chips stay readable; with JavaScript off, the
    snapshot names the step and token count the explorer opens with."""
    url = explorer_page_url(request, where, CHAPTER_PAGE, "bpe_url")
    with fresh_page(browser, viewport=PHONE) as page:
        root = mounted(page, HOOK, url)
        vocabulary = root.get_attribute("data-vocabulary") or "toy"
        typed = TYPED + " " + LONG_WORD[:300]  # a long word must wrap
        control(root, "text").fill(typed)
        expect_chips(root, final_tokens(vocabulary, typed), "on a phone")
        assert_page_within(page, PHONE["width"] + 1, "on a phone")
        assert_nothing_sticks_out(root, "on a phone")
        sizes = (
            readout(root, "tokens")
            .locator(".al-token")
            .evaluate_all(
                "(chips) => chips.map((chip) => parseFloat(getComputedStyle(chip).fontSize))"
            )
        )
        assert sizes and min(sizes) >= LEAST_FONT_PX, f"chip text {min(sizes)} px"
        if where == "standalone":
            opening = root.get_attribute("data-text") or ""
            control(root, "text").fill(opening)
            expect_chips(root, final_tokens(vocabulary, opening), "back to the opening text")
            root.screenshot(path=str(screenshots / "11_explorer_375.png"))
        page.reload(wait_until="load")
        root = page.locator(f"{HOOK}[data-mounted]")
        expect_step(
            root,
            root.get_attribute("data-vocabulary") or "toy",
            root.get_attribute("data-text") or "",
            int(root.get_attribute("data-steps") or 0),
            "reloaded",
        )
        opens = (
            readout(root, "step").inner_text().split(" of ")[1],
            readout(root, "tokens-count").inner_text(),
        )
    [text] = no_script_texts(browser, url, HOOK)
    phrase = f"after step {opens[0]} of {opens[0]}: {opens[1]} tokens"
    assert phrase in text, f"the snapshot does not say {phrase!r}: {text}"


KEYSTROKE_PROBE = """() => {
  window.bpeProbe = { handler: [], slices: [], long: [] };
  let began = 0;
  window.addEventListener("input", () => { began = performance.now(); }, true);
  window.addEventListener("input", () => {
    window.bpeProbe.handler.push(performance.now() - began);
  });
  const plain = window.setTimeout;
  window.setTimeout = (work, ms) => plain(() => {
    const at = performance.now();
    work();
    window.bpeProbe.slices.push(performance.now() - at);
  }, ms);
  new PerformanceObserver((list) => {
    list.getEntries().forEach((entry) => window.bpeProbe.long.push(entry.duration));
  }).observe({ type: "longtask" });
}"""


def test_a_200000_character_word_never_blocks_typing(watched_page: WatchedPage, bpe_url) -> None:
    """Each keystroke in a 200,000-character word returns at once; the merging that follows
    runs in short slices; the result is the real tokenizer's."""
    page = watched_page.page
    root = mounted(page, HOOK, f"{bpe_url}index.html")
    control(root, "vocabulary").select_option("real")
    page.evaluate(KEYSTROKE_PROBE)
    control(root, "text").evaluate(
        "(box, text) => { box.value = text; "
        "box.dispatchEvent(new Event('input', {bubbles: true})); }",
        LONG_WORD[:-3],
    )
    page.wait_for_selector(f'{HOOK}[data-state="ready"]', timeout=60_000)
    control(root, "text").focus()
    page.keyboard.press("End")
    for key in LONG_WORD[-3:]:
        page.keyboard.press(key)
    page.wait_for_selector(f'{HOOK}[data-state="ready"]', timeout=60_000)
    tokens = shipped_tokenizer().tokens(LONG_WORD)
    assert control(root, "text").input_value() == LONG_WORD
    assert readout(root, "tokens-count").inner_text() == f"{len(tokens):,}"
    shown = chips(root)
    assert shown == tokens[: len(shown)] and 100 <= len(shown) < len(tokens)
    assert f"{len(tokens) - len(shown):,} more tokens" in readout(root, "more").inner_text()
    probe = page.evaluate("() => window.bpeProbe")
    handler, slices = probe["handler"], probe["slices"]
    report = (
        f"input handler {max(handler):.0f} ms at most; {len(slices)} slices, median "
        f"{statistics.median(slices):.0f} ms, longest {max(slices):.0f} ms; long tasks "
        f"{sorted(round(x) for x in probe['long'])[-5:]} ms"
    )
    print(report)
    assert len(handler) == 4 and max(handler) < KEYSTROKE_MS, report
    # A slice's wall time includes whatever else the machine runs (a busy 2-core machine can
    # stretch a 15 ms slice to hundreds of ms now and then): the typical slice is judged.
    assert len(slices) > 10 and statistics.median(slices) < KEYSTROKE_MS / 2, report
    assert statistics.quantiles(slices, n=10)[-1] < KEYSTROKE_MS, report
    watched_page.watch.assert_clean("a 200,000-character word", scripts_only=True)


def test_chapter_11_explorer_cuts_text_in_jupyterlab(
    lab,  # noqa: F811 (test_jupyterlab's fixture, imported above)
    watched_page: WatchedPage,
    screenshots: Path,
) -> None:
    """Chapter 11 as stored (a trusted copy, not run again): the explorer in its output."""
    page = watched_page.page
    open_stored(lab, page, CHAPTER, "bpe")
    root = mounted(page, f".jp-OutputArea-output {HOOK}", what="chapter 11's outputs")
    check_bpe_explorer(root)
    # The keyboard reaches the explorer, not JupyterLab's shortcuts: typing and the arrow keys.
    box = control(root, "text")
    box.fill("")
    box.press_sequentially("lowest")
    control(root, "vocabulary").select_option("toy")
    expect_step(root, "toy", "lowest", 5, "typed in JupyterLab")
    slider = control(root, "step")
    slider.focus()
    slider.press("ArrowLeft")
    expect_step(root, "toy", "lowest", 4, "the arrow key")

    wait_for_idle_kernel(page)
    root.scroll_into_view_if_needed()
    page.screenshot(path=str(screenshots / "jupyterlab_11.png"))
    watched_page.watch.assert_clean("JupyterLab", scripts_only=True)
    assert CHAPTER.read_bytes() == CHAPTER_BYTES, f"{CHAPTER} changed during the test"
