/* attnlib live: the translator explorer of chapters 03-05, the trained models run in the page.
 *
 * Type a date: seq2seq.js translates it with the chosen model (its weights inlined by
 * attnlib.live.translator.translator_live), and the explorer shows the translation, the
 * probability of each output character, the alignment (one row per output step, one column per
 * input character) and, step by step, what the decoder wrote and where it looked. With
 * data-expect="copy" (chapter 03's copy task) the input is a digit string that the models must
 * copy: every model copies it, and each copy is shown with its wrong characters marked. Needs
 * attention.js, explorers.js (the DOM helpers) and seq2seq.js first. Stable hooks for tests:
 *   root     .attnlib-live[data-explorer="translator"], data-mounted once built; data-models
 *            (the specs of seq2seq.js), data-vocab {source, target}, data-example, data-examples
 *            (JSON list of dates), data-start (a model index), data-max-steps, data-max-length,
 *            data-expect ("copy" or absent);
 *            set by the explorer: data-shown (JSON {model, text, step, steps}), data-ms (the
 *            milliseconds of the last translation: weights read when first needed, the forward
 *            pass and the drawing, performance.now around them), data-first-ms (the first's),
 *            data-translations (how many so far)
 *   controls [data-control="text" | "model" (select, with two models or more) | "examples"
 *            (select, with examples; option 0 is a placeholder) | "step" (range, 1 to the
 *            number of steps) | "previous" | "next" (buttons; next wraps to step 1)]
 *   readouts [data-readout="translation" | "message" (unknown characters, in words) | "error"
 *            (nothing to translate: empty or too long) | "step" (what step t wrote and read) |
 *            "heatmap" (SVG: a rect per weight with data-row, data-col, data-weight (4 decimals),
 *            text labels data-label="input" | "output" | "probability", the step's row
 *            outlined by [data-current]) | "colorbar" | "hover" | "compare" (copy only: a row
 *            [data-model] per model with data-wrong (how many positions are wrong) and its
 *            copy's characters, each [data-position] with data-wrong="true" where it is wrong)]
 */
