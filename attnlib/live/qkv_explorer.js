/* attnlib live: chapter 06's explorer, queries, keys and values of a short sentence.
 *
 * Needs explorers.js (the DOM helpers) and qkv.js (the arithmetic) first; registers the
 * explorer "qkv", inlined by attnlib/live/qkv_explorer.py. Pick a sentence and a query word,
 * move how strongly each question of W_Q is asked, shuffle the words (with or without
 * positions added) and read the query's row of weights and its output.
 * Stable hooks:
 *   root      .attnlib-live[data-explorer="qkv"]; data-examples (JSON list of {name, tokens,
 *             features, questions, x, wQ, wK, wV, query}), data-positions ("true" | "false")
 *   controls  [data-control="example" (select, index into data-examples) | "query" (select:
 *             the word's index in the sentence as written) | "strength-<c>" (range 0 .. 2, the
 *             multiplier of column c of W_Q, data-column=c; one per column that asks something
 *             in some sentence, hidden where the sentence shown has no such question) |
 *             "positions" (checkbox) | "shuffle" | "reverse" | "reset" (buttons; reset: the
 *             first sentence as written, every question at 1)]
 *   readouts  [data-readout="sentence" (the words in their order now; data-order: the order as
 *             JSON, row j is word order[j]) | "heatmap" (svg: every weight, rows queries and
 *             columns keys in that order, rect[data-weight] each, the query's row outlined) |
 *             "row" (table, one row per key in that order:
 *             td[data-col="score"] q·k/√d_k and td[data-col="weight"]) | "query" (table, q by
 *             dimension) | "output" (table: td[data-col="input"], td[data-col="output"]) |
 *             "top" | "top-weight" | "self-weight" | "shift-outputs" | "shift-weights" |
 *             "verdict" | "strength-<c>" (the multiplier, 2 decimals) | "error"];
 *             numbers in tables have 4 decimals, shifts below 5e-4 two significant digits.
 */
