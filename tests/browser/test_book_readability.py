"""Can the book be read? Every page of the built book, measured in Chromium (`make book` first).

- At 1280 px: no display equation is wider than its column (the theme clips div.math, so a wide
  formula was cut off); no inline formula is clipped; no explorer (``.attnlib-live``) hides part
  of itself behind a horizontal scroll.
- At 375 px (a phone): the page is no wider than the screen, and no inline formula is clipped.
  Display equations may scroll there, inside their own box (``book_static/attnbook.css``).
- Figures: each output image's rendered scale (shown width / natural width) and the size that
  matplotlib's default 10-pt text gets on screen (10 pt x dpi/72 x scale, in CSS pixels: the
  font size, of which capitals are about 0.7); every figure opens at full size on a click
  (``book_static/attnbook.js``), with no kernel and nothing fetched. Figures whose 10-pt text is
  below ``LEGIBLE_PX`` at 1280 px are counted per chapter against ``SMALL_FIGURES``, a ratchet:
  more fails, fewer fails too (so that the allowance comes down once a chapter's figures are
  enlarged, which takes code-cell changes and re-executed outputs).

- At 1280 px the text column is at least ``MIN_COLUMN_1280`` px wide, and no program output is
  taller than ``MAX_OUTPUT_PX``: a longer one scrolls in its own box (``attnbook.css``). Code
  cells wider than the column are counted (``code_1280.json``), not failed.
- At 375 px every figure's 10-pt text is at least ``LEGIBLE_PX``: a figure that would shrink
  below that keeps its legible width in a box that scrolls sideways (``attnbook.js``).
- On both screens, every box that scrolls (a wide equation, an explorer's table, a long output,
  a code cell, a figure's box) says so: a fade (a CSS mask) at the edge with more behind it.

Folded cells (solutions) are unfolded first, so what they hold is measured too. Every
measurement is written to ``_build/readability/<book folder>/<check>.json``, and screenshots to
``_build/screenshots/readability/<book folder>/``; ``BROWSER_TEST_BOOK=<folder>`` measures
another build (an older one, to compare).
"""

from __future__ import annotations

import base64
import html
import json
import re
import struct
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from .conftest import HTML, ROOT, SCREENSHOTS, WatchedPage, open_watched
from .helpers import toc_docnames, wait_for_mathjax, wait_for_widgets

if TYPE_CHECKING:
    from playwright.sync_api import Browser, Page

DOCNAMES = toc_docnames()
DESKTOP = {"width": 1280, "height": 900}
PHONE = {"width": 375, "height": 812}
# Figure text at or above this many CSS pixels (font size of 10-pt text) counts as legible.
LEGIBLE_PX = 9.0
# Matplotlib's default font size, in points: tick labels, legends, axis labels.
DEFAULT_FONT_PT = 10.0
# Figures per chapter whose 10-pt text renders below LEGIBLE_PX at 1280 px, as built now. Their
# sizes are set by code cells (figsize, panels per row, dpi); when a chapter's figures are made
# bigger and its outputs re-executed, lower its number (the test says to what).
SMALL_FIGURES: dict[str, int] = {}  # chapters not listed must have none
# The text column at 1280 px (the theme's was 684 px; attnbook.css widens it to 776 px).
MIN_COLUMN_1280 = 760
# The tallest a program output may be: attnbook.css bounds it at 32rem (512 px) plus its padding.
MAX_OUTPUT_PX = 540
REPORTS = ROOT / "_build" / "readability" / HTML.name
SHOTS = SCREENSHOTS / "readability" / HTML.name
# Places worth a screenshot before and after a change: (page, what, CSS selector, text in it).
SHOTS_1280 = [
    ("notebooks/04_bahdanau_attention", "04_idea_list", "section#the-idea ol", ""),
    (
        "notebooks/05_luong_attention",
        "05_bahdanau_luong",
        "section#the-idea-attend-after-the-step-not-before-it",
        "",
    ),  # noqa: E501
    (
        "notebooks/07_multi_head_attention",
        "07_heads_explorer",
        '.attnlib-live[data-explorer="heads"]',
        "",
    ),  # noqa: E501
    ("notebooks/06_self_attention_qkv", "06_streams", ".cell_output", "steps on the path"),
]
SHOTS_375 = [
    ("notebooks/07_multi_head_attention", "07_learn_375", "article.bd-article ul", "MultiHead"),
    ("notebooks/02_scaled_dot_product", "02_inline_code_375", "article.bd-article p", "torch.nn"),
]


