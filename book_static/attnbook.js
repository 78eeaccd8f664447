// The book's own script, loaded on every page (book.yml: html_static_path, html_js_files).
// 1. Figures open at full size: a click (or Enter) on a notebook's output image shows it at its
// natural size in an overlay that scrolls, with a link to the image alone. No kernel, nothing
// fetched: the image is the one already in the page. Widget images drawn later are included.
// 2. Long inline code gets break opportunities after dots and underscores (<wbr>).
// 3. The menu (the site's chapters) and the "Contents" (this page's sections) buttons work: the
// theme binds its handlers to the first .primary-toggle / .secondary-toggle in the page, which
// sphinx-book-theme's layout hides; the visible ones pass their click on to them.
// 4. Figures are not shrunk below a legible size (10-pt text at 9 CSS px; the dpi is read from
// the PNG the page already loaded); on a phone they scroll sideways in their own box instead.
// 5. Boxes that scroll (wide equations, explorers' tables, long outputs, code, those figures)
// say so: a fade at each edge that has more behind it.
// 6. Search results show prose: the snippet's formulas as plain text, without the code.
// A classic script (ES2017, like attnlib/live/): lint with `node_modules/.bin/eslint book_static`.
/* global window, document, fetch, DOMParser, HTMLImageElement, MutationObserver, ResizeObserver,
   Search */
