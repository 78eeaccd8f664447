/* attnlib live: chapter 11's byte-pair encoding, applied merge by merge in the browser.
 *
 * A port of how attnlib cuts text with learned merges, for both of chapter 11's vocabularies:
 *   - the toy (attnlib.data.bpe.apply_merges on the article's merges): the text split on
 *     whitespace as Python's str.split() does, each word its characters then a separate "</w>";
 *     no normalisation, no unknown characters;
 *   - the real IMDB vocabulary (attnlib.data.subwords.SubwordTokenizer, i.e. Hugging Face
 *     `tokenizers`): the special tokens typed as text kept whole, then <br /> to a space, NFD,
 *     every combining mark dropped, lowercase, the pre-tokens \w+|[^\w\s]+ (Unicode), each
 *     pre-token's characters with "</w>" glued to the last one, a character outside the
 *     vocabulary as "[UNK]".
 * Then the merges, one per step across the whole text: each step takes the earliest-learned
 * merge whose pair occurs anywhere and joins every occurrence, left to right (words are
 * independent, so each word sees the order apply_merges gives it). tests/test_live_bpe.py runs
 * this file in node and checks every step against attnlib.reference.bpe_steps and the final
 * tokens against attnlib itself. In node this file is module.exports; in a browser it adds
 * window.attnlibLive.bpe, used by bpe_explorer.js.
 *
 * The real vocabulary travels compactly ({alphabet, width, count, merges}): its tokens are the
 * five special tokens, each alphabet character with "</w>", each alone, then one token per merge
 * (SubwordTokenizer's id layout), and each merge is two of those ids, `width` bits each, packed
 * into base64.
 */
