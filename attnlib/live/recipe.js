/* attnlib live: chapter 12's explorer, learning-rate schedules and label smoothing.
 *
 * The arithmetic (noamRate, cosineMultiplier, linearMultiplier, scheduleValue, scheduleCurve,
 * firstPeak; smoothedTarget, smoothingFloor, gapProbabilities, smoothedLoss, bestLogitGap) is a
 * port of attnlib.schedules (noam, cosine_decay, linear_warmup_decay: a step t = 0, 1, ... as
 * LambdaLR counts it, t = s - 1 for optimizer step s) and of the chapter's label smoothing
 * (PyTorch's convention: q' = (1 - eps) one-hot + eps / K). tests/test_live_recipe.py runs it
 * in node and checks every number against the NumPy oracle in attnlib.reference. In node this
 * file is module.exports (the arithmetic only); in a browser it needs explorers.js first (the
 * DOM helpers) and registers the explorer "recipe", inlined by attnlib/live/recipe_explorer.py.
 * Stable hooks:
 *   root      .attnlib-live[data-explorer="recipe"]; data-schedule, data-d-model, data-warmup,
 *             data-total, data-final, data-epsilon, data-classes (JSON list of the K offered),
 *             data-k, data-gap: where the controls start
 *   controls  [data-control="schedule" (select: noam | cosine | linear) | "d-model" (select,
 *             Noam only) | "final" (range, the floor f; cosine and linear only) | "warmup"
 *             (range, W) | "total" (range, T) | "step" (range, s = 1 .. T) | "epsilon" (range)
 *             | "classes" (range: an index into data-classes) | "gap" (range, the logit gap g)]
 *   readouts  [data-readout="curve" (svg) | "peak" | "peak-step" | "value" (at s) | "phase" |
 *             "target-true" | "target-other" | "floor" (H(q'), nats) | "best-gap" ("∞" without
 *             smoothing) | "best-confidence" | "confidence" (p of the true class at gap g) |
 *             "loss" (against q') | "excess" (loss - floor, >= 0) | "loss-plain" (against
 *             the one-hot target) | "bars" | "loss-chart" (svg) | "error"]; the echoes beside the
 *             sliders are outputs named like their control. Rates (Noam) show 4 significant
 *             digits (6.988e-4), multipliers and losses 4 decimals, |x| < 5e-4 two digits.
 */
