/* attnlib live: the explorers of chapters 07-09 (heads, positions, masks) as plain DOM.
 *
 * Needs attention.js, encoder.js and explorers.js first. The data come from the root's data-*
 * attributes, written by attnlib/live/__init__.py. Stable hooks for tests and readers:
 *   heads     controls [data-control="heads" | "head" (selects) | "scale-model" (checkbox)]
 *             readouts [data-readout="weights" (the chosen head, 4 decimals) | "heads" (per
 *             head: mean entropy in nats, largest weight) | "d-head" | "scale" | "heatmap" |
 *             "thumbnails" (one svg[data-head] per head, click to choose)]
 *   positions controls [data-control="offset" | "position" | "pair" (ranges)]
 *             readouts [data-readout="k" | "pos" | "i" | "frequency" | "angle" | "rotation"
 *             (2x2) | "pair" (PE(pos), M(k)·PE(pos), PE(pos+k) as rows) | "max-error" |
 *             "similarity" | "circle" | "chart"]
 *   masks     controls [data-control="kind" | "fill" | "row" (selects) | "length" (range) |
 *             "mask-row" (checkbox)]
 *             readouts [data-readout="mask" (1/0) | "scores" (filled) | "weights" | "row-sums" |
 *             "leak" | "difference" | "length" | "heatmap"]
 */
