"""Checks of the built book in _build/html (run after `make book`; `make book-check` does both).

They fail, rather than skip, when the book has not been built: a missing build is an error in
the pipeline, not a reason to pass.
"""

from __future__ import annotations

import re
from functools import cache
from html.parser import HTMLParser
from pathlib import Path
from urllib.parse import unquote, urlsplit

import pytest
import yaml

from tests.book.toc import toc_docnames

ROOT = Path(__file__).resolve().parents[2]
HTML = ROOT / "_build" / "html"
TOC = ROOT / "notebooks" / "_toc.yml"
# Folders of the build that hold assets and page sources, not pages.
NOT_PAGES = {"_static", "_sources", "_images"}
CDN_HOSTS = ("cdn.jsdelivr", "unpkg.com", "cdnjs", "mathjax.org", "googleapis.com")
WIDGET_STATE = "application/vnd.jupyter.widget-state+json"
WIDGET_JS = ("_static/widgets/require.js", "_static/widgets/embed-amd.js")
MATHJAX_JS = "_static/mathjax/tex-chtml.js"
MATHJAX_FONT = "_static/mathjax/output/chtml/fonts/woff-v2/MathJax_Main-Regular.woff"


TOC_DATA = yaml.safe_load(TOC.read_text(encoding="utf-8"))
DOCNAMES = toc_docnames(TOC)
ROOT_DOC = DOCNAMES[0]
CHAPTERS = DOCNAMES[1:]


