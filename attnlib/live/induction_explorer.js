/* attnlib live: chapter 17's explorer, the trained two-layer model with its heads on and off.
 *
 * Needs attention.js, explorers.js (the DOM helpers), transformer_translator.js and
 * induction_lm.js (the model) first, all inlined by attnlib/live/induction_explorer.py, which
 * puts the weights (base64 float32), their manifest, the configuration, example sequences and
 * the heads' scores in the root's data-* attributes. Every change runs the model again. Stable
 * hooks for tests and readers (layers are counted from 1 and heads from 0, as the chapter does):
 *   root      .attnlib-live[data-explorer="induction"]; data-state "ready" | "error";
 *             data-runs (a count), data-tokens (the ids, the start token first), data-predicted
 *             (the likeliest next token at every position), data-off ("L2H1 L2H3", the heads
 *             switched off), data-position (0-based), data-layer, data-head, data-right
 *             ("right/total" next tokens, whose token came before), data-first-ms and
 *             data-last-ms (a run and its drawing, from the event that asked for it)
 *   controls  [data-control="example" (select) | "tokens" (text) | "run" (button) | "head"
 *             (one checkbox per layer and head, checked = on, data-layer and data-head) |
 *             "position" (range) | "show-layer" | "show-head" (selects) | "all-on" (button) |
 *             "thumb" (one button per layer and head, data-layer and data-head, shows it)]
 *   readouts  [data-readout="sequence" (one span per token, shaded by the shown head's weights
 *             from the current position) | "predicted" (one span per position) | "summary" |
 *             "position-text" | "probabilities" (table) | "heatmap" (SVG) | "thumbs" | "error" |
 *             "timing"]
 */