# --- opening a page -----------------------------------------------------------------------------

UNFOLD_JS = """() => {
  document.querySelectorAll("details").forEach((d) => (d.open = true));
  document.querySelectorAll(".toggle-hidden").forEach((e) => e.classList.remove("toggle-hidden"));
  document.querySelectorAll("img").forEach((i) => (i.loading = "eager"));
}"""


def goto(page: Page, url: str) -> None:
    """Open the page, wait for widgets, math and images, and unfold every folded cell."""
    response = page.goto(url, wait_until="load")
    assert response is not None and response.ok, f"{url}: HTTP {response and response.status}"
    wait_for_widgets(page)
    if page.evaluate("() => document.querySelector('.math') !== null"):
        wait_for_mathjax(page)
    page.evaluate(UNFOLD_JS)
    page.wait_for_function("() => Array.from(document.images).every((i) => i.complete)")
    page.evaluate("() => new Promise((done) => requestAnimationFrame(() => setTimeout(done, 50)))")


def save(check: str, docname: str, data: object) -> None:
    """Add ``data`` under ``docname`` to the check's JSON report."""
    REPORTS.mkdir(parents=True, exist_ok=True)
    path = REPORTS / f"{check}.json"
    report = json.loads(path.read_text(encoding="utf-8")) if path.is_file() else {}
    report[docname] = data
    path.write_text(json.dumps(report, indent=1, sort_keys=True) + "\n", encoding="utf-8")


def screenshot(page: Page, name: str, selector: str, text: str = "") -> None:
    """Screenshot the first element matching ``selector`` (and holding ``text``), if any."""
    found = page.locator(selector)
    if text:
        found = found.filter(has_text=text)
    if found.count() == 0:
        return
    SHOTS.mkdir(parents=True, exist_ok=True)
    # A viewport as tall as the element, so the sticky header is not stitched into the picture.
    viewport = page.viewport_size or DESKTOP
    height = found.first.evaluate("(el) => Math.ceil(el.getBoundingClientRect().height)")
    page.set_viewport_size(
        {"width": viewport["width"], "height": max(viewport["height"], height + 100)}
    )  # noqa: E501
    try:
        found.first.screenshot(path=str(SHOTS / f"{name}.png"))
    finally:
        page.set_viewport_size(viewport)


def take_screenshots(page: Page, docname: str, shots: list[tuple[str, str, str, str]]) -> None:
    for name, what, selector, text in shots:
        if name == docname:
            screenshot(page, what, selector, text)


@pytest.fixture
def phone_page(browser: Browser) -> Iterator[WatchedPage]:
    """Like ``watched_page``, at a phone's size (375 x 812 CSS pixels, touch)."""
    with open_watched(browser, viewport=PHONE, device_scale_factor=1, is_mobile=True) as watched:
        yield watched


# --- measurements, in the page ------------------------------------------------------------------

# Display equations: the typeset formula's width against its column (the content box of the
# element holding the div.math), what of it can be seen, and whether its box scrolls.
EQUATIONS_JS = """() => {
  const content = (el) => {
    const s = getComputedStyle(el);
    return el.clientWidth - parseFloat(s.paddingLeft) - parseFloat(s.paddingRight);
  };
  return Array.from(document.querySelectorAll("article.bd-article div.math")).map((holder, i) => {
    const box = holder.querySelector("mjx-container");
    const math = box && box.querySelector(":scope > mjx-math");
    if (!math || math.getClientRects().length === 0) return null;
    return {
      index: i,
      width: Math.round(math.getBoundingClientRect().width),
      column: Math.round(content(holder.parentElement)),
      visible: Math.round(Math.min(box.clientWidth, holder.clientWidth)),
      scrolls: box.scrollWidth > box.clientWidth + 1
        && ["auto", "scroll"].includes(getComputedStyle(box).overflowX),
    };
  }).filter((e) => e !== null);
}"""
DISPLAY_MATH = re.compile(r'<div class="math[^"]*"[^>]*>(.*?)</div>', re.DOTALL)

