/* attnlib live: chapter 14's explorer, the encoder-decoder Transformer translating a typed date.
 *
 * Needs attention.js, explorers.js (the DOM helpers) and transformer_translator.js (the model)
 * first, all inlined by attnlib/live/transformer_translator.py, which puts the weights (base64
 * float32), their manifest and the configuration in the root's data-* attributes. The example
 * is translated when the explorer is built; every edit of the date translates again. Stable
 * hooks for tests and readers:
 *   root      .attnlib-live[data-explorer="transformer-translator"]; data-state "ready" | "empty"
 *             | "error"; data-translations (a count), data-output (the translation),
 *             data-steps, data-step (1-based), data-layer and data-head (1-based),
 *             data-first-ms (building the model and the first translation), data-last-ms (the
 *             latest translation and drawing, from the event that asked for it)
 *   controls  [data-control="date" (text) | "translate" (button) | "step" (range) | "previous"
 *             | "next" (buttons) | "layer" | "head" (selects) | "thumb" (one button per layer
 *             and head, data-layer and data-head 1-based)]
 *   readouts  [data-readout="output" (one span per written character, the current one marked)
 *             | "step-text" | "probabilities" (table: the likeliest next characters) | "source"
 *             (one span per source character, shaded by the current row's weights) | "heatmap"
 *             (SVG inside a box that scrolls sideways) | "thumbs" | "unknown" | "error" |
 *             "timing"]
 */
