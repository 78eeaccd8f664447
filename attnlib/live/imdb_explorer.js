/* attnlib live: chapter 13's explorer, the trained IMDB classifier in the reader's browser.
 *
 * Needs attention.js, explorers.js (the DOM helpers) and imdb.js (the model) first, and the
 * WebAssembly kernel's bytes as window.attnlibImdbWasm (base64), all inlined by
 * attnlib/live/imdb.py. Nothing is downloaded until the reader presses the button; then the
 * tokenizer, config and weights come from the folder named by the root's data-base (the book
 * serves attnlib/assets/imdb/ as _static/imdb/). The browser keeps them (Cache API, in a cache
 * named after data-hash, the files' SHA-256), so a later visit reads them from the disk; where
 * the Cache API is missing (a page opened from file://, a private window) they are downloaded
 * each time. Stable hooks for tests and readers:
 *   root      .attnlib-live[data-explorer="imdb"]; data-state "idle" | "loading" | "ready" |
 *             "empty" (the review holds no word: a prompt instead of a prediction) | "error";
 *             once ready, data-predictions (a count), data-probability (full precision),
 *             data-heatmap ("layer,head,tokens"), data-first-ms, data-last-ms, data-cache
 *             ("hit": every file from the browser's cache, "stored": downloaded and kept,
 *             "off": no Cache API here, downloaded)
 *   controls  [data-control="load" (button) | "review" (textarea) | "layer" | "head" (selects)
 *             | "example" (buttons, data-example="positive" | "negative" | "mixed")]
 *   readouts  [data-readout="progress" | "label" | "probability" (4 decimals) | "tokens" (one
 *             span per token: the token without its end-of-word "</w>", which a gap after the
 *             chip shows instead; the raw token in data-token and at the start of the title)
 *             | "dropped" (inside "tokens", where a long review's middle was cut: between the
 *             first head_tokens and the last tokens) | "heatmap" (canvas) | "colorbar" (the
 *             map's scale, data-max: its largest weight) | "legend" | "hover" (emptied back to
 *             its hint when the review, layer or head changes) | "most-read" (table) | "timing"
 *             | "prompt" (shown for an empty review) | "error"]
 */