# Inline formulas that stick out of their box (the theme sets span.math { overflow: hidden }).
CLIPPED_INLINE_JS = """() => Array.from(document.querySelectorAll("article.bd-article span.math"))
  .map((s) => [s, s.querySelector("mjx-container > mjx-math")])
  .filter(([s, m]) => m && s.getClientRects().length > 0)
  .map(([s, m]) => [s, s.getBoundingClientRect(), m.getBoundingClientRect()])
  .filter(([s, box, math]) => math.right > box.right + 1 || math.left < box.left - 1)
  .map(([s, box, math]) => ({
    text: (s.querySelector("mjx-assistive-mml")?.textContent || "").trim().slice(0, 80),
    width: Math.round(math.width),
    shown: Math.round(box.width),
  }))"""

# What sticks out of the screen: the outermost elements whose right edge passes the viewport's
# and that no scrolling ancestor within the screen holds (fixed drawers, off screen, left out).
OVERFLOW_JS = """() => {
  const vw = document.documentElement.clientWidth;
  const scrolls = (el) =>
    ["auto", "scroll", "hidden", "clip"].includes(getComputedStyle(el).overflowX);
  const held = (el) => {
    for (let a = el.parentElement; a && a !== document.body; a = a.parentElement) {
      if (getComputedStyle(a).position === "fixed") return true;
      if (scrolls(a) && a.getBoundingClientRect().right <= vw + 0.5) return true;
    }
    return getComputedStyle(el).position === "fixed";
  };
  const sticking = new Set(Array.from(document.body.querySelectorAll("*")).filter((el) => {
    const r = el.getBoundingClientRect();
    return r.width > 0 && r.right > vw + 0.5 && !held(el);
  }));
  const out = [];
  for (const el of sticking) {
    if (el.parentElement && sticking.has(el.parentElement)) continue;
    const cls = (el.getAttribute("class") || "").split(/\\s+/).slice(0, 3).join(".");
    out.push({
      element: el.tagName.toLowerCase() + (cls ? "." + cls : ""),
      right: Math.round(el.getBoundingClientRect().right),
      text: (el.textContent || "").replace(/\\s+/g, " ").trim().slice(0, 80),
    });
  }
  return {
    viewport: vw,
    document: document.documentElement.scrollWidth,
    offenders: out.filter((o) => !o.element.startsWith("div.skip-link")).slice(0, 20),
  };
}"""

# Explorers whose content is wider than the room they get (a table behind a scroll).
EXPLORERS_JS = """() => Array.from(document.querySelectorAll("article.bd-article .attnlib-live"))
  .flatMap((root) => [root, ...root.querySelectorAll("*")]
    .filter((el) => el.getClientRects().length > 0 && el.scrollWidth > el.clientWidth + 1
      && ["auto", "scroll", "hidden"].includes(getComputedStyle(el).overflowX))
    .map((el) => ({
      explorer: root.dataset.explorer || root.id,
      element: el.tagName.toLowerCase() + "." + (el.getAttribute("class") || "").split(/\\s+/)[0],
      content: el.scrollWidth,
      shown: el.clientWidth,
    })))"""

# Output figures: natural and shown width, and whether attnbook.js made them open on a click.
FIGURES_JS = """() => Array.from(document.querySelectorAll("article.bd-article .cell_output img"))
  .filter((img) => img.getClientRects().length > 0 && img.naturalWidth > 0)
  .filter((img) => !img.closest(".attnlib-live"))
  .map((img, index) => ({
    index: (img.dataset.readabilityIndex = String(index)) && index,
    src: img.getAttribute("src") || "",
    natural: img.naturalWidth,
    shown: Math.round(img.getBoundingClientRect().width * 10) / 10,
    zoomable: img.classList.contains("attnbook-zoomable"),
    widget: img.closest(".widget-subarea") !== null,
  }))"""