(function (root) {
  "use strict";

  var live = root.attnlibLive;
  if (!live || !live.dom || !live.register || !live.seq2seq) {
    throw new Error("attnlib live: load attention.js, explorers.js and seq2seq.js before " +
      "translator_explorer.js");
  }
  var dom = live.dom;
  var el = dom.el;
  var svg = dom.svg;
  var s2s = live.seq2seq;

  var STYLE_ID = "attnlib-translator-style";
  var MIN_CELL = 16;
  var MAX_CELL = 26;
  var HOVER_HINT = "Point at (or tap) a square to read its weight.";
  var CSS = [
    ".attnlib-live .tr-field{flex:1 1 16em;min-width:0;max-width:34em}",
    ".attnlib-live .tr-field input[type=text].tr-text{flex:1 1 auto;width:100%;min-width:0;",
    "max-width:100%}",
    ".attnlib-live .tr-pick{flex:0 1 auto;min-width:0;max-width:100%}",
    ".attnlib-live .tr-pick select{max-width:min(22em,70vw)}",
    ".attnlib-live .tr-map{display:flex;align-items:flex-start;max-width:100%;margin:.3em 0}",
    ".attnlib-live .tr-map>svg{flex:0 0 auto}",
    ".attnlib-live .tr-scroll{flex:0 1 auto;min-width:0;max-width:100%;overflow-x:auto;",
    "overflow-y:hidden;padding-bottom:.2em}",
    ".attnlib-live .tr-plain{align-self:center;max-width:24em;margin-left:.5em}",
    ".attnlib-live .tr-scroll svg{max-width:none}",
    ".attnlib-live .tr-out{font-size:1.15em;font-weight:600;letter-spacing:.04em}",
    ".attnlib-live .tr-steps{display:flex;flex-wrap:wrap;align-items:center;gap:.3em .6em}",
    ".attnlib-live .tr-steps input[type=range]{width:min(13em,45vw)}",
    ".attnlib-live .tr-message{color:#b35900;margin:.2em 0}",
    ".attnlib-live .tr-message:empty{display:none}",
    ".attnlib-live code{overflow-wrap:anywhere}",
    ".attnlib-live .tr-compare{border-collapse:collapse;margin:.3em 0}",
    ".attnlib-live .tr-compare td{padding:.1em .6em .1em 0;vertical-align:baseline;",
    "text-align:left;white-space:nowrap}",
    ".attnlib-live .tr-compare tr[data-chosen] td:first-child{font-weight:600}",
    ".attnlib-live .tr-copy{font-family:monospace;font-size:1.1em;letter-spacing:.08em}",
    ".attnlib-live .tr-copy span[data-wrong=true]{background:#fdd0a2;color:#8c2d04;",
    "text-decoration:underline wavy #d94801}",
  ].join("");

  function injectStyle() {
    if (!document.getElementById(STYLE_ID)) {
      (document.head || document.documentElement).appendChild(
        el("style", { id: STYLE_ID }, [CSS]));
    }
  }

  function shown(symbol) {
    return symbol === " " ? "␣" : symbol;
  }

  function quoted(symbol) {
    return "“" + shown(symbol) + "”";
  }

  // A probability in words: 3 decimals, or 2 significant digits below 0.001 (2.1e-5).
  function probability(p) {
    return p >= 0.001 || p === 0 ? p.toFixed(3) : p.toExponential(1);
  }

  function problem(message) {
    return new Error("The explorer's data are unreadable: " + message + ".");
  }

  function readJson(rootElement, name, fallback) {
    var text = rootElement.getAttribute("data-" + name);
    if (text === null || text === "") {
      if (fallback !== undefined) {
        return fallback;
      }
      throw problem("data-" + name + " is missing");
    }
    try {
      return JSON.parse(text);
    } catch (error) {
      throw problem("data-" + name + " is not JSON (" + error.message + ")");
    }
  }

  function positiveInt(rootElement, name, fallback) {
    var value = parseInt(rootElement.getAttribute("data-" + name), 10);
    return value >= 1 ? value : fallback;
  }

  // What the root carries, checked: {specs, source, target, example, examples, start, ...}.
  function readData(rootElement) {
    var specs = readJson(rootElement, "models");
    if (!Array.isArray(specs) || !specs.length) {
      throw problem("there is no model to run");
    }
    specs.forEach(function (spec, i) {
      if (!spec || typeof spec.name !== "string" || s2s.KINDS.indexOf(spec.kind) < 0) {
        throw problem("model " + (i + 1) + " has no name or an unknown kind");
      }
    });
    var vocab = readJson(rootElement, "vocab");
    var examples = readJson(rootElement, "examples", []);
    if (!Array.isArray(examples) || !examples.every(function (e) {
      return typeof e === "string" && e.length > 0;
    })) {
      throw problem("data-examples must be a list of dates");
    }
    var start = parseInt(rootElement.getAttribute("data-start"), 10);
    return {
      specs: specs,
      source: s2s.readVocab(vocab && vocab.source, "source"),
      target: s2s.readVocab(vocab && vocab.target, "target"),
      example: rootElement.getAttribute("data-example") || examples[0] || "",
      examples: examples,
      start: start >= 0 && start < specs.length ? start : 0,
      maxSteps: positiveInt(rootElement, "max-steps", 20),
      maxLength: positiveInt(rootElement, "max-length", 100),
      copy: rootElement.getAttribute("data-expect") === "copy",
    };
  }

  // What the typed text cannot be: null when it can be translated, else the words to show.
  function refusal(text, maxLength, copy) {
    var length = Array.from(text).length;
    if (!length) {
      return (copy ? "Type digits to copy" : "Type a date to translate") +
        " (the encoder needs at least one character).";
    }
    if (length > maxLength) {
      return "That is " + length + " characters; this explorer translates at most " +
        maxLength + ".";
    }
    return null;
  }

  // Unknown characters, in words; capitals get a hint (the dates were written in lower case).
  function unknownNote(unknown, source) {
    if (!unknown.length) {
      return "";
    }
    var note = "Not in the models' vocabulary: " + unknown.map(quoted).join(", ") +
      ". Each is read as <unk>, as Python's CharVocab.encode does; the models never met <unk> " +
      "in training, so expect a poor translation.";
    var capitals = unknown.some(function (c) {
      return c !== c.toLowerCase() && source.stoi.has(c.toLowerCase());
    });
    if (capitals) {
      note += " The dates they learned are written in lower case.";
    }
    return note;
  }

  // The steps and the alignment, rows of fixed height: at the left, fixed, each output step's
  // symbol and probability; at the right, in a box that scrolls sideways rather than shrink,
  // the alignment (input characters across), its colour bar at the end. Later steps are faded,
  // the current one outlined.
  function stepMap(result, rows, labels, cell, current) {
    var attention = result.steps[0].weights !== null;
    var font = Math.min(12, Math.floor(cell * 0.72));
    var top = 24;
    var tall = rows.length * cell;
    var height = top + tall + (attention ? 22 : 6);
    var side = 96;
    var fixed = svg("svg", {
      "data-readout": "steps", width: side, height: height, role: "img",
      viewBox: "0 0 " + side + " " + height, "font-size": font, "font-family": "sans-serif",
      "aria-label": "the output steps and the probability of each output character",
    });
    fixed.appendChild(svg("text", { x: 38, y: top - 7, "text-anchor": "end",
      fill: "currentColor", "font-style": "italic" }, "out"));
    fixed.appendChild(svg("text", { x: 90, y: top - 7, "text-anchor": "end",
      fill: "currentColor", "font-style": "italic" }, "p"));
    result.steps.forEach(function (step, i) {
      var y = top + i * cell + cell / 2 + font / 3;
      var group = svg("g", i > current ? { opacity: 0.25 } : {});
      group.appendChild(svg("text", { x: 38, y: y, "text-anchor": "end", fill: "currentColor",
        "data-label": "output" }, rows[i]));
      group.appendChild(svg("text", { x: 90, y: y, "text-anchor": "end", fill: "currentColor",
        "data-label": "probability" }, step.probabilities[step.token].toFixed(3)));
      fixed.appendChild(group);
    });
    fixed.appendChild(svg("rect", { x: 1, y: top + current * cell + 1, width: side - 2,
      height: cell - 2, fill: "none", stroke: "#e6550d", "stroke-width": 2,
      "data-current": current }));
    var parts = [fixed];
    if (attention) {
      var cols = labels.length;
      var right = cols * cell;
      var bar = right + 12;
      var width = bar + 38;
      var picture = svg("svg", {
        "data-readout": "heatmap", width: width, height: height, role: "img",
        viewBox: "0 0 " + width + " " + height, "font-size": font, "font-family": "sans-serif",
        "aria-label": "alignment: " + rows.length + " output steps down, " + cols +
          " input characters across",
      });
      labels.forEach(function (label, j) {
        picture.appendChild(svg("text", { x: (j + 0.5) * cell, y: top - 7,
          "text-anchor": "middle", fill: "currentColor", "data-label": "input" }, label));
      });
      result.steps.forEach(function (step, i) {
        var group = svg("g", i > current ? { opacity: 0.25 } : {});
        for (var j = 0; j < cols; j++) {
          var w = step.weights[j];
          var square = svg("rect", { x: j * cell, y: top + i * cell, width: cell,
            height: cell, fill: dom.viridis(w), "data-row": i, "data-col": j,
            "data-weight": w.toFixed(4) });
          square.appendChild(svg("title", {}, rows[i] + " ← " + labels[j] + ": " +
            w.toFixed(3)));
          group.appendChild(square);
        }
        picture.appendChild(group);
      });
      picture.appendChild(svg("rect", { x: 0.5, y: top + current * cell + 1, width: right - 1,
        height: cell - 2, fill: "none", stroke: "#e6550d", "stroke-width": 2,
        "data-current": current }));
      picture.appendChild(svg("text", { x: 0, y: top + tall + 16, fill: "currentColor" },
        "input characters →"));
      var scale = svg("g", { "data-readout": "colorbar" });
      var pieces = 24;
      for (var s = 0; s < pieces; s++) {
        scale.appendChild(svg("rect", { x: bar, y: top + tall * s / pieces, width: 10,
          height: tall / pieces + 0.5, fill: dom.viridis(1 - (s + 0.5) / pieces) }));
      }
      [1, 0.5, 0].forEach(function (tick) {
        scale.appendChild(svg("text", { x: bar + 14, y: top + tall * (1 - tick) + 4,
          fill: "currentColor" }, String(tick)));
      });
      picture.appendChild(scale);
      parts.push(el("div", { class: "tr-scroll" }, [picture]));
    } else {
      parts.push(el("p", { class: "al-note tr-plain" }, ["No attention: every step reads the " +
        "same summary vector of the whole input, so there is no alignment to draw."]));
    }
    return el("div", { class: "tr-map" }, parts);
  }

  // Chapter 03's comparison: each model's copy of the typed text, its wrong characters marked
  // (a missing one shows as "_"), the chosen model's row in bold.
  function compareTable(outputs, specs, typed, chosenIndex) {
    var rows = outputs.map(function (output, m) {
      var marks = s2s.copyMarks(output, typed);
      var wanted = Array.from(output);
      var wrong = marks.filter(Boolean).length;
      var spans = marks.map(function (isWrong, i) {
        var symbol = i < wanted.length ? shown(wanted[i]) : "_";
        return el("span", { "data-position": i, "data-wrong": String(isWrong),
          title: isWrong ? (i < wanted.length ? "wrong" : "missing") : "" }, [symbol]);
      });
      var verdict = wrong ? wrong + " of " + marks.length + " wrong" : "right";
      return el("tr", m === chosenIndex ? { "data-model": m, "data-wrong": wrong,
        "data-chosen": "" } : { "data-model": m, "data-wrong": wrong }, [
        el("td", {}, [specs[m].name]),
        el("td", { class: "tr-copy" }, spans.length ? spans : ["(nothing)"]),
        el("td", { class: "al-note" }, [verdict]),
      ]);
    });
    return el("table", { class: "tr-compare", "data-readout": "compare" }, [
      el("tbody", {}, rows)]);
  }

  function mountTranslator(rootElement) {
    var data;
    try {
      data = readData(rootElement);
    } catch (error) {
      dom.start(rootElement, "translator");
      rootElement.appendChild(el("p", { class: "al-error", "data-readout": "error",
        role: "alert" }, [error.message]));
      return rootElement;
    }
    dom.start(rootElement, "translator");
    injectStyle();
    var loaded = {};
    var result = null;
    var rows = [];
    var labels = [];
    var count = 0;

    var noun = data.copy ? "digits" : "date";
    var text = el("input", { type: "text", class: "tr-text", value: data.example,
      spellcheck: "false", autocomplete: "off", autocapitalize: "none",
      inputmode: data.copy ? "numeric" : "text", "data-control": "text",
      "aria-label": data.copy ? "digits to copy" : "a date to translate" });
    var model = el("select", { "data-control": "model", "aria-label": "model" },
      data.specs.map(function (spec, m) {
        return el("option", { value: m, selected: m === data.start }, [spec.name]);
      }));
    var examples = el("select", { "data-control": "examples",
      "aria-label": data.copy ? "example strings" : "example dates" },
      [el("option", { value: "" }, ["examples…"])].concat(data.examples.map(function (date) {
        return el("option", { value: date }, [date]);
      })));
    var slider = el("input", { type: "range", min: 1, max: 1, step: 1, value: 1,
      "data-control": "step", "aria-label": "decoder step" });
    var previous = el("button", { type: "button", "data-control": "previous",
      "aria-label": "previous step" }, ["◀"]);
    var next = el("button", { type: "button", "data-control": "next",
      "aria-label": "next step" }, ["▶"]);
    var translation = el("code", { class: "tr-out", "data-readout": "translation" }, [""]);
    var message = el("p", { class: "tr-message", "data-readout": "message", role: "status" });
    var error = el("p", { class: "al-error", "data-readout": "error", role: "alert",
      hidden: true });
    var stepText = el("p", { class: "al-note", "data-readout": "step" }, [""]);
    var comparison = el("div", { class: "tr-scroll" });
    var picture = el("div", { class: "tr-picture" });
    var hover = el("p", { class: "al-note", "data-readout": "hover" }, [HOVER_HINT]);
    var stepRow = el("div", { class: "tr-steps" }, [
      el("label", {}, ["step", slider]), previous, next]);

    var pickers = [];
    if (data.specs.length > 1) {
      pickers.push(el("label", { class: "tr-pick" }, ["model", model]));
    }
    if (data.examples.length) {
      pickers.push(el("label", { class: "tr-pick" }, ["or pick", examples]));
    }
    var one = data.specs.length === 1 ? " (" + data.specs[0].name + ")" : "";
    rootElement.appendChild(el("p", { class: "al-title" }, [
      (data.copy ? "Copier" : "Translator") + ": the trained model" +
      (data.specs.length > 1 ? "s run" : " runs") + " in your browser" + one]));
    rootElement.appendChild(el("div", { class: "al-row" }, [
      el("label", { class: "tr-field" }, [noun, text])].concat(pickers)));
    rootElement.appendChild(message);
    rootElement.appendChild(error);
    if (data.copy) {
      rootElement.appendChild(comparison);
    }
    rootElement.appendChild(el("p", {}, [data.copy ? "the chosen model's copy " :
      "translation ", translation]));
    rootElement.appendChild(stepRow);
    rootElement.appendChild(stepText);
    rootElement.appendChild(picture);
    rootElement.appendChild(hover);

    function chosen() {
      var m = parseInt(model.value, 10);
      return m >= 0 && m < data.specs.length ? m : data.start;
    }

    function modelOf(m) {
      if (!loaded[m]) {
        loaded[m] = s2s.loadModel(data.specs[m]);
      }
      return loaded[m];
    }

    function rowLabel(token) {
      return token === data.target.eos_id ? "</s>" : shown(data.target.itos[token]);
    }

    function cellSize(cols) {
      var width = picture.clientWidth || rootElement.clientWidth || 640;
      var free = width - 96 - 50;
      return Math.max(MIN_CELL, Math.min(MAX_CELL, Math.floor(free / Math.max(cols, 1))));
    }

    function describeStep(t) {
      var step = result.steps[t];
      var p = step.probabilities;
      var others = [];
      for (var k = 0; k < p.length; k++) {
        if (k !== step.token) {
          others.push(k);
        }
      }
      others.sort(function (a, b) {
        return p[b] - p[a];
      });
      var words = "Step " + (t + 1) + " of " + result.steps.length + ": writes " +
        quoted(rowLabel(step.token)) + " with probability " + p[step.token].toFixed(3) +
        "; next likeliest " + others.slice(0, 2).map(function (other) {
          return quoted(rowLabel(other)) + " " + probability(p[other]);
        }).join(", ") + ".";
      if (step.weights) {
        var order = labels.map(function (_, j) {
          return j;
        }).sort(function (a, b) {
          return step.weights[b] - step.weights[a] || a - b;
        });
        words += " It reads " + order.slice(0, 3).map(function (j) {
          return quoted(labels[j]) + " (" + (j + 1) + ") " + step.weights[j].toFixed(2);
        }).join(", ") + ".";
      } else {
        words += " No attention: every step reads the same summary of the whole input.";
      }
      return words;
    }

    function drawStep() {
      var t = parseInt(slider.value, 10) - 1;
      picture.textContent = "";
      hover.textContent = HOVER_HINT;
      if (!result) {
        stepText.textContent = "";
        return;
      }
      var cell = cellSize(labels.length);
      picture.appendChild(stepMap(result, rows, labels, cell, t));
      // On a narrow screen, bring the column this step reads most into view.
      var scroller = picture.querySelector(".tr-scroll");
      var weights = result.steps[t].weights;
      if (scroller && weights && scroller.scrollWidth > scroller.clientWidth) {
        var most = 0;
        for (var j = 1; j < weights.length; j++) {
          most = weights[j] > weights[most] ? j : most;
        }
        scroller.scrollLeft = Math.max(0, (most + 0.5) * cell - scroller.clientWidth / 2);
      }
      stepText.textContent = describeStep(t);
      rootElement.setAttribute("data-shown", JSON.stringify({ model: chosen(),
        text: text.value, step: t + 1, steps: result.steps.length }));
    }

    function setStep(step) {
      slider.value = String(step);
      drawStep();
    }

    function clear(words) {
      result = null;
      comparison.textContent = "";
      translation.textContent = "";
      message.textContent = "";
      error.textContent = words;
      error.hidden = false;
      slider.max = "1";
      slider.value = "1";
      slider.disabled = true;
      drawStep();
      rootElement.setAttribute("data-shown", JSON.stringify({ model: chosen(),
        text: text.value, step: 0, steps: 0 }));
    }

    // Translate what the box holds with the chosen model; time it.
    function translate() {
      var started = performance.now();
      var typed = text.value;
      var refused = refusal(typed, data.maxLength, data.copy);
      examples.value = data.examples.indexOf(typed) >= 0 ? typed : "";
      if (refused) {
        clear(refused);
        return;
      }
      var outputs = null;
      try {
        result = s2s.translate(modelOf(chosen()), typed, data.source, data.target,
          data.maxSteps);
        if (data.copy) {
          outputs = data.specs.map(function (_, m) {
            return m === chosen() ? result.text : s2s.translate(modelOf(m), typed, data.source,
              data.target, data.maxSteps).text;
          });
        }
      } catch (problemMet) {
        clear("The model could not run: " + problemMet.message);
        return;
      }
      if (outputs) {
        comparison.textContent = "";
        comparison.appendChild(compareTable(outputs, data.specs, typed, chosen()));
      }
      labels = result.characters.map(shown);
      rows = result.tokens.map(rowLabel);
      error.hidden = true;
      error.textContent = "";
      message.textContent = unknownNote(result.unknown, data.source);
      translation.textContent = result.text || "(nothing)";
      var stops = result.tokens[result.tokens.length - 1] === data.target.eos_id;
      translation.title = stops ? "" : "stopped after " + data.maxSteps + " steps " +
        "without writing </s>";
      slider.disabled = false;
      slider.max = String(result.steps.length);
      setStep(result.steps.length);
      count += 1;
      var ms = performance.now() - started;
      rootElement.setAttribute("data-ms", ms.toFixed(2));
      rootElement.setAttribute("data-translations", String(count));
      if (!rootElement.hasAttribute("data-first-ms")) {
        rootElement.setAttribute("data-first-ms", ms.toFixed(2));
      }
    }

    function readWeight(event) {
      var square = event.target;
      if (!result || !square || !square.hasAttribute || !square.hasAttribute("data-weight")) {
        return;
      }
      var i = Number(square.getAttribute("data-row"));
      var j = Number(square.getAttribute("data-col"));
      hover.textContent = "output " + quoted(rows[i]) + " (step " + (i + 1) + ") reads input " +
        quoted(labels[j]) + " (character " + (j + 1) + ") with weight " +
        result.steps[i].weights[j].toFixed(3);
    }

    text.addEventListener("input", translate);
    model.addEventListener("change", translate);
    examples.addEventListener("change", function () {
      if (examples.value) {
        text.value = examples.value;
        translate();
      }
    });
    slider.addEventListener("input", drawStep);
    slider.addEventListener("change", drawStep);
    previous.addEventListener("click", function () {
      if (result) {
        var t = parseInt(slider.value, 10);
        setStep(t > 1 ? t - 1 : result.steps.length);
      }
    });
    next.addEventListener("click", function () {
      if (result) {
        var t = parseInt(slider.value, 10);
        setStep(t < result.steps.length ? t + 1 : 1);
      }
    });
    picture.addEventListener("mouseover", readWeight);
    picture.addEventListener("click", readWeight);
    dom.keepKeys(rootElement);
    translate();
    return rootElement;
  }

  live.register("translator", mountTranslator);
  live.mountTranslator = mountTranslator;
})(typeof self !== "undefined" ? self : this);