(function (root) {
  "use strict";

  function live() {
    var api = root.attnlibLive;
    if (!api || !api.multiHead || !api.dom || !api.register) {
      throw new Error("attnlib live: load attention.js, encoder.js, explorers.js first");
    }
    return api;
  }

  var dom = live().dom;
  var el = dom.el;
  var svg = dom.svg;
  var fixed4 = dom.fixed4;

  function data(rootElement, name) {
    return JSON.parse(rootElement.getAttribute("data-" + name));
  }

  function integer(rootElement, name, fallback) {
    var value = parseInt(rootElement.getAttribute("data-" + name), 10);
    return isNaN(value) ? fallback : value;
  }

  function scroll(child) {
    return el("div", { class: "al-scroll" }, [child]);
  }

  function select(name, label, options, value) {
    return el("select", { "data-control": name, "aria-label": label },
      options.map(function (option) {
        return el("option", { value: option[0], selected: String(option[0]) === String(value) },
          [option[1]]);
      }));
  }

  function range(name, label, low, high, value) {
    return el("input", { type: "range", min: low, max: high, step: 1, value: value,
      "data-control": name, "aria-label": label });
  }

  function span(name, text) {
    return el("span", { "data-readout": name }, [text]);
  }

  function listen(controls, update) {
    controls.forEach(function (control) {
      control.addEventListener("input", update);
      control.addEventListener("change", update);
    });
  }

  // A matrix as a viridis heatmap scaled to fit its container; crossed cells are masked ones.
  function heatmap(matrix, rowLabels, columnLabels, title, crossed) {
    var cell = 40;
    var left = 52;
    var top = 34;
    var n = matrix.length;
    var m = n ? matrix[0].length : 0;
    var w = left + m * cell + 4;
    var h = top + n * cell + 4;
    var picture = svg("svg", { "data-readout": "heatmap", class: "al-fit", width: w, height: h,
      viewBox: "0 0 " + w + " " + h, role: "img", "aria-label": title, "font-size": 11,
      "font-family": "sans-serif" });
    picture.appendChild(svg("text", { x: left, y: 10, fill: "currentColor", "font-weight": 600 },
      title));
    columnLabels.forEach(function (label, k) {
      picture.appendChild(svg("text", { x: left + (k + 0.5) * cell, y: top - 6,
        "text-anchor": "middle", fill: "currentColor" }, label));
    });
    matrix.forEach(function (row, i) {
      picture.appendChild(svg("text", { x: left - 6, y: top + (i + 0.5) * cell + 4,
        "text-anchor": "end", fill: "currentColor" }, rowLabels[i]));
      row.forEach(function (value, k) {
        var x = left + k * cell;
        var y = top + i * cell;
        var square = svg("rect", { x: x, y: y, width: cell - 2, height: cell - 2,
          fill: dom.viridis(value) });
        square.appendChild(svg("title", {},
          rowLabels[i] + " → " + columnLabels[k] + ": " + fixed4(value)));
        picture.appendChild(square);
        if (crossed && crossed[i][k]) {
          picture.appendChild(svg("path", { d: "M" + x + " " + y + "l" + (cell - 2) + " " +
            (cell - 2), stroke: "#e74c3c", "stroke-width": 1.5, "stroke-opacity": 0.8 }));
        }
        picture.appendChild(svg("text", { x: x + (cell - 2) / 2, y: y + (cell - 2) / 2 + 4,
          "text-anchor": "middle", fill: value < 0.6 ? "#fff" : "#000" }, value.toFixed(2)));
      });
    });
    return picture;
  }

  // --- chapter 07: heads ---

  function thumbnail(weights, h, chosen) {
    var cell = Math.max(4, Math.floor(72 / weights.length));
    var size = cell * weights.length;
    var picture = svg("svg", { class: "al-thumb", "data-head": h + 1, width: size + 4,
      height: size + 18, role: "button", "aria-pressed": String(chosen), tabindex: 0,
      "data-lm-suppress-shortcuts": "true",
      "aria-label": "show head " + (h + 1), "font-size": 10, "font-family": "sans-serif" });
    picture.appendChild(svg("text", { x: 2, y: 11, fill: "currentColor" }, "head " + (h + 1)));
    weights.forEach(function (row, i) {
      row.forEach(function (value, k) {
        picture.appendChild(svg("rect", { x: 2 + k * cell, y: 15 + i * cell, width: cell,
          height: cell, fill: dom.viridis(value) }));
      });
    });
    return picture;
  }

  function mountHeads(rootElement) {
    var api = live();
    var tokens = data(rootElement, "tokens");
    var inputs = data(rootElement, "inputs");
    var wQ = data(rootElement, "w-q");
    var wK = data(rootElement, "w-k");
    var wV = data(rootElement, "w-v");
    var dModel = inputs[0].length;
    var counts = api.divisors(dModel);
    var initial = integer(rootElement, "heads", counts[counts.length - 1]);
    dom.start(rootElement, "heads");

    var heads = select("heads", "number of heads", counts.map(function (c) {
      return [c, String(c)];
    }), initial);
    var head = select("head", "which head", [[1, "1"]], 1);
    var scaleModel = el("input", { type: "checkbox", "data-control": "scale-model" });
    var readout = el("div", {});

    rootElement.appendChild(el("p", { class: "al-title" },
      ["Head explorer (runs in your browser)"]));
    rootElement.appendChild(el("div", { class: "al-row" }, [
      el("label", {}, ["heads", heads]), el("label", {}, ["show head", head]),
      el("label", {}, [scaleModel, "scale by √d_model instead of √d_head (a common bug)"]),
    ]));
    rootElement.appendChild(readout);

    function fillHeads(count, chosen) {
      head.textContent = "";
      for (var h = 1; h <= count; h++) {
        head.appendChild(el("option", { value: h, selected: h === chosen }, [String(h)]));
      }
      head.value = String(chosen);
    }

    function update() {
      var count = parseInt(heads.value, 10);
      var chosen = Math.min(count, Math.max(1, parseInt(head.value, 10) || 1));
      if (head.options.length !== count) {
        fillHeads(count, chosen);
      }
      var scaleBy = scaleModel.checked ? "model" : "head";
      var result = api.multiHead(inputs, wQ, wK, wV, count, { scaleBy: scaleBy });
      var summary = api.headSummary(result.weights);
      var weights = result.weights[chosen - 1];
      var dHead = dModel / count;
      var thumbs = el("div", { class: "al-row", "data-readout": "thumbnails" },
        result.weights.map(function (w, h) {
          var picture = thumbnail(w, h, h === chosen - 1);
          picture.addEventListener("click", function () {
            head.value = String(h + 1);
            update();
          });
          picture.addEventListener("keydown", function (event) {
            if (event.key === "Enter" || event.key === " ") {
              event.preventDefault();
              head.value = String(h + 1);
              update();
            }
          });
          return picture;
        }));
      readout.textContent = "";
      readout.appendChild(el("p", { class: "al-note" }, [
        "d_model = " + dModel + ", " + count + (count === 1 ? " head" : " heads") +
          ": each head sees d_head = ", span("d-head", String(dHead)),
        " columns of Q, K and V; its scores are divided by " +
          (scaleBy === "head" ? "√d_head" : "√d_model") + " = ",
        span("scale", fixed4(result.scale)),
        scaleBy === "model" && count > 1 ? " (too much: the weights come out flatter)" : "",
      ]));
      readout.appendChild(el("div", { class: "al-row" }, [
        scroll(dom.numberTable("weights", weights, tokens, tokens, "head " + chosen + " of " +
          count + ": softmax(Q_h K_hᵀ / " + (scaleBy === "head" ? "√d_head" : "√d_model") +
          "), queries down, keys across")),
        heatmap(weights, tokens, tokens, "head " + chosen + " weights"),
      ]));
      readout.appendChild(scroll(dom.numberTable("heads", summary.map(function (s) {
        return [s.entropy, s.largest];
      }), summary.map(function (_, h) {
        return "head " + (h + 1);
      }), ["mean entropy (nats)", "largest weight"], "every head (uniform rows would have " +
        "entropy " + fixed4(Math.log(tokens.length)) + ")")));
      readout.appendChild(thumbs);
      dom.keepKeys(rootElement);
    }

    dom.keepKeys(rootElement);
    listen([heads, head, scaleModel], update);
    fillHeads(initial, 1);
    update();
    return rootElement;
  }

  // --- chapter 08: sinusoidal positions ---

  // PE(pos) and PE(pos + k) of pair i on the unit circle: (cos, sin) turns by kω_i.
  function circle(here, there) {
    var size = 170;
    var c = size / 2;
    var r = 62;
    var picture = svg("svg", { "data-readout": "circle", class: "al-fit", width: size,
      height: size + 14, viewBox: "0 0 " + size + " " + (size + 14), role: "img",
      "aria-label": "the pair on the unit circle", "font-size": 10, "font-family": "sans-serif" });
    picture.appendChild(svg("circle", { cx: c, cy: c + 8, r: r, fill: "none",
      stroke: "currentColor", "stroke-opacity": 0.4 }));
    picture.appendChild(svg("line", { x1: c - r - 8, x2: c + r + 8, y1: c + 8, y2: c + 8,
      stroke: "currentColor", "stroke-opacity": 0.3 }));
    picture.appendChild(svg("line", { x1: c, x2: c, y1: 8 + c - r - 8, y2: 8 + c + r + 8,
      stroke: "currentColor", "stroke-opacity": 0.3 }));
    picture.appendChild(svg("text", { x: 2, y: 10, fill: "currentColor" },
      "across: cos (2i+1), up: sin (2i)"));
    [[here, "#1f77b4", "pos"], [there, "#d62728", "pos+k"]].forEach(function (point) {
      var x = c + r * point[0][1];
      var y = c + 8 - r * point[0][0];
      picture.appendChild(svg("line", { x1: c, y1: c + 8, x2: x, y2: y, stroke: point[1],
        "stroke-width": 2 }));
      picture.appendChild(svg("circle", { cx: x, cy: y, r: 4, fill: point[1] }));
      picture.appendChild(svg("text", { x: x + 6, y: y - 4, fill: point[1] }, point[2]));
    });
    return picture;
  }

  // PE(pos) · PE(pos + Δ) against Δ, the point Δ = k marked.
  function similarityChart(values, k) {
    var width = 340;
    var height = 190;
    var left = 40;
    var top = 22;
    var plotWidth = width - left - 10;
    var plotHeight = 130;
    var high = Math.max.apply(null, values);
    var low = Math.min(0, Math.min.apply(null, values));
    var spread = high - low || 1;
    function x(delta) {
      return left + plotWidth * delta / Math.max(1, values.length - 1);
    }
    function y(value) {
      return top + plotHeight * (high - value) / spread;
    }
    var picture = svg("svg", { "data-readout": "chart", class: "al-fit", width: width,
      height: height, viewBox: "0 0 " + width + " " + height, role: "img",
      "aria-label": "dot product of encodings against distance", "font-size": 10,
      "font-family": "sans-serif" });
    picture.appendChild(svg("text", { x: left, y: 12, fill: "currentColor", "font-weight": 600 },
      "PE(pos) · PE(pos + Δ) against Δ"));
    (low === 0 ? [0, high] : [low, 0, high]).forEach(function (tick) {
      picture.appendChild(svg("line", { x1: left, x2: left + plotWidth, y1: y(tick),
        y2: y(tick), stroke: "currentColor", "stroke-opacity": tick === 0 ? 0.5 : 0.15 }));
      picture.appendChild(svg("text", { x: left - 4, y: y(tick) + 3, "text-anchor": "end",
        fill: "currentColor" }, String(Math.round(tick * 10) / 10)));
    });
    [0, values.length - 1].forEach(function (delta) {
      picture.appendChild(svg("text", { x: x(delta), y: top + plotHeight + 14,
        "text-anchor": "middle", fill: "currentColor" }, "Δ=" + delta));
    });
    picture.appendChild(svg("polyline", { fill: "none", stroke: "#1f77b4", "stroke-width": 1.5,
      points: values.map(function (value, delta) {
        return x(delta).toFixed(2) + "," + y(value).toFixed(2);
      }).join(" ") }));
    picture.appendChild(svg("circle", { cx: x(k), cy: y(values[k]), r: 4, fill: "#d62728" }));
    picture.appendChild(svg("text", { x: x(k), y: y(values[k]) - 7, "text-anchor": "middle",
      fill: "#d62728" }, "k"));
    return picture;
  }

  function mountPositions(rootElement) {
    var api = live();
    var dModel = integer(rootElement, "d-model", 64);
    var maxLen = integer(rootElement, "max-len", 100);
    var pairs = Math.floor(dModel / 2);
    dom.start(rootElement, "positions");

    var offset = range("offset", "offset k", 0, maxLen - 1, Math.min(5, maxLen - 1));
    var position = range("position", "position pos", 0, maxLen - 1, Math.min(10, maxLen - 1));
    var pair = range("pair", "dimension pair i", 0, pairs - 1, 0);
    var shownK = span("k", "");
    var shownPos = span("pos", "");
    var shownI = span("i", "");
    var readout = el("div", {});

    rootElement.appendChild(el("p", { class: "al-title" },
      ["Positional-encoding explorer (runs in your browser; d_model = " + dModel + ")"]));
    rootElement.appendChild(el("div", { class: "al-row" }, [
      el("label", {}, ["offset k", offset, shownK]),
      el("label", {}, ["position pos", position, shownPos]),
      el("label", {}, ["pair i", pair, shownI]),
    ]));
    rootElement.appendChild(readout);

    function update() {
      var k = parseInt(offset.value, 10);
      var pos = parseInt(position.value, 10);
      var i = parseInt(pair.value, 10);
      shownK.textContent = String(k);
      shownPos.textContent = String(pos);
      shownI.textContent = String(i);
      var omega = api.frequencies(dModel)[i];
      var block = api.rotationBlock(k, i, dModel);
      var here = api.positionalEncoding(pos, dModel);
      var there = api.positionalEncoding(pos + k, dModel);
      var turned = api.rotate(k, here, dModel);
      var deltas = [];
      for (var delta = 0; delta < maxLen; delta++) {
        deltas.push(delta);
      }
      var similarity = api.encodingSimilarity(pos, deltas, dModel);
      var herePair = here.slice(2 * i, 2 * i + 2);
      var therePair = there.slice(2 * i, 2 * i + 2);
      readout.textContent = "";
      readout.appendChild(el("p", { class: "al-note" }, [
        "pair i = " + i + " (columns " + 2 * i + " and " + (2 * i + 1) + ") turns at ω_i = " +
          "1/10000^(2i/d) = ", span("frequency", omega.toPrecision(6)),
        " per position, so k = " + k + " turns it by kω_i = ", span("angle", fixed4(k * omega)),
        " rad",
      ]));
      readout.appendChild(el("div", { class: "al-row" }, [
        scroll(dom.numberTable("rotation", block, ["row 1", "row 2"], ["", ""],
          "M_i(k) = [[cos kω, sin kω], [−sin kω, cos kω]]")),
        scroll(dom.numberTable("pair", [herePair, turned.slice(2 * i, 2 * i + 2), therePair],
          ["PE(pos)", "M_i(k) · PE(pos)", "PE(pos + k)"], ["sin (2i)", "cos (2i+1)"],
          "pair i at pos and pos + k")),
        circle(herePair, therePair),
      ]));
      readout.appendChild(el("p", { class: "al-note" }, [
        "over all " + pairs + " pairs, max |PE(pos+k) − M(k)·PE(pos)| = ",
        span("max-error", api.rotationError(pos, k, dModel).toExponential(1)),
        " (round-off): the same M(k) works at every pos. PE(pos) · PE(pos+k) = ",
        span("similarity", fixed4(similarity[k])), " (at Δ = 0: " + fixed4(similarity[0]) + ")",
      ]));
      readout.appendChild(similarityChart(similarity, k));
    }

    dom.keepKeys(rootElement);
    listen([offset, position, pair], update);
    update();
    return rootElement;
  }

  // --- chapter 09: masks ---

  var FILLS = [["-inf", "−inf (the library)"], ["-1e9", "−1e9"], ["0", "0 (wrong)"]];

  function fillValue(text) {
    return text === "-inf" ? -Infinity : Number(text);
  }

  function mountMasks(rootElement) {
    var api = live();
    var scores = data(rootElement, "scores");
    var n = scores.length;
    var queries = scores.map(function (_, j) {
      return "q" + (j + 1);
    });
    var keys = scores.map(function (_, k) {
      return "k" + (k + 1);
    });
    var startKind = rootElement.getAttribute("data-kind") || "padding";
    var startLength = integer(rootElement, "length", n);
    dom.start(rootElement, "masks");

    var kind = select("kind", "mask kind", api.MASK_KINDS.map(function (k) {
      return [k, k];
    }), startKind);
    var length = range("length", "real length", 1, n, startLength);
    var shownLength = span("length", "");
    var fill = select("fill", "fill for masked scores", FILLS, "-inf");
    var maskRow = el("input", { type: "checkbox", "data-control": "mask-row" });
    var row = select("row", "which query", queries.map(function (q, j) {
      return [j, q];
    }), n - 1);
    var readout = el("div", {});

    rootElement.appendChild(el("p", { class: "al-title" },
      ["Mask explorer (runs in your browser)"]));
    rootElement.appendChild(el("div", { class: "al-row" }, [
      el("label", {}, ["mask", kind]),
      el("label", {}, ["real length", length, shownLength]),
      el("label", {}, ["fill masked scores with", fill]),
      el("label", {}, [maskRow, "mask every key of query", row]),
    ]));
    rootElement.appendChild(readout);

    function update() {
      var real = parseInt(length.value, 10);
      var masked = maskRow.checked ? parseInt(row.value, 10) : null;
      var filler = fillValue(fill.value);
      shownLength.textContent = String(real);
      var mask = api.attentionMask(kind.value, n, real, masked);
      var weights = api.maskedSoftmax(scores, mask, filler);
      var exact = api.maskedSoftmax(scores, mask, -Infinity);
      var filled = scores.map(function (r, j) {
        return r.map(function (x, k) {
          return mask[j][k] ? x : filler;
        });
      });
      var leak = 0;
      var difference = 0;
      weights.forEach(function (r, j) {
        leak = Math.max(leak, r.reduce(function (sum, w, k) {
          return sum + (mask[j][k] ? 0 : w);
        }, 0));
        r.forEach(function (w, k) {
          difference = Math.max(difference, Math.abs(w - exact[j][k]));
        });
      });
      var sums = weights.map(function (r) {
        return r.reduce(function (a, b) {
          return a + b;
        }, 0);
      });
      var crossed = mask.map(function (r) {
        return r.map(function (allowed) {
          return !allowed;
        });
      });
      readout.textContent = "";
      readout.appendChild(el("div", { class: "al-row" }, [
        scroll(dom.numberTable("mask", mask, queries, keys, "mask (1 = may attend)",
          function (allowed) {
            return allowed ? "1" : "0";
          })),
        scroll(dom.numberTable("scores", filled, queries, keys, "scores, masked ones filled",
          function (x) {
            return x === -Infinity ? "-inf" : x === -1e9 ? "-1e9" : fixed4(x);
          })),
      ]));
      readout.appendChild(el("div", { class: "al-row" }, [
        scroll(dom.numberTable("weights", weights, queries, keys, "attention weights")),
        heatmap(weights, queries, keys, "weights (crossed: masked)", crossed),
      ]));
      readout.appendChild(scroll(dom.numberTable("row-sums", [sums], ["sum"], queries,
        "each query's weights add up to (0 for a query with no key)")));
      readout.appendChild(el("p", { class: "al-note" }, [
        "largest weight a query puts on masked keys: ", span("leak", fixed4(leak)),
        "; largest difference from the −inf fill: ", span("difference", fixed4(difference)),
      ]));
    }

    dom.keepKeys(rootElement);
    listen([kind, length, fill, maskRow, row], update);
    update();
    return rootElement;
  }

  var api = live();
  api.register("heads", mountHeads);
  api.register("positions", mountPositions);
  api.register("masks", mountMasks);
  root.attnlibLive = Object.assign(api, {
    mountHeads: mountHeads,
    mountPositions: mountPositions,
    mountMasks: mountMasks,
  });
})(typeof self !== "undefined" ? self : this);
