/* attnlib live: the explorers of chapters 01 and 02 as plain DOM, no framework, no downloads.
 *
 * Needs attention.js first (it defines window.attnlibLive). attnlib/live/__init__.py inlines
 * the files into a notebook output, so the explorers work in the published book without a
 * Python kernel. The DOM helpers are shared as attnlibLive.dom, and attnlibLive.register adds
 * an explorer (encoder_explorers.js adds those of chapters 07-09). Stable hooks for tests:
 *   root     .attnlib-live[data-explorer="worked-example" | "temperature"], data-mounted once built
 *   controls [data-control="inputs" | "W_K" | "W_Q" | "W_V" | "scale" | "temperature" | "scores"
 *            | "reset"]; the temperature range input holds log10(T), from -1.5 to 1.5
 *   readouts [data-readout="scores" | "weights" | "outputs"] tables (temperature explorer:
 *            "weights"), one <td> per number with 4 decimals; "temperature" (T, 3 digits),
 *            "heatmap" and "chart" (SVG), "largest" and "entropy" (4 decimals), "error"
 */
(function (root) {
  "use strict";

  var SVG_NS = "http://www.w3.org/2000/svg";
  var STYLE_ID = "attnlib-live-style";
  var VIRIDIS = [
    "#440154", "#472d7b", "#3b528b", "#2c728e", "#21918c", "#28ae80", "#5ec962", "#addc30",
    "#fde725",
  ];
  var CSS = [
    ".attnlib-live{border:1px solid rgba(128,128,128,.4);border-radius:6px;padding:.6em .8em;",
    "margin:.5em 0 1em;font-size:.9rem;line-height:1.4;color:inherit;background:transparent}",
    ".attnlib-live [hidden]{display:none!important}",
    ".attnlib-live .al-title{font-weight:600;margin:0 0 .4em}",
    ".attnlib-live .al-row{display:flex;flex-wrap:wrap;align-items:flex-start;gap:.4em 1.2em;",
    "margin:.3em 0}",
    ".attnlib-live label{display:inline-flex;align-items:center;gap:.4em;margin:0;",
    "font-weight:normal;cursor:pointer}",
    ".attnlib-live label.al-matrix{flex-direction:column;align-items:flex-start;gap:.15em}",
    ".attnlib-live textarea,.attnlib-live input[type=text]{font-family:SFMono-Regular,Menlo,",
    "Consolas,'Liberation Mono',monospace;font-size:.85rem;color:inherit;",
    "background:rgba(128,128,128,.08);border:1px solid rgba(128,128,128,.5);border-radius:4px;",
    "padding:.25em .4em;margin:0;box-sizing:border-box}",
    ".attnlib-live textarea{width:9.5em;height:6.2em;resize:vertical}",
    ".attnlib-live input[type=text]{width:14em}",
    ".attnlib-live input[type=range]{width:13em;margin:0;accent-color:#1f77b4}",
    ".attnlib-live input[type=checkbox]{margin:0;accent-color:#1f77b4}",
    ".attnlib-live select{font:inherit;font-size:.85rem;color:inherit;background:transparent;",
    "border:1px solid rgba(128,128,128,.5);border-radius:4px;padding:.1em .3em;max-width:100%}",
    ".attnlib-live select option{color:#000;background:#fff}",
    ".attnlib-live .al-scroll{max-width:100%;overflow-x:auto}",
    ".attnlib-live svg.al-fit{max-width:100%;height:auto}",
    ".attnlib-live .al-thumb{cursor:pointer;border:2px solid transparent;border-radius:4px}",
    ".attnlib-live .al-thumb[aria-pressed=true]{border-color:#1f77b4}",
    ".attnlib-live button{font:inherit;font-size:.85rem;color:inherit;background:transparent;",
    "border:1px solid rgba(128,128,128,.5);border-radius:4px;padding:.15em .6em;cursor:pointer}",
    ".attnlib-live output{font-family:SFMono-Regular,Menlo,Consolas,monospace;min-width:3.5em}",
    ".attnlib-live table{border-collapse:collapse;margin:0;width:auto;font-size:.85rem;",
    "background:transparent;color:inherit;border:none}",
    ".attnlib-live td{font-family:SFMono-Regular,Menlo,Consolas,'Liberation Mono',monospace}",
    ".attnlib-live caption{caption-side:top;text-align:left;font-weight:600;padding:0 0 .2em;",
    "color:inherit}",
    ".attnlib-live th,.attnlib-live td{padding:.12em .55em;border:none;",
    "border-bottom:1px solid rgba(128,128,128,.25);text-align:right;background:transparent;",
    "color:inherit;vertical-align:middle}",
    ".attnlib-live thead th{font-weight:600;border-bottom:1px solid rgba(128,128,128,.6)}",
    ".attnlib-live tbody th{font-weight:normal;text-align:left;opacity:.8}",
    ".attnlib-live .al-error{color:#c0392b;font-weight:600;margin:.3em 0}",
    ".attnlib-live .al-note{margin:.2em 0;opacity:.85}",
    ".attnlib-live svg{display:block;overflow:visible}",
  ].join("");

  function live() {
    if (!root.attnlibLive || !root.attnlibLive.workedExample) {
      throw new Error("attnlib live: load attention.js before explorers.js");
    }
    return root.attnlibLive;
  }

  function el(tag, attrs, children) {
    var node = document.createElement(tag);
    Object.keys(attrs || {}).forEach(function (name) {
      if (attrs[name] !== undefined && attrs[name] !== null && attrs[name] !== false) {
        node.setAttribute(name, attrs[name] === true ? "" : String(attrs[name]));
      }
    });
    (children || []).forEach(function (child) {
      node.appendChild(typeof child === "string" ? document.createTextNode(child) : child);
    });
    return node;
  }

  function svg(tag, attrs, text) {
    var node = document.createElementNS(SVG_NS, tag);
    Object.keys(attrs || {}).forEach(function (name) {
      node.setAttribute(name, String(attrs[name]));
    });
    if (text !== undefined) {
      node.textContent = text;
    }
    return node;
  }

  function fixed4(x) {
    return x.toFixed(4);
  }

  // Python's format(x, ".3g") for the slider's range (0.0316 ... 31.6).
  function g3(x) {
    return String(Number(x.toPrecision(3)));
  }

  function hexToRgb(hex) {
    return [1, 3, 5].map(function (i) {
      return parseInt(hex.slice(i, i + 2), 16);
    });
  }

  // The viridis colour of t in [0, 1] (matplotlib's map, interpolated between 9 stops).
  function viridis(t) {
    t = Math.min(1, Math.max(0, isFinite(t) ? t : 0));
    var position = t * (VIRIDIS.length - 1);
    var i = Math.min(VIRIDIS.length - 2, Math.floor(position));
    var f = position - i;
    var a = hexToRgb(VIRIDIS[i]);
    var b = hexToRgb(VIRIDIS[i + 1]);
    return "rgb(" + a.map(function (c, k) {
      return Math.round(c + f * (b[k] - c));
    }).join(",") + ")";
  }

  function injectStyle() {
    if (document.getElementById(STYLE_ID)) {
      return;
    }
    var style = el("style", { id: STYLE_ID }, [CSS]);
    (document.head || document.documentElement).appendChild(style);
  }

  // A table of numbers with 4 decimals (or as format writes them), labelled rows and columns,
  // tagged data-readout=name.
  function numberTable(name, matrix, rowLabels, columnLabels, caption, format) {
    format = format || fixed4;
    var head = el("tr", {}, [el("th", {}, [""])].concat(columnLabels.map(function (label) {
      return el("th", { scope: "col" }, [label]);
    })));
    var rows = matrix.map(function (row, i) {
      return el("tr", {}, [el("th", { scope: "row" }, [rowLabels[i]])].concat(row.map(function (x) {
        return el("td", { title: String(x) }, [format(x)]);
      })));
    });
    return el("table", { "data-readout": name }, [
      el("caption", {}, [caption]),
      el("thead", {}, [head]),
      el("tbody", {}, rows),
    ]);
  }

  // The attention weights as a viridis heatmap (0 to 1), queries down, keys along the top.
  function heatmap(weights, labels) {
    var cell = 44;
    var left = 58;
    var top = 34;
    var n = weights.length;
    var m = n ? weights[0].length : 0;
    var picture = svg("svg", {
      "data-readout": "heatmap",
      width: left + m * cell + 4,
      height: top + n * cell + 4,
      role: "img",
      "aria-label": "heatmap of the attention weights",
      "font-size": 11,
      "font-family": "sans-serif",
    });
    picture.appendChild(svg("text", { x: left, y: 10, fill: "currentColor", "font-weight": 600 },
      "attention weights"));
    for (var j = 0; j < m; j++) {
      picture.appendChild(svg("text", {
        x: left + (j + 0.5) * cell, y: top - 6, "text-anchor": "middle", fill: "currentColor",
      }, labels[j]));
    }
    weights.forEach(function (row, i) {
      picture.appendChild(svg("text", {
        x: left - 6, y: top + (i + 0.5) * cell + 4, "text-anchor": "end", fill: "currentColor",
      }, labels[i]));
      row.forEach(function (w, k) {
        var x = left + k * cell;
        var y = top + i * cell;
        var square = svg("rect", { x: x, y: y, width: cell - 2, height: cell - 2,
          fill: viridis(w) });
        square.appendChild(svg("title", {}, labels[i] + " → " + labels[k] + ": " + fixed4(w)));
        picture.appendChild(square);
        picture.appendChild(svg("text", {
          x: x + (cell - 2) / 2, y: y + (cell - 2) / 2 + 4, "text-anchor": "middle",
          fill: w < 0.6 ? "#fff" : "#000",
        }, w.toFixed(2)));
      });
    });
    return picture;
  }

  // Softmax weights as bars on a 0..1 axis.
  function barChart(weights, labels, temperature) {
    var width = Math.max(220, 60 + weights.length * 44);
    var height = 190;
    var left = 36;
    var top = 24;
    var plotHeight = 130;
    var slot = (width - left - 8) / weights.length;
    var picture = svg("svg", {
      "data-readout": "chart",
      width: width,
      height: height,
      role: "img",
      "aria-label": "bar chart of the softmax weights",
      "font-size": 11,
      "font-family": "sans-serif",
    });
    picture.appendChild(svg("text", { x: left, y: 12, fill: "currentColor", "font-weight": 600 },
      "softmax at temperature " + g3(temperature)));
    [0, 0.5, 1].forEach(function (tick) {
      var y = top + plotHeight * (1 - tick);
      picture.appendChild(svg("line", { x1: left, x2: width - 8, y1: y, y2: y,
        stroke: "currentColor", "stroke-opacity": tick ? 0.2 : 0.6 }));
      picture.appendChild(svg("text", { x: left - 5, y: y + 4, "text-anchor": "end",
        fill: "currentColor" }, String(tick)));
    });
    weights.forEach(function (w, i) {
      var barHeight = plotHeight * (isFinite(w) ? Math.min(1, Math.max(0, w)) : 0);
      var x = left + i * slot + slot * 0.15;
      var bar = svg("rect", { x: x, y: top + plotHeight - barHeight, width: slot * 0.7,
        height: barHeight, fill: "#1f77b4" });
      bar.appendChild(svg("title", {}, labels[i] + ": " + fixed4(w)));
      picture.appendChild(bar);
      picture.appendChild(svg("text", { x: x + slot * 0.35, y: top + plotHeight - barHeight - 4,
        "text-anchor": "middle", fill: "currentColor" }, w.toFixed(2)));
      picture.appendChild(svg("text", { x: x + slot * 0.35, y: top + plotHeight + 16,
        "text-anchor": "middle", fill: "currentColor" }, labels[i]));
    });
    return picture;
  }

  // The log-scale temperature slider of attnlib.widgets: T = 10^x, x in [-1.5, 1.5], step 0.05.
  function temperatureControl(onChange) {
    var input = el("input", { type: "range", min: -1.5, max: 1.5, step: 0.05, value: 0,
      "data-control": "temperature", "aria-label": "temperature (log scale)" });
    var shown = el("output", { "data-readout": "temperature" }, ["1"]);
    function value() {
      return Math.pow(10, parseFloat(input.value));
    }
    function changed() {
      shown.textContent = g3(value());
      onChange();
    }
    input.addEventListener("input", changed);
    input.addEventListener("change", changed);
    return { element: el("label", {}, ["temperature", input, shown]), input: input, value: value };
  }

  function errorBox() {
    return el("div", { class: "al-error", "data-readout": "error", role: "alert", hidden: true });
  }

  function showError(box, readout, message) {
    box.textContent = message;
    box.hidden = false;
    readout.textContent = "";
  }

  function start(rootElement, explorer) {
    if (!rootElement || !rootElement.nodeType) {
      throw new Error("attnlib live: mount needs a DOM element");
    }
    injectStyle();
    rootElement.textContent = "";
    rootElement.classList.add("attnlib-live");
    rootElement.setAttribute("data-explorer", explorer);
    rootElement.setAttribute("data-mounted", "true");
  }

  // JupyterLab: keys pressed in a control (arrows on the slider, Enter and digits in the
  // matrices) go to the control, not to the notebook's command-mode shortcuts. Lumino checks
  // this attribute on the focused element itself.
  function keepKeys(rootElement) {
    var controls = rootElement.querySelectorAll("input, textarea, button, select");
    Array.prototype.forEach.call(controls, function (control) {
      control.setAttribute("data-lm-suppress-shortcuts", "true");
    });
  }

  // JupyterLab 4 cancels the line break that Enter would type into a textarea inside a notebook
  // cell; there, insert it ourselves (execCommand keeps the undo history where it is supported).
  function typeLineBreaks(textarea) {
    textarea.addEventListener("keydown", function (event) {
      var plain = !(event.ctrlKey || event.altKey || event.metaKey || event.isComposing);
      if (event.key !== "Enter" || !plain || !textarea.closest(".jp-Cell")) {
        return;
      }
      event.preventDefault();
      if (!(document.execCommand && document.execCommand("insertText", false, "\n"))) {
        textarea.setRangeText("\n", textarea.selectionStart, textarea.selectionEnd, "end");
        textarea.dispatchEvent(new Event("input"));
      }
    });
  }

  function formatMatrix(matrix) {
    return matrix.map(function (row) {
      return row.join(" ");
    }).join("\n");
  }

  // Chapter 01: edit the inputs and W_K, W_Q, W_V, toggle the √d_k scaling, move a temperature.
  function mountWorkedExample(rootElement) {
    var api = live();
    start(rootElement, "worked-example");
    var labels = ["input 1", "input 2", "input 3"];
    var matrices = [
      { name: "inputs", rows: 3, cols: 4, start: api.WORKED_INPUTS },
      { name: "W_K", rows: 4, cols: 3, start: api.WORKED_KEY_WEIGHTS },
      { name: "W_Q", rows: 4, cols: 3, start: api.WORKED_QUERY_WEIGHTS },
      { name: "W_V", rows: 4, cols: 3, start: api.WORKED_VALUE_WEIGHTS },
    ];
    var editors = matrices.map(function (matrix) {
      return el("textarea", { "data-control": matrix.name, spellcheck: "false",
        "aria-label": matrix.name + " (" + matrix.rows + "x" + matrix.cols + ")" },
        [formatMatrix(matrix.start)]);
    });
    var scale = el("input", { type: "checkbox", "data-control": "scale" });
    var reset = el("button", { type: "button", "data-control": "reset" },
      ["back to the article's numbers"]);
    var temperature = temperatureControl(update);
    var error = errorBox();
    var readout = el("div", { class: "al-row" });

    rootElement.appendChild(el("p", { class: "al-title" },
      ["Worked-example explorer (runs in your browser)"]));
    rootElement.appendChild(el("div", { class: "al-row" }, matrices.map(function (matrix, i) {
      return el("label", { class: "al-matrix" },
        [matrix.name + " (" + matrix.rows + "x" + matrix.cols + ")", editors[i]]);
    })));
    rootElement.appendChild(el("div", { class: "al-row" }, [
      el("label", {}, [scale, "divide scores by √d_k"]), temperature.element, reset,
    ]));
    rootElement.appendChild(error);
    rootElement.appendChild(readout);

    function update() {
      var parsed;
      try {
        parsed = matrices.map(function (matrix, i) {
          return api.parseMatrix(editors[i].value, matrix.rows, matrix.cols, matrix.name);
        });
      } catch (problem) {
        showError(error, readout, "Cannot read the matrices: " + problem.message);
        return;
      }
      var result = api.workedExample(parsed[0], parsed[1], parsed[2], parsed[3], {
        scale: scale.checked,
        temperature: temperature.value(),
      });
      error.hidden = true;
      error.textContent = "";
      readout.textContent = "";
      readout.appendChild(numberTable("scores", result.scores, labels, labels,
        scale.checked ? "scores (query · key / √d_k)" : "scores (query · key)"));
      readout.appendChild(numberTable("weights", result.weights, labels, labels,
        "attention weights"));
      readout.appendChild(numberTable("outputs", result.outputs, labels, ["d1", "d2", "d3"],
        "outputs"));
      readout.appendChild(heatmap(result.weights, labels));
    }

    keepKeys(rootElement);
    editors.forEach(function (editor) {
      typeLineBreaks(editor);
      editor.addEventListener("input", update);
    });
    scale.addEventListener("change", update);
    reset.addEventListener("click", function () {
      matrices.forEach(function (matrix, i) {
        editors[i].value = formatMatrix(matrix.start);
      });
      scale.checked = false;
      temperature.input.value = 0;
      temperature.input.dispatchEvent(new Event("input"));
    });
    update();
    return rootElement;
  }

  // Chapter 02: how a temperature sharpens or flattens the softmax of a row of scores.
  function mountTemperature(rootElement) {
    var api = live();
    var initial = rootElement.getAttribute("data-scores") || "2 4 4 1 -1";
    start(rootElement, "temperature");
    var scores = el("input", { type: "text", value: initial, "data-control": "scores",
      spellcheck: "false", "aria-label": "scores" });
    var temperature = temperatureControl(update);
    var error = errorBox();
    var readout = el("div", {});

    rootElement.appendChild(el("p", { class: "al-title" },
      ["Temperature explorer (runs in your browser)"]));
    rootElement.appendChild(el("div", { class: "al-row" }, [
      el("label", {}, ["scores", scores]), temperature.element,
    ]));
    rootElement.appendChild(error);
    rootElement.appendChild(readout);

    function update() {
      var values;
      if (!scores.value.replace(/,/g, " ").trim()) {
        showError(error, readout, "Type at least one score.");
        return;
      }
      try {
        values = api.parseScores(scores.value);
      } catch (problem) {
        showError(error, readout, "Cannot read " + problem.message);
        return;
      }
      var t = temperature.value();
      var weights = api.softmax(values, t);
      var columns = values.map(function (_, i) {
        return "k" + (i + 1);
      });
      var largest = Math.max.apply(null, weights);
      error.hidden = true;
      error.textContent = "";
      readout.textContent = "";
      readout.appendChild(el("div", { class: "al-row" }, [
        el("div", {}, [
          numberTable("weights", [weights], ["weight"], columns, "softmax(scores / T)"),
          el("p", { class: "al-note" }, [
            "largest weight ", el("span", { "data-readout": "largest" }, [fixed4(largest)]),
            "; entropy ", el("span", { "data-readout": "entropy" },
              [fixed4(api.entropy(weights))]),
            " nats (uniform would be " + fixed4(Math.log(values.length)) + ")",
          ]),
        ]),
        barChart(weights, columns, t),
      ]));
    }

    keepKeys(rootElement);
    scores.addEventListener("input", update);
    update();
    return rootElement;
  }

  var MOUNT = { "worked-example": mountWorkedExample, temperature: mountTemperature };

  // Make mountAll build explorer roots named `name` with mount(rootElement).
  function register(name, mount) {
    MOUNT[name] = mount;
  }

  // Build every explorer root under scope (default: the document) that is not built yet.
  function mountAll(scope) {
    var found = (scope || document).querySelectorAll(".attnlib-live[data-explorer]");
    Array.prototype.forEach.call(found, function (node) {
      var mount = MOUNT[node.getAttribute("data-explorer")];
      if (mount && !node.hasAttribute("data-mounted")) {
        mount(node);
      }
    });
  }

  root.attnlibLive = Object.assign(root.attnlibLive || {}, {
    mountWorkedExample: mountWorkedExample,
    mountTemperature: mountTemperature,
    mountAll: mountAll,
    register: register,
    viridis: viridis,
    dom: {
      el: el,
      svg: svg,
      fixed4: fixed4,
      viridis: viridis,
      numberTable: numberTable,
      start: start,
      keepKeys: keepKeys,
    },
  });
})(typeof self !== "undefined" ? self : this);
