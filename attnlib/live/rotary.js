/* attnlib live: chapter 16's explorer, rotary positions pair by pair.
 *
 * The arithmetic (frequencies, angles, rotate, pairDots, score, scoresByOffset, shiftError,
 * parseVector) is a port of attnlib.positions (apply_rotary: pair (x[2i], x[2i+1]) turned by
 * position * base^(-2i/d)); tests/test_live_rotary.py runs it in node and checks every number
 * against a NumPy oracle. In node this file is module.exports (the arithmetic only); in a
 * browser it needs explorers.js first (the DOM helpers) and registers the explorer "rotary",
 * inlined by attnlib/live/rotary_explorer.py. Stable hooks:
 *   root      .attnlib-live[data-explorer="rotary"]; data-query, data-key (JSON vectors of an
 *             even length d), data-base, data-max-position, data-max-offset
 *   controls  [data-control="position" (key position n) | "offset" (m - n) | "shift" (s, added
 *             to both) | "base" (select) | "query" | "key" (text) | "reset" (button)]
 *   readouts  [data-readout="pairs" (table, one row per pair) | "circles" (svg) | "score"
 *             (q·k at m, n) | "shifted-score" (at m + s, n + s) | "shifted-circles" (svg, at
             m + s, n + s) | "shift-error" (largest
 *             |difference| over every shift 0 .. max position, 2 significant digits) | "chart"
 *             (svg: q·k against the offset) | "m" | "n" | "offset" | "shift" | "error"]
 */