class PageRefs(HTMLParser):
    """What a page loads and links to, as written in its HTML."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.scripts: list[str] = []  # <script src>, in page order
        self.links: list[tuple[str, str]] = []  # (<link rel>, <link href>)
        self.anchors: list[str] = []  # every <a href>
        self.article_anchors: list[str] = []  # <a href> inside the main article
        self.images: list[str] = []  # <img src>
        self.widget_state = False
        self.math = False  # math in the main article
        self.refresh: str | None = None  # <meta http-equiv="Refresh" content>
        self._article_depth = 0

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        attr = {name: value or "" for name, value in attrs}
        classes = attr.get("class", "").split()
        if tag == "article" and (self._article_depth or "bd-article" in classes):
            self._article_depth += 1
        if tag == "script" and attr.get("src"):
            self.scripts.append(attr["src"])
        elif tag == "script" and attr.get("type") == WIDGET_STATE:
            self.widget_state = True
        elif tag == "link" and "href" in attr:
            self.links.append((attr.get("rel", ""), attr["href"]))
        elif tag == "a" and "href" in attr:
            self.anchors.append(attr["href"])
            if self._article_depth:
                self.article_anchors.append(attr["href"])
        elif tag == "img":
            self.images.append(attr.get("src", ""))
        elif tag == "meta" and attr.get("http-equiv", "").lower() == "refresh":
            self.refresh = attr.get("content", "")
        if self._article_depth and "math" in classes:
            self.math = True

    def handle_endtag(self, tag: str) -> None:
        if tag == "article" and self._article_depth:
            self._article_depth -= 1


@cache
def parse(page: Path) -> PageRefs:
    refs = PageRefs()
    refs.feed(page.read_text(encoding="utf-8"))
    refs.close()
    return refs


def is_external(url: str) -> bool:
    parts = urlsplit(url)
    return bool(parts.scheme or parts.netloc)


def resolve(page: Path, url: str) -> Path:
    """The file a relative URL in ``page`` points to (query and fragment dropped)."""
    path = unquote(urlsplit(url).path)
    return (page.parent / path).resolve() if path else page.resolve()


def page_of(docname: str) -> Path:
    return HTML / f"{docname}.html"


def built_pages() -> list[Path]:
    pages = HTML.rglob("*.html")
    return sorted(p for p in pages if p.relative_to(HTML).parts[0] not in NOT_PAGES)


@pytest.fixture(scope="session", autouse=True)
def built() -> None:
    """Fail every test, with the fix, when the book has not been built."""
    if not (HTML / "index.html").is_file():
        pytest.fail(
            f"{HTML / 'index.html'} is missing: build the book first with `make book` "
            "(then run `pytest tests/book`, or `make book-check` for both).",
            pytrace=False,
        )


def test_toc_has_root_and_chapters() -> None:
    assert ROOT_DOC == "notebooks/index"
    assert CHAPTERS, f"{TOC} lists no chapters"
    assert len(set(DOCNAMES)) == len(DOCNAMES), f"{TOC} lists a file twice: {DOCNAMES}"


@pytest.mark.parametrize("docname", DOCNAMES)
def test_toc_entry_has_source_and_page(docname: str) -> None:
    sources = [ROOT / f"{docname}{suffix}" for suffix in (".ipynb", ".md")]
    assert any(s.is_file() for s in sources), f"{TOC} lists {docname}, which has no source"
    assert page_of(docname).is_file(), f"no page {page_of(docname)} for TOC entry {docname}"


def test_top_level_index_redirects_to_root_page() -> None:
    refresh = parse(HTML / "index.html").refresh
    assert refresh is not None, "_build/html/index.html is not a redirect to the landing page"
    target = refresh.split("url=", 1)[-1].strip()
    assert resolve(HTML / "index.html", target) == page_of(ROOT_DOC).resolve()


@pytest.mark.parametrize("docname", CHAPTERS)
def test_landing_page_links_to_chapter(docname: str) -> None:
    root_page = page_of(ROOT_DOC)
    targets = {
        resolve(root_page, href)
        for href in parse(root_page).article_anchors
        if not is_external(href)
    }
    assert page_of(docname).resolve() in targets, (
        f"{ROOT_DOC}.md does not link to {docname} in its text (the chapter table)"
    )


def test_no_page_loads_external_scripts_or_styles() -> None:
    external = []
    for page in built_pages():
        refs = parse(page)
        loaded = refs.scripts + [href for rel, href in refs.links if rel != "canonical"]
        external += [f"{page.relative_to(HTML)}: {url}" for url in loaded if is_external(url)]
    assert external == [], "pages load from outside the book:\n" + "\n".join(external)


def test_no_page_mentions_a_cdn() -> None:
    mentions = [
        f"{page.relative_to(HTML)}: {host}"
        for page in built_pages()
        for host in CDN_HOSTS
        if host in page.read_text(encoding="utf-8")
    ]
    assert mentions == [], "CDN addresses in pages:\n" + "\n".join(mentions)


def test_every_local_script_and_stylesheet_exists() -> None:
    missing = []
    for page in built_pages():
        refs = parse(page)
        loaded = refs.scripts + [href for rel, href in refs.links if "stylesheet" in rel]
        missing += [
            f"{page.relative_to(HTML)}: {url}"
            for url in loaded
            if not is_external(url) and not resolve(page, url).is_file()
        ]
    assert missing == [], "missing assets:\n" + "\n".join(missing)


@pytest.mark.parametrize("docname", DOCNAMES)
def test_widget_pages_load_local_widget_manager(docname: str) -> None:
    page = page_of(docname)
    refs = parse(page)
    loaded = [resolve(page, src) for src in refs.scripts]
    wanted = [(HTML / name).resolve() for name in WIDGET_JS]
    if not refs.widget_state:
        assert not set(wanted) & set(loaded), f"{docname} has no widgets but loads their code"
        return
    for path in wanted:
        assert path in loaded, f"{docname} has widget state but does not load {path.name}"
        assert path.is_file(), f"{path} is missing from the build"
    require_js, embed_js = (loaded.index(path) for path in wanted)
    assert require_js < embed_js, "require.js must load before embed-amd.js"


def test_math_pages_load_local_mathjax() -> None:
    pages = [page_of(name) for name in DOCNAMES if parse(page_of(name)).math]
    assert pages, "no page of the book has math; MathJax cannot be checked"
    mathjax = (HTML / MATHJAX_JS).resolve()
    for page in pages:
        loaded = [resolve(page, src) for src in parse(page).scripts]
        assert mathjax in loaded, (
            f"{page.relative_to(HTML)} has math but does not load {MATHJAX_JS}"
        )
    assert mathjax.is_file(), f"{mathjax} is missing from the build"
    assert (HTML / MATHJAX_FONT).is_file(), "MathJax's fonts are missing from the build"


@pytest.mark.parametrize("docname", DOCNAMES)
def test_images_resolve(docname: str) -> None:
    page = page_of(docname)
    sources = [src for src in parse(page).images if not src.startswith("data:")]
    external = [src for src in sources if is_external(src)]
    assert external == [], f"{docname} shows images from outside the book: {external}"
    missing = [src for src in sources if not resolve(page, src).is_file()]
    assert missing == [], f"{docname} shows images that are not in the build: {missing}"


@pytest.mark.parametrize("docname", DOCNAMES)
def test_internal_links_resolve(docname: str) -> None:
    page = page_of(docname)
    hrefs = [h for h in parse(page).anchors if not is_external(h) and not h.startswith("#")]
    broken = [href for href in hrefs if not resolve(page, href).exists()]
    assert broken == [], f"{docname} links to files that are not in the build: {broken}"


def test_nbval_markers_are_hidden_from_readers():
    # The notebooks' code; a Markdown page (the appendix) may name a marker in its text.
    for page in [name for name in DOCNAMES[1:] if (ROOT / f"{name}.ipynb").is_file()]:
        html = (HTML / f"{page}.html").read_text(encoding="utf-8")
        assert "NBVAL_" not in html, f"{page}.html shows an nbval marker"
    source = (ROOT / "notebooks" / "04_bahdanau_attention.ipynb").read_text(encoding="utf-8")
    assert "# NBVAL_IGNORE_OUTPUT" in source  # the notebooks keep them


# --- what a reader sees: text, style, outputs ---------------------------------------------------

# Raw TeX in prose: a dollar sign, a control word (\frac, \mathbb, \alpha) or a delimiter. Sphinx
# writes well-formed math as <span class="math">\(...\)</span> or <div class="math">\[...\]</div>;
# a `$$` block inside a list item's paragraph comes out as a bare "$" and loose TeX instead.
RAW_TEX = re.compile(r"\$|\\[A-Za-z]+|\\[()\[\]{}]")
NOT_PROSE_TAGS = {"pre", "code", "script", "style", "textarea", "kbd", "samp"}
NOT_PROSE_CLASSES = {"math", "highlight", "cell_output"}
VOID_TAGS = {"area", "base", "br", "col", "embed", "hr", "img", "input", "link", "meta", "source",
             "track", "wbr"}  # fmt: skip
BOOK_CSS = "_static/attnbook.css"
BOOK_JS = "_static/attnbook.js"
# Two stdout outputs in a row: book.yml's nb_merge_streams should have joined them.
SPLIT_STREAM = re.compile(r'</pre></div>\s*</div>\s*<div class="output stream\b')


class ProseText(HTMLParser):
    """The article's prose: text outside code, math, cell outputs and scripts."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.stack: list[tuple[str, bool, bool]] = []  # (tag, not prose, in the article)
        self.texts: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag in VOID_TAGS:
            return
        classes = set((dict(attrs).get("class") or "").split())
        skip = tag in NOT_PROSE_TAGS or bool(classes & NOT_PROSE_CLASSES)
        article = tag == "article" and "bd-article" in classes
        self.stack.append((tag, skip, article))

    def handle_endtag(self, tag: str) -> None:
        while self.stack and self.stack.pop()[0] != tag:
            pass

    def handle_data(self, data: str) -> None:
        in_article = any(article for _, _, article in self.stack)
        if in_article and not any(skip for _, skip, _ in self.stack) and data.strip():
            self.texts.append(data)


