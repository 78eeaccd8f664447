/* attnlib live: chapter 13's IMDB classifier, run in the reader's browser.
 *
 * A port of the shipped model's inference path, with no dependency:
 *   - readSafetensors: the safetensors file (bfloat16 or float32) into Float32Arrays;
 *   - Tokenizer: the `tokenizers` JSON of attnlib/data/subwords.py (special tokens, <br /> to a
 *     space, NFD, accents stripped, lowercase, the Whitespace pre-tokeniser, BPE with </w>);
 *   - reviewIds: [CLS] then the ids, cut to the head and tail tokens as
 *     attnlib.tasks.imdb.encode_reviews cuts them;
 *   - Classifier: attnlib.encoder.SequenceClassifier in eval mode (embedding x sqrt(d_model),
 *     sinusoidal positions, pre-LN or post-LN layers, mean pooling, linear head).
 * tests/test_live_imdb.py runs this file in node on a few hundred test reviews and checks the
 * tokens are identical and P(positive) equals the Python model's to 1e-4. Plain ES2018 (ES2017
 * and the regular expressions' Unicode property escapes, \p{...}): in a browser it defines
 * window.attnlibImdb, in node it is module.exports.
 */
(function (root) {
  "use strict";

  // --- safetensors ------------------------------------------------------------------------------

  // bfloat16 is the top half of a float32: shift each 16-bit word into the high half.
  function bf16ToFloat32(bytes, offset, count) {
    var words = new Uint16Array(bytes.buffer.slice(bytes.byteOffset + offset,
                                                   bytes.byteOffset + offset + 2 * count));
    var bits = new Uint32Array(count);
    for (var i = 0; i < count; i++) {
      bits[i] = words[i] << 16;
    }
    return new Float32Array(bits.buffer);
  }

  // An ArrayBuffer or Uint8Array holding a .safetensors file -> {name: {shape, data}}.
  // `file` names it in the errors (default "the safetensors file").
  function readSafetensors(buffer, file) {
    file = file || "the safetensors file";
    var bytes = buffer instanceof Uint8Array ? buffer : new Uint8Array(buffer);
    if (bytes.length < 8) {
      throw new Error(file + " is not a safetensors file: " + bytes.length + " bytes");
    }
    var view = new DataView(bytes.buffer, bytes.byteOffset, bytes.length);
    var headerLength = view.getUint32(0, true) + view.getUint32(4, true) * 4294967296;
    if (8 + headerLength > bytes.length) {
      throw new Error(file + " is not a safetensors file: its header runs past the end " +
                      "(truncated?)");
    }
    var header;
    try {
      header = JSON.parse(new TextDecoder().decode(bytes.subarray(8, 8 + headerLength)));
    } catch (problem) {
      throw new Error(file + " is not a safetensors file: its header is not JSON (" +
                      problem.message + ")", { cause: problem });
    }
    if (header === null || typeof header !== "object" || Array.isArray(header)) {
      throw new Error(file + " is not a safetensors file: its header is not a JSON object");
    }
    var start = 8 + headerLength;
    var tensors = {};
    Object.keys(header).forEach(function (name) {
      if (name === "__metadata__") {
        return;
      }
      var entry = header[name];
      if (!entry || !Array.isArray(entry.shape) || !Array.isArray(entry.data_offsets)) {
        throw new Error(file + ": tensor " + name + " lacks its shape or data_offsets");
      }
      var count = entry.shape.reduce(function (a, b) { return a * b; }, 1);
      var begin = start + entry.data_offsets[0];
      var end = start + entry.data_offsets[1];
      if (end > bytes.length) {
        throw new Error(file + ": tensor " + name + " runs past the end of the file " +
                        "(truncated?)");
      }
      var data;
      if (entry.dtype === "BF16" && end - begin === 2 * count) {
        data = bf16ToFloat32(bytes, begin, count);
      } else if (entry.dtype === "F32" && end - begin === 4 * count) {
        data = new Float32Array(bytes.buffer.slice(bytes.byteOffset + begin,
                                                   bytes.byteOffset + end));
      } else {
        throw new Error(file + ": tensor " + name + ": dtype " + entry.dtype + " with " +
                        (end - begin) + " bytes for shape [" + entry.shape + "] is not supported");
      }
      tensors[name] = { shape: entry.shape, data: data };
    });
    return tensors;
  }

  // --- the tokenizer ----------------------------------------------------------------------------

  // Rust regex's \w and \s (what `tokenizers`' Whitespace pre-tokeniser uses), in Unicode.
  var WORD = "\\p{Alphabetic}\\p{M}\\p{Nd}\\p{Pc}\\p{Join_Control}";
  var PRE_TOKENS = new RegExp("[" + WORD + "]+|[^" + WORD + "\\p{White_Space}]+", "gu");
  // `tokenizers`' StripAccents drops every combining mark (Mn, Mc and Me), not only Mn.
  var ACCENTS = /\p{M}/gu;
  // Rust regex's Unicode classes, for a Replace pattern written for `tokenizers`.
  var RUST_CLASSES = { s: "\\p{White_Space}", S: "\\P{White_Space}", d: "\\p{Nd}",
    D: "\\P{Nd}" };

  // A Rust regex pattern -> the same pattern for a JavaScript "u" RegExp: JavaScript's \s and
  // \d are not Unicode's White_Space and Nd (U+0085 is space only to Rust, U+FEFF only to
  // JavaScript). Escaped pairs are read left to right, so "\\s" stays a backslash and an s.
  function fromRustRegex(pattern) {
    return pattern.replace(/\\(.)/gu, function (pair, c) {
      return Object.prototype.hasOwnProperty.call(RUST_CLASSES, c) ? RUST_CLASSES[c] : pair;
    });
  }

  function escapeRegExp(text) {
    return text.replace(/[.*+?^${}()|[\]\\]/g, "\\$&");
  }

  // A `tokenizers` JSON object (BPE model) -> a tokenizer with encode(text) -> {ids, tokens}.
  function Tokenizer(json) {
    var model = json.model || {};
    if (model.type !== "BPE") {
      throw new Error("only a BPE tokenizer is supported, got " + model.type);
    }
    if (model.continuing_subword_prefix || model.byte_fallback || model.fuse_unk ||
        model.dropout) {
      throw new Error("this BPE tokenizer uses options the browser port does not implement");
    }
    this.vocab = new Map(Object.entries(model.vocab));
    this.idToToken = [];
    var self = this;
    this.vocab.forEach(function (id, token) {
      self.idToToken[id] = token;
    });
    this.suffix = model.end_of_word_suffix || "";
    this.unkId = model.unk_token === null ? null : this.vocab.get(model.unk_token);
    this.ranks = new Map();
    model.merges.forEach(function (merge, rank) {
      var pair = typeof merge === "string" ? merge.split(" ") : merge;
      self.ranks.set(pair[0] + " " + pair[1], rank);
    });
    this.normalizers = ((json.normalizer && json.normalizer.normalizers) ||
                        (json.normalizer ? [json.normalizer] : []));
    this.normalizers.forEach(function (step) {
      var known = ["Replace", "NFD", "StripAccents", "Lowercase"];
      if (known.indexOf(step.type) < 0) {
        throw new Error("normaliser " + step.type + " is not implemented in the browser port");
      }
    });
    var preTokenizer = json.pre_tokenizer && json.pre_tokenizer.type;
    if (preTokenizer !== "Whitespace") {
      throw new Error("pre-tokeniser " + preTokenizer + " is not implemented in the browser port");
    }
    var specials = (json.added_tokens || []).map(function (token) { return token.content; });
    this.specials = new Map((json.added_tokens || []).map(function (token) {
      return [token.content, token.id];
    }));
    // Longest first, so that one special token that begins another never wins.
    specials.sort(function (a, b) { return b.length - a.length; });
    this.specialPattern = specials.length ?
      new RegExp("(" + specials.map(escapeRegExp).join("|") + ")") : null;
    this.cache = new Map();
  }

  // The normaliser chain, on text that holds no special token.
  Tokenizer.prototype.normalize = function (text) {
    this.normalizers.forEach(function (step) {
      if (step.type === "Replace") {
        var pattern = step.pattern.Regex !== undefined ?
          new RegExp(fromRustRegex(step.pattern.Regex), "gu") :
          new RegExp(escapeRegExp(step.pattern.String), "gu");
        text = text.replace(pattern, step.content);
      } else if (step.type === "NFD") {
        text = text.normalize("NFD");
      } else if (step.type === "StripAccents") {
        text = text.replace(ACCENTS, "");
      } else {
        // One character at a time, as Rust's char::to_lowercase: no final-sigma context rule.
        text = Array.from(text, function (c) { return c.toLowerCase(); }).join("");
      }
    });
    return text;
  };

  // A binary min-heap of non-negative integer keys: push, pop (the smallest), size.
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

  // Pre-tokens longer than this are not cached (as in `tokenizers`): one pasted run of text
  // with no spaces would otherwise stay in memory.
  var CACHED_LENGTH = 256;

  // One pre-token -> its BPE tokens: characters (the last one with </w>), then the merges in
  // the order they were learned, the leftmost first among equal ranks. As `tokenizers` does it:
  // the symbols form a linked list, and a heap holds every adjacent pair that has a merge,
  // keyed by (rank, position of its left symbol); a popped pair whose symbols have changed
  // since it was pushed is skipped. O(n log n) in the pre-token's length n, where rescanning
  // every pair after each merge was O(n²).
  Tokenizer.prototype.word = function (word) {
    var found = this.cache.get(word);
    if (found) {
      return found;
    }
    var chars = Array.from(word);
    var n = chars.length;
    var symbols = new Array(n);  // the text of each symbol; null once merged into its left
    var known = new Uint8Array(n);  // in the vocabulary: symbols outside it never merge
    var next = new Int32Array(n);  // the linked list of live symbols (-1: none)
    var previous = new Int32Array(n);
    for (var c = 0; c < n; c++) {
      symbols[c] = c === n - 1 ? chars[c] + this.suffix : chars[c];
      known[c] = this.vocab.has(symbols[c]) ? 1 : 0;
      next[c] = c + 1 < n ? c + 1 : -1;
      previous[c] = c - 1;
    }
    var ranks = this.ranks;
    // The rank of the merge of the pair that starts at symbol `left`, or -1 if there is none.
    var rankAt = function (left) {
      var right = next[left];
      if (right < 0 || !known[left] || !known[right]) {
        return -1;
      }
      var rank = ranks.get(symbols[left] + " " + symbols[right]);
      return rank === undefined ? -1 : rank;
    };
    var queue = new MinHeap();  // keys rank * n + left: by rank, then leftmost
    var offer = function (left) {
      var rank = rankAt(left);
      if (rank >= 0) {
        queue.push(rank * n + left);
      }
    };
    for (var p = 0; p + 1 < n; p++) {
      offer(p);
    }
    while (queue.keys.length) {
      var key = queue.pop();
      var left = key % n;
      if (symbols[left] === null || rankAt(left) !== (key - left) / n) {
        continue;  // stale: this symbol or its right neighbour has merged since
      }
      var right = next[left];
      symbols[left] += symbols[right];
      symbols[right] = null;
      next[left] = next[right];
      if (next[right] >= 0) {
        previous[next[right]] = left;
      }
      if (previous[left] >= 0) {
        offer(previous[left]);
      }
      offer(left);
    }
    var result = [];
    for (var s = n ? 0 : -1; s >= 0; s = next[s]) {
      var id = known[s] ? this.vocab.get(symbols[s]) : this.unkId;
      if (id !== null && id !== undefined) {  // no [UNK] in the vocabulary: dropped
        result.push({ id: id, token: known[s] ? symbols[s] : this.idToToken[id] });
      }
    }
    if (n < CACHED_LENGTH && this.cache.size < 50000) {
      this.cache.set(word, result);
    }
    return result;
  };

  // What typeof says, but "null" and "array" for those: for error messages.
  function kindOf(value) {
    if (value === null) {
      return "null";
    }
    return Array.isArray(value) ? "array" : typeof value;
  }

  // text -> {ids, tokens}, no special tokens added (SubwordTokenizer.encode).
  Tokenizer.prototype.encode = function (text) {
    if (typeof text !== "string") {
      throw new TypeError("text must be a string, got " + kindOf(text));
    }
    var ids = [];
    var tokens = [];
    var parts = this.specialPattern ? text.split(this.specialPattern) : [text];
    for (var p = 0; p < parts.length; p++) {
      if (p % 2 === 1) {
        ids.push(this.specials.get(parts[p]));
        tokens.push(parts[p]);
        continue;
      }
      var words = this.normalize(parts[p]).match(PRE_TOKENS) || [];
      for (var w = 0; w < words.length; w++) {
        var pieces = this.word(words[w]);
        for (var k = 0; k < pieces.length; k++) {
          ids.push(pieces[k].id);
          tokens.push(pieces[k].token);
        }
      }
    }
    return { ids: ids, tokens: tokens };
  };

  // How a reader sees a token: {text, wordEnd}. The end-of-word suffix ("</w>") is dropped and
  // reported as wordEnd; a special token ([CLS], [UNK]) stands alone, so it ends a word too.
  Tokenizer.prototype.display = function (token) {
    var suffix = this.suffix;
    if (suffix && token.length > suffix.length &&
        token.slice(token.length - suffix.length) === suffix) {
      return { text: token.slice(0, token.length - suffix.length), wordEnd: true };
    }
    return { text: token, wordEnd: this.specials.has(token) };
  };

  // [CLS] + the ids, cut to maxLen by keeping the first headTokens and the last ones
  // (attnlib.tasks.imdb.encode_reviews). -> {ids, tokens, dropped}
  function reviewIds(tokenizer, text, maxLen, headTokens, clsId) {
    if (!(headTokens >= 0 && headTokens < maxLen)) {
      throw new Error("headTokens must be in [0, maxLen), got " + headTokens + " for " + maxLen);
    }
    var encoded = tokenizer.encode(text);
    var ids = encoded.ids;
    var tokens = encoded.tokens;
    var dropped = Math.max(0, ids.length - (maxLen - 1));
    if (dropped > 0) {
      var tail = maxLen - 1 - headTokens;
      var cut = function (list) {
        return list.slice(0, headTokens).concat(tail ? list.slice(list.length - tail) : []);
      };
      ids = cut(ids);
      tokens = cut(tokens);
    }
    return {
      ids: [clsId].concat(ids),
      tokens: [tokenizer.idToToken[clsId]].concat(tokens),
      dropped: dropped,
    };
  }

  // --- the model --------------------------------------------------------------------------------

  // x (n, inputs) @ weight(outputs, inputs)ᵀ + bias -> (n, outputs); four rows at a time, so
  // each weight row is read once per four tokens.
  function linear(x, n, inputs, weight, bias, outputs) {
    var y = new Float32Array(n * outputs);
    var t = 0;
    for (; t + 4 <= n; t += 4) {
      var r0 = t * inputs;
      var r1 = r0 + inputs;
      var r2 = r1 + inputs;
      var r3 = r2 + inputs;
      for (var o = 0; o < outputs; o++) {
        var w = o * inputs;
        var a0 = 0;
        var a1 = 0;
        var a2 = 0;
        var a3 = 0;
        for (var i = 0; i < inputs; i++) {
          var wi = weight[w + i];
          a0 += x[r0 + i] * wi;
          a1 += x[r1 + i] * wi;
          a2 += x[r2 + i] * wi;
          a3 += x[r3 + i] * wi;
        }
        var b = bias[o];
        y[t * outputs + o] = a0 + b;
        y[(t + 1) * outputs + o] = a1 + b;
        y[(t + 2) * outputs + o] = a2 + b;
        y[(t + 3) * outputs + o] = a3 + b;
      }
    }
    for (; t < n; t++) {
      var row = t * inputs;
      for (var q = 0; q < outputs; q++) {
        var base = q * inputs;
        var acc = 0;
        for (var j = 0; j < inputs; j++) {
          acc += x[row + j] * weight[base + j];
        }
        y[t * outputs + q] = acc + bias[q];
      }
    }
    return y;
  }

  // LayerNorm over the last axis of x (n, d), biased variance, as torch.nn.LayerNorm.
  function layerNorm(x, n, d, weight, bias, eps) {
    var y = new Float32Array(n * d);
    for (var t = 0; t < n; t++) {
      var row = t * d;
      var mean = 0;
      for (var i = 0; i < d; i++) {
        mean += x[row + i];
      }
      mean /= d;
      var variance = 0;
      for (var j = 0; j < d; j++) {
        var centred = x[row + j] - mean;
        variance += centred * centred;
      }
      var inverse = 1 / Math.sqrt(variance / d + eps);
      for (var k = 0; k < d; k++) {
        y[row + k] = (x[row + k] - mean) * inverse * weight[k] + bias[k];
      }
    }
    return y;
  }

  // PE(pos, 2i) = sin(pos / 10000^(2i/d)), PE(pos, 2i+1) = cos(same): (n, d), float32.
  function sinusoidal(n, d) {
    var table = new Float32Array(n * d);
    for (var pos = 0; pos < n; pos++) {
      for (var even = 0; even < d; even += 2) {
        var angle = pos * Math.pow(10000, -even / d);
        table[pos * d + even] = Math.sin(angle);
        if (even + 1 < d) {
          table[pos * d + even + 1] = Math.cos(angle);
        }
      }
    }
    return table;
  }

  // Self-attention of q, k, v (n, d) split into heads: -> {out (n, d), weights[h] (n, n)}.
  // product(a, rows, inner, b, cols) is a (rows, inner) @ b(cols, inner)ᵀ with inner a multiple
  // of 4: the same kernel as the linear layers, so both matrix products of a head run in it.
  function attention(q, k, v, n, d, heads, product) {
    var dHead = d / heads;
    var scale = 1 / Math.sqrt(dHead);
    var padded = Math.ceil(n / 4) * 4;  // keys padded with zero weights for the kernel
    var out = new Float32Array(n * d);
    var weights = [];
    for (var h = 0; h < heads; h++) {
      var offset = h * dHead;
      var qh = new Float32Array(n * dHead);
      var kh = new Float32Array(n * dHead);
      var vhT = new Float32Array(dHead * padded);  // (d_head, padded keys)
      for (var t = 0; t < n; t++) {
        for (var c = 0; c < dHead; c++) {
          qh[t * dHead + c] = q[t * d + offset + c];
          kh[t * dHead + c] = k[t * d + offset + c];
          vhT[c * padded + t] = v[t * d + offset + c];
        }
      }
      var scores = product(qh, n, dHead, kh, n);  // (n, n)
      var w = new Float32Array(n * n);
      var wPadded = new Float32Array(n * padded);
      for (var i = 0; i < n; i++) {
        var row = i * n;
        var max = -Infinity;
        for (var j = 0; j < n; j++) {
          var s = scores[row + j] * scale;
          scores[row + j] = s;
          if (s > max) {
            max = s;
          }
        }
        var total = 0;
        for (var j2 = 0; j2 < n; j2++) {
          var e = Math.exp(scores[row + j2] - max);
          scores[row + j2] = e;
          total += e;
        }
        for (var j3 = 0; j3 < n; j3++) {
          var weight = scores[row + j3] / total;
          w[row + j3] = weight;
          wPadded[i * padded + j3] = weight;
        }
      }
      var attended = product(wPadded, n, padded, vhT, dHead);  // (n, d_head)
      for (var t2 = 0; t2 < n; t2++) {
        for (var c2 = 0; c2 < dHead; c2++) {
          out[t2 * d + offset + c2] = attended[t2 * dHead + c2];
        }
      }
      weights.push(w);
    }
    return { out: out, weights: weights };
  }

  function addInPlace(x, y) {
    for (var i = 0; i < x.length; i++) {
      x[i] += y[i];
    }
    return x;
  }

  function reluInPlace(x) {
    for (var i = 0; i < x.length; i++) {
      if (x[i] < 0) {
        x[i] = 0;
      }
    }
    return x;
  }

  // --- the WebAssembly kernel (attnlib/live/linear.wat) -----------------------------------------

  // The module's bytes -> a backend whose linear() runs in WebAssembly with SIMD, or null where
  // this JavaScript engine cannot run it (then the plain linear above does the work).
  function wasmBackend(bytes) {
    if (typeof WebAssembly !== "object" || !bytes || !WebAssembly.validate(bytes)) {
      return null;
    }
    var instance = new WebAssembly.Instance(new WebAssembly.Module(bytes), {});
    var memory = instance.exports.memory;
    var kernel = instance.exports.linear;
    var used = 0;  // bytes holding weights; scratch space for activations starts here
    var PAGE = 65536;

    function reserve(bytesNeeded) {
      var missing = bytesNeeded - memory.buffer.byteLength;
      if (missing > 0) {
        memory.grow(Math.ceil(missing / PAGE));
      }
    }

    // Copy a Float32Array into the module's memory for good: -> its byte address.
    function upload(values) {
      var address = used;
      reserve(address + values.byteLength);
      new Float32Array(memory.buffer, address, values.length).set(values);
      used = address + Math.ceil(values.byteLength / 16) * 16;
      return address;
    }

    // x (n, inputs) @ W(outputs, inputs)ᵀ + b with W, b uploaded: -> (n, outputs).
    function linearWasm(x, n, inputs, layer, outputs) {
      if (inputs % 4 !== 0) {
        throw new Error("the WebAssembly kernel needs inputs divisible by 4, got " + inputs);
      }
      var rows = Math.ceil(n / 4) * 4;
      var xAddress = used;
      var yAddress = xAddress + rows * inputs * 4;
      reserve(yAddress + rows * outputs * 4);
      var xView = new Float32Array(memory.buffer, xAddress, rows * inputs);
      xView.set(x.subarray(0, n * inputs));
      xView.fill(0, n * inputs);
      kernel(xAddress, rows, inputs, layer.weightAddress, layer.biasAddress, outputs, yAddress);
      return new Float32Array(memory.buffer, yAddress, n * outputs).slice();
    }

    // a (n, inner) @ b(outputs, inner)ᵀ, both copied in for this call: -> (n, outputs).
    function productWasm(a, n, inner, b, outputs) {
      var zeros = Math.ceil(outputs / 4) * 16;
      var bAddress = used + zeros;
      var saved = used;
      reserve(bAddress + b.byteLength);
      new Float32Array(memory.buffer, saved, zeros / 4).fill(0);
      new Float32Array(memory.buffer, bAddress, b.length).set(b);
      used = bAddress + Math.ceil(b.byteLength / 16) * 16;
      try {
        return linearWasm(a, n, inner, { weightAddress: bAddress, biasAddress: saved }, outputs);
      } finally {
        used = saved;
      }
    }

    return { name: "WebAssembly SIMD", upload: upload, linear: linearWasm, product: productWasm };
  }

  var PREFIX = "encoder.";
  var LINEARS = [
    ["query", "attention.query_projection"],
    ["key", "attention.key_projection"],
    ["value", "attention.value_projection"],
    ["output", "attention.output_projection"],
    ["up", "feed_forward.linear1"],
    ["down", "feed_forward.linear2"],
  ];

  // tensors from readSafetensors + the shipped config.json -> a model with predict(ids).
  // options.wasm: the bytes of attnlib/live/linear.wasm, for the fast linear layers.
  function Classifier(tensors, config, options) {
    var need = function (name, count) {
      var tensor = tensors[name];
      if (!tensor) {
        throw new Error("the weights lack " + name);
      }
      if (tensor.data.length !== count) {
        throw new Error(name + " has " + tensor.data.length + " numbers, expected " + count);
      }
      return tensor.data;
    };
    ["d_model", "num_heads", "num_layers", "d_ff", "vocab_size", "max_len"].forEach(function (k) {
      if (!(Number.isInteger(config[k]) && config[k] >= 1)) {
        throw new Error("config." + k + " must be a positive integer, got " + config[k]);
      }
    });
    // Each head reads its own d_model / num_heads features: a remainder has no head to go to.
    if (config.d_model % config.num_heads !== 0) {
      throw new Error("config.d_model (" + config.d_model + ") must be divisible by " +
                      "config.num_heads (" + config.num_heads + "): each head reads " +
                      "d_model / num_heads features");
    }
    if (config.activation && config.activation !== "relu") {
      throw new Error("only the relu feed-forward is implemented, got " + config.activation);
    }
    var d = config.d_model;
    var ff = config.d_ff;
    this.config = config;
    this.d = d;
    this.heads = config.num_heads;
    this.normFirst = Boolean(config.norm_first);
    // The kernel reads rows 4 numbers at a time: a head or feed-forward width that is not a
    // multiple of 4 runs in plain JavaScript instead (slower, the same numbers).
    var fits = (d / this.heads) % 4 === 0 && ff % 4 === 0;
    this.backend = fits ? wasmBackend(options && options.wasm) : null;
    this.backendName = this.backend ? this.backend.name : "JavaScript";
    this.product = this.backend ? this.backend.product : function (a, rows, inner, b, cols) {
      return linear(a, rows, inner, b, new Float32Array(cols), cols);
    };
    var self = this;
    var linearLayer = function (prefix, inputs, outputs) {
      var layer = {
        weight: need(prefix + ".weight", inputs * outputs),
        bias: need(prefix + ".bias", outputs),
        inputs: inputs,
        outputs: outputs,
      };
      if (self.backend) {
        layer.weightAddress = self.backend.upload(layer.weight);
        layer.biasAddress = self.backend.upload(layer.bias);
      }
      return layer;
    };
    var encoderLayer = function (p) {
      var layer = {
        norm1: [need(p + "norm1.weight", d), need(p + "norm1.bias", d)],
        norm2: [need(p + "norm2.weight", d), need(p + "norm2.bias", d)],
      };
      LINEARS.forEach(function (entry) {
        var inputs = entry[0] === "down" ? ff : d;
        var outputs = entry[0] === "up" ? ff : d;
        layer[entry[0]] = linearLayer(p + entry[1], inputs, outputs);
      });
      return layer;
    };
    this.embedding = need(PREFIX + "embedding.weight", config.vocab_size * d);
    this.layers = [];
    for (var l = 0; l < config.num_layers; l++) {
      this.layers.push(encoderLayer(PREFIX + "layers." + l + "."));
    }
    if (this.normFirst) {
      this.finalNorm = [need(PREFIX + "final_norm.weight", d), need(PREFIX + "final_norm.bias", d)];
    }
    var classes = tensors["head.bias"] ? tensors["head.bias"].data.length : 0;
    this.head = linearLayer("head", d, classes);
    this.classes = classes;
    this.positions = sinusoidal(config.max_len, d);
  }

  // x (n, layer.inputs) -> (n, layer.outputs), in WebAssembly where it runs.
  Classifier.prototype.linear = function (layer, x, n) {
    if (this.backend) {
      return this.backend.linear(x, n, layer.inputs, layer, layer.outputs);
    }
    return linear(x, n, layer.inputs, layer.weight, layer.bias, layer.outputs);
  };

  // One layer on x (n, d): -> {x, weights[h] (n, n)}; pre-LN or post-LN as configured.
  Classifier.prototype.layer = function (layer, x, n) {
    var d = this.d;
    var eps = 1e-5;
    var norm = function (values, which) {
      return layerNorm(values, n, d, which[0], which[1], eps);
    };
    var input = this.normFirst ? norm(x, layer.norm1) : x;
    var attended = attention(this.linear(layer.query, input, n), this.linear(layer.key, input, n),
                             this.linear(layer.value, input, n), n, d, this.heads, this.product);
    var projected = this.linear(layer.output, attended.out, n);
    if (this.normFirst) {
      x = addInPlace(new Float32Array(x), projected);
      var hidden = reluInPlace(this.linear(layer.up, norm(x, layer.norm2), n));
      x = addInPlace(x, this.linear(layer.down, hidden, n));
    } else {
      x = norm(addInPlace(projected, x), layer.norm1);
      var inner = reluInPlace(this.linear(layer.up, x, n));
      x = norm(addInPlace(this.linear(layer.down, inner, n), x), layer.norm2);
    }
    return { x: x, weights: attended.weights };
  };

  // Refuse ids that are not an array (or typed array) of integers, naming the first bad one.
  function checkIds(ids) {
    if (!Array.isArray(ids) && !(ArrayBuffer.isView(ids) && !(ids instanceof DataView))) {
      throw new TypeError("ids must be an array of integer token ids, got " + kindOf(ids));
    }
    for (var t = 0; t < ids.length; t++) {
      if (!Number.isInteger(ids[t])) {
        var shown = typeof ids[t] === "string" ? JSON.stringify(ids[t]) : String(ids[t]);
        throw new TypeError("ids must be an array of integer token ids, got ids[" + t + "] = " +
                            shown + " (" + kindOf(ids[t]) + ")");
      }
    }
  }

  // ids (n,) -> {logits (classes,), probabilities (classes,), weights[layer][head] (n, n)}.
  Classifier.prototype.predict = function (ids) {
    checkIds(ids);
    var n = ids.length;
    var d = this.d;
    if (n < 1 || n > this.config.max_len) {
      throw new Error("need 1 to " + this.config.max_len + " token ids, got " + n);
    }
    var x = new Float32Array(n * d);
    var scale = Math.fround(Math.sqrt(d));
    for (var t = 0; t < n; t++) {
      var id = ids[t];
      if (!(id >= 0 && id < this.config.vocab_size)) {
        throw new Error("token id " + id + " is outside the vocabulary 0.." +
                        (this.config.vocab_size - 1));
      }
      for (var i = 0; i < d; i++) {
        x[t * d + i] = Math.fround(this.embedding[id * d + i] * scale) + this.positions[t * d + i];
      }
    }
    var weights = [];
    for (var l = 0; l < this.layers.length; l++) {
      var result = this.layer(this.layers[l], x, n);
      x = result.x;
      weights.push(result.weights);
    }
    if (this.normFirst) {
      x = layerNorm(x, n, d, this.finalNorm[0], this.finalNorm[1], 1e-5);
    }
    var pooled = new Float32Array(d);
    for (var t2 = 0; t2 < n; t2++) {
      for (var j = 0; j < d; j++) {
        pooled[j] += x[t2 * d + j];
      }
    }
    for (var j2 = 0; j2 < d; j2++) {
      pooled[j2] /= n;
    }
    var logits = Array.from(linear(pooled, 1, d, this.head.weight, this.head.bias, this.classes));
    var max = Math.max.apply(null, logits);
    var exps = logits.map(function (z) { return Math.exp(z - max); });
    var total = exps.reduce(function (a, b) { return a + b; }, 0);
    return {
      logits: logits,
      probabilities: exps.map(function (e) { return e / total; }),
      weights: weights,
    };
  };

  // How much each key j is read in one layer's head: the mean over queries of w[i, j] (n,).
  // The pooled state is the mean of the tokens' states, so this is the share of each token in
  // the attention part of what the classifier pools from that layer.
  function attentionReceived(weights, n) {
    var received = new Float64Array(n);
    for (var i = 0; i < n; i++) {
      for (var j = 0; j < n; j++) {
        received[j] += weights[i * n + j] / n;
      }
    }
    return Array.from(received);
  }

  // The mean of a layer's heads: (n, n).
  function meanOfHeads(heads, n) {
    var mean = new Float32Array(n * n);
    heads.forEach(function (w) {
      for (var i = 0; i < n * n; i++) {
        mean[i] += w[i] / heads.length;
      }
    });
    return mean;
  }

  // The error analyse() throws for a review with no token to read (empty, only spaces, only
  // line breaks): the model would score [CLS] alone, which says nothing about any review.
  var EMPTY_REVIEW = "EmptyReviewError";

  // Everything the explorer shows for one text. A text that is not a string is a TypeError
  // (from encode); one with no token to read, an error named EMPTY_REVIEW.
  function analyse(model, tokenizer, text) {
    var config = model.config;
    var clsId = tokenizer.vocab.get("[CLS]");
    var review = reviewIds(tokenizer, text, config.max_len, config.head_tokens || 0, clsId);
    if (review.ids.length < 2) {
      var empty = new Error("the review holds no words to read: type a review");
      empty.name = EMPTY_REVIEW;
      throw empty;
    }
    var prediction = model.predict(review.ids);
    return {
      ids: review.ids,
      tokens: review.tokens,
      dropped: review.dropped,
      probability: prediction.probabilities[1],
      logits: prediction.logits,
      weights: prediction.weights,
    };
  }

  var api = {
    readSafetensors: readSafetensors,
    Tokenizer: Tokenizer,
    reviewIds: reviewIds,
    Classifier: Classifier,
    linear: linear,
    wasmBackend: wasmBackend,
    layerNorm: layerNorm,
    sinusoidal: sinusoidal,
    attentionReceived: attentionReceived,
    meanOfHeads: meanOfHeads,
    analyse: analyse,
    EMPTY_REVIEW: EMPTY_REVIEW,
  };
  if (typeof module === "object" && module && module.exports) {
    module.exports = api;
  } else {
    root.attnlibImdb = Object.assign(root.attnlibImdb || {}, api);
  }
})(typeof self !== "undefined" ? self : this);
