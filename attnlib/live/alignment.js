/* attnlib live: chapter 05's alignment explorer, its answers computed ahead of time in Python.
 *
 * The trained translation models of chapter 05 are Python, so the browser does not run them:
 * attnlib.widgets.alignment_live asks every model for every date the explorer offers and
 * inlines the translations and alignment weights as JSON in the root's data-answers. So the
 * explorer works in the published book and in JupyterLab alike, with no kernel; a date of the
 * reader's own needs Python (the chapter's next cell). Needs attention.js and explorers.js
 * first (the DOM helpers). Stable hooks for tests:
 *   root     .attnlib-live[data-explorer="alignment"], data-mounted once built; data-answers
 *            {models: [names], examples: [{label, source, target}], answers: [example][model]
 *            {prediction, rows: [labels], permille: [rows][source characters] or null}} with
 *            the weights in thousandths; data-start (an example index); data-shown
 *            "example,model" (indices) of what is drawn
 *   controls [data-control="example" | "model"] (selects, option values are indices)
 *   readouts [data-readout="source" | "prediction" | "verdict" | "heatmap" (SVG, a rect per
 *            weight with data-row, data-col and data-weight in thousandths, its labels text
 *            [data-label="input" | "output"]) | "colorbar" |
 *            "hover" | "python" (why a date of your own needs Python) | "error"]
 */