# Every box that scrolls (found by what it is, not by the classes attnbook.js gives it), and
# whether a fade shows at the edges with more behind them: a mask image (attnbook.css).
SCROLL_CUES_JS = """() => {
  const boxes = new Set(document.querySelectorAll([
    'article.bd-article div.math mjx-container[display="true"]',
    "article.bd-article .attnlib-live .al-scroll",
    "article.bd-article .cell_output > .output > .highlight > pre",
    "article.bd-article .cell_input pre",
  ].join(", ")));
  document.querySelectorAll("article.bd-article .cell_output img").forEach((img) => {
    if (!img.closest(".attnlib-live, .widget-subarea")) boxes.add(img.parentElement);
  });
  const scrolls = (value) => ["auto", "scroll"].includes(value);
  return Array.from(boxes).filter((box) => box.getClientRects().length > 0).map((box) => {
    const s = getComputedStyle(box);
    const across = scrolls(s.overflowX) && box.scrollWidth > box.clientWidth + 1;
    const down = scrolls(s.overflowY) && box.scrollHeight > box.clientHeight + 1;
    const mask = s.maskImage !== "none" ? s.maskImage : s.webkitMaskImage;
    return {
      element: box.tagName.toLowerCase() + "." + (box.getAttribute("class") || "").split(/\\s+/)[0],
      text: (box.textContent || box.querySelector("img")?.alt || "").trim().slice(0, 60),
      across, down,
      faded: Boolean(mask) && mask !== "none",
    };
  }).filter((box) => box.across || box.down);
}"""

# At 1280 px: the text column, program outputs taller than the bound, code cells that scroll.
COLUMN_JS = """(maxOutput) => {
  const article = document.querySelector("article.bd-article");
  const s = getComputedStyle(article);
  const outputs = Array.from(document.querySelectorAll(
    "article.bd-article .cell_output > .output > .highlight > pre"))
    .filter((pre) => pre.getClientRects().length > 0);
  return {
    column: Math.round(
      article.clientWidth - parseFloat(s.paddingLeft) - parseFloat(s.paddingRight)),
    tall_outputs: outputs.map((pre) => Math.round(pre.getBoundingClientRect().height))
      .filter((height) => height > maxOutput),
    longest_output: Math.max(0, ...outputs.map((pre) => Math.round(pre.scrollHeight))),
    code_cells: document.querySelectorAll("article.bd-article .cell_input pre").length,
    code_cells_wider: Array.from(document.querySelectorAll("article.bd-article .cell_input pre"))
      .filter((pre) => pre.scrollWidth > pre.clientWidth + 1).length,
  };
}"""


def cue_problems(page: Page) -> list[str]:
    """A line for every box that scrolls with no fade at its edge to say so."""
    return [
        f"{box['element']} scrolls {'sideways' if box['across'] else 'down'} with no fade: "
        f"{box['text']!r}"
        for box in page.evaluate(SCROLL_CUES_JS)
        if not box["faded"]
    ]


def wait_for_fitted_figures(page: Page) -> None:
    """Wait until attnbook.js has sized every output figure for the screen (it reads their dpi);
    the measurements that follow say what is wrong when it never does."""
    from playwright.sync_api import TimeoutError as PlaywrightTimeoutError

    try:
        page.wait_for_function(
            """() => Array.from(document.querySelectorAll("article.bd-article .cell_output img"))
              .filter((img) => !img.closest(".attnlib-live, .widget-subarea"))
              .every((img) => img.dataset.attnbookFit !== undefined)""",
            timeout=10_000,
        )
    except PlaywrightTimeoutError:
        pass


def display_tex(docname: str) -> list[str]:
    """The TeX of the page's display equations, in page order, as Sphinx wrote it."""
    text = (HTML / f"{docname}.html").read_text(encoding="utf-8")
    found = [" ".join(html.unescape(m.group(1)).split()) for m in DISPLAY_MATH.finditer(text)]
    return [tex.removeprefix("\\[").removesuffix("\\]").strip() for tex in found]


def equation_report(page: Page, docname: str) -> list[dict]:
    equations = page.evaluate(EQUATIONS_JS)
    tex = display_tex(docname)
    for e in equations:
        e["tex"] = tex[e["index"]][:160] if e["index"] < len(tex) else "?"
    return equations


def png_dpi(data: bytes) -> float:
    """The resolution a PNG records in its pHYs chunk (matplotlib writes it), else 72."""
    at = data[:65_536].find(b"pHYs")
    if at < 0:
        return 72.0
    per_x, _, unit = struct.unpack(">IIB", data[at + 4 : at + 13])
    return per_x * 0.0254 if unit == 1 else 72.0