(function () {
  "use strict";

  var FIGURES = "article.bd-article .cell_output img";
  var SHRUNK = 0.95; // offer the button when a figure is shown below 95% of its size
  var lightbox = null;
  var returnFocus = null;

  function isFigure(img) {
    return (
      img instanceof HTMLImageElement &&
      img.matches(FIGURES) &&
      !img.closest(".attnlib-live") && // the explorers handle their own pictures
      !img.closest(".attnbook-lightbox")
    );
  }

  function scaleOf(img) {
    return img.naturalWidth ? img.getBoundingClientRect().width / img.naturalWidth : 1;
  }

  function updateButton(img, button) {
    var shrunk = img.naturalWidth > 0 && scaleOf(img) < SHRUNK;
    button.hidden = !shrunk;
    if (shrunk) {
      button.textContent =
        "Enlarge figure (shown at " + Math.round(scaleOf(img) * 100) + "% of its size)";
    }
  }

  function prepare(img) {
    if (img.dataset.attnbookZoom || !isFigure(img)) {
      return;
    }
    img.dataset.attnbookZoom = "1";
    img.classList.add("attnbook-zoomable");
    img.tabIndex = 0;
    img.setAttribute("role", "button");
    img.setAttribute("aria-label", "Show this figure at full size");
    img.title = "Click to see this figure at full size";
    // Widgets lay out their own images; leave their DOM alone and rely on the click.
    if (img.closest(".widget-subarea")) {
      return;
    }
    var box = document.createElement("div");
    box.className = "attnbook-figure-box";
    img.insertAdjacentElement("beforebegin", box);
    box.appendChild(img);
    var button = document.createElement("button");
    button.type = "button";
    button.className = "attnbook-enlarge";
    button.hidden = true;
    button.addEventListener("click", function () {
      open(img);
    });
    box.insertAdjacentElement("afterend", button);
    var update = function () {
      fitFigure(img, box);
      updateButton(img, button);
    };
    img.addEventListener("load", update);
    if (window.ResizeObserver) {
      new ResizeObserver(update).observe(box);
    }
    cue(box);
    update();
  }

  // --- Figures at a readable size ---------------------------------------------------------------
  // Matplotlib's default 10-pt text is (10 x dpi/72 x shown/natural) CSS px on screen; below about
  // 9 px it cannot be read. A column too narrow for that (a phone) does not shrink the figure
  // further: the figure keeps the width that makes its text 9 px, in a box that scrolls sideways.
  // The resolution comes from the PNG's pHYs chunk (matplotlib writes it), read from the image
  // the page already loaded (same address, so the browser's cache answers).
  var LEGIBLE_PX = 9;
  var FONT_PT = 10;
  var PNG_SIGNATURE = 0x89504e47;
  var dpiOf = {};

  function pngDpi(bytes) {
    if (bytes.byteLength < 8 || bytes.getUint32(0) !== PNG_SIGNATURE) {
      return 72; // not a PNG: what the tests assume too
    }
    for (var at = 8; at + 8 <= bytes.byteLength; ) {
      var length = bytes.getUint32(at);
      var type = String.fromCharCode(
        bytes.getUint8(at + 4),
        bytes.getUint8(at + 5),
        bytes.getUint8(at + 6),
        bytes.getUint8(at + 7)
      );
      if (type === "pHYs" && at + 17 <= bytes.byteLength) {
        // pixels per unit along x, then along y, then the unit (1: the metre)
        return bytes.getUint8(at + 16) === 1 ? bytes.getUint32(at + 8) * 0.0254 : 72;
      }
      if (type === "IDAT" || type === "IEND") {
        break; // pHYs, when there is one, comes before the image data
      }
      at += 12 + length;
    }
    return 72;
  }

  function resolution(src) {
    if (!dpiOf[src]) {
      dpiOf[src] = fetch(src)
        .then(function (response) {
          return response.arrayBuffer();
        })
        .then(function (buffer) {
          return pngDpi(new DataView(buffer));
        })
        .catch(function () {
          return 72;
        });
    }
    return dpiOf[src];
  }

  function fitFigure(img, box) {
    var src = img.currentSrc || img.src;
    if (!img.naturalWidth || !src) {
      return;
    }
    resolution(src).then(function (dpi) {
      var legible = Math.ceil((img.naturalWidth * LEGIBLE_PX * 72) / (FONT_PT * dpi));
      var need = Math.min(img.naturalWidth, legible);
      var wide = need > box.clientWidth + 0.5;
      img.style.width = wide ? need + "px" : "";
      img.style.maxWidth = wide ? "none" : "";
      box.classList.toggle("attnbook-figure-wide", wide);
      img.dataset.attnbookFit = String(need); // the tests wait for this
      updateCue(box);
    });
  }

  // --- Boxes that scroll say so ------------------------------------------------------------------
  // A fade at each edge with more content behind it (attnbook.css draws it from these classes).
  var SCROLL_BOXES = [
    'article.bd-article div.math mjx-container[display="true"]',
    "article.bd-article .attnlib-live .al-scroll",
    "article.bd-article .cell_output > .output > .highlight > pre",
    "article.bd-article .cell_input pre",
    "article.bd-article .pst-scrollable-table-container",
  ].join(", ");
  var SCROLLS = ["auto", "scroll"];

  function updateCue(box) {
    var style = window.getComputedStyle(box);
    var across = SCROLLS.indexOf(style.overflowX) >= 0;
    var down = SCROLLS.indexOf(style.overflowY) >= 0;
    var left = box.scrollLeft;
    var top = box.scrollTop;
    box.classList.toggle("attnbook-more-left", across && left > 1);
    box.classList.toggle(
      "attnbook-more-right",
      across && box.scrollWidth - box.clientWidth - left > 1
    );
    box.classList.toggle("attnbook-more-above", down && top > 1);
    box.classList.toggle(
      "attnbook-more-below",
      down && box.scrollHeight - box.clientHeight - top > 1
    );
  }

  function cue(box) {
    if (box.dataset.attnbookCue) {
      updateCue(box);
      return;
    }
    box.dataset.attnbookCue = "1";
    box.classList.add("attnbook-scroll");
    var update = function () {
      updateCue(box);
    };
    box.addEventListener("scroll", update, { passive: true });
    if (window.ResizeObserver) {
      new ResizeObserver(update).observe(box);
    }
    update();
  }

  // --- The menu and "Contents" buttons -----------------------------------------------------------
  // pydata-sphinx-theme 0.17.1 (opening the panels on narrow screens) and sphinx-book-theme
  // (collapsing the menu on wide ones) listen on document.querySelector(".primary-toggle") and
  // (".secondary-toggle"): the navbar's buttons, which the book's layout never shows. The buttons
  // a reader sees hand their click to those, so each screen width gets the theme's own behaviour.
  function bindToggles() {
    // A section of this page tapped in an open panel closes the panel, so the reader sees where
    // the link led. The jump waits for the panel's "close" handler (the theme's, which moves the
    // links back and returns the focus to the button) so that nothing moves the page after it.
    var panels = "#pst-primary-sidebar-modal, #pst-secondary-sidebar-modal";
    document.querySelectorAll(panels).forEach(function (dialog) {
      dialog.addEventListener("click", function (event) {
        var link = event.target.closest && event.target.closest('a[href^="#"]');
        var target = link && document.getElementById(link.hash.slice(1));
        if (!dialog.open || !target) {
          return;
        }
        event.preventDefault();
        dialog.close();
        window.setTimeout(function () {
          if (window.location.hash === link.hash) {
            target.scrollIntoView();
          } else {
            window.location.hash = link.hash;
          }
        }, 0);
      });
    });
    ["primary", "secondary"].forEach(function (side) {
      var buttons = document.querySelectorAll("." + side + "-toggle");
      var bound = buttons[0];
      Array.prototype.slice.call(buttons, 1).forEach(function (button) {
        if (button.dataset.attnbookToggle) {
          return;
        }
        button.dataset.attnbookToggle = side;
        button.addEventListener("click", function (event) {
          event.preventDefault();
          event.stopPropagation();
          bound.click();
          if (side === "primary") {
            var sidebar = document.getElementById("pst-primary-sidebar");
            button.setAttribute(
              "aria-expanded",
              String(!!sidebar && !sidebar.classList.contains("pst-sidebar-hidden"))
            );
          }
        });
      });
    });
  }

  // --- Search results: prose, not source -------------------------------------------------------
  // Sphinx's search page fetches each result's page and shows 240 characters of its main text, in
  // which formulas are still TeX (\(\frac{...}\)) and code cells are code. The text it reads is
  // cleaned first: formulas turned into plain text, code cells, the page's contents list and the
  // widgets' data left out. (The index itself only matches words; it is left as Sphinx built it.)
  var NOT_SNIPPET = [
    ".cell_input",
    ".bd-sidebar-secondary",
    ".bd-header-article",
    ".prev-next-area",
    ".headerlink",
    "script",
    "style",
    "template",
  ].join(", ");
  var TEX_SYMBOLS = {
    alpha: "\u03b1",
    beta: "\u03b2",
    gamma: "\u03b3",
    delta: "\u03b4",
    epsilon: "\u03b5",
    varepsilon: "\u03b5",
    eta: "\u03b7",
    theta: "\u03b8",
    lambda: "\u03bb",
    mu: "\u03bc",
    pi: "\u03c0",
    sigma: "\u03c3",
    tau: "\u03c4",
    phi: "\u03c6",
    omega: "\u03c9",
    Sigma: "\u03a3",
    sum: "\u03a3",
    prod: "\u03a0",
    infty: "\u221e",
    cdot: "\u00b7",
    times: "\u00d7",
    le: "\u2264",
    leq: "\u2264",
    ge: "\u2265",
    geq: "\u2265",
    ne: "\u2260",
    neq: "\u2260",
    approx: "\u2248",
    to: "\u2192",
    rightarrow: "\u2192",
    leftarrow: "\u2190",
    in: "\u2208",
    top: "\u1d40",
    sqrt: "\u221a",
    partial: "\u2202",
    ldots: "\u2026",
    dots: "\u2026",
    cdots: "\u22ef",
    mid: "|",
    odot: "\u2299",
    oplus: "\u2295",
  };
  var TEX_DROP = /\\(?:left|right|big|Big|bigg|Bigg|bigl|bigr|Bigl|Bigr|displaystyle|nonumber)\b/g;
  var TEX_WRAPPER =
    /\\(?:mathrm|text|textrm|textit|textbf|operatorname|mathbf|mathit|mathsf|mathtt|boldsymbol|mathcal|hat|tilde|bar|vec|overline|underbrace)\s*\{([^{}]*)\}/g;

  function plainTex(tex) {
    var text = tex
      .replace(/^\s*(?:\\[([]|\$\$?)/, "")
      .replace(/(?:\\[)\]]|\$\$?)\s*$/, "")
      .replace(/\\(?:begin|end)\{[^{}]*\}/g, " ")
      .replace(/\\mathbb\s*\{R\}/g, "\u211d")
      .replace(TEX_DROP, "");
    for (var before = ""; before !== text; ) {
      before = text;
      text = text
        .replace(TEX_WRAPPER, "$1")
        .replace(/([_^])\{([^{}]*)\}/g, "$1$2")
        .replace(/\\[dt]?frac\s*\{([^{}]*)\}\s*\{([^{}]*)\}/g, "($1)/($2)")
        .replace(/\\sqrt\s*\{([^{}]*)\}/g, "\u221a($1)");
    }
    return text
      .replace(/\\\\/g, "; ")
      .replace(/\\[,;:! ]|\\q?quad\b|~|&/g, " ")
      .replace(/\\([A-Za-z]+)/g, function (match, name) {
        return Object.prototype.hasOwnProperty.call(TEX_SYMBOLS, name) ? TEX_SYMBOLS[name] : name;
      })
      .replace(/\\([{}_%#$|])/g, "$1")
      .replace(/[{}]/g, "")
      .replace(/\s+/g, " ")
      .trim();
  }

  function snippetHtml(htmlString) {
    var page = new DOMParser().parseFromString(htmlString, "text/html");
    page.querySelectorAll(NOT_SNIPPET).forEach(function (element) {
      element.remove();
    });
    page.querySelectorAll(".math").forEach(function (math) {
      math.textContent = " " + plainTex(math.textContent) + " ";
    });
    return page.documentElement.outerHTML;
  }

  function cleanSearchSnippets() {
    if (typeof Search === "undefined" || !Search.htmlToText || Search.htmlToText.attnbook) {
      return;
    }
    var htmlToText = Search.htmlToText;
    Search.htmlToText = function (htmlString, anchor) {
      return htmlToText(snippetHtml(htmlString), anchor);
    };
    Search.htmlToText.attnbook = true;
  }

  function build() {
    var box = document.createElement("div");
    box.className = "attnbook-lightbox";
    box.hidden = true;
    box.setAttribute("role", "dialog");
    box.setAttribute("aria-modal", "true");
    box.setAttribute("aria-label", "Figure at full size");
    box.innerHTML =
      '<div class="attnbook-lightbox-bar">' +
      '<span data-role="info"></span>' +
      '<a data-role="alone" target="_blank" rel="noopener">Open the image alone</a>' +
      '<button type="button" data-role="close">Close (Esc)</button>' +
      "</div>" +
      '<div class="attnbook-lightbox-body" data-role="body"><img alt=""></div>';
    box.querySelector('[data-role="close"]').addEventListener("click", close);
    box.querySelector('[data-role="body"]').addEventListener("click", function (event) {
      if (event.target === event.currentTarget) {
        close(); // a click beside the figure
      }
    });
    document.body.appendChild(box);
    return box;
  }

  function open(img) {
    lightbox = lightbox || build();
    var src = img.currentSrc || img.src;
    var big = lightbox.querySelector(".attnbook-lightbox-body img");
    big.src = src;
    big.alt = img.alt || "";
    var percent = Math.round(scaleOf(img) * 100);
    lightbox.querySelector('[data-role="info"]').textContent =
      "Full size: " + img.naturalWidth + " \u00d7 " + img.naturalHeight + " px" +
      (percent < 100 ? " (the page shows it at " + percent + "%)" : "") +
      ". Scroll to see all of it.";
    var alone = lightbox.querySelector('[data-role="alone"]');
    // Browsers refuse to open data: URLs (widget images) as pages; offer the link otherwise.
    alone.hidden = src.slice(0, 5) === "data:";
    alone.href = alone.hidden ? "#" : src;
    returnFocus = img;
    lightbox.hidden = false;
    document.documentElement.classList.add("attnbook-lightbox-open");
    lightbox.querySelector('[data-role="body"]').scrollTo(0, 0);
    lightbox.querySelector('[data-role="close"]').focus();
  }

  function close() {
    if (!lightbox || lightbox.hidden) {
      return;
    }
    lightbox.hidden = true;
    document.documentElement.classList.remove("attnbook-lightbox-open");
    if (returnFocus) {
      returnFocus.focus();
      returnFocus = null;
    }
  }

  // Long inline code (torch.nn.functional.scaled_dot_product_attention) may break after a dot,
  // an underscore or a slash (attnbook.css lets it break anywhere, as a last resort).
  var LONG_CODE = 24;
  var BREAK_AFTER = /[._/]/;

  function breakable(code) {
    if (code.dataset.attnbookWbr || code.textContent.length < LONG_CODE) {
      return;
    }
    code.dataset.attnbookWbr = "1";
    var walker = document.createTreeWalker(code, 4 /* NodeFilter.SHOW_TEXT */);
    var texts = [];
    for (var node = walker.nextNode(); node; node = walker.nextNode()) {
      texts.push(node);
    }
    texts.forEach(function (text) {
      var value = text.nodeValue;
      var parts = [];
      var start = 0;
      for (var i = 0; i < value.length - 1; i += 1) {
        if (BREAK_AFTER.test(value.charAt(i))) {
          parts.push(value.slice(start, i + 1));
          start = i + 1;
        }
      }
      if (parts.length === 0) {
        return;
      }
      parts.push(value.slice(start));
      var pieces = document.createDocumentFragment();
      parts.forEach(function (part, index) {
        if (index > 0) {
          pieces.appendChild(document.createElement("wbr"));
        }
        pieces.appendChild(document.createTextNode(part));
      });
      text.parentNode.replaceChild(pieces, text);
    });
  }

  function prepareAll(root) {
    if (root.nodeType !== 1) {
      return;
    }
    if (root.tagName === "IMG") {
      prepare(root);
    }
    root.querySelectorAll("img").forEach(prepare);
    if (root.matches(SCROLL_BOXES)) {
      cue(root);
    }
    root.querySelectorAll(SCROLL_BOXES).forEach(cue);
  }

  function start() {
    cleanSearchSnippets();
    bindToggles();
    var article = document.querySelector("article.bd-article");
    if (!article) {
      return;
    }
    prepareAll(article);
    article.querySelectorAll("code.literal").forEach(breakable);
    new MutationObserver(function (records) {
      records.forEach(function (record) {
        record.addedNodes.forEach(prepareAll);
        // An explorer redrawing its table inside a box: the box may now scroll, or no longer.
        var holder = record.target.closest && record.target.closest(".attnbook-scroll");
        if (holder) {
          updateCue(holder);
        }
      });
    }).observe(article, { childList: true, subtree: true });
    article.addEventListener("click", function (event) {
      var img = event.target.closest && event.target.closest("img.attnbook-zoomable");
      if (img) {
        event.preventDefault();
        open(img);
      }
    });
    article.addEventListener("keydown", function (event) {
      var img = event.target;
      if ((event.key === "Enter" || event.key === " ") && img.matches("img.attnbook-zoomable")) {
        event.preventDefault();
        open(img);
      }
    });
    document.addEventListener("keydown", function (event) {
      if (!lightbox || lightbox.hidden) {
        return;
      }
      if (event.key === "Escape") {
        close();
      } else if (event.key === "Tab") {
        // Keep the focus in the dialog: its link (when shown) and its close button.
        var stops = Array.prototype.filter.call(
          lightbox.querySelectorAll("a[href], button"),
          function (element) {
            return !element.hidden;
          }
        );
        var at = stops.indexOf(document.activeElement);
        var next = (at + (event.shiftKey ? stops.length - 1 : 1)) % stops.length;
        event.preventDefault();
        stops[at < 0 ? 0 : next].focus();
      }
    });
  }

  if (document.readyState === "loading") {
    document.addEventListener("DOMContentLoaded", start);
  } else {
    start();
  }
})();
