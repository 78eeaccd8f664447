/* attnlib live: chapter 11's explorer, byte-pair encoding applied merge by merge as you type.
 *
 * Needs explorers.js (the DOM helpers) and bpe.js (the merges) first, all inlined by
 * attnlib/live/bpe_explorer.py. Stable hooks for tests and readers:
 *   root      .attnlib-live[data-explorer="bpe"]; data-text, data-vocabulary ("toy" | "real"),
 *             data-step (where the slider starts; past the last step: the last), data-toy (the
 *             toy merges, JSON), data-real (the real vocabulary, packed: see bpe.js); once
 *             built, data-state "ready" | "working" (a long text is being merged, a slice at a
 *             time), data-steps (the steps this text takes), data-shown-step
 *   controls  [data-control="text" (textarea) | "vocabulary" (select: toy | real) | "step"
 *             (range, 0 .. steps) | "back" | "play" (play / pause) | "forward" (buttons)]
 *   readouts  [data-readout="step" ("k of K") | "merge" (this step's merge, or what step 0
 *             is) | "characters" | "tokens-count" (tokens at this step) | "start-count"
 *             (symbols before any merge) | "tokens" (one chip per token, at most MAX_CHIPS:
 *             data-token the raw token, class al-fresh where this step's merge joined,
 *             al-word-end before a word's gap) | "more" (the tokens not drawn) | "status" |
 *             "error"]
 */