(function (root) {
  "use strict";

  var HOVER_HINT = "Point at (or tap) a square to read its weight.";

  function problem(message) {
    return new Error("The explorer's stored answers are unreadable: " + message + ".");
  }

  function isText(value) {
    return typeof value === "string" && value.length > 0;
  }

  // The answers of data-answers, checked, or an Error that says what is wrong in words.
  function readAnswers(text) {
    var data;
    try {
      data = JSON.parse(text);
    } catch (error) {
      throw problem("they are not JSON (" + error.message + ")");
    }
    if (!data || !Array.isArray(data.models) || !Array.isArray(data.examples) ||
        !Array.isArray(data.answers)) {
      throw problem("they need a list of models, of examples and of answers");
    }
    if (!data.models.length || !data.examples.length) {
      throw problem("there is no model or no example to choose");
    }
    if (data.answers.length !== data.examples.length) {
      throw problem(data.examples.length + " examples but answers for " + data.answers.length);
    }
    data.examples.forEach(function (example, i) {
      if (!example || !isText(example.source)) {
        throw problem("example " + (i + 1) + " has no date to translate");
      }
      var row = data.answers[i];
      if (!Array.isArray(row) || row.length !== data.models.length) {
        throw problem("example " + (i + 1) + " lacks the answer of some model");
      }
      row.forEach(function (answer, m) {
        var where = data.models[m] + " on example " + (i + 1);
        if (!answer || typeof answer.prediction !== "string" || !Array.isArray(answer.rows)) {
          throw problem(where + " has no translation");
        }
        if (answer.permille === null) {
          return;
        }
        var weights = answer.permille;
        var wide = example.source.length;
        if (!Array.isArray(weights) || weights.length !== answer.rows.length ||
            !weights.every(function (r) {
              return Array.isArray(r) && r.length === wide && r.every(function (w) {
                return typeof w === "number" && w >= 0 && w <= 1000;
              });
            })) {
          throw problem(where + " needs one row of " + wide + " weights (0 to 1000) per " +
            "output character");
        }
      });
    });
    return data;
  }

  // The input's characters as column labels, a space drawn as an open box.
  function inputLabels(source) {
    return Array.from(source).map(function (c) {
      return c === " " ? "␣" : c;
    });
  }

  var api = { readAnswers: readAnswers, inputLabels: inputLabels };
  if (typeof module === "object" && module && module.exports) {
    module.exports = api;
    return;
  }

  var live = root.attnlibLive;
  if (!live || !live.dom || !live.register) {
    throw new Error("attnlib live: load attention.js and explorers.js before alignment.js");
  }
  var dom = live.dom;
  var el = dom.el;
  var svg = dom.svg;

  // Output characters down, input characters across, viridis from 0 to 1, a colour bar.
  function alignmentMap(answer, labels) {
    var rows = answer.rows;
    var cols = labels.length;
    var cell = Math.max(10, Math.min(24, Math.floor(600 / cols)));
    var left = 48;
    var top = 30;
    var bar = left + cols * cell + 14;
    var width = bar + 56;
    var height = top + rows.length * cell + 28;
    var picture = svg("svg", {
      "data-readout": "heatmap", class: "al-fit", width: width, height: height,
      viewBox: "0 0 " + width + " " + height, role: "img", "font-size": 12,
      "font-family": "sans-serif",
      "aria-label": "alignment: " + rows.length + " output characters down, " + cols +
        " input characters across",
    });
    labels.forEach(function (label, j) {
      picture.appendChild(svg("text", { x: left + (j + 0.5) * cell, y: top - 8,
        "text-anchor": "middle", fill: "currentColor", "data-label": "input" }, label));
    });
    answer.permille.forEach(function (row, i) {
      picture.appendChild(svg("text", { x: left - 6, y: top + (i + 0.5) * cell + 4,
        "text-anchor": "end", fill: "currentColor", "data-label": "output" }, rows[i]));
      row.forEach(function (w, j) {
        var square = svg("rect", { x: left + j * cell, y: top + i * cell, width: cell,
          height: cell, fill: dom.viridis(w / 1000), "data-row": i, "data-col": j,
          "data-weight": w });
        square.appendChild(svg("title", {}, rows[i] + " ← " + labels[j] + ": " +
          (w / 1000).toFixed(3)));
        picture.appendChild(square);
      });
    });
    picture.appendChild(svg("text", { x: left, y: top + rows.length * cell + 20,
      fill: "currentColor" }, "input characters →"));
    var scale = svg("g", { "data-readout": "colorbar" });
    var steps = 24;
    var tall = rows.length * cell;
    for (var s = 0; s < steps; s++) {
      scale.appendChild(svg("rect", { x: bar, y: top + tall * s / steps, width: 12,
        height: tall / steps + 0.5, fill: dom.viridis(1 - (s + 0.5) / steps) }));
    }
    [1, 0.5, 0].forEach(function (tick) {
      scale.appendChild(svg("text", { x: bar + 16, y: top + tall * (1 - tick) + 4,
        fill: "currentColor" }, String(tick)));
    });
    picture.appendChild(scale);
    return picture;
  }

  function mountAlignment(rootElement) {
    var data;
    try {
      data = readAnswers(rootElement.getAttribute("data-answers") || "");
    } catch (error) {
      dom.start(rootElement, "alignment");
      rootElement.appendChild(el("p", { class: "al-error", "data-readout": "error",
        role: "alert" }, [error.message]));
      return rootElement;
    }
    var start = parseInt(rootElement.getAttribute("data-start"), 10);
    start = start >= 0 && start < data.examples.length ? start : 0;
    dom.start(rootElement, "alignment");

    var example = el("select", { "data-control": "example", "aria-label": "date" },
      data.examples.map(function (item, i) {
        return el("option", { value: i, selected: i === start, title: item.label || "" },
          [item.source + (item.label ? "  (" + item.label + ")" : "")]);
      }));
    var model = el("select", { "data-control": "model", "aria-label": "model" },
      data.models.map(function (name, m) {
        return el("option", { value: m }, [name]);
      }));
    var source = el("code", { "data-readout": "source" }, [""]);
    var prediction = el("code", { "data-readout": "prediction" }, [""]);
    var verdict = el("span", { "data-readout": "verdict" }, [""]);
    var picture = el("div", { class: "al-scroll" });
    var hover = el("p", { class: "al-note", "data-readout": "hover" }, [HOVER_HINT]);

    rootElement.appendChild(el("p", { class: "al-title" }, ["Alignment explorer: " +
      data.models.length + " trained models, " + data.examples.length + " dates"]));
    rootElement.appendChild(el("div", { class: "al-row" }, [
      el("label", {}, ["date", example]), el("label", {}, ["model", model])]));
    rootElement.appendChild(el("p", { class: "al-note", "data-readout": "python" }, [
      "Type your own date: that needs Python. These answers were computed by the models " +
      "when the notebook ran, for these dates only; to translate any date, run the " +
      "notebook (the cell after this explorer does it)."]));
    rootElement.appendChild(el("p", {}, [source, " → ", prediction, " ", verdict]));
    rootElement.appendChild(picture);
    rootElement.appendChild(hover);

    function update() {
      var e = parseInt(example.value, 10);
      var m = parseInt(model.value, 10);
      var item = data.examples[e];
      var answer = data.answers[e][m];
      source.textContent = item.source;
      prediction.textContent = answer.prediction || "(nothing)";
      if (item.target) {
        var right = answer.prediction === item.target;
        verdict.textContent = right ? "✓ right" : "✗ wrong: the answer is " + item.target;
        verdict.style.color = right ? "#27ae60" : "#c0392b";
      } else {
        verdict.textContent = "";
      }
      picture.textContent = "";
      hover.textContent = HOVER_HINT;
      if (answer.permille === null) {
        picture.appendChild(el("p", { class: "al-note" },
          ["This model has no attention, so there is no alignment to draw."]));
      } else {
        picture.appendChild(alignmentMap(answer, inputLabels(item.source)));
      }
      rootElement.setAttribute("data-shown", e + "," + m);
    }

    function readWeight(event) {
      var square = event.target;
      if (!square || !square.hasAttribute || !square.hasAttribute("data-weight")) {
        return;
      }
      var item = data.examples[parseInt(example.value, 10)];
      var answer = data.answers[parseInt(example.value, 10)][parseInt(model.value, 10)];
      var i = Number(square.getAttribute("data-row"));
      var j = Number(square.getAttribute("data-col"));
      hover.textContent = "output “" + answer.rows[i] + "” (step " + (i + 1) + ") reads input “" +
        inputLabels(item.source)[j] + "” (character " + (j + 1) + ") with weight " +
        (Number(square.getAttribute("data-weight")) / 1000).toFixed(3);
    }

    example.addEventListener("change", update);
    model.addEventListener("change", update);
    picture.addEventListener("mouseover", readWeight);
    picture.addEventListener("click", readWeight);
    dom.keepKeys(rootElement);
    update();
    return rootElement;
  }

  live.register("alignment", mountAlignment);
  live.mountAlignment = mountAlignment;
  live.alignment = api;
})(typeof self !== "undefined" ? self : this);