(function (root) {
  "use strict";

  function live() {
    var api = root.attnlibLive;
    if (!api || !api.dom || !api.register || !root.attnlibTransformerTranslator) {
      throw new Error("attnlib live: load attention.js, explorers.js and " +
                      "transformer_translator.js first");
    }
    return api;
  }

  var dom = live().dom;
  var el = dom.el;
  var svg = dom.svg;
  var model = root.attnlibTransformerTranslator;
  var STYLE_ID = "attnlib-transformer-translator-style";
  var CSS = [
    ".attnlib-live[data-explorer=transformer-translator] input[type=text]{width:22em;",
    "max-width:100%}",
    ".attnlib-live .al-written{font-family:SFMono-Regular,Menlo,Consolas,monospace;",
    "font-size:1.1rem;letter-spacing:.05em}",
    ".attnlib-live .al-written span{padding:0 .1em;border-radius:3px}",
    ".attnlib-live .al-written span.al-later{opacity:.3}",
    ".attnlib-live .al-written span.al-now{outline:2px solid #e6a700}",
    ".attnlib-live .al-source{display:flex;flex-wrap:wrap;gap:2px;margin:.2em 0}",
    ".attnlib-live .al-source span{font-family:SFMono-Regular,Menlo,Consolas,monospace;",
    "min-width:1.1em;text-align:center;border-radius:3px;padding:.1em .15em}",
    ".attnlib-live .al-thumbs{display:flex;flex-wrap:wrap;gap:.4em}",
    ".attnlib-live .al-thumbs button{display:flex;flex-direction:column;align-items:center;",
    "padding:.2em;font-size:.75rem}",
    ".attnlib-live .al-thumbs canvas{image-rendering:pixelated;max-width:9em;height:auto}",
    ".attnlib-live .al-step-row button{min-width:2.5em}",
    ".attnlib-live .al-map{display:flex;align-items:flex-start;max-width:100%}",
    ".attnlib-live .al-map .al-scroll{flex:0 1 auto;min-width:0}",
    ".attnlib-live .al-map svg{flex:none}",
  ].join("");
  var CELL = 22;  // pixels per heatmap cell: a character label fits
  var LEFT = 50;  // room for the written characters left of the map
  var TOP = 44;  // room for the source characters above it
  var SHOWN = 3;  // next characters listed with their probabilities

  // The viridis colour of 256 levels, worked out once: a map redraws thousands of cells.
  var LEVELS = [];
  for (var level = 0; level < 256; level++) {
    var css = dom.viridis(level / 255);
    LEVELS.push({ css: css, rgb: css.slice(4, -1).split(",").map(Number) });
  }

  function colour(weight) {
    return LEVELS[Math.max(0, Math.min(255, Math.round(weight * 255))) || 0];
  }

  function injectStyle() {
    if (!document.getElementById(STYLE_ID)) {
      (document.head || document.documentElement).appendChild(el("style", { id: STYLE_ID },
        [CSS]));
    }
  }

  // A character as a reader sees it on an axis: a space as ␣.
  function shown(symbol) {
    return symbol === " " ? "␣" : symbol;
  }

  function textColour(weight) {
    return weight < 0.6 ? "#fff" : "#000";
  }

  function parseAttribute(rootElement, name) {
    var text = rootElement.getAttribute("data-" + name);
    if (text === null) {
      throw new Error("the explorer lacks its data-" + name);
    }
    return name === "weights" ? text : JSON.parse(text);
  }

  // The written characters down the side of the map: a picture of their own, so that they
  // stay in view while the map scrolls sideways.
  function rowLabels(result, step) {
    var picture = svg("svg", { "data-readout": "heatmap-rows", width: LEFT,
      height: TOP + result.steps.length * CELL + 4, "font-size": 12,
      "font-family": "sans-serif", "aria-hidden": "true" });
    picture.appendChild(svg("text", { x: LEFT - 6, y: TOP - 8, "text-anchor": "end",
      fill: "currentColor", opacity: 0.8 }, "writes"));
    result.steps.forEach(function (entry, i) {
      picture.appendChild(svg("text", { x: LEFT - 6, y: TOP + i * CELL + CELL / 2 + 4,
        "text-anchor": "end", fill: "currentColor", "font-weight": i === step ? 700 : 400,
        opacity: i <= step ? 1 : 0.3 }, i <= step ? entry.token : "?"));
    });
    return picture;
  }

  // The cross-attention of one layer and head as an SVG: a row (a <g data-row>) per step, a
  // column per source character, and a frame (data-frame) for the current step. showRows hides
  // the rows not written yet, so that stepping changes the picture without rebuilding it.
  function heatmap(result, layer, head) {
    var symbols = result.symbols;
    var rows = result.steps.length;
    var picture = svg("svg", { "data-readout": "heatmap", width: symbols.length * CELL + 4,
      height: TOP + rows * CELL + 4, role: "img", "font-size": 12, "font-family": "sans-serif",
      "aria-label": "cross-attention of layer " + (layer + 1) + ", head " + (head + 1) });
    symbols.forEach(function (symbol, j) {
      picture.appendChild(svg("text", { x: (j + 0.5) * CELL, y: TOP - 8,
        "text-anchor": "middle", fill: "currentColor" }, shown(symbol)));
    });
    picture.appendChild(svg("text", { x: 0, y: 12, fill: "currentColor", opacity: 0.8 },
      "reads the date →"));
    result.steps.forEach(function (entry, i) {
      var group = svg("g", { "data-row": i });
      var row = entry.cross[layer][head];
      for (var j = 0; j < symbols.length; j++) {
        group.appendChild(svg("rect", { x: j * CELL, y: TOP + i * CELL, width: CELL - 1,
          height: CELL - 1, fill: colour(row[j]).css }));
      }
      picture.appendChild(group);
    });
    picture.appendChild(svg("rect", { "data-frame": "", x: 0, y: TOP - 1,
      width: symbols.length * CELL, height: CELL + 1, fill: "none", stroke: "#e6a700",
      "stroke-width": 2 }));
    return picture;
  }

  // Show the rows of steps 0..step of a heatmap, and frame the current one.
  function showRows(picture, step) {
    Array.prototype.forEach.call(picture.querySelectorAll("g[data-row]"), function (group) {
      group.setAttribute("visibility", Number(group.getAttribute("data-row")) <= step ?
        "visible" : "hidden");
    });
    picture.querySelector("[data-frame]").setAttribute("y", TOP + step * CELL - 1);
  }

  // Every step's row of one layer and head, a block of pixels per weight, on a canvas.
  function thumbnail(result, layer, head, step) {
    var scale = 3;
    var src = result.symbols.length;
    var rows = result.steps.length;
    var canvas = el("canvas", { width: src * scale, height: rows * scale });
    var context = canvas.getContext && canvas.getContext("2d");
    if (!context) {
      return canvas;
    }
    var image = context.createImageData(src * scale, rows * scale);
    var pixels = image.data;
    for (var i = 0; i < rows; i++) {
      var row = result.steps[i].cross[layer][head];
      for (var j = 0; j < src; j++) {
        // Later steps are not written yet: a faint grey.
        var rgb = i <= step ? colour(row[j]).rgb : [128, 128, 128];
        var alpha = i <= step ? 255 : 40;
        for (var dy = 0; dy < scale; dy++) {
          for (var dx = 0; dx < scale; dx++) {
            var at = 4 * ((i * scale + dy) * src * scale + j * scale + dx);
            pixels[at] = rgb[0];
            pixels[at + 1] = rgb[1];
            pixels[at + 2] = rgb[2];
            pixels[at + 3] = alpha;
          }
        }
      }
    }
    context.putImageData(image, 0, 0);
    return canvas;
  }

  function options(select, count, word) {
    for (var i = 0; i < count; i++) {
      select.appendChild(el("option", { value: i }, [word + " " + (i + 1)]));
    }
  }

  function mountTransformerTranslator(rootElement) {
    var started = performance.now();
    var config = parseAttribute(rootElement, "config");
    var translator = new model.Translator(
      model.decodeWeights(parseAttribute(rootElement, "weights"),
                          parseAttribute(rootElement, "manifest")), config);
    var example = rootElement.getAttribute("data-example") || "";
    injectStyle();
    dom.start(rootElement, "transformer-translator");
    var input = el("input", { type: "text", "data-control": "date", value: example,
      "aria-label": "a date to translate", spellcheck: "false", autocomplete: "off" });
    var button = el("button", { type: "button", "data-control": "translate" }, ["translate"]);
    var stepInput = el("input", { type: "range", "data-control": "step", min: 1, max: 1,
      value: 1, "aria-label": "decoding step" });
    var previous = el("button", { type: "button", "data-control": "previous",
      "aria-label": "previous step" }, ["◀"]);
    var next = el("button", { type: "button", "data-control": "next",
      "aria-label": "next step" }, ["▶"]);
    var layerSelect = el("select", { "data-control": "layer", "aria-label": "layer" });
    var headSelect = el("select", { "data-control": "head", "aria-label": "head" });
    options(layerSelect, config.num_layers, "layer");
    options(headSelect, config.num_heads, "head");
    layerSelect.value = String(config.num_layers - 1);  // the last layer: the sharpest maps
    var error = el("div", { class: "al-error", "data-readout": "error", role: "alert",
      hidden: true });
    var unknown = el("p", { class: "al-note", "data-readout": "unknown", hidden: true });
    var written = el("div", { class: "al-written", "data-readout": "output",
      "aria-live": "polite" });
    var stepText = el("p", { class: "al-note", "data-readout": "step-text" });
    var probabilities = el("div", { "data-readout": "probabilities" });
    var source = el("div", { class: "al-source", "data-readout": "source" });
    var mapBox = el("div", { class: "al-scroll", "data-readout": "heatmap-box" });
    var labelBox = el("div", {});
    var thumbs = el("div", { class: "al-thumbs", "data-readout": "thumbs" });
    var timing = el("p", { class: "al-note", "data-readout": "timing" });
    var results = el("div", {}, [
      el("div", { class: "al-row" }, [el("span", {}, ["translation:"]), written]),
      el("div", { class: "al-row al-step-row" }, [previous,
        el("label", {}, ["step", stepInput]), next]),
      stepText, probabilities,
      el("div", { class: "al-row" }, [el("label", {}, ["cross-attention of", layerSelect]),
        headSelect]),
      el("p", { class: "al-note" }, ["What this head reads in the date while it writes the " +
        "current character (weight 0 dark purple, 1 bright yellow):"]),
      source, el("div", { class: "al-map" }, [labelBox, mapBox]),
      el("p", { class: "al-note" }, ["Every layer and head (click one to show it above):"]),
      thumbs,
    ]);
    rootElement.appendChild(el("p", { class: "al-title" },
      ["Translate a date with the Transformer, one character at a time"]));
    rootElement.appendChild(el("div", { class: "al-row" }, [
      el("label", {}, ["date", input]), button]));
    rootElement.appendChild(unknown);
    rootElement.appendChild(error);
    rootElement.appendChild(results);
    rootElement.appendChild(timing);

    var result = null;
    var step = 0;
    var count = 0;

    function showStep() {
      var layer = Number(layerSelect.value);
      var head = Number(headSelect.value);
      var entry = result.steps[step];
      rootElement.setAttribute("data-step", String(step + 1));
      rootElement.setAttribute("data-layer", String(layer + 1));
      rootElement.setAttribute("data-head", String(head + 1));
      stepInput.value = String(step + 1);
      previous.disabled = step === 0;
      next.disabled = step === result.steps.length - 1;
      written.textContent = "";
      result.steps.forEach(function (s, i) {
        var mark = i === step ? "al-now" : i > step ? "al-later" : "";
        written.appendChild(el("span", { class: mark, title: "step " + (i + 1) }, [s.token]));
      });
      var before = result.steps.slice(0, step).map(function (s) { return s.token; }).join("");
      stepText.textContent = "Step " + (step + 1) + " of " + result.steps.length +
        ": the decoder reads <s>" + before + " and writes " + entry.token +
        " with probability " + entry.probabilities[entry.id].toFixed(3) + ".";
      var ranked = entry.probabilities.map(function (p, id) { return [p, id]; })
        .sort(function (a, b) { return b[0] - a[0]; }).slice(0, SHOWN);
      probabilities.textContent = "";
      probabilities.appendChild(dom.numberTable("probabilities", [ranked.map(function (r) {
        return r[0];
      })], ["probability"], ranked.map(function (r) { return translator.target.itos[r[1]]; }),
      "the likeliest next characters", function (p) { return p.toFixed(3); }));
      var row = entry.cross[layer][head];
      source.textContent = "";
      result.symbols.forEach(function (symbol, j) {
        source.appendChild(el("span", { title: "position " + j + ": " + row[j].toFixed(3),
          style: "background:" + colour(row[j]).css + ";color:" + textColour(row[j]) },
          [shown(symbol)]));
      });
      labelBox.textContent = "";
      labelBox.appendChild(rowLabels(result, step));
      var drawn = result.steps.length + ":" + layer + ":" + head;
      if (mapBox.getAttribute("data-drawn") !== drawn || !mapBox.firstChild) {
        mapBox.textContent = "";
        mapBox.appendChild(heatmap(result, layer, head));
        mapBox.setAttribute("data-drawn", drawn);
      }
      showRows(mapBox.firstChild, step);
      thumbs.textContent = "";
      for (var l = 0; l < config.num_layers; l++) {
        for (var h = 0; h < config.num_heads; h++) {
          thumbs.appendChild(thumbButton(l, h, l === layer && h === head));
        }
      }
      dom.keepKeys(rootElement);
    }

    function thumbButton(l, h, pressed) {
      var thumb = el("button", { type: "button", "data-control": "thumb", "data-layer": l + 1,
        "data-head": h + 1, "aria-pressed": pressed ? "true" : "false", class: "al-thumb",
        title: "layer " + (l + 1) + ", head " + (h + 1) },
      [thumbnail(result, l, h, step), "L" + (l + 1) + " H" + (h + 1)]);
      thumb.addEventListener("click", function () {
        layerSelect.value = String(l);
        headSelect.value = String(h);
        showStep();
      });
      return thumb;
    }

    function fail(state, message) {
      rootElement.setAttribute("data-state", state);
      error.textContent = message;
      error.hidden = false;
      results.hidden = true;
    }

    function translate(since) {
      var text = input.value;
      error.hidden = true;
      unknown.hidden = true;
      try {
        result = translator.translate(text);
      } catch (problem) {
        if (problem.name !== model.INPUT_ERROR) {
          throw problem;
        }
        fail(text.length ? "error" : "empty", problem.message);
        return;
      }
      if (result.unknown.length) {
        var alphabet = translator.source.itos.slice(4).map(shown).join("");
        unknown.textContent = "The model never saw " + result.unknown.map(function (u) {
          return "“" + u.symbol + "”";
        }).join(", ") + " in training: it reads each as <unk>. Its alphabet: " + alphabet;
        unknown.hidden = false;
      }
      results.hidden = false;
      count += 1;
      step = result.steps.length - 1;  // the whole translation first; step back to walk it
      mapBox.removeAttribute("data-drawn");
      stepInput.max = String(result.steps.length);
      rootElement.setAttribute("data-state", "ready");
      rootElement.setAttribute("data-output", result.output);
      rootElement.setAttribute("data-steps", String(result.steps.length));
      rootElement.setAttribute("data-translations", String(count));
      showStep();
      var ms = performance.now() - since;
      rootElement.setAttribute(count === 1 ? "data-first-ms" : "data-last-ms", ms.toFixed(1));
      timing.textContent = (count === 1 ? "Model built and first date translated" :
        "Translated") + " in " + ms.toFixed(0) + " ms, in your browser.";
    }

    input.addEventListener("input", function () { translate(performance.now()); });
    button.addEventListener("click", function () { translate(performance.now()); });
    input.addEventListener("keydown", function (event) {
      if (event.key === "Enter") {
        translate(performance.now());
      }
    });
    stepInput.addEventListener("input", function () {
      step = Number(stepInput.value) - 1;
      showStep();
    });
    previous.addEventListener("click", function () {
      step = Math.max(0, step - 1);
      showStep();
    });
    next.addEventListener("click", function () {
      step = Math.min(result.steps.length - 1, step + 1);
      showStep();
    });
    layerSelect.addEventListener("change", showStep);
    headSelect.addEventListener("change", showStep);
    translate(started);
    return rootElement;
  }

  live().register("transformer-translator", mountTransformerTranslator);
  root.attnlibLive.mountTransformerTranslator = mountTransformerTranslator;
})(typeof self !== "undefined" ? self : this);