(function (root) {
  "use strict";

  var inNode = typeof module === "object" && module && module.exports;

  function checkBase(base) {
    if (typeof base !== "number" || !(base > 0) || !isFinite(base)) {
      throw new Error("base must be a positive number, got " + base);
    }
  }

  function checkVector(name, x) {
    if (!Array.isArray(x) || x.length === 0 || x.length % 2 !== 0) {
      throw new Error(name + " must have an even number of entries (pairs), got " +
        (Array.isArray(x) ? x.length : typeof x));
    }
    x.forEach(function (value, i) {
      if (typeof value !== "number" || !isFinite(value)) {
        throw new Error(name + " entry " + (i + 1) + " is " + value + ", not a finite number");
      }
    });
  }

  // base^(-2i/d) for each pair i: radians per position step, (d / 2,).
  function frequencies(dim, base) {
    checkBase(base);
    if (!Number.isInteger(dim) || dim < 2 || dim % 2 !== 0) {
      throw new Error("dim must be an even integer >= 2, got " + dim);
    }
    var out = [];
    for (var i = 0; i < dim / 2; i++) {
      out.push(Math.pow(base, -2 * i / dim));
    }
    return out;
  }

  // The angle of each pair at one position: position * frequency, (d / 2,).
  function angles(position, dim, base) {
    return frequencies(dim, base).map(function (omega) {
      return position * omega;
    });
  }

  // Pair (a, b) at angle t -> (a cos t - b sin t, a sin t + b cos t), as apply_rotary.
  function rotate(x, position, base) {
    checkVector("x", x);
    var turns = angles(position, x.length, base);
    var out = [];
    turns.forEach(function (t, i) {
      var a = x[2 * i];
      var b = x[2 * i + 1];
      out.push(a * Math.cos(t) - b * Math.sin(t), a * Math.sin(t) + b * Math.cos(t));
    });
    return out;
  }

  // Each pair's share of q·k after rotating q to position m and k to position n, (d / 2,).
  function pairDots(q, k, m, n, base) {
    checkVector("q", q);
    checkVector("k", k);
    if (q.length !== k.length) {
      throw new Error("q has " + q.length + " entries but k has " + k.length);
    }
    var rq = rotate(q, m, base);
    var rk = rotate(k, n, base);
    var out = [];
    for (var i = 0; i < q.length / 2; i++) {
      out.push(rq[2 * i] * rk[2 * i] + rq[2 * i + 1] * rk[2 * i + 1]);
    }
    return out;
  }

  function sum(xs) {
    return xs.reduce(function (a, b) {
      return a + b;
    }, 0);
  }

  // q·k with q at position m and k at position n, both rotated.
  function score(q, k, m, n, base) {
    return sum(pairDots(q, k, m, n, base));
  }

  // q·k with the key at `position` and the query at position + offset, for each offset.
  function scoresByOffset(q, k, position, offsets, base) {
    return offsets.map(function (offset) {
      return score(q, k, position + offset, position, base);
    });
  }

  // Largest |score(m + s, n + s) - score(m, n)| over the shifts s: round-off, if the law holds.
  function shiftError(q, k, m, n, shifts, base) {
    var here = score(q, k, m, n, base);
    return shifts.reduce(function (worst, s) {
      return Math.max(worst, Math.abs(score(q, k, m + s, n + s, base) - here));
    }, 0);
  }

  // "0.5 -1, 2 3" -> [0.5, -1, 2, 3]; an even count of finite numbers.
  function parseVector(text, name) {
    var tokens = String(text).replace(/,/g, " ").trim().split(/\s+/).filter(Boolean);
    var values = tokens.map(function (token) {
      var plain = token.replace(/\u2212/g, "-");  // a typographic minus too
      var value = Number(plain);
      if (!/^[-+]?(\d+\.?\d*|\.\d+)(e[-+]?\d+)?$/i.test(plain) || !isFinite(value)) {
        throw new Error(name + ": '" + token + "' is not a number");
      }
      return value;
    });
    if (values.length === 0 || values.length % 2 !== 0) {
      throw new Error(name + " needs an even number of entries (pairs), got " + values.length);
    }
    return values;
  }

  var api = {
    frequencies: frequencies,
    angles: angles,
    rotate: rotate,
    pairDots: pairDots,
    score: score,
    scoresByOffset: scoresByOffset,
    shiftError: shiftError,
    parseVector: parseVector,
  };

  if (inNode) {
    module.exports = api;
    return;
  }

  // --- the explorer (browser only) ---

  var live = root.attnlibLive;
  if (!live || !live.dom || !live.register) {
    throw new Error("attnlib live: load explorers.js before rotary.js");
  }
  var dom = live.dom;
  var el = dom.el;
  var svg = dom.svg;
  var QUERY = "#ff7f0e";
  var KEY = "#1f77b4";
  var BASES = ["10000", "1000", "100", "10"];

  function number(x) {
    return (Object.is(x, -0) ? 0 : x).toFixed(4);
  }

  function twoDigits(x) {
    return x === 0 ? "0" : x.toExponential(1);
  }

  function range(name, label, min, max, value) {
    return el("input", { type: "range", min: min, max: max, step: 1, value: value,
      "data-control": name, "aria-label": label });
  }

  function table(caption, head, rows) {
    return el("div", { class: "al-scroll" }, [el("table", { "data-readout": "pairs" }, [
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

  function arrow(picture, cx, cy, r, x, y, colour, faint) {
    picture.appendChild(svg("line", { x1: cx, y1: cy, x2: cx + r * x, y2: cy - r * y,
      stroke: colour, "stroke-width": faint ? 1.5 : 2.5, "stroke-opacity": faint ? 0.35 : 1,
      "stroke-dasharray": faint ? "3 3" : "none" }));
    if (!faint) {
      picture.appendChild(svg("circle", { cx: cx + r * x, cy: cy - r * y, r: 3.5,
        fill: colour }));
    }
  }

  // One circle per pair: the pair of q (orange) and of k (blue), turned (solid) and as given
  // (dashed); the angle between the turned ones is (m - n) ω_i, whatever the shift.
  function circles(name, title, q, k, m, n, base) {
    var pairs = q.length / 2;
    var rq = rotate(q, m, base);
    var rk = rotate(k, n, base);
    var size = 112;
    var r = 42;
    var top = 18;
    var width = pairs * size;
    var picture = svg("svg", { "data-readout": name, class: "al-fit", width: width,
      height: top + size + 22, viewBox: "0 0 " + width + " " + (top + size + 22), role: "img",
      "aria-label": title, "font-size": 11, "font-family": "sans-serif" });
    picture.appendChild(svg("text", { x: 4, y: 12, fill: "currentColor", "font-weight": 600 },
      title));
    for (var i = 0; i < pairs; i++) {
      var cx = i * size + size / 2;
      var cy = top + size / 2 + 4;
      var longest = Math.max(Math.hypot(q[2 * i], q[2 * i + 1]),
        Math.hypot(k[2 * i], k[2 * i + 1]), 1e-12);
      picture.appendChild(svg("circle", { cx: cx, cy: cy, r: r, fill: "none",
        stroke: "currentColor", "stroke-opacity": 0.25 }));
      arrow(picture, cx, cy, r, q[2 * i] / longest, q[2 * i + 1] / longest, QUERY, true);
      arrow(picture, cx, cy, r, k[2 * i] / longest, k[2 * i + 1] / longest, KEY, true);
      arrow(picture, cx, cy, r, rq[2 * i] / longest, rq[2 * i + 1] / longest, QUERY, false);
      arrow(picture, cx, cy, r, rk[2 * i] / longest, rk[2 * i + 1] / longest, KEY, false);
      picture.appendChild(svg("text", { x: cx, y: top + size + 18, "text-anchor": "middle",
        fill: "currentColor" }, "pair " + i + " (dims " + 2 * i + ", " + (2 * i + 1) + ")"));
    }
    return picture;
  }

  // q·k against the offset m - n (the same curve at every position), the current offset marked.
  function chart(offsets, scores, current) {
    var left = 44;
    var top = 22;
    var plot = 120;
    var step = Math.max(6, Math.min(14, 520 / offsets.length));
    var width = left + offsets.length * step + 10;
    var low = Math.min.apply(null, scores.concat([0]));
    var high = Math.max.apply(null, scores.concat([0]));
    var span = high - low || 1;
    function y(value) {
      return top + plot * (high - value) / span;
    }
    var picture = svg("svg", { "data-readout": "chart", class: "al-fit", width: width,
      height: top + plot + 30, viewBox: "0 0 " + width + " " + (top + plot + 30), role: "img",
      "aria-label": "q·k against the offset", "font-size": 11, "font-family": "sans-serif" });
    picture.appendChild(svg("text", { x: left, y: 12, fill: "currentColor", "font-weight": 600 },
      "q·k against the offset m − n: the same curve at every position"));
    (low < 0 && high > 0 ? [low, 0, high] : [low, high]).forEach(function (tick) {
      picture.appendChild(svg("line", { x1: left, x2: width - 8, y1: y(tick), y2: y(tick),
        stroke: "currentColor", "stroke-opacity": tick === 0 ? 0.6 : 0.2 }));
      picture.appendChild(svg("text", { x: left - 5, y: y(tick) + 4, "text-anchor": "end",
        fill: "currentColor" }, tick.toFixed(2)));
    });
    var points = scores.map(function (value, j) {
      return (left + (j + 0.5) * step).toFixed(1) + "," + y(value).toFixed(1);
    });
    picture.appendChild(svg("polyline", { points: points.join(" "), fill: "none", stroke: KEY,
      "stroke-width": 2 }));
    offsets.forEach(function (offset, j) {
      var x = left + (j + 0.5) * step;
      if (offset === current) {
        picture.appendChild(svg("circle", { cx: x, cy: y(scores[j]), r: 5, fill: QUERY }));
      }
      if (offset % 4 === 0) {
        picture.appendChild(svg("text", { x: x, y: top + plot + 16, "text-anchor": "middle",
          fill: "currentColor" }, String(offset)));
      }
    });
    return picture;
  }

  function mountRotary(rootElement) {
    var startQuery = JSON.parse(rootElement.getAttribute("data-query"));
    var startKey = JSON.parse(rootElement.getAttribute("data-key"));
    var startBase = rootElement.getAttribute("data-base") || "10000";
    var maxPosition = parseInt(rootElement.getAttribute("data-max-position"), 10) || 64;
    var maxOffset = parseInt(rootElement.getAttribute("data-max-offset"), 10) || 16;
    dom.start(rootElement, "rotary");

    var position = range("position", "key position n", 0, maxPosition, Math.min(5, maxPosition));
    var offset = range("offset", "offset m - n", -maxOffset, maxOffset, Math.min(3, maxOffset));
    var shift = range("shift", "shift both by s", 0, maxPosition, Math.min(20, maxPosition));
    var base = el("select", { "data-control": "base", "aria-label": "base" },
      BASES.concat(BASES.indexOf(startBase) < 0 ? [startBase] : []).map(function (b) {
        return el("option", { value: b, selected: b === startBase }, [b]);
      }));
    var query = el("input", { type: "text", value: startQuery.join(" "), "data-control": "query",
      spellcheck: "false", "aria-label": "query vector q", style: "width:22em" });
    var key = el("input", { type: "text", value: startKey.join(" "), "data-control": "key",
      spellcheck: "false", "aria-label": "key vector k", style: "width:22em" });
    var reset = el("button", { type: "button", "data-control": "reset" }, ["back to the start"]);
    var shown = {};
    ["n", "offset", "m", "shift"].forEach(function (name) {
      shown[name] = el("output", { "data-readout": name }, [""]);
    });
    var error = el("div", { class: "al-error", "data-readout": "error", role: "alert",
      hidden: true });
    var readout = el("div", {});

    rootElement.appendChild(el("p", { class: "al-title" },
      ["Rotary explorer: q at position m, k at position n, each pair turned by its own " +
        "angle (runs in your browser)"]));
    rootElement.appendChild(el("div", { class: "al-row" }, [
      el("label", {}, ["q", query]), el("label", {}, ["k", key]),
      el("label", {}, ["base", base]), reset,
    ]));
    rootElement.appendChild(el("div", { class: "al-row" }, [
      el("label", {}, ["key position n", position, shown.n]),
      el("label", {}, ["offset m − n", offset, shown.offset]),
      el("span", {}, ["so the query stands at m = ", shown.m]),
      el("label", {}, ["shift both by s", shift, shown.shift]),
    ]));
    rootElement.appendChild(error);
    rootElement.appendChild(readout);

    function update() {
      var q;
      var k;
      try {
        q = parseVector(query.value, "q");
        k = parseVector(key.value, "k");
        if (q.length !== k.length) {
          throw new Error("q has " + q.length + " entries but k has " + k.length);
        }
      } catch (problem) {
        error.textContent = "Cannot read the vectors: " + problem.message;
        error.hidden = false;
        readout.textContent = "";
        return;
      }
      error.hidden = true;
      var b = Number(base.value);
      var n = parseInt(position.value, 10);
      var delta = parseInt(offset.value, 10);
      var s = parseInt(shift.value, 10);
      var m = n + delta;
      shown.n.textContent = String(n);
      shown.offset.textContent = String(delta);
      shown.m.textContent = String(m);
      shown.shift.textContent = String(s);
      var omegas = frequencies(q.length, b);
      var here = pairDots(q, k, m, n, b);
      var there = pairDots(q, k, m + s, n + s, b);
      var rows = omegas.map(function (omega, i) {
        return ["pair " + i, omega.toPrecision(4), number(m * omega), number(n * omega),
          number(delta * omega), number(here[i]), number(there[i])];
      });
      var offsets = [];
      for (var j = -maxOffset; j <= maxOffset; j++) {
        offsets.push(j);
      }
      var shifts = [];
      for (var t = 0; t <= maxPosition; t++) {
        shifts.push(t);
      }
      readout.textContent = "";
      readout.appendChild(table("each pair: its frequency ω_i, the angles it turns q and k by " +
        "(radians), and its share of q·k", ["pair", "ω_i", "q: m ω_i", "k: n ω_i",
        "(m − n) ω_i", "share at m, n", "share at m+s, n+s"], rows));
      readout.appendChild(el("div", { class: "al-scroll" }, [
        circles("circles", "each pair with q at m = " + m + " (orange) and k at n = " + n +
          " (blue); dashed: as given", q, k, m, n, b),
        circles("shifted-circles", "both shifted by s = " + s + ": each pair turned further, " +
          "the angle between q and k the same", q, k, m + s, n + s, b),
      ]));
      readout.appendChild(el("p", { class: "al-note" }, [
        "q·k = ", el("span", { "data-readout": "score" }, [number(sum(here))]),
        " with q at " + m + " and k at " + n + "; shifted to " + (m + s) + " and " + (n + s) +
          ": ", el("span", { "data-readout": "shifted-score" }, [number(sum(there))]),
        ". Over every shift from 0 to " + maxPosition + ", the largest change is ",
        el("span", { "data-readout": "shift-error" },
          [twoDigits(shiftError(q, k, m, n, shifts, b))]),
        " (round-off): only the offset m − n counts.",
      ]));
      readout.appendChild(el("div", { class: "al-scroll" },
        [chart(offsets, scoresByOffset(q, k, n, offsets, b), delta)]));
    }

    dom.keepKeys(rootElement);
    [position, offset, shift].forEach(function (control) {
      control.addEventListener("input", update);
    });
    [query, key].forEach(function (control) {
      control.addEventListener("input", update);
    });
    base.addEventListener("change", update);
    reset.addEventListener("click", function () {
      query.value = startQuery.join(" ");
      key.value = startKey.join(" ");
      base.value = startBase;
      position.value = Math.min(5, maxPosition);
      offset.value = Math.min(3, maxOffset);
      shift.value = Math.min(20, maxPosition);
      update();
    });
    update();
    return rootElement;
  }

  live.rotary = api;
  live.register("rotary", mountRotary);
})(typeof self !== "undefined" ? self : this);
