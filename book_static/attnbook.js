// The book's own script, loaded on every page (book.yml: html_static_path, html_js_files).
// 1. Figures open at full size: a click (or Enter) on a notebook's output image shows it at its
// natural size in an overlay that scrolls, with a link to the image alone. No kernel, nothing
// fetched: the image is the one already in the page. Widget images drawn later are included.
// 2. Long inline code gets break opportunities after dots and underscores (<wbr>).
// A classic script (ES2017, like attnlib/live/): lint with `node_modules/.bin/eslint book_static`.
/* global window, document, HTMLImageElement, MutationObserver, ResizeObserver */
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
    var button = document.createElement("button");
    button.type = "button";
    button.className = "attnbook-enlarge";
    button.hidden = true;
    button.addEventListener("click", function () {
      open(img);
    });
    img.insertAdjacentElement("afterend", button);
    var update = function () {
      updateButton(img, button);
    };
    img.addEventListener("load", update);
    if (window.ResizeObserver) {
      new ResizeObserver(update).observe(img);
    }
    update();
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
  }

  function start() {
    var article = document.querySelector("article.bd-article");
    if (!article) {
      return;
    }
    prepareAll(article);
    article.querySelectorAll("code.literal").forEach(breakable);
    new MutationObserver(function (records) {
      records.forEach(function (record) {
        record.addedNodes.forEach(prepareAll);
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