(function (root) {
  "use strict";

  function live() {
    var api = root.attnlibLive;
    if (!api || !api.dom || !api.register || !api.bpe) {
      throw new Error("attnlib live: load explorers.js and bpe.js first");
    }
    return api;
  }

  var dom = live().dom;
  var el = dom.el;
  var bpe = live().bpe;
  var STYLE_ID = "attnlib-bpe-style";
  var CSS = [
    ".attnlib-live[data-explorer=bpe] textarea{width:100%;height:4.5em;font-family:inherit;",
    "font-size:.9rem}",
    // chapter 13's token chips: a word's pieces side by side, a gap after its last piece
    ".attnlib-live .al-tokens{display:flex;flex-wrap:wrap;gap:2px 1px;max-height:14em;",
    "overflow-y:auto;margin:.3em 0}",
    ".attnlib-live .al-token{font-family:SFMono-Regular,Menlo,Consolas,monospace;",
    "font-size:.8rem;padding:0 .25em;border-radius:3px;border:1px solid rgba(128,128,128,.3);",
    "word-break:break-all}",
    ".attnlib-live .al-token.al-word-end{margin-right:.5em}",
    ".attnlib-live .al-token.al-fresh{background:rgba(230,126,34,.3);border-color:#e67e22}",
    ".attnlib-live .al-eow{opacity:.5;font-size:.75em}",
    ".attnlib-live[data-explorer=bpe] input[type=range]{width:16em;max-width:100%}",
    // on a phone the vocabulary picker shrinks rather than stick out
    ".attnlib-live[data-explorer=bpe] label{max-width:100%}",
    ".attnlib-live[data-explorer=bpe] select{min-width:0;flex:0 1 auto}",
    ".attnlib-live .al-merge{font-family:SFMono-Regular,Menlo,Consolas,monospace;font-size:.8rem}",
  ].join("");
  // Chips drawn at most; the counts cover every token.
  var MAX_CHIPS = 500;
  // A text this long is merged in slices of SLICE_MS milliseconds, so typing never waits.
  var LONG_TEXT = 5000;
  var SLICE_MS = 15;
  var PLAY_MS = 700;

  function injectStyle() {
    if (!document.getElementById(STYLE_ID)) {
      (document.head || document.documentElement).appendChild(el("style", { id: STYLE_ID },
        [CSS]));
    }
  }

  function plural(count, word) {
    return count.toLocaleString("en-US") + " " + word + (count === 1 ? "" : "s");
  }

  // A chip: the token without its "</w>" (shown faint inside), the raw token in data-token.
  function chip(token, last, fresh) {
    var shown = bpe.display(token);
    var children = [shown.text];
    if (shown.end && token !== bpe.END) {
      children.push(el("span", { class: "al-eow", "aria-hidden": "true" }, [bpe.END]));
    }
    var classes = "al-token" + (last ? " al-word-end" : "") + (fresh ? " al-fresh" : "");
    return el("span", { class: classes, "data-token": token, title: token }, children);
  }

  function mountBpe(rootElement) {
    var vocabularies = {
      toy: bpe.toyVocabulary(JSON.parse(rootElement.getAttribute("data-toy") || "[]")),
      real: bpe.realVocabulary(JSON.parse(rootElement.getAttribute("data-real"))),
    };
    var names = {
      toy: "toy: the article's " + vocabularies.toy.merges.length + " merges",
      real: "IMDB: " + vocabularies.real.size.toLocaleString("en-US") + " tokens (" +
        vocabularies.real.merges.length.toLocaleString("en-US") + " merges)",
    };
    var startText = rootElement.getAttribute("data-text") || "";
    var startVocabulary = rootElement.getAttribute("data-vocabulary") === "real" ? "real" : "toy";
    var startStep = parseInt(rootElement.getAttribute("data-step"), 10);
    dom.start(rootElement, "bpe");
    injectStyle();

    var text = el("textarea", { "data-control": "text", spellcheck: "false",
      "aria-label": "text to tokenise" }, [startText]);
    var vocabulary = el("select", { "data-control": "vocabulary", "aria-label": "vocabulary" },
      ["toy", "real"].map(function (name) {
        return el("option", { value: name, selected: name === startVocabulary }, [names[name]]);
      }));
    var slider = el("input", { type: "range", min: 0, max: 0, step: 1, value: 0,
      "data-control": "step", "aria-label": "merges applied" });
    var back = el("button", { type: "button", "data-control": "back",
      "aria-label": "one merge back" }, ["\u25c0 back"]);
    var play = el("button", { type: "button", "data-control": "play" }, ["\u25b6 play"]);
    var forward = el("button", { type: "button", "data-control": "forward",
      "aria-label": "one merge forward" }, ["forward \u25b6"]);
    var stepShown = el("output", { "data-readout": "step" }, ["0 of 0"]);
    var merge = el("p", { class: "al-note al-merge", "data-readout": "merge" });
    var characters = el("span", { "data-readout": "characters" }, ["0"]);
    var startCount = el("span", { "data-readout": "start-count" }, ["0"]);
    var tokenCount = el("span", { "data-readout": "tokens-count" }, ["0"]);
    var status = el("p", { class: "al-note", "data-readout": "status", hidden: true });
    var chips = el("div", { class: "al-tokens", "data-readout": "tokens" });
    var more = el("p", { class: "al-note", "data-readout": "more", hidden: true });
    var error = el("div", { class: "al-error", "data-readout": "error", role: "alert",
      hidden: true });

    rootElement.appendChild(el("p", { class: "al-title" },
      ["Byte-pair encoding, merge by merge (runs in your browser)"]));
    rootElement.appendChild(el("label", { class: "al-matrix", style: "width:100%" },
      ["Type any text", text]));
    rootElement.appendChild(el("div", { class: "al-row" }, [
      el("label", {}, ["vocabulary", vocabulary]),
    ]));
    rootElement.appendChild(el("div", { class: "al-row" }, [
      el("label", {}, ["step", slider, stepShown]), back, play, forward,
    ]));
    rootElement.appendChild(merge);
    rootElement.appendChild(el("p", { class: "al-note" }, [
      characters, " characters \u2192 ", startCount, " symbols before any merge \u2192 ",
      tokenCount, " tokens at this step",
    ]));
    rootElement.appendChild(status);
    rootElement.appendChild(error);
    rootElement.appendChild(chips);
    rootElement.appendChild(more);

    var result = null;  // the finished merges of the current text
    var job = null;
    var timer = null;
    var playing = null;

    function stopPlaying() {
      if (playing !== null) {
        clearInterval(playing);
        playing = null;
      }
      play.textContent = "\u25b6 play";
    }

    function draw() {
      var steps = result.steps.length;
      var step = Math.min(steps, Math.max(0, parseInt(slider.value, 10) || 0));
      var shown = bpe.tokensAt(result, step, MAX_CHIPS);
      stepShown.textContent = step + " of " + steps;
      rootElement.setAttribute("data-shown-step", String(step));
      if (step === 0) {
        merge.textContent = steps ? "Step 0: every word as its characters" +
          (vocabularies[vocabulary.value].name === "toy" ? " and a separate </w>" :
            ", </w> glued to the last one") + "; press play or move the slider." :
          "No merge applies to this text.";
      } else {
        var current = result.steps[step - 1];
        merge.textContent = "Step " + step + ": merge " + (current.rank + 1) + " of the " +
          "learned list, " + current.pair[0] + " + " + current.pair[1] + " \u2192 " +
          current.pair[0] + current.pair[1] + ", joined in " + plural(current.places, "place") +
          " (highlighted).";
      }
      tokenCount.textContent = shown.total.toLocaleString("en-US");
      chips.textContent = "";
      shown.tokens.forEach(function (token, i) {
        chips.appendChild(chip(token, shown.last[i], shown.fresh[i]));
      });
      var hiddenCount = shown.total - shown.tokens.length;
      more.hidden = hiddenCount <= 0;
      more.textContent = hiddenCount > 0 ? "\u2026 and " + plural(hiddenCount, "more token") +
        ", counted but not drawn." : "";
      back.disabled = step === 0;
      forward.disabled = step === steps;
    }

    function finished(done, atEnd) {
      result = done;
      rootElement.setAttribute("data-state", "ready");
      rootElement.setAttribute("data-steps", String(result.steps.length));
      status.hidden = true;
      status.textContent = "";
      slider.max = String(result.steps.length);
      if (atEnd !== undefined) {
        slider.value = String(Math.min(atEnd, result.steps.length));
      }
      startCount.textContent = result.initial.symbols.length.toLocaleString("en-US");
      draw();
    }

    // Merge the text again: a short text at once; a long one in slices, the first one after
    // this keystroke has been drawn, so that typing never waits for the merges.
    function update(atStep) {
      stopPlaying();
      if (timer !== null) {
        clearTimeout(timer);
        timer = null;
      }
      var chosen = vocabularies[vocabulary.value];
      var value = text.value;
      characters.textContent = Array.from(value).length.toLocaleString("en-US");
      job = null;
      var mine = null;
      var slice = function () {
        timer = null;
        if (mine === null) {
          try {
            mine = job = bpe.mergeJob(value, chosen);
          } catch (problem) {
            error.textContent = "Cannot tokenise this text: " + problem.message;
            error.hidden = false;
            return;
          }
          error.hidden = true;
        }
        if (mine !== job) {
          return;
        }
        if (job.run(value.length < LONG_TEXT ? undefined : SLICE_MS)) {
          finished(job.result, atStep);
        } else {
          timer = setTimeout(slice, 0);
        }
      };
      if (value.length < LONG_TEXT) {
        slice();
        return;
      }
      rootElement.setAttribute("data-state", "working");
      status.hidden = false;
      status.textContent = "Merging a long text (" + characters.textContent +
        " characters) a slice at a time\u2026";
      timer = setTimeout(slice, 0);
    }

    function go(step) {
      if (result) {
        slider.value = String(Math.min(result.steps.length, Math.max(0, step)));
        draw();
      }
    }

    dom.keepKeys(rootElement);
    text.addEventListener("input", function () {
      update(Infinity);
    });
    vocabulary.addEventListener("change", function () {
      update(Infinity);
    });
    slider.addEventListener("input", function () {
      stopPlaying();
      draw();
    });
    back.addEventListener("click", function () {
      stopPlaying();
      go(parseInt(slider.value, 10) - 1);
    });
    forward.addEventListener("click", function () {
      stopPlaying();
      go(parseInt(slider.value, 10) + 1);
    });
    play.addEventListener("click", function () {
      if (playing !== null || !result) {
        stopPlaying();
        return;
      }
      if (parseInt(slider.value, 10) >= result.steps.length) {
        go(0);
      }
      play.textContent = "\u275a\u275a pause";
      playing = setInterval(function () {
        var step = parseInt(slider.value, 10);
        if (!result || step >= result.steps.length) {
          stopPlaying();
          return;
        }
        go(step + 1);
      }, PLAY_MS);
    });
    update(isFinite(startStep) ? startStep : Infinity);
    return rootElement;
  }

  live().register("bpe", mountBpe);
  root.attnlibLive.mountBpe = mountBpe;
})(typeof self !== "undefined" ? self : this);
