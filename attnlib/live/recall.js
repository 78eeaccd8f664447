/* attnlib live: chapter 19's explorer, a cache that grows against a state that does not.
 *
 * Key-value pairs are written one at a time into three memories, then every key written so far
 * comes back as a query and each memory says which value it recalls:
 *   cache   softmax attention's KV cache: every key and value kept, a query reads
 *           softmax(sharpness · K q) V;
 *   linear  linear attention's state (the feature map the identity, no normaliser):
 *           M = Σ k vᵀ, d × d numbers whatever the count, a query reads Mᵀ q;
 *   delta   the delta rule's state (DeltaNet, write strength 1): each write first takes out what
 *           M already says for its key, M += k (v − Mᵀ k)ᵀ, and a query reads Mᵀ q.
 * Keys and values are unit vectors of size d: the first d entries of given vectors, scaled.
 * Each pair's value is one of a table of value vectors, and a read is decoded as the value id
 * whose vector has the largest dot product with it (the first, on a tie). The arithmetic
 * (unitRows, cacheRead, linearMemory, deltaMemory, readMemory, decode, recall, recallCurve)
 * matches attnlib's own steps (attnlib.attention.attend,
 * gated_linear_attention_step with every gate at 1, delta_rule_step), checked number for number
 * in node by tests/test_live_recall.py. In node this file is module.exports (the arithmetic
 * only); in a browser it needs explorers.js first and registers the explorer "recall", inlined
 * by attnlib/live/recall_explorer.py. Stable hooks:
 *   root      .attnlib-live[data-explorer="recall"]; data-keys (JSON, pairs × max dim),
 *             data-table (JSON, value ids × max dim), data-values (JSON, a value id a pair),
 *             data-sharpness, data-dims (JSON, the key sizes offered)
 *   controls  [data-control="written" (pairs written so far, range) | "dim" (key size, select)]
 *   readouts  [data-readout="written" | "cache-numbers" | "state-numbers" | "cache" (table) |
 *             "state" (svg: the linear state) | "recall" (table, one row per key written) |
 *             "accuracy-cache" | "accuracy-linear" | "accuracy-delta" (percent) | "curve" (svg:
 *             recall against the pairs written)]
 */