(function (root) {
  "use strict";

  var END = "</w>";
  var SPECIALS = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"];
  var UNK = "[UNK]";
  // Python's str.isspace(), for the toy's text.split() (wider than JavaScript's \s: \x1c-\x1f).
  var PYTHON_SPACE = "\\t\\n\\v\\f\\r\\x1c-\\x20\\x85\\xa0\\u1680\\u2000-\\u200a\\u2028\\u2029" +
    "\\u202f\\u205f\\u3000";
  var TOY_WORDS = new RegExp("[^" + PYTHON_SPACE + "]+", "gu");
  // The regexes of `tokenizers` (Oniguruma, Unicode): \w and \s, <br />, every combining mark.
  var WORD = "\\p{Alphabetic}\\p{M}\\p{Nd}\\p{Pc}\\p{Join_Control}";
  var PRE_TOKENS = new RegExp("[" + WORD + "]+|[^" + WORD + "\\p{White_Space}]+", "gu");
  var BR_TAG = new RegExp("<br\\p{White_Space}*/?>", "gu");
  var MARKS = new RegExp("\\p{M}", "gu");
  var SPECIAL_SPLIT = /(\[PAD\]|\[UNK\]|\[CLS\]|\[SEP\]|\[MASK\])/;
  var BASE64 = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

  function kindOf(value) {
    if (value === null) {
      return "null";
    }
    return Array.isArray(value) ? "array" : typeof value;
  }

  function checkText(text) {
    if (typeof text !== "string") {
      throw new TypeError("text must be a string, got " + kindOf(text));
    }
  }

  // A vocabulary: {name, merges: [[left, right]], ids: Map token -> id, pairs: Map
  // (left id * size + right id) -> rank, made: [id of the token each merge makes], known}.
  // `tokens` are the ids' strings (merge results appended here); `known(c)` says whether a
  // character may start a word (the toy knows every one).
  function makeVocabulary(name, merges, tokens, known) {
    var ids = new Map();
    var add = function (token) {
      if (!ids.has(token)) {
        ids.set(token, tokens.length);
        tokens.push(token);
      }
      return ids.get(token);
    };
    tokens.splice(0).forEach(add);
    var sides = merges.map(function (pair, rank) {
      if (!Array.isArray(pair) || pair.length !== 2 || typeof pair[0] !== "string" ||
          typeof pair[1] !== "string" || !pair[0] || !pair[1]) {
        throw new Error("merges[" + rank + "] must be a pair of non-empty strings, got " +
          JSON.stringify(pair));
      }
      return [add(pair[0]), add(pair[1])];
    });
    var made = merges.map(function (pair) { return add(pair[0] + pair[1]); });
    var size = tokens.length;
    var pairs = new Map();
    sides.forEach(function (side, rank) {
      pairs.set(side[0] * size + side[1], rank);  // a repeated pair: the last rank, as Python
    });
    return { name: name, merges: merges, tokens: tokens, ids: ids, size: size, pairs: pairs,
      made: made, known: known };
  }

  // The toy vocabulary: merges as learned, [[left, right], ...].
  function toyVocabulary(merges) {
    if (!Array.isArray(merges)) {
      throw new TypeError("merges must be an array of pairs, got " + kindOf(merges));
    }
    return makeVocabulary("toy", merges, [], function () { return true; });
  }

  // Unpack `count` numbers of `width` bits each from base64 text (most significant bit first).
  function unpack(text, width, count) {
    var values = new Array(count);
    var buffer = 0;
    var held = 0;
    var at = 0;
    for (var i = 0; i < count; i++) {
      while (held < width) {
        var digit = at < text.length ? BASE64.indexOf(text.charAt(at)) : -1;
        if (digit < 0) {
          throw new Error("the packed merges end early or hold a bad character at " + at);
        }
        buffer = (buffer << 6) | digit;
        held += 6;
        at += 1;
      }
      held -= width;
      values[i] = (buffer >> held) & ((1 << width) - 1);
      buffer &= (1 << held) - 1;
    }
    return values;
  }

  // The real vocabulary from its compact form {alphabet, width, count, merges}.
  function realVocabulary(compact) {
    if (!compact || typeof compact.alphabet !== "string" || typeof compact.merges !== "string" ||
        !Number.isInteger(compact.width) || !Number.isInteger(compact.count)) {
      throw new Error("a real vocabulary needs alphabet, width, count and merges");
    }
    var alphabet = Array.from(compact.alphabet);
    var tokens = SPECIALS.concat(alphabet.map(function (c) { return c + END; }), alphabet);
    var packed = unpack(compact.merges, compact.width, 2 * compact.count);
    var merges = new Array(compact.count);
    for (var m = 0; m < compact.count; m++) {
      var left = tokens[packed[2 * m]];
      var right = tokens[packed[2 * m + 1]];
      if (left === undefined || right === undefined) {
        throw new Error("merge " + m + " names a token that does not exist yet");
      }
      merges[m] = [left, right];
      tokens.push(left + right);
    }
    var chars = new Set(alphabet);
    return makeVocabulary("real", merges, tokens.slice(0, SPECIALS.length + 2 * alphabet.length),
      function (c) { return chars.has(c); });
  }

  // SubwordTokenizer's normaliser: <br /> to a space, NFD, marks dropped, lowercase one code
  // point at a time, as Rust's char::to_lowercase (no final-sigma rule: only a capital sigma
  // needs the slow path).
  function normalize(text) {
    text = text.replace(BR_TAG, " ").normalize("NFD").replace(MARKS, "");
    if (text.indexOf("\u03a3") < 0) {
      return text.toLowerCase();
    }
    return Array.from(text, function (c) { return c.toLowerCase(); }).join("");
  }

  // The pre-tokens of `text`: {words: [string], whole: [bool]}; a whole word (a special token
  // typed as text) stays one symbol. Toy: Python's text.split(). Real: the special tokens, then
  // the normaliser and \w+|[^\w\s]+ on the text between them.
  function preTokens(text, vocabulary) {
    checkText(text);
    if (vocabulary.name === "toy") {
      var found = text.match(TOY_WORDS) || [];
      return { words: found, whole: found.map(function () { return false; }) };
    }
    var out = { words: [], whole: [] };
    text.split(SPECIAL_SPLIT).forEach(function (part, p) {
      if (p % 2 === 1) {
        out.words.push(part);
        out.whole.push(true);
        return;
      }
      (normalize(part).match(PRE_TOKENS) || []).forEach(function (word) {
        out.words.push(word);
        out.whole.push(false);
      });
    });
    return out;
  }

  // A resumable cut of pre-tokens into symbols: next() adds one code point's symbols (or one
  // whole word) to `laid` and says whether any is left. Toy: the characters then a separate
  // "</w>" (attnlib.reference.bpe_words). Real: "</w>" glued to the last character, a
  // character outside the alphabet as "[UNK]" (which no merge joins).
  function symbolizer(pre, vocabulary, laid) {
    var toy = vocabulary.name === "toy";
    var w = 0;
    var at = 0;
    return function () {
      if (w >= pre.words.length) {
        return false;
      }
      var word = pre.words[w];
      if (pre.whole[w]) {
        laid.symbols.push(word);
        laid.last.push(true);
        w += 1;
        return true;
      }
      var c = String.fromCodePoint(word.codePointAt(at));
      at += c.length;
      var end = at >= word.length;
      if (toy) {
        laid.symbols.push(c);
        laid.last.push(false);
        if (end) {
          laid.symbols.push(END);
          laid.last.push(true);
        }
      } else {
        laid.symbols.push(!vocabulary.known(c) ? UNK : end ? c + END : c);
        laid.last.push(end);
      }
      if (end) {
        w += 1;
        at = 0;
      }
      return true;
    };
  }

  // The symbols every word of `text` starts from: [[symbol, ...], ...].
  function textWords(text, vocabulary) {
    var laid = { symbols: [], last: [] };
    var next = symbolizer(preTokens(text, vocabulary), vocabulary, laid);
    while (next()) { /* lay out every symbol */ }
    var words = [];
    var word = [];
    laid.symbols.forEach(function (symbol, i) {
      word.push(symbol);
      if (laid.last[i]) {
        words.push(word);
        word = [];
      }
    });
    return words;
  }

  // A binary min-heap of non-negative integer keys.
  function MinHeap() {
    this.keys = [];
  }

  MinHeap.prototype.push = function (key) {
    var keys = this.keys;
    var at = keys.length;
    keys.push(key);
    while (at > 0) {
      var parent = (at - 1) >> 1;
      if (keys[parent] <= key) {
        break;
      }
      keys[at] = keys[parent];
      at = parent;
    }
    keys[at] = key;
  };

  MinHeap.prototype.pop = function () {
    var keys = this.keys;
    var top = keys[0];
    var last = keys.pop();
    var size = keys.length;
    if (size > 0) {
      var at = 0;
      for (;;) {
        var child = 2 * at + 1;
        if (child >= size) {
          break;
        }
        if (child + 1 < size && keys[child + 1] < keys[child]) {
          child += 1;
        }
        if (keys[child] >= last) {
          break;
        }
        keys[at] = keys[child];
        at = child;
      }
      keys[at] = last;
    }
    return top;
  };

  // A resumable run of every merge of `text` under `vocabulary`: run(budgetMs) works for about
  // that long and says whether it has finished, so a page stays responsive on a pasted
  // 200,000-character word. Its phases: cut the pre-tokens into symbols; index them; offer
  // every joinable pair to a heap keyed by (rank, position), which pops them in merge order
  // and, within a merge, left to right; a pair whose symbols changed since it was pushed is
  // skipped (O(n log n) in the symbols, as in `tokenizers`). A pair that a merge creates was
  // learned after that merge, so a merge's places are all known when it starts: the pops of one
  // rank are one step. job.result: {initial: {symbols, last}, steps: [{rank, pair, places,
  // first}], events, stops}: step k joins at the left positions events[first ..], the joined
  // token ending (exclusive) at the matching stops.
  function mergeJob(text, vocabulary) {
    var laid = { symbols: [], last: [] };
    var cut = symbolizer(preTokens(text, vocabulary), vocabulary, laid);
    var n = 0;
    var ids = null;  // token ids; -1: never merges (unknown, or in no merge)
    var next = null;  // the next symbol of the word, -1 at its end
    var previous = null;
    var stop = null;  // where the token that starts here ends (exclusive)
    var indexed = -1;  // -1 while cutting
    var index = function (i) {
      var id = vocabulary.ids.get(laid.symbols[i]);
      ids[i] = id === undefined ? -1 : id;
      next[i] = laid.last[i] ? -1 : i + 1;
      previous[i] = i > 0 && !laid.last[i - 1] ? i - 1 : -1;
      stop[i] = i + 1;
    };
    var pairs = vocabulary.pairs;
    var size = vocabulary.size;
    var rankAt = function (left) {
      var right = next[left];
      if (right < 0 || ids[left] < 0 || ids[right] < 0) {
        return -1;
      }
      var rank = pairs.get(ids[left] * size + ids[right]);
      return rank === undefined ? -1 : rank;
    };
    var queue = new MinHeap();
    var offer = function (left) {
      var rank = rankAt(left);
      if (rank >= 0) {
        queue.push(rank * n + left);
      }
    };
    var events = [];
    var stops = [];
    var steps = [];
    var current = null;
    var offered = 0;
    var job = { done: false, result: null };
    job.run = function (budgetMs) {
      var deadline = Date.now() + (budgetMs === undefined ? Infinity : budgetMs);
      var count = 0;
      while (indexed < 0 && cut()) {
        if (++count % 1024 === 0 && Date.now() > deadline) {
          return false;
        }
      }
      if (indexed < 0) {
        n = laid.symbols.length;
        ids = new Int32Array(n);
        next = new Int32Array(n);
        previous = new Int32Array(n);
        stop = new Int32Array(n);
        indexed = 0;
      }
      while (indexed < n) {
        index(indexed++);
        if (++count % 1024 === 0 && Date.now() > deadline) {
          return false;
        }
      }
      while (offered < n) {
        offer(offered++);
        if (++count % 1024 === 0 && Date.now() > deadline) {
          return false;
        }
      }
      while (queue.keys.length) {
        if (++count % 1024 === 0 && Date.now() > deadline) {
          return false;
        }
        var key = queue.pop();
        var left = key % n;
        var rank = (key - left) / n;
        if (ids[left] < 0 || rankAt(left) !== rank) {
          continue;  // stale: this symbol or its right neighbour has merged since
        }
        if (!current || current.rank !== rank) {
          current = { rank: rank, pair: vocabulary.merges[rank], places: 0, first: events.length };
          steps.push(current);
        }
        var right = next[left];
        ids[left] = vocabulary.made[rank];
        ids[right] = -1;
        stop[left] = stop[right];
        next[left] = next[right];
        if (next[right] >= 0) {
          previous[next[right]] = left;
        }
        events.push(left);
        stops.push(stop[left]);
        current.places += 1;
        if (previous[left] >= 0) {
          offer(previous[left]);
        }
        offer(left);
      }
      job.done = true;
      job.result = { initial: laid, steps: steps, events: Int32Array.from(events),
        stops: Int32Array.from(stops) };
      return true;
    };
    return job;
  }

  // Every merge of `text` under `vocabulary`, at once (see mergeJob).
  function mergeSteps(text, vocabulary) {
    var job = mergeJob(text, vocabulary);
    job.run();
    return job.result;
  }

  // The tokens after `step` merges (0: the starting symbols), at most `limit` of them:
  // {tokens, last (ends a word), fresh (made by this step's merge), total}. It replays the
  // recorded extents, integers only, and builds the text of the tokens it returns.
  function tokensAt(result, step, limit) {
    var steps = result.steps;
    if (!Number.isInteger(step) || step < 0 || step > steps.length) {
      throw new Error("step must be an integer from 0 to " + steps.length + ", got " + step);
    }
    var laid = result.initial;
    var n = laid.symbols.length;
    var stop = new Int32Array(n);
    var fresh = new Uint8Array(n);
    for (var i = 0; i < n; i++) {
      stop[i] = i + 1;
    }
    var end = step < steps.length ? steps[step].first : result.events.length;
    var start = step > 0 ? steps[step - 1].first : end;
    for (var e = 0; e < end; e++) {
      var left = result.events[e];
      stop[left] = result.stops[e];
      fresh[left] = e >= start ? 1 : 0;
    }
    limit = limit === undefined ? Infinity : limit;
    var out = { tokens: [], last: [], fresh: [], total: n - end };
    for (var s = 0; s < n && out.tokens.length < limit; s = stop[s]) {
      out.tokens.push(laid.symbols.slice(s, stop[s]).join(""));
      out.last.push(laid.last[stop[s] - 1]);
      out.fresh.push(fresh[s] === 1);
    }
    return out;
  }

  // text -> its final tokens (SubwordTokenizer.tokens, or apply_merges word by word).
  function encode(text, vocabulary) {
    var result = mergeSteps(text, vocabulary);
    return tokensAt(result, result.steps.length).tokens;
  }

  // How a chip shows a token: {text, end}: the token without its "</w>", and whether it had one
  // (the toy's lone "</w>" keeps its text).
  function display(token) {
    if (token.length > END.length && token.slice(-END.length) === END) {
      return { text: token.slice(0, -END.length), end: true };
    }
    return { text: token, end: token === END };
  }

  var api = {
    END: END,
    SPECIALS: SPECIALS,
    toyVocabulary: toyVocabulary,
    realVocabulary: realVocabulary,
    unpack: unpack,
    normalize: normalize,
    preTokens: preTokens,
    words: textWords,
    mergeJob: mergeJob,
    mergeSteps: mergeSteps,
    tokensAt: tokensAt,
    encode: encode,
    display: display,
  };
  if (typeof module === "object" && module && module.exports) {
    module.exports = api;
  } else {
    root.attnlibLive = root.attnlibLive || {};
    root.attnlibLive.bpe = api;
  }
})(typeof self !== "undefined" ? self : this);
