/* attnlib live: chapter 10's two explorers, on the arithmetic of stack.js.
 *
 * Needs attention.js, explorers.js (the DOM helpers) and stack.js first; inlined by
 * attnlib/live/stack_explorer.py. Stable hooks for tests:
 *   "stack"  root .attnlib-live[data-explorer="stack"]; data-depth, data-quantity, data-seed,
 *            data-input-std: where the controls start; data-measured (JSON, optional):
 *            {"post-LN": {quantity: [per block]}, "pre-LN": {...}} from the chapter's run,
 *            data-measured-label: what that run was
 *            controls [data-control="depth" (range 1-24) | "quantity" (select, a name of
 *            stack.QUANTITIES) | "seed" (range 0-9) | "input-std" (range: an index into
 *            INPUT_STDS)]
 *            readouts [data-readout="chart" | "measured-chart" (svg) | "profile" |
 *            "measured-profile" (tables: rows post-LN, pre-LN; columns block 1, top block, their
 *            ratio; each <td>'s title holds the full number) | "error"]; echoes beside the
 *            sliders are outputs named like their control
 *   "norms"  root .attnlib-live[data-explorer="norms"]; data-batch (JSON rows), data-used,
 *            data-example, data-scale (log10 of the factor): where the controls start
 *            controls [data-control="batch" (textarea: one example a line) | "used" (range:
 *            the first k examples) | "example" (select: which to scale) | "scale" (range,
 *            log10 of the factor, -2 to 2) | "reset" (button)]
 *            readouts [data-readout="input" | "row-stats" (mean, std of each example: what
 *            LayerNorm uses) | "column-stats" (mean; std of each feature: what BatchNorm uses)
 *            | "layer-norm" | "layer-norm-check" (its rows' mean, std) | "batch-norm" |
 *            "batch-norm-check" (its columns' mean; std)] tables, the full number in each
 *            <td>'s title; "batch-of-one" (a note, shown for a batch of one) | "error"
 */