@pytest.mark.parametrize("docname", DOCNAMES)
def test_prose_holds_no_raw_tex(docname: str) -> None:
    prose = ProseText()
    prose.feed(page_of(docname).read_text(encoding="utf-8"))
    prose.close()
    raw = [" ".join(text.split())[:100] for text in prose.texts if RAW_TEX.search(text)]
    assert raw == [], (
        f"{docname} shows raw TeX (is a $$ block inside a paragraph? give it blank lines "
        "around it, indented like the list item's text):\n" + "\n".join(raw)
    )


@pytest.mark.parametrize("docname", DOCNAMES)
def test_page_loads_the_book_style_and_script(docname: str) -> None:
    page = page_of(docname)
    refs = parse(page)
    styles = [resolve(page, href) for rel, href in refs.links if "stylesheet" in rel]
    scripts = [resolve(page, src) for src in refs.scripts]
    assert (HTML / BOOK_CSS).resolve() in styles, f"{docname} does not load {BOOK_CSS}"
    assert (HTML / BOOK_JS).resolve() in scripts, f"{docname} does not load {BOOK_JS}"


@pytest.mark.parametrize("docname", DOCNAMES)
def test_stream_outputs_are_merged(docname: str) -> None:
    html = page_of(docname).read_text(encoding="utf-8")
    splits = len(SPLIT_STREAM.findall(html))
    assert splits == 0, (
        f"{docname}: {splits} printed output(s) split into several boxes (nb_merge_streams in "
        "book.yml joins them)"
    )
