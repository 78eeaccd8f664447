/* attnlib live: chapter 15's explorer, the online softmax of one row, block by block.
 *
 * The arithmetic (onlineSoftmaxSteps, softmaxRow, parseRow) is a port of
 * attnlib.reference.online_softmax_steps and softmax; tests/test_live_flash.py runs it in node
 * and checks every number against the NumPy oracle. In node this file is module.exports (the
 * arithmetic only); in a browser it needs explorers.js first (the DOM helpers) and registers the
 * explorer "online-softmax", inlined by attnlib/live/flash_explorer.py. Stable hooks:
 *   root      .attnlib-live[data-explorer="online-softmax"]; data-examples (JSON: name -> row,
 *             "-inf" for a masked key), data-values (JSON, (n, d_v)), data-block (start size)
 *   controls  [data-control="scores" (text) | "block" (select) | "step" (range, 1 .. blocks)
 *             | "previous" | "next" | "example" (buttons, data-example=name)]
 *   readouts  [data-readout="row" (table: score, block, weight so far, exact softmax) |
 *             "state" (table: one line per block seen, then the exact row) | "chart" (svg) |
 *             "step" ("t of T") | "weight-error" | "output-error" (largest |partial - exact|,
 *             2 significant digits) | "error"]
 */
(function (root) {
  "use strict";

  var inNode = typeof module === "object" && module && module.exports;

  function checkRow(row) {
    if (!Array.isArray(row) || row.length === 0) {
      throw new Error("row must be a non-empty list of scores");
    }
    row.forEach(function (s, j) {
      if (typeof s !== "number" || isNaN(s) || s === Infinity) {
        throw new Error("score " + (j + 1) + " is " + s + ": only numbers and -inf are allowed");
      }
    });
  }

  function sum(xs) {
    return xs.reduce(function (a, b) {
      return a + b;
    }, 0);
  }

  // Softmax of the row in one go; a row of -inf gives zeros (attnlib's convention), never NaN.
  function softmaxRow(row) {
    checkRow(row);
    var top = Math.max.apply(null, row);
    var shift = top === -Infinity ? 0 : top;
    var exps = row.map(function (s) {
      return Math.exp(s - shift);
    });
    var total = sum(exps);
    var norm = total > 0 ? total : 1;
    return exps.map(function (e) {
      return e / norm;
    });
  }

  // weights (n,) @ values (n, d_v) -> (d_v,)
  function mix(weights, values) {
    var out = values[0].map(function () {
      return 0;
    });
    weights.forEach(function (w, j) {
      values[j].forEach(function (v, c) {
        out[c] += w * v;
      });
    });
    return out;
  }

  function expsFrom(scores, shift) {
    return scores.map(function (s) {
      return Math.exp(s - shift);
    });
  }

  function divided(xs, by) {
    return xs.map(function (x) {
      return x / by;
    });
  }

  // a * factor + b, entry by entry
  function scaledPlus(a, factor, b) {
    return a.map(function (x, c) {
      return x * factor + b[c];
    });
  }

  // The state after each block of keys, as attnlib.reference.online_softmax_steps gives it:
  // {start, end, blockMax, runningMax, runningSum, rescale, weights (end,), output (d_v,) or
  // null}. The old sum and output are worth exp(old max - new max) against the new maximum.
  function onlineSoftmaxSteps(row, blockSize, values) {
    checkRow(row);
    if (!Number.isInteger(blockSize) || blockSize < 1) {
      throw new Error("block size must be a positive integer, got " + blockSize);
    }
    if (values && values.length !== row.length) {
      throw new Error("values have " + values.length + " rows but the row has " + row.length +
        " scores");
    }
    var runningMax = -Infinity;
    var runningSum = 0;
    var total = values ? values[0].map(function () {
      return 0;
    }) : null;
    var steps = [];
    for (var start = 0; start < row.length; start += blockSize) {
      var end = Math.min(start + blockSize, row.length);
      var block = row.slice(start, end);
      var blockMax = Math.max.apply(null, block);
      var newMax = Math.max(runningMax, blockMax);
      var shift = newMax === -Infinity ? 0 : newMax;  // exp(-inf - 0) = 0, not NaN
      var rescale = Math.exp(runningMax - shift);
      var exps = expsFrom(block, shift);
      runningMax = newMax;
      runningSum = runningSum * rescale + sum(exps);
      var norm = runningSum > 0 ? runningSum : 1;
      var output = null;
      if (values) {
        total = scaledPlus(total, rescale, mix(exps, values.slice(start, end)));
        output = divided(total, norm);
      }
      steps.push({ start: start, end: end, blockMax: blockMax, runningMax: runningMax,
        runningSum: runningSum, rescale: rescale, output: output,
        weights: divided(expsFrom(row.slice(0, end), shift), norm) });
    }
    return steps;
  }

  // "1.5 -inf, 2" -> [1.5, -Infinity, 2]; "-inf" (or -Infinity, −∞) is a masked key.
  function parseRow(text) {
    var tokens = String(text).replace(/,/g, " ").trim().split(/\s+/).filter(Boolean);
    if (tokens.length === 0) {
      throw new Error("type at least one score");
    }
    return tokens.map(function (token) {
      var plain = token.toLowerCase().replace(/\u2212/g, "-");  // a typographic minus too
      if (plain === "-inf" || plain === "-infinity" || plain === "-\u221e") {
        return -Infinity;
      }
      var value = Number(plain);
      if (!/^[-+]?(\d+\.?\d*|\.\d+)(e[-+]?\d+)?$/.test(plain) || !isFinite(value)) {
        throw new Error("'" + token + "' is not a number or -inf");
      }
      return value;
    });
  }

  function formatScore(s) {
    return s === -Infinity ? "-inf" : String(s);
  }

  var api = {
    onlineSoftmaxSteps: onlineSoftmaxSteps,
    softmaxRow: softmaxRow,
    mix: mix,
    parseRow: parseRow,
    formatScore: formatScore,
  };

  if (inNode) {
    module.exports = api;
    return;
  }

  // --- the explorer (browser only) ---

  var live = root.attnlibLive;
  if (!live || !live.dom || !live.register) {
    throw new Error("attnlib live: load explorers.js before flash.js");
  }
  var dom = live.dom;
  var el = dom.el;
  var svg = dom.svg;
  var BAR = "#1f77b4";
  var NEW = "#ff7f0e";
  var STYLE_ID = "attnlib-flash-style";
  var CSS = [
    ".attnlib-live[data-explorer=online-softmax] input[type=text]{width:30em;max-width:100%}",
    ".attnlib-live[data-explorer=online-softmax] td{white-space:nowrap}",
    // twelve keys of four decimals must fit a book column (688 px) without a scroll bar
    ".attnlib-live[data-explorer=online-softmax] table{font-size:0.8em}",
    ".attnlib-live[data-explorer=online-softmax] td," +
      ".attnlib-live[data-explorer=online-softmax] th{padding:0.15em 0.3em}",
    ".attnlib-live[data-explorer=online-softmax] label{flex-wrap:wrap;max-width:100%}",
  ].join("");

  function injectStyle() {
    if (!document.getElementById(STYLE_ID)) {
      (document.head || document.documentElement).appendChild(el("style", { id: STYLE_ID },
        [CSS]));
    }
  }

  // 4 decimals, small numbers in exponent form so a rescale of 4e-13 does not read as 0.
  function number(x) {
    if (x === -Infinity) {
      return "-\u221e";
    }
    if (x !== 0 && Math.abs(x) < 5e-4) {
      return x.toExponential(1);
    }
    return x.toFixed(4);
  }

  function twoDigits(x) {
    return x === 0 ? "0" : x.toExponential(1);
  }

  function table(name, caption, head, rows) {
    return el("div", { class: "al-scroll" }, [el("table", { "data-readout": name }, [
      el("caption", {}, [caption]),
      el("thead", {}, [el("tr", {}, head.map(function (label) {
        return el("th", { scope: "col" }, [label]);
      }))]),
      el("tbody", {}, rows.map(function (cells) {
        return el("tr", {}, cells.map(function (cell, c) {
          return c === 0 ? el("th", { scope: "row" }, [cell]) : el("td", {}, [cell]);
        }));
      })),
    ])]);
  }

  // Bars: the weights of the keys seen so far (the newest block in orange), the exact softmax
  // as a black tick over each key.
  function chart(step, exact, blockSize) {
    var n = exact.length;
    var slot = 30;
    var left = 34;
    var top = 22;
    var plot = 120;
    var width = left + n * slot + 8;
    var picture = svg("svg", { "data-readout": "chart", class: "al-fit", width: width,
      height: top + plot + 22, viewBox: "0 0 " + width + " " + (top + plot + 22), role: "img",
      "aria-label": "weights so far against the exact softmax", "font-size": 11,
      "font-family": "sans-serif" });
    picture.appendChild(svg("text", { x: left, y: 12, fill: "currentColor", "font-weight": 600 },
      "weights after key " + step.end + " (bars) and the exact softmax (ticks)"));
    [0, 0.5, 1].forEach(function (tick) {
      var y = top + plot * (1 - tick);
      picture.appendChild(svg("line", { x1: left, x2: width - 8, y1: y, y2: y,
        stroke: "currentColor", "stroke-opacity": tick ? 0.2 : 0.6 }));
      picture.appendChild(svg("text", { x: left - 5, y: y + 4, "text-anchor": "end",
        fill: "currentColor" }, String(tick)));
    });
    for (var j = 0; j < n; j++) {
      var x = left + j * slot;
      if (j < step.end) {
        var h = plot * step.weights[j];
        var bar = svg("rect", { x: x + 5, y: top + plot - h, width: slot - 10, height: h,
          fill: j >= step.start ? NEW : BAR });
        bar.appendChild(svg("title", {}, "k" + (j + 1) + ": " + number(step.weights[j])));
        picture.appendChild(bar);
      }
      var y = top + plot * (1 - exact[j]);
      picture.appendChild(svg("line", { x1: x + 2, x2: x + slot - 2, y1: y, y2: y,
        stroke: "currentColor", "stroke-width": 2 }));
      if (j % blockSize === 0 && j > 0) {
        picture.appendChild(svg("line", { x1: x, x2: x, y1: top, y2: top + plot,
          stroke: "currentColor", "stroke-opacity": 0.35, "stroke-dasharray": "3 3" }));
      }
      picture.appendChild(svg("text", { x: x + slot / 2, y: top + plot + 15,
        "text-anchor": "middle", fill: "currentColor" }, "k" + (j + 1)));
    }
    return picture;
  }

  function mountOnlineSoftmax(rootElement) {
    var examples = JSON.parse(rootElement.getAttribute("data-examples"));
    var values = JSON.parse(rootElement.getAttribute("data-values"));
    var startBlock = parseInt(rootElement.getAttribute("data-block"), 10) || 4;
    var names = Object.keys(examples);
    function exampleText(name) {
      return examples[name].map(String).join(" ");
    }
    dom.start(rootElement, "online-softmax");
    injectStyle();

    var scores = el("input", { type: "text", value: exampleText(names[0]),
      "data-control": "scores", spellcheck: "false", "aria-label": "scores of one query row" });
    var block = el("select", { "data-control": "block", "aria-label": "block size" });
    var step = el("input", { type: "range", min: 1, max: 1, step: 1, value: 1,
      "data-control": "step", "aria-label": "blocks seen" });
    var shownStep = el("output", { "data-readout": "step" }, [""]);
    var previous = el("button", { type: "button", "data-control": "previous" }, ["\u25c0 back"]);
    var next = el("button", { type: "button", "data-control": "next" }, ["next block \u25b6"]);
    var exampleButtons = names.map(function (name) {
      return el("button", { type: "button", "data-control": "example", "data-example": name },
        [name]);
    });
    var error = el("div", { class: "al-error", "data-readout": "error", role: "alert",
      hidden: true });
    var readout = el("div", {});

    rootElement.appendChild(el("p", { class: "al-title" },
      ["Online softmax explorer: one query row, a block of keys at a time (runs in your " +
        "browser)"]));
    rootElement.appendChild(el("div", { class: "al-row" }, [
      el("label", {}, ["scores (up to " + values.length + ", -inf masks a key)", scores]),
    ]));
    rootElement.appendChild(el("div", { class: "al-row" },
      [el("span", {}, ["examples:"])].concat(exampleButtons)));
    rootElement.appendChild(el("div", { class: "al-row" }, [
      el("label", {}, ["block size", block]),
      el("label", {}, ["blocks seen", step, shownStep]), previous, next,
    ]));
    rootElement.appendChild(error);
    rootElement.appendChild(readout);

    var lastLength = -1;

    // The block-size menu offers 1 .. n for a row of n scores, keeping the choice if it fits.
    function fillBlockSizes(n) {
      var chosen = parseInt(block.value, 10) || startBlock;
      block.textContent = "";
      for (var b = 1; b <= n; b++) {
        block.appendChild(el("option", { value: b, selected: b === Math.min(chosen, n) },
          [String(b)]));
      }
    }

    function render(row, steps, exact, exactOutput, t) {
      var size = parseInt(block.value, 10);
      var current = steps[t - 1];
      var keys = row.map(function (_, j) {
        return "k" + (j + 1);
      });
      var rowTable = table("row", "the row, and its softmax so far", [""].concat(keys), [
        ["score"].concat(row.map(number)),
        ["block"].concat(row.map(function (_, j) {
          return String(Math.floor(j / size) + 1);
        })),
        ["weight after block " + t].concat(row.map(function (_, j) {
          return j < current.end ? number(current.weights[j]) : "\u00b7";
        })),
        ["exact softmax"].concat(exact.map(number)),
      ]);
      var head = ["block", "keys", "block max", "running max m", "rescale e^(m_old - m)",
        "running sum \u2113"].concat(values[0].map(function (_, c) {
        return "o" + (c + 1);
      }));
      var lines = steps.slice(0, t).map(function (s, i) {
        return [String(i + 1), (s.start + 1) + "\u2013" + s.end, number(s.blockMax),
          number(s.runningMax), i === 0 ? "(empty)" : number(s.rescale),
          number(s.runningSum)].concat(s.output.map(number));
      });
      var top = Math.max.apply(null, row);
      var shift = top === -Infinity ? 0 : top;
      lines.push(["exact", "1\u2013" + row.length, "", number(top), "",
        number(sum(row.map(function (s) {
          return Math.exp(s - shift);
        })))].concat(exactOutput.map(number)));
      var weightError = Math.max.apply(null, exact.map(function (w, j) {
        return Math.abs((j < current.end ? current.weights[j] : 0) - w);
      }));
      var outputError = Math.max.apply(null, exactOutput.map(function (o, c) {
        return Math.abs(current.output[c] - o);
      }));
      var rescaled = current.rescale < 1 && t > 1;
      readout.textContent = "";
      readout.appendChild(rowTable);
      readout.appendChild(table("state", "the state after each block (o: the partial output " +
        "\u03a3 weight \u00b7 value)", head, lines));
      readout.appendChild(el("p", { class: "al-note" }, [
        "After block " + t + " of " + steps.length + ": largest |weight - exact| ",
        el("span", { "data-readout": "weight-error" }, [twoDigits(weightError)]),
        ", largest |output - exact| ",
        el("span", { "data-readout": "output-error" }, [twoDigits(outputError)]),
        t === steps.length ? " (the last block: the exact row, up to rounding)." :
          rescaled ? ". This block raised the maximum, so the old sum and output were " +
            "multiplied by " + number(current.rescale) + "." : ".",
      ]));
      readout.appendChild(el("div", { class: "al-scroll" }, [chart(current, exact, size)]));
    }

    function update(keepStep) {
      var row;
      try {
        row = parseRow(scores.value);
        if (row.length > values.length) {
          throw new Error("at most " + values.length + " scores, got " + row.length);
        }
      } catch (problem) {
        error.textContent = "Cannot read the scores: " + problem.message;
        error.hidden = false;
        readout.textContent = "";
        return;
      }
      error.hidden = true;
      if (row.length !== lastLength) {
        fillBlockSizes(row.length);
        lastLength = row.length;
      }
      var size = parseInt(block.value, 10);
      var rowValues = values.slice(0, row.length);
      var steps = onlineSoftmaxSteps(row, size, rowValues);
      var exact = softmaxRow(row);
      step.max = steps.length;
      var t = keepStep ? Math.min(parseInt(step.value, 10), steps.length) : 1;
      step.value = t;
      shownStep.textContent = t + " of " + steps.length;
      previous.disabled = t <= 1;
      next.disabled = t >= steps.length;
      render(row, steps, exact, mix(exact, rowValues), t);
    }

    function move(by) {
      step.value = Math.max(1, Math.min(parseInt(step.max, 10), parseInt(step.value, 10) + by));
      update(true);
    }

    dom.keepKeys(rootElement);
    scores.addEventListener("input", function () {
      update(false);
    });
    block.addEventListener("change", function () {
      update(false);
    });
    step.addEventListener("input", function () {
      update(true);
    });
    previous.addEventListener("click", function () {
      move(-1);
    });
    next.addEventListener("click", function () {
      move(1);
    });
    exampleButtons.forEach(function (button, i) {
      button.addEventListener("click", function () {
        scores.value = exampleText(names[i]);
        update(false);
      });
    });
    update(false);
    return rootElement;
  }

  live.flash = api;
  live.register("online-softmax", mountOnlineSoftmax);
})(typeof self !== "undefined" ? self : this);