def image_bytes(docname: str, src: str) -> tuple[str, bytes]:
    """A short name for an image and its first bytes (a file of the build, or a data: URL)."""
    if src.startswith("data:"):
        payload = src.split(",", 1)[-1]
        return "data:" + payload[40:52], base64.b64decode(payload[:90_000] + "==")
    source = (HTML / docname).parent / src
    return source.name[:16], source.read_bytes()[:65_536] if source.is_file() else b""


def figure_report(page: Page, docname: str) -> list[dict]:
    figures = page.evaluate(FIGURES_JS)
    for figure in figures:
        figure["src"], data = image_bytes(docname, figure["src"])
        dpi = png_dpi(data) if data.startswith(b"\x89PNG") else 72.0
        figure["dpi"] = round(dpi)
        figure["scale"] = round(figure["shown"] / figure["natural"], 3)
        figure["text_px"] = round(DEFAULT_FONT_PT * dpi / 72 * figure["scale"], 1)
    return figures


def short(docname: str) -> str:
    return docname.rsplit("/", 1)[-1]


# --- the checks ---------------------------------------------------------------------------------


@pytest.mark.parametrize("docname", DOCNAMES)
def test_fits_a_wide_screen(docname: str, book_url: str, watched_page: WatchedPage) -> None:
    """At 1280 px: every display equation fits its column, no formula is clipped, explorers fit."""
    page = watched_page.page
    goto(page, f"{book_url}{docname}.html")
    equations = equation_report(page, docname)
    clipped = page.evaluate(CLIPPED_INLINE_JS)
    explorers = page.evaluate(EXPLORERS_JS)
    column = page.evaluate(COLUMN_JS, MAX_OUTPUT_PX)
    save("equations_1280", docname, equations)
    save("explorers_1280", docname, explorers)
    save("code_1280", docname, column)
    take_screenshots(page, docname, SHOTS_1280)
    wide = [e for e in equations if e["width"] > e["column"] + 1]
    for number, e in enumerate(wide):
        holder = page.locator("article.bd-article div.math").nth(e["index"])
        holder.scroll_into_view_if_needed()
        SHOTS.mkdir(parents=True, exist_ok=True)
        holder.screenshot(path=str(SHOTS / f"{short(docname)}_equation_{number}.png"))
    problems = [
        f"display equation {e['width']} px wide in a {e['column']} px column "
        f"({e['visible']} px visible{', scrolls' if e['scrolls'] else ', no scrollbar'}): "
        f"{e['tex']}"
        for e in wide
    ]
    problems += [f"inline formula clipped, {c['shown']} of {c['width']} px: {c}" for c in clipped]
    problems += [
        f"explorer {e['explorer']}: {e['element']} shows {e['shown']} of {e['content']} px"
        for e in explorers
    ]
    if column["column"] < MIN_COLUMN_1280:
        problems.append(f"the text column is {column['column']} px, under {MIN_COLUMN_1280}")
    problems += [
        f"a program output {height} px tall (more than {MAX_OUTPUT_PX} px)"
        for height in column["tall_outputs"]
    ]
    problems += cue_problems(page)
    if problems:
        raise AssertionError(f"{docname} at 1280 px:\n" + "\n".join(problems))


@pytest.mark.parametrize("docname", DOCNAMES)
def test_fits_a_phone(docname: str, book_url: str, phone_page: WatchedPage) -> None:
    """At 375 px: the page is no wider than the screen and no inline formula is clipped."""
    page = phone_page.page
    goto(page, f"{book_url}{docname}.html")
    wait_for_fitted_figures(page)
    overflow = page.evaluate(OVERFLOW_JS)
    clipped = page.evaluate(CLIPPED_INLINE_JS)
    equations = equation_report(page, docname)
    figures = [f for f in figure_report(page, docname) if not f["widget"]]
    save("page_width_375", docname, {**overflow, "clipped_inline": clipped})
    save("equations_375", docname, equations)
    save("figures_375", docname, figures)
    take_screenshots(page, docname, SHOTS_375)
    problems = []
    if overflow["document"] > PHONE["width"]:
        sticking = [
            f"{o['element']} to {o['right']} px: {o['text']}" for o in overflow["offenders"]
        ]  # noqa: E501
        problems.append(
            f"the page is {overflow['document']} px wide on a {PHONE['width']} px screen; "
            "sticking out:\n  " + "\n  ".join(sticking)
        )
    problems += [f"inline formula clipped, {c['shown']} of {c['width']} px: {c}" for c in clipped]
    problems += [
        f"display equation {e['width']} px wide in {e['visible']} px with no way to scroll: "
        f"{e['tex']}"
        for e in equations
        if e["width"] > e["visible"] + 1 and not e["scrolls"]
    ]
    problems += [
        f"figure {f['src']}: 10-pt text at {f['text_px']} px (shown {f['shown']} of "
        f"{f['natural']} px at {f['dpi']} dpi)"
        for f in figures
        if f["text_px"] < LEGIBLE_PX and f["scale"] < 0.99
    ]
    problems += cue_problems(page)
    if problems:
        raise AssertionError(f"{docname} at 375 px:\n" + "\n".join(problems))