(function (root) {
  "use strict";

  var inNode = typeof module === "object" && module && module.exports;
  var SCHEDULES = ["noam", "cosine", "linear"];
  // A value within this relative distance of the largest counts as the peak (an ulp of noise).
  var PEAK_TOLERANCE = 1e-12;

  function checkInt(name, value, least) {
    if (!Number.isInteger(value) || value < least) {
      throw new Error(name + " must be an integer >= " + least + ", got " + value);
    }
  }

  function checkFraction(name, value) {
    if (typeof value !== "number" || !(value >= 0 && value <= 1)) {
      throw new Error(name + " must be in [0, 1], got " + value);
    }
  }

  // attnlib.schedules.noam: d_model^-0.5 * min(s^-0.5, s * warmup^-1.5), s = t + 1.
  function noamRate(step, dModel, warmup) {
    checkInt("step", step, 0);
    checkInt("d_model", dModel, 1);
    checkInt("warmup", warmup, 1);
    var s = step + 1;
    return Math.pow(dModel, -0.5) * Math.min(Math.pow(s, -0.5), s * Math.pow(warmup, -1.5));
  }

  function checkDecay(total, warmup, least, final) {
    checkInt("total_steps", total, 1);
    checkInt("warmup", warmup, least);
    checkFraction("final", final);
    if (warmup >= total) {
      throw new Error("warmup=" + warmup + " leaves no steps to decay in total_steps=" + total);
    }
  }

  // attnlib.schedules.cosine_decay(total, warmup, final): (t + 1) / W, then a half cosine to f.
  function cosineMultiplier(step, total, warmup, final) {
    checkInt("step", step, 0);
    checkDecay(total, warmup, 0, final);
    if (step < warmup) {
      return (step + 1) / warmup;
    }
    var progress = Math.min(1, (step - warmup) / (total - warmup));
    return final + (1 - final) * 0.5 * (1 + Math.cos(Math.PI * progress));
  }

  // attnlib.schedules.linear_warmup_decay(warmup, total, final): (t + 1) / W, then a line to f.
  function linearMultiplier(step, warmup, total, final) {
    checkInt("step", step, 0);
    checkDecay(total, warmup, 1, final);
    if (step < warmup) {
      return (step + 1) / warmup;
    }
    var progress = Math.min(1, (step + 1 - warmup) / (total - warmup));
    return 1 - (1 - final) * progress;
  }

  // knobs: {dModel, warmup, total, final}; Noam ignores total (the horizon) and final.
  function scheduleValue(kind, step, knobs) {
    if (kind === "noam") {
      return noamRate(step, knobs.dModel, knobs.warmup);
    }
    if (kind === "cosine") {
      return cosineMultiplier(step, knobs.total, knobs.warmup, knobs.final);
    }
    if (kind === "linear") {
      return linearMultiplier(step, knobs.warmup, knobs.total, knobs.final);
    }
    throw new Error("schedule must be one of " + SCHEDULES.join(", ") + ", got " + kind);
  }

  // The schedule at every step t = 0 .. total - 1.
  function scheduleCurve(kind, knobs) {
    checkInt("total_steps", knobs.total, 1);
    scheduleValue(kind, 0, knobs);  // the knobs checked once, not at every step
    var out = new Array(knobs.total);
    for (var t = 0; t < knobs.total; t++) {
      out[t] = scheduleValue(kind, t, knobs);
    }
    return out;
  }

  // {index, value}: the first index whose value is the largest, to PEAK_TOLERANCE.
  function firstPeak(values) {
    if (!values.length) {
      throw new Error("values must not be empty");
    }
    var largest = values.reduce(function (a, b) {
      return Math.max(a, b);
    }, -Infinity);
    for (var i = 0; i < values.length; i++) {
      if (values[i] >= largest * (1 - PEAK_TOLERANCE)) {
        return { index: i, value: values[i] };
      }
    }
    throw new Error("no peak in " + values.length + " values");
  }

  function checkSmoothing(classes, epsilon) {
    checkInt("K", classes, 2);
    checkFraction("epsilon", epsilon);
  }

  // q' = (1 - eps) one-hot + eps / K: the true class and each of the K - 1 others.
  function smoothedTarget(classes, epsilon) {
    checkSmoothing(classes, epsilon);
    return { trueClass: 1 - epsilon + epsilon / classes, other: epsilon / classes };
  }

  function xLogX(x) {
    return x === 0 ? 0 : x * Math.log(x);
  }

  // H(q') in nats: the smallest cross-entropy any prediction can have against q'.
  function smoothingFloor(classes, epsilon) {
    var q = smoothedTarget(classes, epsilon);
    return -(xLogX(q.trueClass) + (classes - 1) * xLogX(q.other));
  }

  function checkGap(gap) {
    if (typeof gap !== "number" || !isFinite(gap) || gap < 0) {
      throw new Error("gap must be a finite number >= 0, got " + gap);
    }
  }

  // softmax of logits with the true class `gap` above the K - 1 others (all at 0).
  function gapProbabilities(classes, gap) {
    checkInt("K", classes, 2);
    checkGap(gap);
    var rest = (classes - 1) * Math.exp(-gap);
    return { trueClass: 1 / (1 + rest), other: Math.exp(-gap) / (1 + rest) };
  }

  // Cross-entropy of that prediction against q' (eps = 0: the ordinary loss, -log p_true).
  function smoothedLoss(classes, epsilon, gap) {
    var q = smoothedTarget(classes, epsilon);
    checkGap(gap);
    var lse = Math.log1p((classes - 1) * Math.exp(-gap));  // -log p_true
    return q.trueClass * lse + (classes - 1) * q.other * (gap + lse);
  }

  // The gap at which softmax equals q': ln(q'_true / q'_other); Infinity without smoothing.
  function bestLogitGap(classes, epsilon) {
    var q = smoothedTarget(classes, epsilon);
    return Math.log(q.trueClass) - Math.log(q.other);
  }

  var api = {
    SCHEDULES: SCHEDULES,
    noamRate: noamRate,
    cosineMultiplier: cosineMultiplier,
    linearMultiplier: linearMultiplier,
    scheduleValue: scheduleValue,
    scheduleCurve: scheduleCurve,
    firstPeak: firstPeak,
    smoothedTarget: smoothedTarget,
    smoothingFloor: smoothingFloor,
    gapProbabilities: gapProbabilities,
    smoothedLoss: smoothedLoss,
    bestLogitGap: bestLogitGap,
  };

  if (inNode) {
    module.exports = api;
    return;
  }

  // --- the explorer (browser only) ---

  var live = root.attnlibLive;
  if (!live || !live.dom || !live.register) {
    throw new Error("attnlib live: load explorers.js before recipe.js");
  }
  var dom = live.dom;
  var el = dom.el;
  var svg = dom.svg;

  // An empty chart, WIDTH wide and `height` high, with its title in bold at the top left.
  function chart(readout, height, label, title) {
    var picture = svg("svg", { "data-readout": readout, class: "al-fit", width: WIDTH,
      height: height, viewBox: "0 0 " + WIDTH + " " + height, role: "img", "aria-label": label,
      "font-size": 12, "font-family": "sans-serif" });
    picture.appendChild(svg("text", { x: 4, y: 13, fill: "currentColor", "font-weight": 600 },
      title));
    return picture;
  }
  var BLUE = "#1f77b4";
  var ORANGE = "#ff7f0e";
  var D_MODELS = ["64", "128", "256", "512", "768", "1024"];
  var NAMES = {
    noam: "Noam: warm-up, then 1/√s",
    cosine: "linear warm-up, then cosine decay",
    linear: "linear warm-up, then linear decay",
  };
  var WIDTH = 360;  // the pictures' width: at 375 px they shrink by a tenth at most
  var MAX_GAP = 20;

  // 4 decimals; |x| < 5e-4 in two significant digits, so 2.7e-6 does not read as 0.
  function number(x) {
    if (x === Infinity) {
      return "\u221e";
    }
    if (x !== 0 && Math.abs(x) < 5e-4) {
      return x.toExponential(1);
    }
    return x.toFixed(4);
  }

  // A Noam rate: 4 significant digits (6.988e-4); a multiplier: as number().
  function rate(kind, x) {
    return kind === "noam" ? x.toExponential(3) : number(x);
  }

  function range(name, label, min, max, step, value) {
    return el("input", { type: "range", min: min, max: max, step: step, value: value,
      "data-control": name, "aria-label": label });
  }

  function span(name, text) {
    return el("span", { "data-readout": name }, [text]);
  }

  // The schedule against the optimizer step s = 1 .. T, the peak and the chosen step marked.
  function curveChart(kind, values, peak, chosen) {
    var left = 52;
    var top = 24;
    var plot = 150;
    var right = WIDTH - 12;
    var total = values.length;
    var high = peak.value > 0 ? peak.value : 1;
    function x(t) {
      return left + (right - left) * (total > 1 ? t / (total - 1) : 0);
    }
    function y(v) {
      return top + plot * (1 - v / high);
    }
    var picture = chart("curve", top + plot + 40, NAMES[kind], kind === "noam" ?
      "learning rate against the step s" : "multiplier of the base rate against the step s");
    [0, 0.5, 1].forEach(function (fraction) {
      var v = high * fraction;
      picture.appendChild(svg("line", { x1: left, x2: right, y1: y(v), y2: y(v),
        stroke: "currentColor", "stroke-opacity": fraction ? 0.2 : 0.6 }));
      picture.appendChild(svg("text", { x: left - 4, y: y(v) + 4, "text-anchor": "end",
        fill: "currentColor" }, fraction === 0 ? "0" : kind === "noam" ? v.toExponential(1) :
        String(Number(v.toFixed(2)))));
    });
    [0, Math.floor((total - 1) / 2), total - 1].forEach(function (t, i) {
      picture.appendChild(svg("text", { x: x(t), y: top + plot + 16, fill: "currentColor",
        "text-anchor": ["start", "middle", "end"][i] }, String(t + 1)));
    });
    picture.appendChild(svg("text", { x: (left + right) / 2, y: top + plot + 32,
      "text-anchor": "middle", fill: "currentColor" }, "optimizer step s (t = s − 1)"));
    // one point per pixel column at most, the peak's step always among them
    var columns = Math.min(total, 2 * (right - left));
    var steps = [];
    for (var c = 0; c < columns; c++) {
      steps.push(Math.round(c * (total - 1) / Math.max(columns - 1, 1)));
    }
    steps.push(peak.index);
    steps.sort(function (a, b) {
      return a - b;
    });
    var points = steps.map(function (t) {
      return x(t).toFixed(1) + "," + y(values[t]).toFixed(1);
    });
    picture.appendChild(svg("polyline", { points: points.join(" "), fill: "none", stroke: BLUE,
      "stroke-width": 2 }));
    picture.appendChild(svg("circle", { cx: x(peak.index), cy: y(peak.value), r: 4.5,
      fill: "none", stroke: "currentColor", "stroke-width": 1.5 }));
    picture.appendChild(svg("line", { x1: x(chosen), x2: x(chosen), y1: top, y2: top + plot,
      stroke: ORANGE, "stroke-dasharray": "3 3" }));
    picture.appendChild(svg("circle", { cx: x(chosen), cy: y(values[chosen]), r: 4.5,
      fill: ORANGE }));
    return picture;
  }

  // The target q': the true class, then up to six of the others; the one-hot target dashed.
  function bars(classes, q) {
    var shown = Math.min(classes, 7);
    var left = 34;
    var top = 36;
    var plot = 110;
    var slot = (WIDTH - left - (classes > shown ? 92 : 8)) / shown;
    var picture = chart("bars", top + plot + 24, "the smoothed target distribution",
      "target q' (bars); one-hot target (dashed)");
    [0, 0.5, 1].forEach(function (tick) {
      var y = top + plot * (1 - tick);
      picture.appendChild(svg("line", { x1: left, x2: WIDTH - 8, y1: y, y2: y,
        stroke: "currentColor", "stroke-opacity": tick ? 0.2 : 0.6 }));
      picture.appendChild(svg("text", { x: left - 4, y: y + 4, "text-anchor": "end",
        fill: "currentColor" }, String(tick)));
    });
    for (var k = 0; k < shown; k++) {
      var value = k === 0 ? q.trueClass : q.other;
      var x = left + k * slot + slot * 0.15;
      var h = plot * value;
      var bar = svg("rect", { x: x, y: top + plot - h, width: slot * 0.7, height: h,
        fill: k === 0 ? ORANGE : BLUE });
      bar.appendChild(svg("title", {}, (k === 0 ? "true class: " : "class " + (k + 1) + ": ") +
        number(value)));
      picture.appendChild(bar);
      if (k === 0) {
        picture.appendChild(svg("rect", { x: x, y: top, width: slot * 0.7, height: plot,
          fill: "none", stroke: "currentColor", "stroke-dasharray": "4 3" }));
      }
      if (k === 0) {  // above the one-hot target's box, from the bar's left edge
        picture.appendChild(svg("text", { x: x, y: top - 4, fill: "currentColor" },
          number(value)));
      } else if (k === 1) {
        picture.appendChild(svg("text", { x: x + slot * 0.35, y: top + plot - h - 4,
          "text-anchor": "middle", fill: "currentColor" }, number(value)));
      }
      picture.appendChild(svg("text", { x: x + slot * 0.35, y: top + plot + 16,
        "text-anchor": "middle", fill: "currentColor" }, k === 0 ? "true" : String(k + 1)));
    }
    if (classes > shown) {
      picture.appendChild(svg("text", { x: WIDTH - 8, y: top + plot - 6, "text-anchor": "end",
        fill: "currentColor" }, "… " + (classes - shown) + " more"));
    }
    return picture;
  }

  // The loss against the logit gap g: against q' (blue, lowest at the best gap) and against
  // the one-hot target (orange, dashed, falling towards 0 for ever); the floor dotted.
  function lossChart(classes, epsilon, gap, floor, best) {
    var left = 40;
    var top = 24;
    var plot = 130;
    var right = WIDTH - 12;
    var gaps = [];
    for (var i = 0; i <= 200; i++) {
      gaps.push(MAX_GAP * i / 200);
    }
    var smooth = gaps.map(function (g) {
      return smoothedLoss(classes, epsilon, g);
    });
    var plain = gaps.map(function (g) {
      return smoothedLoss(classes, 0, g);
    });
    var high = Math.max.apply(null, smooth.concat(plain));
    function x(g) {
      return left + (right - left) * g / MAX_GAP;
    }
    function y(v) {
      return top + plot * (1 - v / high);
    }
    function line(values, colour, dashes) {
      return svg("polyline", { points: values.map(function (v, j) {
        return x(gaps[j]).toFixed(1) + "," + y(v).toFixed(1);
      }).join(" "), fill: "none", stroke: colour, "stroke-width": 2,
      "stroke-dasharray": dashes });
    }
    var picture = chart("loss-chart", top + plot + 40, "the loss against the logit gap",
      "loss against q' (blue), one-hot target (orange)");
    [0, high / 2, high].forEach(function (tick) {
      picture.appendChild(svg("line", { x1: left, x2: right, y1: y(tick), y2: y(tick),
        stroke: "currentColor", "stroke-opacity": tick ? 0.2 : 0.6 }));
      picture.appendChild(svg("text", { x: left - 4, y: y(tick) + 4, "text-anchor": "end",
        fill: "currentColor" }, tick.toFixed(2)));
    });
    [0, 5, 10, 15, 20].forEach(function (g) {
      picture.appendChild(svg("text", { x: x(g), y: top + plot + 16, "text-anchor": "middle",
        fill: "currentColor" }, String(g)));
    });
    picture.appendChild(svg("text", { x: (left + right) / 2, y: top + plot + 32,
      "text-anchor": "middle", fill: "currentColor" },
      "logit gap g of the true class over the others"));
    picture.appendChild(svg("line", { x1: left, x2: right, y1: y(floor), y2: y(floor),
      stroke: "currentColor", "stroke-dasharray": "1 3", "stroke-width": 1.5 }));
    picture.appendChild(line(plain, ORANGE, "5 3"));
    picture.appendChild(line(smooth, BLUE, "none"));
    if (best <= MAX_GAP) {
      picture.appendChild(svg("circle", { cx: x(best), cy: y(floor), r: 4.5, fill: "none",
        stroke: "currentColor", "stroke-width": 1.5 }));
    }
    picture.appendChild(svg("circle", { cx: x(gap), cy: y(smoothedLoss(classes, epsilon, gap)),
      r: 4.5, fill: BLUE }));
    return picture;
  }

  function mountRecipe(rootElement) {
    function attribute(name, fallback) {
      var value = rootElement.getAttribute("data-" + name);
      return value === null || value === "" ? fallback : value;
    }
    var startKind = attribute("schedule", "noam");
    var startDModel = attribute("d-model", "512");
    var classes = JSON.parse(attribute("classes", "[2,3,4,5,10,100,1000,10000,37000]"));
    var startK = parseInt(attribute("k", "4"), 10);
    dom.start(rootElement, "recipe");

    var kind = el("select", { "data-control": "schedule", "aria-label": "schedule" },
      SCHEDULES.map(function (name) {
        return el("option", { value: name, selected: name === startKind }, [NAMES[name]]);
      }));
    var dModel = el("select", { "data-control": "d-model", "aria-label": "d_model" },
      D_MODELS.concat(D_MODELS.indexOf(startDModel) < 0 ? [startDModel] : []).map(function (d) {
        return el("option", { value: d, selected: d === startDModel }, [d]);
      }));
    var final = range("final", "floor f", 0, 0.5, 0.01, attribute("final", "0"));
    var total = range("total", "total steps T", 2000, 100000, 1000, attribute("total", "20000"));
    var warmup = range("warmup", "warm-up W", 0, 99000, 50, attribute("warmup", "4000"));
    var step = range("step", "step s", 1, 100000, 1, attribute("warmup", "4000"));
    var epsilon = range("epsilon", "epsilon", 0, 1, 0.01, attribute("epsilon", "0.1"));
    var kIndex = range("classes", "number of classes K", 0, classes.length - 1, 1,
      Math.max(0, classes.indexOf(startK)));
    var gap = range("gap", "logit gap g", 0, MAX_GAP, 0.1, attribute("gap", "6"));
    var echo = {};
    ["final", "total", "warmup", "step", "epsilon", "classes", "gap"].forEach(function (name) {
      echo[name] = el("output", { "data-readout": name }, [""]);
    });
    var dModelLabel = el("label", {}, ["d_model", dModel]);
    var finalLabel = el("label", {}, ["floor f", final, echo.final]);
    var error = el("div", { class: "al-error", "data-readout": "error", role: "alert",
      hidden: true });
    var scheduleOut = el("div", {});
    var smoothingOut = el("div", {});

    rootElement.appendChild(el("p", { class: "al-title" },
      ["Schedules and label smoothing (runs in your browser)"]));
    rootElement.appendChild(el("div", { class: "al-row" }, [
      // wraps its select under the word on a phone: the longest name is wider than the row
      el("label", { style: "flex-wrap:wrap;max-width:100%" }, ["schedule", kind]), dModelLabel,
      finalLabel,
    ]));
    rootElement.appendChild(el("div", { class: "al-row" }, [
      el("label", {}, ["warm-up W", warmup, echo.warmup]),
      el("label", {}, ["total steps T", total, echo.total]),
      el("label", {}, ["step s", step, echo.step]),
    ]));
    rootElement.appendChild(scheduleOut);
    rootElement.appendChild(el("p", { class: "al-title" },
      ["Label smoothing: the target q' and the smallest loss"]));
    rootElement.appendChild(el("div", { class: "al-row" }, [
      el("label", {}, ["ε", epsilon, echo.epsilon]),
      el("label", {}, ["classes K", kIndex, echo.classes]),
      el("label", {}, ["logit gap g", gap, echo.gap]),
    ]));
    rootElement.appendChild(error);
    rootElement.appendChild(smoothingOut);

    function int(control) {
      return Math.round(Number(control.value));
    }

    // The sliders' ranges follow the schedule and T: W < T (W >= 1 but for cosine), s <= T.
    function constrain(name) {
      var T = int(total);
      warmup.min = name === "cosine" ? 0 : 50;
      warmup.max = T - 1000;
      warmup.value = Math.min(Math.max(int(warmup), Number(warmup.min)), T - 1000);
      step.max = T;
      step.value = Math.min(Math.max(int(step), 1), T);
      dModelLabel.hidden = name !== "noam";
      finalLabel.hidden = name === "noam";
    }

    function updateSchedule() {
      var name = kind.value;
      constrain(name);
      var knobs = { dModel: parseInt(dModel.value, 10), warmup: int(warmup), total: int(total),
        final: Number(final.value) };
      var s = int(step);
      echo.warmup.textContent = String(knobs.warmup);
      echo.total.textContent = String(knobs.total);
      echo.step.textContent = String(s);
      echo.final.textContent = knobs.final.toFixed(2);
      var values = scheduleCurve(name, knobs);
      var peak = firstPeak(values);
      var W = knobs.warmup;
      var phase;
      if (name === "noam") {
        phase = s < W ? "warm-up: d_model^-0.5 · W^-1.5 · s, a straight line" :
          "decay: d_model^-0.5 · s^-0.5 (the warm-up W no longer counts)";
      } else if (s <= W) {
        phase = "warm-up: s / W";
      } else {
        phase = name === "cosine" ? "decay: half a cosine from 1 down to f at T" :
          "decay: a straight line from 1 down to f at T";
      }
      scheduleOut.textContent = "";
      scheduleOut.appendChild(curveChart(name, values, peak, s - 1));
      scheduleOut.appendChild(el("p", { class: "al-note" }, [
        name === "noam" ? "The rate peaks at " : "The multiplier peaks at ",
        span("peak", rate(name, peak.value)), " at step s = ",
        span("peak-step", String(peak.index + 1)),
        name === "noam" ? " (= d_model^-0.5 · W^-0.5 at s = W)" :
          " (s = W, or s = 1 without a warm-up)",
        ". At s = " + s + ": ", span("value", rate(name, values[s - 1])), ", ",
        span("phase", phase), ".",
      ]));
      scheduleOut.appendChild(el("p", { class: "al-note" }, [name === "noam" ?
        "The value is the learning rate itself (the optimizer's lr = 1); T only sets how far " +
        "the picture goes." : "The value multiplies the optimizer's base rate; s counts " +
        "optimizer steps, and attnlib's schedule is asked for t = s − 1, as LambdaLR asks."]));
    }

    function updateSmoothing() {
      var eps = Number(epsilon.value);
      var K = classes[int(kIndex)];
      var g = Number(gap.value);
      echo.epsilon.textContent = eps.toFixed(2);
      echo.classes.textContent = String(K);
      echo.gap.textContent = g.toFixed(1);
      var q = smoothedTarget(K, eps);
      var floor = smoothingFloor(K, eps);
      var best = bestLogitGap(K, eps);
      var p = gapProbabilities(K, g);
      var loss = smoothedLoss(K, eps, g);
      smoothingOut.textContent = "";
      smoothingOut.appendChild(bars(K, q));
      smoothingOut.appendChild(el("p", { class: "al-note" }, [
        "q' puts ", span("target-true", number(q.trueClass)), " = 1 − ε + ε/K on the true " +
          "class and ", span("target-other", number(q.other)), " = ε/K on each of the " +
          (K - 1) + " others. No prediction can score below its entropy H(q') = ",
        span("floor", number(floor)), " nats, reached when the true logit leads every other " +
          "by ", span("best-gap", number(best)), " = ln(q'true / q'other), a confidence of ",
        span("best-confidence", number(q.trueClass)), ".",
      ]));
      smoothingOut.appendChild(lossChart(K, eps, g, floor, best));
      smoothingOut.appendChild(el("p", { class: "al-note" }, [
        "A prediction whose true logit leads by g = " + g.toFixed(1) + " gives it p = ",
        span("confidence", number(p.trueClass)), ". Its loss against q' is ",
        span("loss", number(loss)), " (", span("excess", number(Math.max(0, loss - floor))),
        " above the floor); against the one-hot target it is ",
        span("loss-plain", number(smoothedLoss(K, 0, g))),
        eps > 0 ? ". With ε > 0 a prediction ever closer to one-hot costs ever more; " +
          "without smoothing it only ever gains." : ". Without smoothing the floor is 0, " +
          "reached only as g grows for ever: the model is always pushed to grow its logits.",
      ]));
    }

    function update(part) {
      try {
        error.hidden = true;
        if (part !== "smoothing") {
          updateSchedule();
        }
        if (part !== "schedule") {
          updateSmoothing();
        }
      } catch (problem) {
        error.textContent = "Cannot draw this: " + problem.message;
        error.hidden = false;
      }
    }

    dom.keepKeys(rootElement);
    [warmup, total, step, final].forEach(function (control) {
      control.addEventListener("input", function () {
        update("schedule");
      });
    });
    [kind, dModel].forEach(function (control) {
      control.addEventListener("change", function () {
        update("schedule");
      });
    });
    [epsilon, kIndex, gap].forEach(function (control) {
      control.addEventListener("input", function () {
        update("smoothing");
      });
    });
    update("all");
    return rootElement;
  }

  live.recipe = api;
  live.register("recipe", mountRecipe);
})(typeof self !== "undefined" ? self : this);