(function (root) {
  "use strict";

  function live() {
    var api = root.attnlibLive;
    if (!api || !api.dom || !api.register || !root.attnlibImdb) {
      throw new Error("attnlib live: load attention.js, explorers.js and imdb.js first");
    }
    return api;
  }

  var dom = live().dom;
  var el = dom.el;
  var imdb = root.attnlibImdb;
  var STYLE_ID = "attnlib-imdb-style";
  var CSS = [
    ".attnlib-live[data-explorer=imdb] textarea{width:100%;height:7em;font-family:inherit;",
    "font-size:.9rem}",
    ".attnlib-live .al-tokens{display:flex;flex-wrap:wrap;gap:2px 1px;max-height:14em;",
    "overflow-y:auto;margin:.3em 0}",
    ".attnlib-live .al-token{font-family:SFMono-Regular,Menlo,Consolas,monospace;",
    "font-size:.8rem;padding:0 .25em;border-radius:3px;border:1px solid rgba(128,128,128,.3)}",
    // A word's pieces sit together; a gap follows the piece that ends a word.
    ".attnlib-live .al-token.al-word-end{margin-right:.5em}",
    ".attnlib-live .al-verdict{font-size:1.1rem;font-weight:600}",
    ".attnlib-live .al-bar{display:inline-block;width:10em;max-width:40vw;height:.8em;",
    "border:1px solid rgba(128,128,128,.6);border-radius:3px;vertical-align:middle;",
    "background:linear-gradient(90deg,#c0392b 0%,#c0392b var(--neg),#27ae60 var(--neg))}",
    ".attnlib-live canvas.al-heatmap{max-width:100%;height:auto;image-rendering:pixelated;",
    "border:1px solid rgba(128,128,128,.4);touch-action:none}",
    ".attnlib-live .al-map{display:flex;align-items:flex-start;gap:.6em;max-width:100%}",
    ".attnlib-live .al-map .al-scroll{flex:0 1 auto;min-width:0}",
    ".attnlib-live .al-colorbar{flex:none;display:flex;gap:.3em;align-items:stretch;",
    "font-size:.75rem;height:12em}",
    ".attnlib-live .al-colorbar .al-ramp{width:.9em;border:1px solid rgba(128,128,128,.6)}",
    ".attnlib-live .al-colorbar .al-ticks{display:flex;flex-direction:column;",
    "justify-content:space-between;font-family:SFMono-Regular,Menlo,Consolas,monospace}",
    ".attnlib-live .al-dropped{font-size:.8rem;font-style:italic;padding:0 .4em;",
    "border:1px dashed #c0392b;border-radius:3px;color:#c0392b;margin-right:.5em}",
    ".attnlib-live progress{width:14em;max-width:100%}",
  ].join("");

  var LABELLED_TOKENS = 48;
  var CACHE_PREFIX = "attnlib-imdb-";
  var HOVER_HINT = "Point at (or tap) the map to read one weight.";
  var CUT_COLOUR = "#e74c3c";  // where a long review's middle was dropped, on the map
  var LABEL_MARGIN = 78;  // pixels for token labels left of and above the map
  var EXAMPLES = {
    positive: "A wonderful film. The acting is superb, the story moved me, and I would " +
      "happily watch it again.",
    negative: "A dull, lifeless mess. The plot makes no sense, the dialogue is awful, and I " +
      "wanted my two hours back.",
    mixed: "The first half is gripping and beautifully shot, but the ending is rushed and " +
      "the villain is a cliche.",
  };

  function injectStyle() {
    if (document.getElementById(STYLE_ID)) {
      return;
    }
    var style = document.createElement("style");
    style.id = STYLE_ID;
    style.textContent = CSS;
    document.head.appendChild(style);
  }

  function megabytes(bytes) {
    return (bytes / 1e6).toFixed(1) + " MB";
  }

  function base64Bytes(text) {
    var binary = atob(text);
    var bytes = new Uint8Array(binary.length);
    for (var i = 0; i < binary.length; i++) {
      bytes[i] = binary.charCodeAt(i);
    }
    return bytes;
  }

  // fetch(url) as an ArrayBuffer, calling onBytes(received) as the chunks arrive.
  function download(url, onBytes) {
    return fetch(url).then(function (response) {
      if (!response.ok) {
        throw new Error("HTTP " + response.status + " for " + url);
      }
      if (!response.body || !response.body.getReader) {
        return response.arrayBuffer();
      }
      var reader = response.body.getReader();
      var chunks = [];
      var received = 0;
      function pump() {
        return reader.read().then(function (step) {
          if (step.done) {
            var all = new Uint8Array(received);
            var at = 0;
            chunks.forEach(function (chunk) {
              all.set(chunk, at);
              at += chunk.length;
            });
            return all.buffer;
          }
          chunks.push(step.value);
          received += step.value.length;
          onBytes(received);
          return pump();
        });
      }
      return pump();
    });
  }

  // The browser's cache for the files of the model with this hash, or null where there is none
  // (no Cache API: file:// pages, some private windows). Caches of other hashes (an older
  // model) are deleted: one model is kept, never two.
  function openCache(hash) {
    if (!hash || typeof caches === "undefined" || !root.isSecureContext) {
      return Promise.resolve(null);
    }
    var name = CACHE_PREFIX + hash;
    return caches.keys().then(function (names) {
      return Promise.all(names.filter(function (other) {
        return other.indexOf(CACHE_PREFIX) === 0 && other !== name;
      }).map(function (other) {
        return caches.delete(other);
      }));
    }).then(function () {
      return caches.open(name);
    }).catch(function () {
      return null;
    });
  }

  // download(url) through the cache: {buffer, cached} where cached says it came from the disk.
  // A cache that fails to answer or to store is skipped: the download still counts.
  function fetchKept(cache, url, onBytes) {
    if (!cache) {
      return download(url, onBytes).then(function (buffer) {
        return { buffer: buffer, cached: false };
      });
    }
    return cache.match(url).catch(function () {
      return undefined;
    }).then(function (hit) {
      if (hit) {
        return hit.arrayBuffer().then(function (buffer) {
          onBytes(buffer.byteLength);
          return { buffer: buffer, cached: true };
        });
      }
      return download(url, onBytes).then(function (buffer) {
        return cache.put(url, new Response(buffer)).catch(function () {
          return null;
        }).then(function () {
          return { buffer: buffer, cached: false };
        });
      });
    });
  }

  // Whether every file is in the cache already (to say so on the button before a click).
  function allKept(cache, urls) {
    if (!cache) {
      return Promise.resolve(false);
    }
    return Promise.all(urls.map(function (url) {
      return cache.match(url);
    })).then(function (hits) {
      return hits.every(Boolean);
    }).catch(function () {
      return false;
    });
  }

  // The viridis colour of t in [0, 1] as [r, g, b].
  function rgb(t) {
    return dom.viridis(t).match(/\d+/g).map(Number);
  }

  // A vertical colour bar from 0 (bottom) to a map's largest weight (top), in viridis.
  function colourBar() {
    var stops = [];
    for (var i = 0; i <= 8; i++) {
      stops.push(dom.viridis(1 - i / 8) + " " + (100 * i / 8).toFixed(1) + "%");
    }
    var top = el("span", {}, [""]);
    var middle = el("span", {}, [""]);
    var ramp = el("div", { class: "al-ramp", "aria-hidden": "true",
      style: "background:linear-gradient(180deg," + stops.join(",") + ")" });
    var element = el("div", { class: "al-colorbar", "data-readout": "colorbar", role: "img" },
      [ramp, el("div", { class: "al-ticks" }, [top, middle, el("span", {}, ["0"])])]);
    return {
      element: element,
      show: function (largest) {
        top.textContent = largest.toFixed(4);
        middle.textContent = (largest / 2).toFixed(4);
        element.setAttribute("data-max", String(largest));
        element.setAttribute("aria-label", "colour scale: dark purple 0 to yellow " +
          largest.toFixed(4));
      },
    };
  }

  function mountImdb(rootElement) {
    var base = rootElement.getAttribute("data-base") || "";
    var size = parseInt(rootElement.getAttribute("data-size"), 10) || 0;
    var initialText = rootElement.getAttribute("data-example") || EXAMPLES.mixed;
    var hash = rootElement.getAttribute("data-hash") || "";
    var names = ["config.json", "tokenizer.json", "model.safetensors"];
    var kept = openCache(hash);
    dom.start(rootElement, "imdb");
    injectStyle();
    rootElement.setAttribute("data-state", "idle");

    var load = el("button", { "data-control": "load" },
      ["Run the model in this page (downloads " + megabytes(size) + ")"]);
    var progress = el("progress", { max: size || 1, value: 0 });
    var progressText = el("span", { "data-readout": "progress" }, [""]);
    var progressRow = el("div", { class: "al-row", hidden: true }, [progress, progressText]);
    var error = el("p", { class: "al-error", "data-readout": "error", hidden: true }, [""]);
    var workspace = el("div", { hidden: true });
    rootElement.appendChild(el("p", { class: "al-title" },
      ["The trained classifier, running in your browser"]));
    rootElement.appendChild(el("p", { class: "al-note" }, [
      "Type a review and the model of this chapter reads it here: no Python, no server. " +
      "It needs its weights and tokenizer first (" + megabytes(size) + ", downloaded when " +
      "you press the button; your browser keeps them for your next visit)."]));
    rootElement.appendChild(el("div", { class: "al-row" }, [load]));
    rootElement.appendChild(progressRow);
    rootElement.appendChild(error);
    rootElement.appendChild(workspace);
    dom.keepKeys(rootElement);
    kept.then(function (cache) {
      return allKept(cache, names.map(function (name) {
        return base + name;
      }));
    }).then(function (all) {
      if (all && !load.disabled) {
        load.textContent = "Run the model in this page (kept by your browser: no download)";
      }
    });

    function fail(message) {
      rootElement.setAttribute("data-state", "error");
      progressRow.hidden = true;
      error.hidden = false;
      error.textContent = message;
      load.disabled = false;
    }

    load.addEventListener("click", function () {
      var started = performance.now();
      load.disabled = true;
      error.hidden = true;
      progressRow.hidden = false;
      rootElement.setAttribute("data-state", "loading");
      progressText.textContent = "downloading…";
      var received = { model: 0, tokenizer: 0 };
      var fromCache = [];
      var show = function () {
        var total = received.model + received.tokenizer;
        progress.value = total;
        progressText.textContent = "downloading: " + megabytes(total) + " of " + megabytes(size);
      };
      var bytes = function (cache, name) {
        return fetchKept(cache, base + name, function (n) {
          if (name !== "config.json") {
            received[name === "tokenizer.json" ? "tokenizer" : "model"] = n;
            show();
          }
        }).then(function (file) {
          fromCache.push(file.cached);
          return file.buffer;
        });
      };
      var json = function (cache, name) {
        return bytes(cache, name).then(function (buffer) {
          try {
            return JSON.parse(new TextDecoder().decode(buffer));
          } catch (problem) {
            throw new Error(name + " is not JSON (" + problem.message + ")", { cause: problem });
          }
        });
      };
      kept.then(function (cache) {
        rootElement.setAttribute("data-cache", cache ? "pending" : "off");
        return Promise.all([
          json(cache, "config.json"),
          json(cache, "tokenizer.json"),
          bytes(cache, "model.safetensors"),
        ]);
      }).then(function (files) {
        if (rootElement.getAttribute("data-cache") === "pending") {
          var hit = fromCache.every(Boolean);
          rootElement.setAttribute("data-cache", hit ? "hit" : "stored");
        }
        progressText.textContent = "preparing the model…";
        // Let the browser paint the message before the synchronous set-up.
        return new Promise(function (resolve) {
          setTimeout(function () {
            resolve(files);
          }, 0);
        });
      }).then(function (files) {
        var wasm = root.attnlibImdbWasm ? base64Bytes(root.attnlibImdbWasm) : null;
        var tensors = imdb.readSafetensors(files[2], "model.safetensors");
        var model = new imdb.Classifier(tensors, files[0], { wasm: wasm });
        var tokenizer = new imdb.Tokenizer(files[1]);
        progressRow.hidden = true;
        load.hidden = true;
        ready(model, tokenizer, started);
      }).catch(function (problem) {
        fail("The model's files could not be loaded here (" + problem.message + "). The " +
          "live model runs in the published book (make book); in JupyterLab, the Python " +
          "cells of this chapter run the same model.");
      });
    });

    function ready(model, tokenizer, started) {
      var config = model.config;
      var review = el("textarea", { "data-control": "review", "aria-label": "a review",
        spellcheck: "false" });
      review.value = initialText;
      var examples = Object.keys(EXAMPLES).map(function (name) {
        var button = el("button", { "data-control": "example", "data-example": name },
          [name]);
        button.addEventListener("click", function () {
          review.value = EXAMPLES[name];
          run();
        });
        return button;
      });
      var layer = el("select", { "data-control": "layer", "aria-label": "layer" },
        Array.from({ length: config.num_layers }, function (_, l) {
          return el("option", { value: l, selected: l === config.num_layers - 1 },
            [String(l + 1)]);
        }));
      var head = el("select", { "data-control": "head", "aria-label": "head" },
        Array.from({ length: config.num_heads }, function (_, h) {
          return el("option", { value: h }, [String(h + 1)]);
        }).concat([el("option", { value: "mean" }, ["mean of heads"])]));
      var label = el("span", { class: "al-verdict", "data-readout": "label" }, [""]);
      var probability = el("output", { "data-readout": "probability" }, [""]);
      var bar = el("span", { class: "al-bar", "aria-hidden": "true" });
      var counts = el("p", { class: "al-note" }, [""]);
      var tokens = el("div", { class: "al-tokens", "data-readout": "tokens" });
      var canvas = el("canvas", { class: "al-heatmap", "data-readout": "heatmap",
        role: "img", "aria-label": "attention weights" });
      var colorbar = colourBar();
      var legend = el("p", { class: "al-note", "data-readout": "legend" }, [""]);
      var hover = el("p", { class: "al-note", "data-readout": "hover" }, [HOVER_HINT]);
      var mostRead = el("div", {});
      var timing = el("p", { class: "al-note", "data-readout": "timing" }, [""]);
      var prompt = el("p", { class: "al-note", "data-readout": "prompt", hidden: true },
        ["Type a review above (or pick an example) and the model will read it."]);
      var results = el("div", {}, [
        el("div", { class: "al-row" }, [label, bar,
          el("span", {}, ["P(positive) = ", probability])]),
        counts,
        tokens,
        el("div", { class: "al-row" }, [
          el("label", {}, ["layer", layer]), el("label", {}, ["head", head])]),
        el("div", { class: "al-map" }, [el("div", { class: "al-scroll" }, [canvas]),
          colorbar.element]),
        legend,
        hover,
        mostRead,
        timing,
      ]);

      workspace.appendChild(el("div", { class: "al-row" }, [el("span", {}, ["examples:"])]
        .concat(examples)));
      workspace.appendChild(review);
      workspace.appendChild(prompt);
      workspace.appendChild(results);
      workspace.hidden = false;
      dom.keepKeys(rootElement);

      var current = null;
      var predictions = 0;
      var pending = null;

      function chosenWeights() {
        var l = parseInt(layer.value, 10);
        var heads = current.weights[l];
        var n = current.ids.length;
        return head.value === "mean" ? imdb.meanOfHeads(heads, n) :
          heads[parseInt(head.value, 10)];
      }

      // A token as the reader sees it: without its end-of-word suffix.
      function shownToken(token) {
        return tokenizer.display(token).text;
      }

      function drawAttention() {
        if (!current) {
          return null;
        }
        var n = current.ids.length;
        var weights = chosenWeights();
        var received = imdb.attentionReceived(weights, n);
        var largest = 0;
        var smallest = Infinity;
        for (var i = 0; i < weights.length; i++) {
          largest = Math.max(largest, weights[i]);
          smallest = Math.min(smallest, weights[i]);
        }
        hover.textContent = HOVER_HINT;
        // Token labels along both axes when they can be read (up to 48 tokens).
        var labelled = n <= LABELLED_TOKENS;
        var cell = labelled ? Math.max(10, Math.floor(400 / n)) : Math.max(1, Math.floor(480 / n));
        var margin = labelled ? LABEL_MARGIN : 0;
        var side = margin + n * cell;
        canvas.width = side;
        canvas.height = side;
        var context = canvas.getContext("2d");
        var image = context.createImageData(n * cell, n * cell);
        for (var q = 0; q < n; q++) {
          for (var k = 0; k < n; k++) {
            var colour = rgb(largest > 0 ? weights[q * n + k] / largest : 0);
            for (var dy = 0; dy < cell; dy++) {
              for (var dx = 0; dx < cell; dx++) {
                var at = 4 * ((q * cell + dy) * n * cell + k * cell + dx);
                image.data[at] = colour[0];
                image.data[at + 1] = colour[1];
                image.data[at + 2] = colour[2];
                image.data[at + 3] = 255;
              }
            }
          }
        }
        context.putImageData(image, margin, margin);
        if (current.dropped) {
          // A line before the first token of the tail, across and down: the cut.
          var cut = margin + (1 + config.head_tokens) * cell;
          context.fillStyle = CUT_COLOUR;
          context.fillRect(cut - 1, margin, 2, n * cell);
          context.fillRect(margin, cut - 1, n * cell, 2);
        }
        if (labelled) {
          context.fillStyle = getComputedStyle(rootElement).color || "#000";
          context.font = Math.min(12, cell) + "px sans-serif";
          context.textBaseline = "middle";
          current.tokens.forEach(function (token, t) {
            var shown = shownToken(token);
            var text = shown.length > 11 ? shown.slice(0, 10) + "…" : shown;
            context.textAlign = "right";
            context.fillText(text, margin - 4, margin + (t + 0.5) * cell);
            context.save();
            context.translate(margin + (t + 0.5) * cell, margin - 4);
            context.rotate(-Math.PI / 2);
            context.textAlign = "left";
            context.fillText(text, 0, 0);
            context.restore();
          });
        }
        canvas.style.width = Math.min(side, 560) + "px";
        canvas.dataset.margin = String(margin);
        canvas.dataset.cell = String(cell);
        colorbar.show(largest);
        legend.textContent = "Queries (the tokens reading) down, keys (the tokens read) " +
          "across. Colour: 0 (dark purple) to this map's largest weight, " +
          largest.toFixed(4) + " (yellow); its smallest is " + smallest.toFixed(4) +
          ". The scale changes with every map." + (current.dropped ? " The red lines mark " +
          "where the middle of the review was dropped." : "");
        var which = "layer " + (parseInt(layer.value, 10) + 1) + ", " +
          (head.value === "mean" ? "mean of heads" : "head " + (parseInt(head.value, 10) + 1));
        canvas.setAttribute("aria-label", "attention weights of " + which + ": " + n +
          " queries down, " + n + " keys across; the brightest is " + largest.toFixed(4));
        rootElement.setAttribute("data-heatmap", [layer.value, head.value, n].join(","));
        var mostReceived = Math.max.apply(null, received);
        Array.prototype.forEach.call(tokens.querySelectorAll(".al-token"), function (chip, j) {
          var share = received[j] / (mostReceived || 1);
          chip.style.background = "rgba(31,119,180," + (0.05 + 0.6 * share).toFixed(3) + ")";
          chip.title = current.tokens[j] + " (position " + j + "): receives " +
            received[j].toFixed(4) + " of the attention in " + which;
        });
        var order = received.map(function (_, j) { return j; }).sort(function (a, b) {
          return received[b] - received[a] || a - b;
        }).slice(0, Math.min(8, n));
        var rows = order.map(function (j, rank) {
          return el("tr", {}, [el("td", {}, [String(rank + 1)]),
            el("th", { title: current.tokens[j] }, [shownToken(current.tokens[j])]),
            el("td", {}, [String(j)]), el("td", {}, [received[j].toFixed(4)])]);
        });
        mostRead.textContent = "";
        mostRead.appendChild(el("table", { "data-readout": "most-read" }, [
          el("caption", {}, ["Tokens most attended to in " + which + " (mean weight over " +
            "the queries: the pooled state averages every position's output)"]),
          el("thead", {}, [el("tr", {}, [el("th", {}, ["rank"]), el("th", {}, ["token"]),
            el("th", {}, ["position"]), el("th", {}, ["weight"])])]),
          el("tbody", {}, rows),
        ]));
        return weights;
      }

      // An empty review (no token but [CLS]): a prompt, not a prediction.
      function showPrompt() {
        current = null;
        results.hidden = true;
        prompt.hidden = false;
        error.hidden = true;
        rootElement.removeAttribute("data-probability");
        rootElement.setAttribute("data-state", "empty");
      }

      function run() {
        pending = null;
        var t0 = performance.now();
        try {
          current = imdb.analyse(model, tokenizer, review.value);
        } catch (problem) {
          if (problem.name === imdb.EMPTY_REVIEW) {
            showPrompt();
          } else {
            current = null;
            fail(problem.message);
          }
          return;
        }
        results.hidden = false;
        prompt.hidden = true;
        var p = current.probability;
        label.textContent = p >= 0.5 ? "positive" : "negative";
        label.style.color = p >= 0.5 ? "#27ae60" : "#c0392b";
        probability.textContent = p.toFixed(4);
        bar.style.setProperty("--neg", ((1 - p) * 100).toFixed(1) + "%");
        var n = current.ids.length;
        counts.textContent = (n - 1) + " subword tokens after [CLS]" + (current.dropped ?
          ", " + current.dropped + " dropped from the middle (the model reads the first " +
          config.head_tokens + " and the last " + (config.max_len - 1 - config.head_tokens) +
          ")" : "") + ". Each token is shaded by the attention it receives in the map below.";
        tokens.textContent = "";
        current.tokens.forEach(function (token, j) {
          if (current.dropped && j === 1 + config.head_tokens) {
            tokens.appendChild(el("em", { class: "al-dropped", "data-readout": "dropped",
              title: "the model reads the first " + config.head_tokens + " and the last " +
              (config.max_len - 1 - config.head_tokens) + " subwords" },
            ["… " + current.dropped + " subwords dropped here …"]));
          }
          var shown = tokenizer.display(token);
          tokens.appendChild(el("span", { class: shown.wordEnd ? "al-token al-word-end" : "al-token",
            "data-token": token, title: token }, [shown.text]));
        });
        drawAttention();
        predictions += 1;
        var elapsed = performance.now() - t0;
        if (predictions === 1) {
          rootElement.setAttribute("data-first-ms", (performance.now() - started).toFixed(0));
        }
        rootElement.setAttribute("data-last-ms", elapsed.toFixed(0));
        rootElement.setAttribute("data-probability", String(p));
        rootElement.setAttribute("data-predictions", String(predictions));
        rootElement.setAttribute("data-state", "ready");
        error.hidden = true;
        timing.textContent = "Read " + n + " tokens in " + elapsed.toFixed(0) + " ms (" +
          model.backendName + ").";
      }

      review.addEventListener("input", function () {
        hover.textContent = HOVER_HINT;  // it read the map of the text before this edit
        if (pending !== null) {
          clearTimeout(pending);
        }
        pending = setTimeout(run, 150);
      });
      [layer, head].forEach(function (control) {
        control.addEventListener("change", drawAttention);
      });
      function readWeight(event) {
        if (!current) {
          return;
        }
        var box = canvas.getBoundingClientRect();
        var scale = box.width / canvas.width;  // CSS pixels per canvas pixel
        var margin = Number(canvas.dataset.margin) * scale;
        var cell = Number(canvas.dataset.cell) * scale;
        var n = current.ids.length;
        var q = Math.floor((event.clientY - box.top - margin) / cell);
        var k = Math.floor((event.clientX - box.left - margin) / cell);
        if (q >= 0 && q < n && k >= 0 && k < n) {
          var weights = chosenWeights();
          hover.textContent = "query " + q + " “" + shownToken(current.tokens[q]) + "” → key " +
            k + " “" + shownToken(current.tokens[k]) + "”: " + weights[q * n + k].toFixed(4);
        }
      }
      canvas.addEventListener("mousemove", readWeight);
      canvas.addEventListener("click", readWeight);
      run();
    }
  }

  live().register("imdb", mountImdb);
})(typeof self !== "undefined" ? self : this);