@pytest.mark.parametrize("docname", DOCNAMES)
def test_figures_are_legible_or_open_full_size(
    docname: str, book_url: str, watched_page: WatchedPage, capsys: pytest.CaptureFixture[str]
) -> None:
    """Report every figure's scale and text size; every figure opens full size on a click."""
    page = watched_page.page
    goto(page, f"{book_url}{docname}.html")
    figures = figure_report(page, docname)
    save("figures_1280", docname, figures)
    small = [f for f in figures if f["text_px"] < LEGIBLE_PX]
    with capsys.disabled():
        for f in figures:
            print(
                f"\n{short(docname)}: figure {f['src']}: {f['natural']} px at {f['dpi']} dpi "
                f"shown at {f['shown']} px (scale {f['scale']:.2f}), 10-pt text "
                f"{f['text_px']} px{'  SMALL' if f in small else ''}",
                end="",
            )
    problems = [f"figure {f['src']} does not open on a click" for f in figures if not f["zoomable"]]
    allowed = SMALL_FIGURES.get(docname, 0)
    if len(small) > allowed:
        problems.append(
            f"{len(small)} figure(s) with 10-pt text under {LEGIBLE_PX} px (allowed {allowed}): "
            + ", ".join(f"{f['src']} ({f['text_px']} px)" for f in small)
        )
    elif len(small) < allowed:
        problems.append(
            f"only {len(small)} small figure(s) now, {allowed} allowed: lower SMALL_FIGURES"
            f"[{docname!r}] in {Path(__file__).name} to {len(small)}"
        )
    shrunk = [f for f in figures if f["scale"] < 0.95]
    if shrunk:
        problems += enlarge_problems(page, docname, shrunk[0])
    problems += watched_page.watch.problems()
    if problems:
        raise AssertionError(f"{docname}:\n" + "\n".join(problems))


def enlarge_problems(page: Page, docname: str, figure: dict) -> list[str]:
    """Click a shrunk figure: the overlay shows it at its natural width; Escape closes it."""
    image = page.locator(f'img[data-readability-index="{figure["index"]}"]')
    image.scroll_into_view_if_needed()
    image.click()
    overlay = page.locator(".attnbook-lightbox")
    try:
        overlay.wait_for(state="visible", timeout=5_000)
    except Exception:  # noqa: BLE001 (Playwright's timeout; the message says what failed)
        return [f"clicking figure {figure['src']} opened nothing"]
    big = overlay.locator("img")
    page.wait_for_function(
        "(img) => img.complete && img.naturalWidth > 0", arg=big.element_handle()
    )
    shown = big.evaluate("(img) => img.getBoundingClientRect().width")
    problems = []
    if abs(shown - figure["natural"]) > 1:
        problems.append(f"enlarged {figure['src']} is {shown:.0f} px, not {figure['natural']}")
    if docname == "notebooks/06_self_attention_qkv":
        SHOTS.mkdir(parents=True, exist_ok=True)
        page.screenshot(path=str(SHOTS / "06_figure_enlarged.png"))
    page.keyboard.press("Escape")
    if overlay.is_visible():
        problems.append("Escape did not close the enlarged figure")
    elif not image.evaluate("(img) => document.activeElement === img"):
        problems.append("closing the enlarged figure did not return the focus to it")
    return problems