(function (root) {
  "use strict";

  var inNode = typeof module === "object" && module && module.exports;
  var MEMORIES = ["cache", "linear", "delta"];

  function checkPairs(keys, table, values) {
    var numValues = Array.isArray(table) ? table.length : 0;
    if (!Array.isArray(keys) || keys.length === 0 || !Array.isArray(values) ||
        values.length !== keys.length) {
      throw new Error("keys and values must be lists of the same length >= 1, got " +
        (Array.isArray(keys) ? keys.length : typeof keys) + " and " +
        (Array.isArray(values) ? values.length : typeof values));
    }
    table.concat(keys).forEach(function (row, i) {
      if (!Array.isArray(row) || row.length !== keys[0].length) {
        throw new Error("every key and value vector must have " + keys[0].length +
          " entries; row " + (i + 1) + " of the table and keys does not");
      }
    });
    values.forEach(function (id, i) {
      if (!Number.isInteger(id) || id < 0 || id >= numValues) {
        throw new Error("value " + (i + 1) + " is " + id + ", not an id in 0.." +
          (numValues - 1));
      }
    });
  }

  // The first d entries of every row, scaled to length 1: (rows, d).
  function unitRows(rows, d) {
    if (!Number.isInteger(d) || d < 1 || d > rows[0].length) {
      throw new Error("d must be an integer in 1.." + rows[0].length + ", got " + d);
    }
    return rows.map(function (row) {
      var part = row.slice(0, d);
      var norm = Math.sqrt(part.reduce(function (s, x) { return s + x * x; }, 0)) || 1;
      return part.map(function (x) { return x / norm; });
    });
  }

  function dot(a, b) {
    var total = 0;
    for (var i = 0; i < a.length; i++) {
      total += a[i] * b[i];
    }
    return total;
  }

  // The cache's read for query q after `written` pairs: Σ softmax(sharpness k·q) v, (d,).
  function cacheRead(keys, table, values, written, q, sharpness) {
    var scores = keys.slice(0, written).map(function (key) { return sharpness * dot(key, q); });
    var top = Math.max.apply(null, scores);
    var weights = scores.map(function (s) { return Math.exp(s - top); });
    var total = weights.reduce(function (a, b) { return a + b; }, 0);
    var out = new Array(q.length).fill(0);
    weights.forEach(function (w, i) {
      table[values[i]].forEach(function (x, f) { out[f] += (w / total) * x; });
    });
    return out;
  }

  function zeros(rows, cols) {
    var out = [];
    for (var r = 0; r < rows; r++) {
      out.push(new Array(cols).fill(0));
    }
    return out;
  }

  // Mᵀ q: what a state (d × d) says for query q, (d,).
  function readMemory(memory, q) {
    var out = new Array(memory[0].length).fill(0);
    memory.forEach(function (row, f) {
      row.forEach(function (x, v) { out[v] += q[f] * x; });
    });
    return out;
  }

  // Linear attention's state after `written` pairs: M = Σ k vᵀ, (d, d).
  function linearMemory(keys, table, values, written) {
    var d = keys[0].length;
    var memory = zeros(d, d);
    for (var i = 0; i < written; i++) {
      for (var f = 0; f < d; f++) {
        for (var g = 0; g < d; g++) {
          memory[f][g] += keys[i][f] * table[values[i]][g];
        }
      }
    }
    return memory;
  }

  // The delta rule's state after `written` pairs: M += k (v − Mᵀ k)ᵀ each write, (d, d).
  function deltaMemory(keys, table, values, written) {
    var d = keys[0].length;
    var memory = zeros(d, d);
    for (var i = 0; i < written; i++) {
      var said = readMemory(memory, keys[i]);
      for (var f = 0; f < d; f++) {
        for (var g = 0; g < d; g++) {
          memory[f][g] += keys[i][f] * (table[values[i]][g] - said[g]);
        }
      }
    }
    return memory;
  }

  function argmax(xs) {
    var best = 0;
    for (var i = 1; i < xs.length; i++) {
      if (xs[i] > xs[best]) {
        best = i;
      }
    }
    return best;
  }

  // The value id whose vector best matches a read: argmax over the table of v·read.
  function decode(table, read) {
    return argmax(table.map(function (vector) { return dot(vector, read); }));
  }

  // Each memory's recalled id for every key written so far: {cache, linear, delta} of (written,).
  function recall(keys, table, values, written, sharpness) {
    var linear = linearMemory(keys, table, values, written);
    var delta = deltaMemory(keys, table, values, written);
    return {
      cache: keys.slice(0, written).map(function (key) {
        return decode(table, cacheRead(keys, table, values, written, key, sharpness));
      }),
      linear: keys.slice(0, written).map(function (key) {
        return decode(table, readMemory(linear, key));
      }),
      delta: keys.slice(0, written).map(function (key) {
        return decode(table, readMemory(delta, key));
      }),
    };
  }

  // The share of the first `written` value ids that `recalled` gets right.
  function share(recalled, values) {
    var right = recalled.filter(function (id, j) { return id === values[j]; }).length;
    return right / recalled.length;
  }

  // The share of written keys each memory recalls right, for 1 .. pairs written.
  function recallCurve(keys, table, values, sharpness) {
    var out = { cache: [], linear: [], delta: [] };
    keys.forEach(function (unused, i) {
      var got = recall(keys, table, values, i + 1, sharpness);
      MEMORIES.forEach(function (name) { out[name].push(share(got[name], values)); });
    });
    return out;
  }

  var api = {
    unitRows: unitRows,
    cacheRead: cacheRead,
    decode: decode,
    readMemory: readMemory,
    linearMemory: linearMemory,
    deltaMemory: deltaMemory,
    recall: recall,
    recallCurve: recallCurve,
    checkPairs: checkPairs,
  };

  if (inNode) {
    module.exports = api;
    return;
  }

  // --- the explorer (browser only) ---

  var live = root.attnlibLive;
  if (!live || !live.dom || !live.register) {
    throw new Error("attnlib live: load explorers.js before recall.js");
  }
  var dom = live.dom;
  var el = dom.el;
  var svg = dom.svg;
  var COLOURS = { cache: "#1f77b4", linear: "#ff7f0e", delta: "#2ca02c" };
  var NAMES = { cache: "softmax cache", linear: "linear state", delta: "delta-rule state" };

  function twoDecimals(x) {
    var text = x.toFixed(2);
    return text === "-0.00" ? "0.00" : text;
  }

  function percent(x) {
    return (100 * x).toFixed(0) + "%";
  }

  // The linear state as a heatmap: key features down, value features across; red +, blue −.
  function heatmap(memory) {
    var cell = 14;
    var left = 26;
    var top = 30;
    var rows = memory.length;
    var cols = memory[0].length;
    var width = Math.max(left + cols * cell + 8, 250);  // room for the title
    var height = top + rows * cell + 8;
    var largest = Math.max(1e-12, Math.max.apply(null, memory.map(function (row) {
      return Math.max.apply(null, row.map(Math.abs));
    })));
    var picture = svg("svg", { "data-readout": "state", class: "al-fit", width: width,
      height: height, viewBox: "0 0 " + width + " " + height, role: "img",
      "aria-label": "the linear state, " + rows + " by " + cols, "font-size": 11,
      "font-family": "sans-serif" });
    picture.appendChild(svg("text", { x: 2, y: 12, fill: "currentColor", "font-weight": 600 },
      "linear state M, " + rows + " × " + cols + " (red +, blue −)"));
    picture.appendChild(svg("text", { x: left, y: 25, fill: "currentColor" },
      "value feature →"));
    memory.forEach(function (row, f) {
      row.forEach(function (x, v) {
        var strength = Math.abs(x) / largest;
        picture.appendChild(svg("rect", { x: left + v * cell, y: top + f * cell, width: cell - 1,
          height: cell - 1, fill: x >= 0 ? "#d62728" : "#1f77b4",
          "fill-opacity": strength.toFixed(3) }));
      });
      picture.appendChild(svg("text", { x: left - 4, y: top + f * cell + 11,
        "text-anchor": "end", fill: "currentColor" }, String(f)));
    });
    return picture;
  }

  // Recall against the pairs written, one line per memory; the key size d marked.
  function curve(points, d, written) {
    var left = 40;
    var top = 22;
    var plot = 120;
    var count = points.cache.length;
    var step = Math.max(8, Math.min(18, 480 / count));
    var width = left + count * step + 110;
    function x(i) {
      return left + (i + 0.5) * step;
    }
    function y(value) {
      return top + plot * (1 - value);
    }
    var picture = svg("svg", { "data-readout": "curve", class: "al-fit", width: width,
      height: top + plot + 34, viewBox: "0 0 " + width + " " + (top + plot + 34), role: "img",
      "aria-label": "recall against the pairs written", "font-size": 11,
      "font-family": "sans-serif" });
    picture.appendChild(svg("text", { x: left, y: 12, fill: "currentColor", "font-weight": 600 },
      "recall against the pairs written (key size d = " + d + ")"));
    [0, 0.5, 1].forEach(function (tick) {
      picture.appendChild(svg("line", { x1: left, x2: left + count * step, y1: y(tick),
        y2: y(tick), stroke: "currentColor", "stroke-opacity": 0.2 }));
      picture.appendChild(svg("text", { x: left - 5, y: y(tick) + 4, "text-anchor": "end",
        fill: "currentColor" }, percent(tick)));
    });
    if (d <= count) {
      picture.appendChild(svg("line", { x1: x(d - 1), x2: x(d - 1), y1: top, y2: top + plot,
        stroke: "currentColor", "stroke-dasharray": "3 3", "stroke-opacity": 0.6 }));
      picture.appendChild(svg("text", { x: x(d - 1) + 3, y: top + 10, fill: "currentColor" },
        "pairs = d"));
    }
    picture.appendChild(svg("circle", { cx: x(written - 1), cy: top + plot + 6, r: 4,
      fill: "currentColor" }));
    MEMORIES.forEach(function (name, m) {
      var line = points[name].map(function (value, i) {
        return x(i).toFixed(1) + "," + y(value).toFixed(1);
      });
      picture.appendChild(svg("polyline", { points: line.join(" "), fill: "none",
        stroke: COLOURS[name], "stroke-width": 2 }));
      picture.appendChild(svg("text", { x: left + count * step + 8, y: top + 12 + 16 * m,
        fill: COLOURS[name] }, NAMES[name]));
    });
    [1, count].forEach(function (i) {
      picture.appendChild(svg("text", { x: x(i - 1), y: top + plot + 28, "text-anchor": "middle",
        fill: "currentColor" }, String(i)));
    });
    return picture;
  }

  function htmlTable(name, caption, head, rows) {
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

  function mountRecall(rootElement) {
    var rawKeys = JSON.parse(rootElement.getAttribute("data-keys"));
    var rawTable = JSON.parse(rootElement.getAttribute("data-table"));
    var values = JSON.parse(rootElement.getAttribute("data-values"));
    var sharpness = Number(rootElement.getAttribute("data-sharpness"));
    var dims = JSON.parse(rootElement.getAttribute("data-dims"));
    checkPairs(rawKeys, rawTable, values);
    dom.start(rootElement, "recall");

    var startWritten = Math.min(6, rawKeys.length);
    var written = el("input", { type: "range", min: 1, max: rawKeys.length, step: 1,
      value: startWritten, "data-control": "written", "aria-label": "pairs written so far" });
    var dim = el("select", { "data-control": "dim", "aria-label": "key size d" },
      dims.map(function (d, i) {
        return el("option", { value: String(d), selected: i === 1 }, [String(d)]);
      }));
    var shown = el("output", { "data-readout": "written" }, [""]);
    var readout = el("div", {});
    rootElement.appendChild(el("p", { class: "al-title" },
      ["Recall explorer: a cache that keeps every pair against a state of fixed size " +
        "(runs in your browser)"]));
    rootElement.appendChild(el("div", { class: "al-row" }, [
      el("label", {}, ["pairs written so far", written, shown]),
      el("label", {}, ["key size d", dim]),
    ]));
    rootElement.appendChild(readout);

    function update() {
      var d = parseInt(dim.value, 10);
      var n = parseInt(written.value, 10);
      var keys = unitRows(rawKeys, d);
      var table = unitRows(rawTable, d);
      shown.textContent = String(n);
      var got = recall(keys, table, values, n, sharpness);
      var rows = values.slice(0, n).map(function (value, j) {
        return ["key " + (j + 1), String(value)].concat(MEMORIES.map(function (name) {
          return got[name][j] + (got[name][j] === value ? " ✓" : " ✗");
        }));
      });
      var accuracy = {};
      MEMORIES.forEach(function (name) {
        accuracy[name] = el("span", { "data-readout": "accuracy-" + name },
          [percent(share(got[name], values))]);
      });
      var cacheRows = keys.slice(0, n).map(function (key, i) {
        return ["pair " + (i + 1), key.map(twoDecimals).join(" "),
          String(values[i])];
      });
      readout.textContent = "";
      readout.appendChild(el("p", { class: "al-note" }, [
        "After ", String(n), " pairs the cache keeps ",
        el("span", { "data-readout": "cache-numbers" }, [String(2 * n * d)]),
        " numbers (a key and a value of " + d + " a pair, growing with every pair); each " +
          "state keeps ",
        el("span", { "data-readout": "state-numbers" }, [String(d * d)]),
        " (d × d, whatever the count). Recall of the keys written so far: softmax cache ",
        accuracy.cache, ", linear state ", accuracy.linear, ", delta-rule state ",
        accuracy.delta, ".",
      ]));
      readout.appendChild(el("div", { class: "al-scroll" },
        [curve(recallCurve(keys, table, values, sharpness), d, n)]));
      readout.appendChild(el("div", { class: "al-row" }, [
        htmlTable("cache", "the softmax cache: one row a pair (the unit key, its value id)",
          ["pair", "key", "value"], cacheRows),
        el("div", { class: "al-scroll" }, [heatmap(linearMemory(keys, table, values, n))]),
      ]));
      readout.appendChild(htmlTable("recall", "each key comes back: the value id each memory " +
        "recalls", ["key", "its value", "softmax cache", "linear state", "delta-rule state"],
        rows));
    }

    dom.keepKeys(rootElement);
    written.addEventListener("input", update);
    dim.addEventListener("change", update);
    update();
    return rootElement;
  }

  live.recall = api;
  live.register("recall", mountRecall);
})(typeof self !== "undefined" ? self : this);