(function (root) {
  "use strict";

  function live() {
    var api = root.attnlibLive;
    if (!api || !api.dom || !api.register || !root.attnlibInductionLM) {
      throw new Error("attnlib live: load attention.js, explorers.js, transformer_translator.js " +
                      "and induction_lm.js first");
    }
    return api;
  }

  var dom = live().dom;
  var el = dom.el;
  var svg = dom.svg;
  var lm = root.attnlibInductionLM;
  var STYLE_ID = "attnlib-induction-style";
  var CSS = [
    ".attnlib-live[data-explorer=induction] input[type=text]{width:34em;max-width:100%;",
    "box-sizing:border-box;font-family:SFMono-Regular,Menlo,Consolas,monospace}",
    ".attnlib-live .al-tokens{display:flex;flex-wrap:wrap;gap:2px;margin:.2em 0}",
    ".attnlib-live .al-tokens span{font-family:SFMono-Regular,Menlo,Consolas,monospace;",
    "font-size:.8rem;min-width:1.6em;text-align:center;border-radius:3px;padding:.1em 0;",
    "cursor:pointer}",
    ".attnlib-live .al-tokens span.al-now{outline:2px solid #e6a700}",
    ".attnlib-live .al-tokens span.al-right{background:rgba(46,160,67,.35)}",
    ".attnlib-live .al-tokens span.al-wrong{background:rgba(192,57,43,.25)}",
    ".attnlib-live .al-heads{display:flex;flex-wrap:wrap;gap:.2em .8em}",
    ".attnlib-live .al-heads label{font-size:.8rem}",
    ".attnlib-live .al-scroll{max-width:100%;overflow-x:auto}",
    ".attnlib-live .al-thumbs{display:flex;flex-wrap:wrap;gap:.4em}",
    ".attnlib-live .al-thumbs button{display:flex;flex-direction:column;align-items:center;",
    "padding:.2em;font-size:.75rem}",
    ".attnlib-live .al-thumbs button[aria-pressed=true]{outline:2px solid #e6a700}",
  ].join("");
  var CELL = 7;  // pixels per heatmap cell: 48 positions in 336 pixels
  var SHOWN = 5;  // next tokens listed with their probabilities
  var THUMB = 2;  // pixels per weight in the thumbnails of every head

  function injectStyle() {
    if (!document.getElementById(STYLE_ID)) {
      (document.head || document.documentElement).appendChild(el("style", { id: STYLE_ID },
        [CSS]));
    }
  }

  function parseAttribute(rootElement, name) {
    var text = rootElement.getAttribute("data-" + name);
    if (text === null) {
      throw new Error("the explorer lacks its data-" + name);
    }
    return name === "weights" ? text : JSON.parse(text);
  }

  function tokenName(id) {
    return id === 0 ? "BOS" : String(id);
  }

  function textColour(weight) {
    return weight < 0.6 ? "#fff" : "#000";
  }

  // One head's weights (n, n) as a heatmap, queries down, keys across; the row of `position`
  // framed.
  function heatmap(weights, n, position) {
    var picture = svg("svg", { "data-readout": "heatmap", width: n * CELL + 2,
      height: n * CELL + 2, role: "img",
      "aria-label": "attention weights of the shown head, queries down, keys across" });
    // The keys a query may read (itself and those before it) at weight 0, then the weights
    // above 0.004 on top: a few hundred rectangles rather than n squared.
    var stairs = ["1,1"];
    for (var row = 0; row < n; row++) {
      var x = 1 + (row + 1) * CELL;
      stairs.push(x + "," + (1 + row * CELL), x + "," + (1 + (row + 1) * CELL));
    }
    stairs.push("1," + (1 + n * CELL));
    picture.appendChild(svg("polygon", { fill: dom.viridis(0), points: stairs.join(" ") }));
    for (var i = 0; i < n; i++) {
      for (var j = 0; j <= i; j++) {
        var w = weights[i * n + j];
        if (w > 0.004) {
          picture.appendChild(svg("rect", { x: j * CELL + 1, y: i * CELL + 1, width: CELL,
            height: CELL, fill: dom.viridis(w) }));
        }
      }
    }
    picture.appendChild(svg("rect", { x: 0.5, y: 0.5, width: n * CELL + 1, height: n * CELL + 1,
      fill: "none", stroke: "currentColor", "stroke-opacity": 0.4 }));
    picture.appendChild(svg("rect", { "data-frame": "true", x: 0.5, y: position * CELL + 0.5,
      width: n * CELL + 1, height: CELL + 1, fill: "none", stroke: "#e6a700",
      "stroke-width": 1.5 }));
    return picture;
  }

  // The viridis colour of 256 levels as [r, g, b], worked out once: a thumbnail has n² pixels.
  var LEVELS = [];
  for (var level = 0; level < 256; level++) {
    LEVELS.push(dom.viridis(level / 255).slice(4, -1).split(",").map(Number));
  }

  // One head's weights (n, n) on a canvas, THUMB pixels a weight; the keys a query may not
  // read (those after it) a faint grey.
  function thumbnail(weights, n) {
    var size = n * THUMB;
    var canvas = el("canvas", { width: size, height: size });
    var context = canvas.getContext && canvas.getContext("2d");
    if (!context) {
      return canvas;
    }
    var image = context.createImageData(size, size);
    var pixels = image.data;
    for (var i = 0; i < n; i++) {
      for (var j = 0; j < n; j++) {
        var rgb = j <= i ? LEVELS[Math.round(Math.min(1, weights[i * n + j]) * 255)] :
          [128, 128, 128];
        for (var dy = 0; dy < THUMB; dy++) {
          for (var dx = 0; dx < THUMB; dx++) {
            var at = 4 * ((i * THUMB + dy) * size + j * THUMB + dx);
            pixels[at] = rgb[0];
            pixels[at + 1] = rgb[1];
            pixels[at + 2] = rgb[2];
            pixels[at + 3] = j <= i ? 255 : 40;
          }
        }
      }
    }
    context.putImageData(image, 0, 0);
    return canvas;
  }

  // A checkbox that switches head h of layer l on (checked) and off, labelled with its scores.
  function headSwitch(l, h, scores) {
    var box = el("input", { type: "checkbox", "data-control": "head", "data-layer": l + 1,
      "data-head": h, checked: true });
    var notes = Object.keys(scores).map(function (name) {
      return name + " " + scores[name][l][h].toFixed(2);
    });
    var label = el("label", { title: notes.join(", ") }, [box, "H" + h +
      (notes.length ? " (" + notes.join(", ") + ")" : "")]);
    return { layer: l, head: h, box: box, label: label };
  }

  function mountInduction(rootElement) {
    var started = performance.now();
    var config = parseAttribute(rootElement, "config");
    var model = new lm.LanguageModel(lm.decodeWeights(parseAttribute(rootElement, "weights"),
      parseAttribute(rootElement, "manifest")), config);
    var examples = parseAttribute(rootElement, "examples");
    var scores = parseAttribute(rootElement, "scores");
    var layers = config.num_layers;
    var heads = config.num_heads;
    injectStyle();
    dom.start(rootElement, "induction");

    var exampleSelect = el("select", { "data-control": "example", "aria-label": "example" });
    examples.forEach(function (row, i) {
      exampleSelect.appendChild(el("option", { value: i }, ["example " + (i + 1)]));
    });
    var input = el("input", { type: "text", "data-control": "tokens", spellcheck: "false",
      autocomplete: "off", "aria-label": "tokens after the start token, spaced" });
    var button = el("button", { type: "button", "data-control": "run" }, ["run"]);
    var allOn = el("button", { type: "button", "data-control": "all-on" }, ["all heads on"]);
    var switches = [];
    var headBox = el("div", { class: "al-heads" });
    for (var l = 0; l < layers; l++) {
      var row = el("div", { class: "al-row" }, [el("span", {}, ["layer " + (l + 1) + ":"])]);
      for (var h = 0; h < heads; h++) {
        var made = headSwitch(l, h, scores);
        row.appendChild(made.label);
        switches.push(made);
      }
      headBox.appendChild(row);
    }
    var positionInput = el("input", { type: "range", "data-control": "position", min: 0,
      max: 1, value: 1, "aria-label": "position" });
    var layerSelect = el("select", { "data-control": "show-layer", "aria-label": "layer" });
    var headSelect = el("select", { "data-control": "show-head", "aria-label": "head" });
    for (var i = 0; i < layers; i++) {
      layerSelect.appendChild(el("option", { value: i }, ["layer " + (i + 1)]));
    }
    for (var k = 0; k < heads; k++) {
      headSelect.appendChild(el("option", { value: k }, ["head " + k]));
    }
    layerSelect.value = String(layers - 1);
    var error = el("div", { class: "al-error", "data-readout": "error", role: "alert",
      hidden: true });
    var sequence = el("div", { class: "al-tokens", "data-readout": "sequence" });
    var predicted = el("div", { class: "al-tokens", "data-readout": "predicted" });
    var summary = el("p", { class: "al-note", "data-readout": "summary", "aria-live": "polite" });
    var positionText = el("p", { class: "al-note", "data-readout": "position-text" });
    var probabilities = el("div", { "data-readout": "probabilities" });
    var mapBox = el("div", { class: "al-scroll" });
    var thumbs = el("div", { class: "al-thumbs", "data-readout": "thumbs" });
    var timing = el("p", { class: "al-note", "data-readout": "timing" });
    var results = el("div", {}, [
      el("p", { class: "al-note" }, ["The tokens, shaded by the shown head's weights from the " +
        "framed position (click a token to move there; weight 0 dark purple, 1 yellow):"]),
      sequence,
      el("p", { class: "al-note" }, ["The likeliest next token at each position (green: it " +
        "is the token that comes next, red: it is not):"]),
      predicted, summary,
      el("div", { class: "al-row" }, [el("label", {}, ["position", positionInput]),
        el("label", {}, ["show", layerSelect]), headSelect]),
      positionText, el("div", { class: "al-row" }, [probabilities, mapBox]),
      el("p", { class: "al-note" }, ["Every layer and head (click one to show it above):"]),
      thumbs,
    ]);
    rootElement.appendChild(el("p", { class: "al-title" },
      ["The trained two-layer model: switch heads off and watch it stop copying"]));
    rootElement.appendChild(el("div", { class: "al-row" }, [exampleSelect,
      el("span", {}, ["or type tokens (1 to " + (config.vocab_size - 1) + ") after the start " +
        "token:"])]));
    rootElement.appendChild(el("div", { class: "al-row" }, [input, button]));
    rootElement.appendChild(el("p", { class: "al-note" }, [Object.keys(scores).length ?
      "Heads on, each with its scores:" : "Heads on:"]));
    rootElement.appendChild(headBox);
    rootElement.appendChild(allOn);
    rootElement.appendChild(error);
    rootElement.appendChild(results);
    rootElement.appendChild(timing);

    var ids = null;
    var result = null;
    var position = 0;
    var count = 0;

    function off() {
      return switches.filter(function (s) { return !s.box.checked; })
        .map(function (s) { return [s.layer, s.head]; });
    }

    function show() {
      var layer = Number(layerSelect.value);
      var head = Number(headSelect.value);
      var n = ids.length;
      var weights = result.weights[layer][head];
      rootElement.setAttribute("data-position", String(position));
      rootElement.setAttribute("data-layer", String(layer + 1));
      rootElement.setAttribute("data-head", String(head));
      positionInput.value = String(position);
      sequence.textContent = "";
      ids.forEach(function (id, j) {
        var w = j <= position ? weights[position * n + j] : 0;
        var span = el("span", { "data-position": j, class: j === position ? "al-now" : "",
          title: "position " + j + ", token " + tokenName(id) + ": weight " + w.toFixed(3),
          style: "background:" + dom.viridis(w) + ";color:" + textColour(w) }, [tokenName(id)]);
        span.addEventListener("click", function () {
          position = j;
          show();
        });
        sequence.appendChild(span);
      });
      var p = model.probabilities(result, position);
      var guess = result.predicted[position];
      var next = position + 1 < n ? ids[position + 1] : null;
      positionText.textContent = "At position " + position + " (token " +
        tokenName(ids[position]) + ") the model predicts " + tokenName(guess) +
        " with probability " + p[guess].toFixed(3) + (next === null ? "; the sequence ends here." :
          "; the next token is " + tokenName(next) + ", which gets " + p[next].toFixed(3) + ".");
      var ranked = p.map(function (q, id) { return [q, id]; })
        .sort(function (a, b) { return b[0] - a[0]; }).slice(0, SHOWN);
      probabilities.textContent = "";
      probabilities.appendChild(dom.numberTable("probabilities", ranked.map(function (r) {
        return [r[0]];
      }), ranked.map(function (r) { return "token " + tokenName(r[1]); }), ["probability"],
      "the likeliest next tokens", function (q) { return q.toFixed(3); }));
      mapBox.textContent = "";
      mapBox.appendChild(el("p", { class: "al-note" }, ["Layer " + (layer + 1) + ", head " +
        head + ": every position's weights (queries down, keys across):"]));
      mapBox.appendChild(heatmap(weights, n, position));
      Array.prototype.forEach.call(thumbs.children, function (thumb) {
        var pressed = Number(thumb.getAttribute("data-layer")) === layer + 1 &&
          Number(thumb.getAttribute("data-head")) === head;
        thumb.setAttribute("aria-pressed", pressed ? "true" : "false");
      });
      dom.keepKeys(rootElement);
    }

    function drawThumbs() {
      thumbs.textContent = "";
      result.weights.forEach(function (layerWeights, shownLayer) {
        layerWeights.forEach(function (weights, shownHead) {
          var thumb = el("button", { type: "button", "data-control": "thumb",
            "data-layer": shownLayer + 1, "data-head": shownHead, "aria-pressed": "false",
            title: "layer " + (shownLayer + 1) + ", head " + shownHead },
          [thumbnail(weights, ids.length), "L" + (shownLayer + 1) + " H" + shownHead]);
          thumb.addEventListener("click", function () {
            layerSelect.value = String(shownLayer);
            headSelect.value = String(shownHead);
            show();
          });
          thumbs.appendChild(thumb);
        });
      });
    }

    function showPredictions() {
      var n = ids.length;
      var seen = {};
      var right = 0;
      var total = 0;
      predicted.textContent = "";
      result.predicted.forEach(function (guess, t) {
        var next = t + 1 < n ? ids[t + 1] : null;
        var copyable = seen[ids[t]] === true;
        seen[ids[t]] = true;
        if (copyable && next !== null) {
          total += 1;
          right += guess === next ? 1 : 0;
        }
        var span = el("span", { "data-position": t, class: next === null ? "" :
          guess === next ? "al-right" : "al-wrong",
        title: "after position " + t + ": " + tokenName(guess) }, [tokenName(guess)]);
        span.addEventListener("click", function () {
          position = t;
          show();
        });
        predicted.appendChild(span);
      });
      rootElement.setAttribute("data-right", right + "/" + total);
      summary.textContent = total ? "Where the current token came before (where copying can " +
        "help), the next token is predicted right at " + right + " of " + total + " positions." :
        "No token repeats here, so there is nothing to copy.";
    }

    function run(since) {
      error.hidden = true;
      var typed;
      try {
        typed = lm.parseTokens(input.value, config.vocab_size, config.max_len - 1);
      } catch (problem) {
        if (problem.name !== lm.INPUT_ERROR) {
          throw problem;
        }
        rootElement.setAttribute("data-state", "error");
        error.textContent = problem.message;
        error.hidden = false;
        results.hidden = true;
        return;
      }
      ids = [0].concat(typed);
      var switchedOff = off();
      result = model.run(ids, switchedOff);
      results.hidden = false;
      count += 1;
      position = Math.min(position, ids.length - 1);
      positionInput.max = String(ids.length - 1);
      rootElement.setAttribute("data-state", "ready");
      rootElement.setAttribute("data-runs", String(count));
      rootElement.setAttribute("data-tokens", ids.join(" "));
      rootElement.setAttribute("data-predicted", result.predicted.join(" "));
      rootElement.setAttribute("data-off", switchedOff.map(function (pair) {
        return "L" + (pair[0] + 1) + "H" + pair[1];
      }).join(" "));
      showPredictions();
      drawThumbs();
      show();
      var ms = performance.now() - since;
      rootElement.setAttribute(count === 1 ? "data-first-ms" : "data-last-ms", ms.toFixed(1));
      timing.textContent = (count === 1 ? "Model built and run" : "Run") + " in " +
        ms.toFixed(0) + " ms, in your browser.";
    }

    function pickExample() {
      input.value = examples[Number(exampleSelect.value)].slice(1).join(" ");
    }

    exampleSelect.addEventListener("change", function () {
      var since = performance.now();
      pickExample();
      run(since);
    });
    input.addEventListener("input", function () { run(performance.now()); });
    button.addEventListener("click", function () { run(performance.now()); });
    switches.forEach(function (s) {
      s.box.addEventListener("change", function () { run(performance.now()); });
    });
    allOn.addEventListener("click", function () {
      var since = performance.now();
      switches.forEach(function (s) { s.box.checked = true; });
      run(since);
    });
    positionInput.addEventListener("input", function () {
      position = Number(positionInput.value);
      show();
    });
    layerSelect.addEventListener("change", show);
    headSelect.addEventListener("change", show);
    pickExample();
    position = examples[0].length - 2;  // the last prediction that has an answer to check
    run(started);
    return rootElement;
  }

  live().register("induction", mountInduction);
  root.attnlibLive.mountInduction = mountInduction;
})(typeof self !== "undefined" ? self : this);