(function (root) {
  "use strict";

  var live = root.attnlibLive;
  if (!live || !live.dom || !live.register || !live.qkv) {
    throw new Error("attnlib live: load explorers.js and qkv.js before qkv_explorer.js");
  }
  var dom = live.dom;
  var el = dom.el;
  var qkv = live.qkv;
  var BLUE = "#1f77b4";
  // Below this a shift is rounding, not a change: float64 sums in another order.
  var ROUNDING = 1e-12;

  function fixed4(x) {
    return (x + 0).toFixed(4);  // + 0: -0 prints as 0
  }

  // A shift: 4 decimals, or two significant digits below 5e-4 so that 1.1e-16 is not "0".
  function shift(x) {
    return x !== 0 && Math.abs(x) < 5e-4 ? x.toExponential(1) : fixed4(x);
  }

  function span(name, text) {
    return el("span", { "data-readout": name }, [text]);
  }

  // A table with a header row and one labelled row per entry of rows: [label, cells...]
  // (row.bold: the label in bold); a cell is {col, value} (4 decimals) or a DOM node.
  function table(name, caption, columns, rows) {
    return el("table", { "data-readout": name }, [
      el("caption", {}, [caption]),
      el("thead", {}, [el("tr", {}, columns.map(function (text) {
        return el("th", { scope: "col" }, [text]);
      }))]),
      el("tbody", {}, rows.map(function (row) {
        var label = el("th", { scope: "row", style: row.bold ? "font-weight:600;opacity:1" :
          undefined }, [row[0]]);
        return el("tr", {}, [label].concat(row.slice(1).map(
          function (cell) {
            return cell.nodeType ? el("td", { style: "text-align:left;width:5.2em" }, [cell]) :
              el("td", { "data-col": cell.col, title: String(cell.value) },
                [fixed4(cell.value)]);
          })));
      })),
    ]);
  }

  function bar(weight) {
    return el("span", { "aria-hidden": "true", style: "display:inline-block;height:.8em;" +
      "vertical-align:middle;background:" + BLUE + ";width:" +
      (5 * Math.max(0, Math.min(1, weight))).toFixed(2) + "em" });
  }

  // The query dimensions of an example that ask something: W_Q's columns that are not all
  // zero (all of them if none is: then every query is zero and every row uniform).
  function asking(example) {
    var wQ = example.wQ;
    var all = wQ[0].map(function (_, c) {
      return c;
    });
    var found = all.filter(function (c) {
      return wQ.some(function (row) {
        return row[c] !== 0;
      });
    });
    return found.length ? found : all;
  }

  // Every weight as a viridis square, queries down and keys across in the order shown, the
  // query's row outlined: shuffling the words permutes rows and columns alike.
  function heatmap(weights, labels, chosen) {
    var cell = 22;
    var left = 66;
    var top = 58;
    var n = weights.length;
    var width = left + n * cell + 4;
    var height = top + n * cell + 4;
    var picture = dom.svg("svg", { "data-readout": "heatmap", class: "al-fit", width: width,
      height: height, viewBox: "0 0 " + width + " " + height, role: "img",
      "aria-label": "every query's weights over the keys", "font-size": 11,
      "font-family": "sans-serif" });
    labels.forEach(function (label, j) {
      var x = left + (j + 0.5) * cell;
      picture.appendChild(dom.svg("text", { x: x, y: top - 6, fill: "currentColor",
        transform: "rotate(-55 " + x + " " + (top - 6) + ")" }, label));
      picture.appendChild(dom.svg("text", { x: left - 5, y: top + (j + 0.5) * cell + 4,
        "text-anchor": "end", fill: "currentColor", "font-weight": j === chosen ? 700 : 400 },
      label));
    });
    weights.forEach(function (row, i) {
      row.forEach(function (w, j) {
        var square = dom.svg("rect", { x: left + j * cell, y: top + i * cell, width: cell - 1,
          height: cell - 1, fill: dom.viridis(w), "data-weight": String(w) });
        square.appendChild(dom.svg("title", {}, labels[i] + " → " + labels[j] + ": " +
          fixed4(w)));
        picture.appendChild(square);
      });
    });
    picture.appendChild(dom.svg("rect", { x: left - 1.5, y: top + chosen * cell - 1.5,
      width: n * cell + 2, height: cell + 2, fill: "none", stroke: "#ff7f0e",
      "stroke-width": 2.5 }));
    return picture;
  }

  // Labels of the query words, the same word twice told apart by its place as written.
  function wordLabels(tokens) {
    return tokens.map(function (word, i) {
      var twice = tokens.filter(function (other) {
        return other === word;
      }).length > 1;
      return twice ? word + " (" + (i + 1) + ")" : word;
    });
  }

  function mountQkv(rootElement) {
    var examples = JSON.parse(rootElement.getAttribute("data-examples") || "[]");
    var startPositions = rootElement.getAttribute("data-positions") === "true";
    dom.start(rootElement, "qkv");
    if (!examples.length) {
      rootElement.appendChild(el("div", { class: "al-error", "data-readout": "error" },
        ["No sentence to show."]));
      return rootElement;
    }
    var state = { example: 0, order: null };

    var exampleSelect = el("select", { "data-control": "example", "aria-label": "sentence" },
      examples.map(function (example, i) {
        return el("option", { value: i }, [example.name]);
      }));
    var querySelect = el("select", { "data-control": "query", "aria-label": "query word" });
    var positions = el("input", { type: "checkbox", "data-control": "positions",
      checked: startPositions });
    var buttons = {};
    [["shuffle", "shuffle the words"], ["reverse", "reverse them"],
      ["reset", "reset"]].forEach(function (pair) {
      buttons[pair[0]] = el("button", { type: "button", "data-control": pair[0] }, [pair[1]]);
    });
    // One slider per column that asks in some sentence, made once (the set of controls stays
    // the same from sentence to sentence); build() shows those the sentence shown uses.
    var columns = [];
    examples.forEach(function (example) {
      asking(example).forEach(function (c) {
        if (columns.indexOf(c) < 0) {
          columns.push(c);
        }
      });
    });
    columns.sort(function (a, b) {
      return a - b;
    });
    var sliders = columns.map(function (c) {
      var input = el("input", { type: "range", min: 0, max: 2, step: 0.05, value: 1,
        "data-control": "strength-" + c, "data-column": c });
      var echo = el("output", { "data-readout": "strength-" + c }, ["1.00"]);
      var words = el("span", {}, [""]);
      input.addEventListener("input", update);
      return { column: c, input: input, echo: echo, words: words,
        label: el("label", { style: "flex-wrap:wrap;max-width:100%" }, [words, input, echo]) };
    });
    var error = el("div", { class: "al-error", "data-readout": "error", role: "alert",
      hidden: true });
    var out = el("div", {});

    rootElement.appendChild(el("p", { class: "al-title" },
      ["Queries, keys and values of a sentence (runs in your browser)"]));
    rootElement.appendChild(el("div", { class: "al-row" }, [
      el("label", { style: "flex-wrap:wrap;max-width:100%", hidden: examples.length < 2 },
        ["sentence", exampleSelect]),
      el("label", {}, ["query word", querySelect]),
    ]));
    rootElement.appendChild(el("p", { class: "al-note" },
      ["How strongly each question of W_Q is asked (its column times a factor):"]));
    rootElement.appendChild(el("div", { class: "al-row" }, sliders.map(function (slider) {
      return slider.label;
    })));
    rootElement.appendChild(el("div", { class: "al-row" }, [
      el("label", {}, [positions, "add positions (chapter 08)"]),
      buttons.shuffle, buttons.reverse, buttons.reset,
    ]));
    rootElement.appendChild(error);
    rootElement.appendChild(out);

    function current() {
      return examples[state.example];
    }

    // The query picker for this sentence; its questions shown, each at 1, and the words as written.
    function build() {
      var ex = current();
      var labels = wordLabels(ex.tokens);
      querySelect.textContent = "";
      ex.tokens.forEach(function (_, i) {
        querySelect.appendChild(el("option", { value: i, selected: i === ex.query },
          [labels[i]]));
      });
      querySelect.value = String(ex.query);
      var used = asking(ex);
      sliders.forEach(function (slider) {
        var c = slider.column;
        slider.label.hidden = used.indexOf(c) < 0;
        slider.input.value = 1;
        slider.words.textContent = slider.label.hidden ? "" : ex.questions[c];
        slider.input.setAttribute("aria-label", slider.label.hidden ? "" : ex.questions[c]);
      });
      state.order = null;
    }

    function strengths() {
      var factors = current().wQ[0].map(function () {
        return 1;
      });
      sliders.forEach(function (slider) {
        if (!slider.label.hidden) {
          factors[slider.column] = Number(slider.input.value);
          slider.echo.textContent = factors[slider.column].toFixed(2);
        }
      });
      return factors;
    }

    function draw() {
      var ex = current();
      var n = ex.tokens.length;
      var order = state.order || qkv.checkOrder(null, n);
      var options = { strengths: strengths(), order: order, positions: positions.checked };
      var result = qkv.sentenceAttention(ex.x, ex.wQ, ex.wK, ex.wV, options);
      var moved = qkv.permutationShift(ex.x, ex.wQ, ex.wK, ex.wV, order, options);
      var word = Number(querySelect.value);
      var i = order.indexOf(word);
      var name = ex.tokens[word];
      var row = result.weights[i];
      var top = row.indexOf(Math.max.apply(null, row));
      var written = order.every(function (value, k) {
        return value === k;
      });
      var outputLabels = result.outputs[0].length === ex.features.length ? ex.features :
        result.outputs[0].map(function (_, c) {
          return "dimension " + c;
        });

      out.textContent = "";
      var sentence = span("sentence", order.map(function (k) {
        return ex.tokens[k];
      }).join(" "));
      sentence.setAttribute("data-order", JSON.stringify(order));
      out.appendChild(el("p", { class: "al-note" }, [
        written ? "The words as written: " : "The words in a new order: ", sentence,
        positions.checked ? " (each position's vector added to the word standing there)" : "",
      ]));
      out.appendChild(el("p", { class: "al-note" }, [
        "The query of “" + name + "” puts its largest weight, ", span("top-weight",
          fixed4(row[top])), ", on “", span("top", ex.tokens[order[top]]), "”, and ",
        span("self-weight", fixed4(row[i])), " on itself.",
      ]));
      out.appendChild(heatmap(result.weights, order.map(function (k) {
        return ex.tokens[k];
      }), i));
      out.appendChild(el("div", { class: "al-row" }, [
        table("row", "The row of “" + name + "”, key by key", ["key", "q·k/√d_k", "weight",
          ""], order.map(function (k, j) {
          var line = [ex.tokens[k], { col: "score", value: result.scores[i][j] },
            { col: "weight", value: row[j] }, bar(row[j])];
          line.bold = j === i;
          return line;
        })),
        table("query", "its query q = x W_Q (the dimensions that ask)", ["question", "q"],
          asking(ex).map(function (c) {
            return [ex.questions[c], { col: "query", value: result.queries[i][c] }];
          })),
        table("output", "its vector before and after", ["feature", "input", "output"],
          outputLabels.map(function (label, c) {
            var input = c < result.inputs[i].length ? result.inputs[i][c] : NaN;
            return [label, { col: "input", value: input },
              { col: "output", value: result.outputs[i][c] }];
          })),
      ]));
      var follows = moved.outputs < ROUNDING && moved.weights < ROUNDING;
      out.appendChild(el("p", { class: "al-note" }, [
        "Against the words as written, every word's output moved by at most ",
        span("shift-outputs", shift(moved.outputs)), " and its weights by at most ",
        span("shift-weights", shift(moved.weights)), ": ",
        span("verdict", written ? "the same order, nothing to compare yet; shuffle or " +
          "reverse the words." : follows ?
          "the outputs followed their words (only rounding differs)." :
          "the outputs changed, because the positions tell the orders apart."),
      ]));
    }

    function update() {
      try {
        error.hidden = true;
        draw();
      } catch (problem) {
        error.textContent = "Cannot draw this: " + problem.message;
        error.hidden = false;
      }
    }

    function reorder(order) {
      state.order = order;
      update();
    }

    exampleSelect.addEventListener("change", function () {
      state.example = Number(exampleSelect.value);
      build();
      update();
    });
    querySelect.addEventListener("change", update);
    positions.addEventListener("change", update);
    buttons.shuffle.addEventListener("click", function () {
      var n = current().tokens.length;
      reorder(qkv.shuffledOrder(n, Math.random, state.order));
    });
    buttons.reverse.addEventListener("click", function () {
      reorder((state.order || qkv.checkOrder(null, current().tokens.length)).slice().reverse());
    });
    buttons.reset.addEventListener("click", function () {
      exampleSelect.value = "0";
      state.example = 0;
      positions.checked = startPositions;
      build();
      update();
    });
    dom.keepKeys(rootElement);
    build();
    update();
    return rootElement;
  }

  live.register("qkv", mountQkv);
})(typeof self !== "undefined" ? self : this);