(function (root) {
  "use strict";

  var live = root.attnlibLive;
  if (!live || !live.dom || !live.register || !live.stack) {
    throw new Error("attnlib live: load explorers.js and stack.js before stack_explorer.js");
  }
  var dom = live.dom;
  var el = dom.el;
  var svg = dom.svg;
  var stack = live.stack;

  var BLUE = "#1f77b4";
  var ORANGE = "#ff7f0e";
  var ORDERS = [["post-LN", false, BLUE], ["pre-LN", true, ORANGE]];
  var MAX_DEPTH = 24;
  var INPUT_STDS = [0.25, 0.5, 1, 2, 4, 8, 16];
  var NAMES = {
    "stream std": "size of the residual stream (standard deviation) after each block",
    "stream gradient": "gradient on the residual stream after each block",
    cosine: "mean cosine between two tokens after each block (1: all alike)",
    all: "gradient of all of a block's parameters, lumped",
    W_Q: "gradient of W_Q (queries)",
    W_K: "gradient of W_K (keys)",
    W_V: "gradient of W_V (values)",
    W_O: "gradient of W_O (attention output)",
    W_1: "gradient of W_1 (feed-forward, in)",
    W_2: "gradient of W_2 (feed-forward, out)",
  };
  var WIDTH = 360;  // the charts' width: at 375 px they shrink by a tenth at most
  var CSS = [
    ".attnlib-live[data-explorer=norms] th,.attnlib-live[data-explorer=norms] td",
    "{padding:.1em .3em;font-size:.8rem}",
    ".attnlib-live[data-explorer=stack] th,.attnlib-live[data-explorer=stack] td",
    "{padding:.1em .4em}",
    ".attnlib-live .al-panel{margin:.4em 0 .6em}",
    ".attnlib-live textarea.al-batch{width:100%;max-width:28em;height:6.5em}",
  ].join("");

  function injectStyle() {
    if (!document.getElementById("attnlib-live-stack-style")) {
      (document.head || document.documentElement).appendChild(
        el("style", { id: "attnlib-live-stack-style" }, [CSS]));
    }
  }

  function attribute(rootElement, name, fallback) {
    var value = rootElement.getAttribute("data-" + name);
    return value === null || value === "" ? fallback : value;
  }

  function range(name, label, min, max, step, value) {
    return el("input", { type: "range", min: min, max: max, step: step, value: value,
      "data-control": name, "aria-label": label });
  }

  // 4 significant digits; the title keeps the whole number for a reader (and the tests).
  function significant(x) {
    if (!isFinite(x)) {
      return String(x);
    }
    var a = Math.abs(x);
    return a !== 0 && (a < 1e-3 || a >= 1e5) ? x.toExponential(2) : String(Number(x.toPrecision(4)));
  }

  function table(name, matrix, rowLabels, columnLabels, caption, format) {
    var head = el("tr", {}, [el("th", {}, [""])].concat(columnLabels.map(function (label) {
      return el("th", { scope: "col" }, [label]);
    })));
    var rows = matrix.map(function (row, i) {
      return el("tr", {}, [el("th", { scope: "row" }, [rowLabels[i]])].concat(row.map(
        function (x) {
          return el("td", { title: String(x) }, [format(x)]);
        })));
    });
    return el("div", { class: "al-scroll al-panel" }, [el("table", { "data-readout": name }, [
      el("caption", {}, [caption]), el("thead", {}, [head]), el("tbody", {}, rows)])]);
  }

  function errorBox() {
    return el("div", { class: "al-error", "data-readout": "error", role: "alert", hidden: true });
  }

  // --- the stack ---

  // One line per order, block 1 .. L across; log scale for gradients.
  function profileChart(readout, series, quantity, title) {
    var left = 54;
    var top = 26;
    var plot = 150;
    var right = WIDTH - 10;
    var depth = series[0].values.length;
    var logScale = quantity !== "stream std" && quantity !== "cosine";
    var all = [].concat.apply([], series.map(function (s) {
      return s.values;
    }));
    var low = Math.min.apply(null, all);
    var high = Math.max.apply(null, all);
    var f = logScale ? Math.log10 : function (v) {
      return v;
    };
    var bottom;
    var ceiling;
    if (logScale) {
      bottom = Math.floor(f(Math.max(low, 1e-300)));
      ceiling = Math.max(Math.ceil(f(high)), bottom + 1);
    } else if (quantity === "cosine") {
      bottom = Math.min(0, low);
      ceiling = 1;
    } else {
      bottom = 0;
      ceiling = high > 0 ? high * 1.1 : 1;
    }
    function x(block) {
      return left + (right - left) * (depth > 1 ? (block - 1) / (depth - 1) : 0.5);
    }
    function y(v) {
      return top + plot * (1 - (f(v) - bottom) / (ceiling - bottom));
    }
    var picture = svg("svg", { "data-readout": readout, class: "al-fit", width: WIDTH,
      height: top + plot + 52, viewBox: "0 0 " + WIDTH + " " + (top + plot + 52), role: "img",
      "aria-label": title, "font-size": 12, "font-family": "sans-serif" });
    picture.appendChild(svg("text", { x: 4, y: 13, fill: "currentColor", "font-weight": 600 },
      title));
    var ticks = [];
    if (logScale) {
      var every = Math.max(1, Math.ceil((ceiling - bottom) / 4));
      for (var e = bottom; e <= ceiling; e += every) {
        ticks.push([Math.pow(10, e), "1e" + e]);
      }
    } else {
      [0, 0.5, 1].forEach(function (fraction) {
        var v = bottom + (ceiling - bottom) * fraction;
        ticks.push([v, String(Number(v.toPrecision(2)))]);
      });
    }
    ticks.forEach(function (tick) {
      picture.appendChild(svg("line", { x1: left, x2: right, y1: y(tick[0]), y2: y(tick[0]),
        stroke: "currentColor", "stroke-opacity": 0.2 }));
      picture.appendChild(svg("text", { x: left - 4, y: y(tick[0]) + 4, "text-anchor": "end",
        fill: "currentColor" }, tick[1]));
    });
    var labels = depth > 1 ? [1, Math.ceil(depth / 2), depth] : [1];
    labels.filter(function (b, i) {
      return labels.indexOf(b) === i;
    }).forEach(function (block) {
      picture.appendChild(svg("text", { x: x(block), y: top + plot + 16, "text-anchor": "middle",
        fill: "currentColor" }, String(block)));
    });
    picture.appendChild(svg("text", { x: (left + right) / 2, y: top + plot + 31,
      "text-anchor": "middle", fill: "currentColor" }, "block (1 = nearest the input)"));
    series.forEach(function (s, k) {
      var points = s.values.map(function (v, i) {
        return x(i + 1).toFixed(1) + "," + y(v).toFixed(1);
      });
      picture.appendChild(svg("polyline", { points: points.join(" "), fill: "none",
        stroke: s.colour, "stroke-width": 2 }));
      s.values.forEach(function (v, i) {
        picture.appendChild(k === 0 ?
          svg("circle", { cx: x(i + 1), cy: y(v), r: 3, fill: s.colour }) :
          svg("rect", { x: x(i + 1) - 3, y: y(v) - 3, width: 6, height: 6, fill: s.colour }));
      });
      picture.appendChild(svg("rect", { x: left + 4 + 90 * k, y: top + plot + 38, width: 10,
        height: 10, fill: s.colour }));
      picture.appendChild(svg("text", { x: left + 18 + 90 * k, y: top + plot + 47,
        fill: "currentColor" }, s.name));
    });
    return picture;
  }

  function profileTable(readout, series, caption) {
    return table(readout, series.map(function (s) {
      var values = s.values;
      return [values[0], values[values.length - 1], values[0] / values[values.length - 1]];
    }), series.map(function (s) {
      return s.name;
    }), ["block 1", "block " + series[0].values.length, "ratio"], caption, significant);
  }

  function mountStack(rootElement) {
    var startQuantity = attribute(rootElement, "quantity", "W_2");
    var measured = JSON.parse(attribute(rootElement, "measured", "null"));
    var measuredLabel = attribute(rootElement, "measured-label", "measured in the chapter's run");
    var startStd = Number(attribute(rootElement, "input-std", "1"));
    dom.start(rootElement, "stack");
    injectStyle();

    var depth = range("depth", "number of blocks L", 1, MAX_DEPTH, 1,
      attribute(rootElement, "depth", "12"));
    var quantity = el("select", { "data-control": "quantity", "aria-label": "what to plot" },
      stack.QUANTITIES.map(function (name) {
        return el("option", { value: name, selected: name === startQuantity }, [NAMES[name]]);
      }));
    var seed = range("seed", "random draw", 0, 9, 1, attribute(rootElement, "seed", "0"));
    var inputStd = range("input-std", "standard deviation of the input", 0,
      INPUT_STDS.length - 1, 1, Math.max(0, INPUT_STDS.indexOf(startStd)));
    var echo = {};
    ["depth", "seed", "input-std"].forEach(function (name) {
      echo[name] = el("output", { "data-readout": name }, [""]);
    });
    var error = errorBox();
    var charts = el("div", { class: "al-row" });
    var out = el("div", {});

    rootElement.appendChild(el("p", { class: "al-title" },
      ["Post-LN against pre-LN through a stack of blocks (runs in your browser)"]));
    rootElement.appendChild(el("div", { class: "al-row" }, [
      el("label", { style: "flex-wrap:wrap;max-width:100%" }, ["show", quantity]),
    ]));
    rootElement.appendChild(el("div", { class: "al-row" }, [
      el("label", {}, ["blocks L", depth, echo.depth]),
      el("label", {}, ["draw", seed, echo.seed]),
      el("label", {}, ["input std", inputStd, echo["input-std"]]),
    ]));
    rootElement.appendChild(error);
    rootElement.appendChild(charts);
    rootElement.appendChild(out);

    // The profiles depend on the draw, the input and L, not on what is shown: keep them.
    var cache = { key: null, profiles: null };

    function profiles(L, s, std) {
      var key = [L, s, std].join(" ");
      if (cache.key !== key) {
        cache.key = key;
        cache.profiles = ORDERS.map(function (order) {
          return stack.stackProfile(order[1], L, s, std);
        });
      }
      return cache.profiles;
    }

    function update() {
      var L = Math.round(Number(depth.value));
      var s = Math.round(Number(seed.value));
      var std = INPUT_STDS[Math.round(Number(inputStd.value))];
      var name = quantity.value;
      echo.depth.textContent = String(L);
      echo.seed.textContent = String(s);
      echo["input-std"].textContent = String(std);
      charts.textContent = "";
      out.textContent = "";
      try {
        error.hidden = true;
        var computed = profiles(L, s, std);
        var series = ORDERS.map(function (order, k) {
          return { name: order[0], colour: order[2], values: computed[k][name] };
        });
        charts.appendChild(el("div", {}, [
          profileChart("chart", series, name, NAMES[name].replace(" after each block", "")),
          profileTable("profile", series, "computed here: " + L + " block" + (L > 1 ? "s" : "")),
        ]));
        out.appendChild(el("p", { class: "al-note" }, [
          "Computed in this page at initialisation: " + L + " block" + (L > 1 ? "s" : "") +
          " of width " + stack.WIDTH + " (" + stack.HEADS + " heads, d_ff = " + stack.FF +
          "), Xavier weights and zero biases (draw " + s + "), one sequence of " + stack.SEQ +
          " random tokens of standard deviation " + std + ", no dropout. The loss is a fixed " +
          "random linear read-out of the top of the stack (after a final LayerNorm for " +
          "pre-LN), one forward and one backward pass; nothing is trained."]));
      } catch (problem) {
        error.textContent = "Cannot compute this: " + problem.message;
        error.hidden = false;
      }
      if (measured && measured["post-LN"] && measured["post-LN"][name]) {
        var chapter = ORDERS.map(function (order) {
          return { name: order[0], colour: order[2], values: measured[order[0]][name] };
        });
        charts.appendChild(el("div", {}, [
          profileChart("measured-chart", chapter, name, "measured in the chapter: " +
            NAMES[name].replace(" after each block", "")),
          profileTable("measured-profile", chapter, measuredLabel),
        ]));
      } else if (measured) {
        charts.appendChild(el("p", { class: "al-note", "data-readout": "measured-profile" },
          ["The chapter's run did not record this quantity."]));
      }
    }

    dom.keepKeys(rootElement);
    [depth, seed, inputStd].forEach(function (control) {
      control.addEventListener("input", update);
    });
    quantity.addEventListener("change", update);
    update();
    return rootElement;
  }

  // --- LayerNorm against BatchNorm ---

  function parseBatch(text) {
    var lines = text.split("\n").map(function (line) {
      return line.trim();
    }).filter(function (line) {
      return line !== "";
    });
    if (lines.length === 0) {
      throw new Error("type at least one example: one line of numbers");
    }
    if (lines.length > 8) {
      throw new Error("at most 8 examples, got " + lines.length);
    }
    var rows = lines.map(function (line, i) {
      return line.split(/[\s,]+/).map(function (word) {
        var value = Number(word);
        if (word === "" || !isFinite(value)) {
          throw new Error("example " + (i + 1) + ": \"" + word + "\" is not a number");
        }
        return value;
      });
    });
    rows.forEach(function (row, i) {
      if (row.length !== rows[0].length) {
        throw new Error("example " + (i + 1) + " has " + row.length + " features, example 1 has " +
          rows[0].length);
      }
    });
    if (rows[0].length > 8) {
      throw new Error("at most 8 features, got " + rows[0].length);
    }
    return rows;
  }

  function formatBatch(rows) {
    return rows.map(function (row) {
      return row.map(function (x) {
        return String(x);
      }).join(" ");
    }).join("\n");
  }

  function fixed2(x) {
    var text = x.toFixed(2);
    return text === "-0.00" ? "0.00" : text;
  }

  function mountNorms(rootElement) {
    var startBatch = JSON.parse(attribute(rootElement, "batch", "[[1,2],[3,5]]"));
    var startUsed = attribute(rootElement, "used", String(startBatch.length));
    var startExample = attribute(rootElement, "example", "0");
    var startScale = attribute(rootElement, "scale", "0");
    dom.start(rootElement, "norms");
    injectStyle();

    var editor = el("textarea", { "data-control": "batch", class: "al-batch", spellcheck: "false",
      "aria-label": "the batch: one example a line, its features separated by spaces" });
    editor.value = formatBatch(startBatch);
    var used = range("used", "number of examples in the batch", 1, 8, 1, startUsed);
    var example = el("select", { "data-control": "example", "aria-label": "example to scale" });
    var scale = range("scale", "scale factor of that example (log10)", -2, 2, 0.1, startScale);
    var reset = el("button", { type: "button", "data-control": "reset" }, ["reset"]);
    var echo = { used: el("output", { "data-readout": "used" }, [""]),
      scale: el("output", { "data-readout": "scale" }, [""]) };
    var error = errorBox();
    var out = el("div", {});

    rootElement.appendChild(el("p", { class: "al-title" },
      ["LayerNorm against BatchNorm on one batch (runs in your browser)"]));
    rootElement.appendChild(el("label", { class: "al-matrix" },
      ["the batch: one example a line, its features across", editor]));
    rootElement.appendChild(el("div", { class: "al-row" }, [
      el("label", {}, ["batch size", used, echo.used]),
      el("label", {}, ["scale example", example]),
      el("label", {}, ["by", scale, echo.scale]),
      reset,
    ]));
    rootElement.appendChild(error);
    rootElement.appendChild(out);

    function setExamples(count) {
      var chosen = Math.min(Number(example.value || startExample), count - 1);
      example.textContent = "";
      for (var i = 0; i < count; i++) {
        example.appendChild(el("option", { value: i, selected: i === chosen }, ["x" + (i + 1)]));
      }
      example.value = String(chosen);
    }

    function update() {
      var rows;
      try {
        error.hidden = true;
        rows = parseBatch(editor.value);
      } catch (problem) {
        error.textContent = "Cannot read the batch: " + problem.message;
        error.hidden = false;
        out.textContent = "";
        return;
      }
      used.max = rows.length;
      var k = Math.min(Math.max(Math.round(Number(used.value)), 1), rows.length);
      used.value = k;
      if (example.options.length !== k) {
        setExamples(k);
      }
      var chosen = Number(example.value);
      var factor = Math.pow(10, Number(scale.value));
      echo.used.textContent = String(k);
      echo.scale.textContent = String(Number(factor.toPrecision(3)));
      var batch = rows.slice(0, k).map(function (row, i) {
        return row.map(function (x) {
          return i === chosen ? x * factor : x;
        });
      });
      var features = batch[0].map(function (_, j) {
        return "f" + (j + 1);
      });
      var examples = batch.map(function (_, i) {
        return "x" + (i + 1);
      });
      var rowStats = stack.normStatistics(batch, 1);
      var columnStats = stack.normStatistics(batch, 0);
      var ln = stack.layerNorm(batch);
      var bn = stack.batchNorm(batch);
      var lnCheck = stack.normStatistics(ln, 1);
      var bnCheck = stack.normStatistics(bn, 0);
      function pairs(stats) {
        return stats.mean.map(function (m, i) {
          return [m, stats.std[i]];
        });
      }
      out.textContent = "";
      out.appendChild(el("div", { class: "al-row" }, [
        table("input", batch, examples, features, "the batch: examples down, features across",
          fixed2),
        table("row-stats", pairs(rowStats), examples, ["mean", "std"],
          "per example: LayerNorm's statistics", fixed2),
        table("column-stats", [columnStats.mean, columnStats.std], ["mean", "std"], features,
          "per feature, over the batch: BatchNorm's statistics", fixed2),
      ]));
      out.appendChild(el("div", { class: "al-row" }, [
        el("div", {}, [
          table("layer-norm", ln, examples, features,
            "LayerNorm: each example by its own mean and std", fixed2),
          table("layer-norm-check", pairs(lnCheck), examples, ["mean", "std"],
            "after LayerNorm, per example", fixed2),
        ]),
        el("div", {}, [
          table("batch-norm", bn, examples, features,
            "BatchNorm (training mode): each feature by the batch's", fixed2),
          table("batch-norm-check", [bnCheck.mean, bnCheck.std], ["mean", "std"], features,
            "after BatchNorm, per feature", fixed2),
        ]),
      ]));
      out.appendChild(el("p", { class: "al-note" }, [
        "Scaling example x" + (chosen + 1) + " by " + echo.scale.textContent + " leaves its " +
        "LayerNorm output as it was (up to ε = 1e-5 in the variance); under BatchNorm it " +
        "moves every feature's mean and std, so every example's output changes."]));
      out.appendChild(el("p", { class: "al-note", "data-readout": "batch-of-one",
        hidden: k !== 1 }, [
        "A batch of one: each feature's mean is that example's own value and its std is 0, so " +
        "BatchNorm's output is all zeros, whatever the example. PyTorch refuses this in " +
        "training mode (ValueError: Expected more than 1 value per channel when training). " +
        "LayerNorm does not care: it never looks at the other examples."]));
    }

    dom.keepKeys(rootElement);
    editor.addEventListener("keydown", function (event) {
      // JupyterLab 4 cancels Enter in a textarea inside a cell: type the line break ourselves.
      var plain = !(event.ctrlKey || event.altKey || event.metaKey || event.isComposing);
      if (event.key !== "Enter" || !plain || !editor.closest(".jp-Cell")) {
        return;
      }
      event.preventDefault();
      if (!(document.execCommand && document.execCommand("insertText", false, "\n"))) {
        editor.setRangeText("\n", editor.selectionStart, editor.selectionEnd, "end");
        editor.dispatchEvent(new Event("input"));
      }
    });
    editor.addEventListener("input", update);
    used.addEventListener("input", update);
    scale.addEventListener("input", update);
    example.addEventListener("change", update);
    reset.addEventListener("click", function () {
      editor.value = formatBatch(startBatch);
      used.max = startBatch.length;
      used.value = startUsed;
      scale.value = startScale;
      setExamples(Math.min(Number(startUsed), startBatch.length));
      example.value = startExample;
      update();
    });
    setExamples(Math.min(Number(startUsed), startBatch.length));
    example.value = startExample;
    update();
    return rootElement;
  }

  live.register("stack", mountStack);
  live.register("norms", mountNorms);
})(typeof self !== "undefined" ? self : this);
