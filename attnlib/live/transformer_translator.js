/* attnlib live: chapter 14's encoder-decoder Transformer, translating dates in the browser.
 *
 * A port of attnlib.generation.EncoderDecoder in eval mode, with greedy decoding as
 * attnlib.generation.greedy_decode does it (one new token a step, each layer's keys and values
 * of the earlier steps kept, the memory's projected once):
 *   - decodeWeights: the base64 float32 blob and its manifest [[name, shape], ...] that
 *     attnlib/live/transformer_translator.py writes -> {name: Float32Array};
 *   - tokenize: one id per character (code point), unknown ones to <unk>, as CharVocab.encode;
 *   - Translator: token embedding x sqrt(d_model) + positions (sinusoidal table or learned
 *     rows), post-LN or pre-LN layers (pre-LN: a final LayerNorm on each stack), decoder layers
 *     of causal self-attention, cross-attention over the encoder's last output, feed-forward;
 *     the output projection (the target embedding itself when tied) and its bias;
 *   - translate: per step the token, the output probabilities and every layer's and head's
 *     cross-attention row over the source.
 * tests/test_live_transformer_translator.py runs it in node on a few hundred dates and checks
 * the tokens equal PyTorch's and the probabilities and attention rows agree to 1e-5. Plain ES2017:
 * in a browser it defines window.attnlibTransformerTranslator, in node it is module.exports.
 */
(function (root) {
  "use strict";

  // base64 of little-endian float32s + [[name, shape], ...] in the blob's order -> tensors.
  function decodeWeights(base64, manifest) {
    var binary = atob(base64);  // a global in browsers and in node 16 and later
    var bytes = new Uint8Array(binary.length);
    for (var i = 0; i < binary.length; i++) {
      bytes[i] = binary.charCodeAt(i);
    }
    var all = new Float32Array(bytes.buffer);
    var tensors = {};
    var offset = 0;
    manifest.forEach(function (entry) {
      var count = entry[1].reduce(function (a, b) { return a * b; }, 1);
      if (offset + count > all.length) {
        throw new Error("the weights end before " + entry[0] + ": " + all.length + " numbers");
      }
      tensors[entry[0]] = all.subarray(offset, offset + count);
      offset += count;
    });
    if (offset !== all.length) {
      throw new Error("the manifest names " + offset + " numbers, the weights hold " + all.length);
    }
    return tensors;
  }

  // x (n, inputs) @ weight(outputs, inputs)ᵀ + bias -> (n, outputs), float32 results; two rows
  // at a time, so each weight row is read once per two positions.
  function linear(x, n, inputs, weight, bias, outputs) {
    var y = new Float32Array(n * outputs);
    var t = 0;
    for (; t + 2 <= n; t += 2) {
      var r0 = t * inputs;
      var r1 = r0 + inputs;
      for (var o = 0; o < outputs; o++) {
        var w = o * inputs;
        var a0 = 0;
        var a1 = 0;
        for (var i = 0; i < inputs; i++) {
          var wi = weight[w + i];
          a0 += x[r0 + i] * wi;
          a1 += x[r1 + i] * wi;
        }
        y[t * outputs + o] = a0 + bias[o];
        y[(t + 1) * outputs + o] = a1 + bias[o];
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
  function layerNorm(x, n, d, norm) {
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
      var inverse = 1 / Math.sqrt(variance / d + norm.eps);
      for (var k = 0; k < d; k++) {
        y[row + k] = (x[row + k] - mean) * inverse * norm.weight[k] + norm.bias[k];
      }
    }
    return y;
  }

  // PE(pos, 2i) = sin(pos / 10000^(2i/d)), PE(pos, 2i+1) = cos(same): (n, d), float32, as
  // attnlib.transformer.sinusoidal_encoding (float64 angles, a float32 table).
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

  // Softmax of a list of numbers (float64), the largest subtracted first.
  function softmax(values) {
    var max = -Infinity;
    for (var i = 0; i < values.length; i++) {
      max = Math.max(max, values[i]);
    }
    var exps = Array.prototype.map.call(values, function (v) { return Math.exp(v - max); });
    var total = exps.reduce(function (a, b) { return a + b; }, 0);
    return exps.map(function (e) { return e / total; });
  }

  // Queries q (nq, d) over keys k and values v (nk, d), split into heads; query i may read keys
  // 0..limit(i) (all of them when limit is null): -> {out (nq, d), weights[h] (nq, nk)}.
  function attention(q, k, v, nq, nk, d, heads, limit) {
    var dHead = d / heads;
    var scale = 1 / Math.sqrt(dHead);
    var out = new Float32Array(nq * d);
    var weights = [];
    var scores = new Float64Array(nk);
    for (var h = 0; h < heads; h++) {
      var offset = h * dHead;
      var w = new Float32Array(nq * nk);
      for (var i = 0; i < nq; i++) {
        var last = limit === null ? nk - 1 : limit(i);
        var max = -Infinity;
        for (var j = 0; j <= last; j++) {
          var s = 0;
          for (var c = 0; c < dHead; c++) {
            s += q[i * d + offset + c] * k[j * d + offset + c];
          }
          scores[j] = Math.fround(s) * scale;
          max = Math.max(max, scores[j]);
        }
        var total = 0;
        for (var j2 = 0; j2 <= last; j2++) {
          scores[j2] = Math.exp(scores[j2] - max);
          total += scores[j2];
        }
        for (var j3 = 0; j3 <= last; j3++) {
          w[i * nk + j3] = scores[j3] / total;  // keys after `last` keep weight 0
        }
        for (var c2 = 0; c2 < dHead; c2++) {
          var acc = 0;
          for (var j4 = 0; j4 <= last; j4++) {
            acc += w[i * nk + j4] * v[j4 * d + offset + c2];
          }
          out[i * d + offset + c2] = acc;
        }
      }
      weights.push(w);
    }
    return { out: out, weights: weights };
  }

  // What typeof says, but "null" and "array" for those: for error messages.
  function kindOf(value) {
    if (value === null) {
      return "null";
    }
    return Array.isArray(value) ? "array" : typeof value;
  }

  // The error of a text the model cannot read (empty, longer than its positions).
  var INPUT_ERROR = "TranslatorInputError";

  function inputError(message) {
    var error = new Error(message);
    error.name = INPUT_ERROR;
    return error;
  }

  // Named tensors -> need(name, count): the tensor, if it has count numbers; dense(prefix,
  // inputs, outputs): a Linear layer's weight and bias; norm(prefix): a LayerNorm of width d.
  function weightReader(tensors, d, eps) {
    var need = function (name, count) {
      var tensor = tensors[name];
      if (!tensor) {
        throw new Error("the weights lack " + name);
      }
      if (tensor.length !== count) {
        throw new Error(name + " has " + tensor.length + " numbers, expected " + count);
      }
      return tensor;
    };
    var dense = function (prefix, inputs, outputs) {
      return { weight: need(prefix + ".weight", inputs * outputs),
               bias: need(prefix + ".bias", outputs), inputs: inputs, outputs: outputs };
    };
    var norm = function (prefix) {
      return { weight: need(prefix + ".weight", d), bias: need(prefix + ".bias", d), eps: eps };
    };
    return { need: need, dense: dense, norm: norm };
  }

  // tensors from decodeWeights + the config transformer_translator.py writes -> a translator.
  function Translator(tensors, config) {
    ["d_model", "num_heads", "num_layers", "d_ff", "max_len", "max_steps"].forEach(function (k) {
      if (!(Number.isInteger(config[k]) && config[k] >= 1)) {
        throw new Error("config." + k + " must be a positive integer, got " + config[k]);
      }
    });
    if (config.d_model % config.num_heads !== 0) {
      throw new Error("config.num_heads (" + config.num_heads + ") does not divide d_model (" +
                      config.d_model + ")");
    }
    var d = config.d_model;
    var ff = config.d_ff;
    var eps = config.layer_norm_eps || 1e-5;
    this.config = config;
    this.d = d;
    this.heads = config.num_heads;
    this.normFirst = Boolean(config.norm_first);
    this.source = vocabulary(config.source_vocab, "source");
    this.target = vocabulary(config.target_vocab, "target");
    var read = weightReader(tensors, d, eps);
    var need = read.need;
    var dense = read.dense;
    var norm = read.norm;
    var attentionOf = function (prefix) {
      return {
        query: dense(prefix + ".query_projection", d, d),
        key: dense(prefix + ".key_projection", d, d),
        value: dense(prefix + ".value_projection", d, d),
        output: dense(prefix + ".output_projection", d, d),
      };
    };
    var feedForward = function (prefix) {
      return { up: dense(prefix + ".linear1", d, ff), down: dense(prefix + ".linear2", ff, d) };
    };
    var stack = function (prefix, vocab, decoder) {
      var part = { embedding: need(prefix + ".embedding.weight", vocab.size * d), layers: [] };
      part.positions = config.positions === "learned" ?
        need(prefix + ".positions.weight", config.max_len * d) : sinusoidal(config.max_len, d);
      for (var l = 0; l < config.num_layers; l++) {
        var p = prefix + ".layers." + l + ".";
        var layer = { feedForward: feedForward(p + "feed_forward"), norm1: norm(p + "norm1"),
                      norm2: norm(p + "norm2") };
        if (decoder) {
          layer.self = attentionOf(p + "self_attention");
          layer.cross = attentionOf(p + "cross_attention");
          layer.norm3 = norm(p + "norm3");
        } else {
          layer.self = attentionOf(p + "attention");
        }
        part.layers.push(layer);
      }
      // A final LayerNorm closes a pre-LN stack (its residual stream is never normalised).
      part.finalNorm = config.norm_first ? norm(prefix + ".final_norm") : null;
      return part;
    };
    if (config.positions !== "sinusoidal" && config.positions !== "learned") {
      throw new Error("positions must be 'sinusoidal' or 'learned', got " + config.positions);
    }
    this.encoder = stack("encoder", this.source, false);
    this.decoder = stack("decoder", this.target, true);
    // Tied: the output projection's weight is the target embedding itself (Press and Wolf).
    this.output = {
      weight: config.tie_weights ? this.decoder.embedding :
        need("output.weight", this.target.size * d),
      bias: need("output.bias", this.target.size),
      inputs: d,
      outputs: this.target.size,
    };
  }

  // itos (a list of symbols, the special ones first) -> {itos, stoi, size, pad, sos, eos, unk}.
  function vocabulary(itos, what) {
    if (!Array.isArray(itos) || itos.length < 4) {
      throw new Error("config." + what + "_vocab must list its symbols, got " + kindOf(itos));
    }
    var stoi = new Map(itos.map(function (symbol, i) { return [symbol, i]; }));
    return { itos: itos, stoi: stoi, size: itos.length, pad: stoi.get("<pad>"),
             sos: stoi.get("<s>"), eos: stoi.get("</s>"), unk: stoi.get("<unk>") };
  }

  Translator.prototype.linear = function (layer, x, n) {
    return linear(x, n, layer.inputs, layer.weight, layer.bias, layer.outputs);
  };

  // Embed ids at positions start..start+n-1: emb x sqrt(d) + PE -> (n, d).
  Translator.prototype.embed = function (part, ids, start) {
    var d = this.d;
    var scale = Math.fround(Math.sqrt(d));
    var x = new Float32Array(ids.length * d);
    for (var t = 0; t < ids.length; t++) {
      for (var i = 0; i < d; i++) {
        x[t * d + i] = Math.fround(part.embedding[ids[t] * d + i] * scale) +
          part.positions[(start + t) * d + i];
      }
    }
    return x;
  };

  // The characters of text -> {ids, symbols, unknown: [{index, symbol}]}: one id per code point,
  // <unk> for a character outside the source vocabulary (as CharVocab.encode).
  Translator.prototype.tokenize = function (text) {
    if (typeof text !== "string") {
      throw new TypeError("text must be a string, got " + kindOf(text));
    }
    var source = this.source;
    var symbols = Array.from(text);
    var unknown = [];
    var ids = symbols.map(function (symbol, index) {
      var id = source.stoi.get(symbol);
      // The special symbols are several characters long, so one character is never one of them.
      if (id === undefined || id < 4) {
        unknown.push({ index: index, symbol: symbol });
        return source.unk;
      }
      return id;
    });
    return { ids: ids, symbols: symbols, unknown: unknown };
  };

  // Source ids (n,) -> the memory (n, d) and each decoder layer's cross keys and values.
  Translator.prototype.encode = function (ids) {
    var n = ids.length;
    var d = this.d;
    var self = this;
    var part = this.encoder;
    var x = this.embed(part, ids, 0);
    part.layers.forEach(function (layer) {
      var input = self.normFirst ? layerNorm(x, n, d, layer.norm1) : x;
      var attended = attention(self.linear(layer.self.query, input, n),
        self.linear(layer.self.key, input, n), self.linear(layer.self.value, input, n),
        n, n, d, self.heads, null);
      var projected = self.linear(layer.self.output, attended.out, n);
      if (self.normFirst) {
        x = addInPlace(new Float32Array(x), projected);
        x = addInPlace(x, self.feedForward(layer.feedForward, layerNorm(x, n, d, layer.norm2), n));
      } else {
        x = layerNorm(addInPlace(projected, x), n, d, layer.norm1);
        x = layerNorm(addInPlace(self.feedForward(layer.feedForward, x, n), x), n, d, layer.norm2);
      }
    });
    var memory = part.finalNorm ? layerNorm(x, n, d, part.finalNorm) : x;
    var cross = this.decoder.layers.map(function (layer) {
      return { keys: self.linear(layer.cross.key, memory, n),
               values: self.linear(layer.cross.value, memory, n) };
    });
    return { memory: memory, cross: cross, length: n };
  };

  Translator.prototype.feedForward = function (block, x, n) {
    return this.linear(block.down, reluInPlace(this.linear(block.up, x, n)), n);
  };

  // One decoder step: the newest token at position `step`, with every layer's cached keys and
  // values of the earlier steps (rows 0..step-1 of cache[l].keys and .values; row `step` is
  // written here) -> {logits (vocab,), cross[layer][head] (src,)}.
  Translator.prototype.step = function (token, step, encoded, cache) {
    var d = this.d;
    var self = this;
    var x = this.embed(this.decoder, [token], step);
    var src = encoded.length;
    var crossRows = [];
    this.decoder.layers.forEach(function (layer, l) {
      var held = cache[l];
      var selfBlock = function (input) {
        held.keys.set(self.linear(layer.self.key, input, 1), step * d);
        held.values.set(self.linear(layer.self.value, input, 1), step * d);
        var attended = attention(self.linear(layer.self.query, input, 1), held.keys,
          held.values, 1, step + 1, d, self.heads, null);
        return self.linear(layer.self.output, attended.out, 1);
      };
      var crossBlock = function (input) {
        var attended = attention(self.linear(layer.cross.query, input, 1), encoded.cross[l].keys,
          encoded.cross[l].values, 1, src, d, self.heads, null);
        crossRows.push(attended.weights);
        return self.linear(layer.cross.output, attended.out, 1);
      };
      if (self.normFirst) {
        x = addInPlace(new Float32Array(x), selfBlock(layerNorm(x, 1, d, layer.norm1)));
        x = addInPlace(x, crossBlock(layerNorm(x, 1, d, layer.norm2)));
        x = addInPlace(x, self.feedForward(layer.feedForward, layerNorm(x, 1, d, layer.norm3), 1));
      } else {
        x = layerNorm(addInPlace(selfBlock(x), x), 1, d, layer.norm1);
        x = layerNorm(addInPlace(crossBlock(x), x), 1, d, layer.norm2);
        x = layerNorm(addInPlace(self.feedForward(layer.feedForward, x, 1), x), 1, d, layer.norm3);
      }
    });
    if (this.decoder.finalNorm) {
      x = layerNorm(x, 1, d, this.decoder.finalNorm);
    }
    return { logits: this.linear(this.output, x, 1), cross: crossRows };
  };

  // Greedy decoding of text (or of a list of source ids): from <s>, the likeliest token a step,
  // until </s> or maxSteps (default config.max_steps) tokens. -> {ids, symbols, unknown, output,
  // steps: [{id, token, probabilities (vocab,), cross[layer][head] (src,)}]}. A text with no
  // character, or more than the model's positions, is an error named INPUT_ERROR.
  Translator.prototype.translate = function (text, maxSteps) {
    var read = Array.isArray(text) ? { ids: text, symbols: null, unknown: [] } : this.tokenize(text);
    var n = read.ids.length;
    var limit = this.config.max_len;
    if (n === 0) {
      throw inputError("type a date to translate: the text is empty");
    }
    if (n > limit) {
      throw inputError("the text has " + n + " characters, but the model has positions for " +
                       limit + " only: shorten it");
    }
    read.ids.forEach(function (id, t) {
      if (!(Number.isInteger(id) && id >= 0 && id < this.source.size)) {
        throw new Error("source id " + id + " at " + t + " is outside the vocabulary 0.." +
                        (this.source.size - 1));
      }
    }, this);
    maxSteps = maxSteps === undefined ? this.config.max_steps : maxSteps;
    if (!(Number.isInteger(maxSteps) && maxSteps >= 1 && maxSteps <= limit)) {
      throw new Error("maxSteps must be an integer in 1.." + limit + ", got " + maxSteps);
    }
    var encoded = this.encode(read.ids);
    var d = this.d;
    // Each layer's self-attention keys and values, a row per step written (the KV cache).
    var cache = this.decoder.layers.map(function () {
      return { keys: new Float32Array(maxSteps * d), values: new Float32Array(maxSteps * d) };
    });
    var token = this.target.sos;
    var steps = [];
    var written = [];
    for (var s = 0; s < maxSteps; s++) {
      var result = this.step(token, s, encoded, cache);
      var probabilities = softmax(result.logits);
      token = 0;
      for (var v = 1; v < probabilities.length; v++) {
        if (result.logits[v] > result.logits[token]) {
          token = v;  // the first of equal largest logits, as torch.argmax
        }
      }
      steps.push({ id: token, token: this.target.itos[token], probabilities: probabilities,
                   cross: result.cross });
      if (token === this.target.eos) {
        break;
      }
      written.push(this.target.itos[token]);
    }
    return { ids: read.ids, symbols: read.symbols, unknown: read.unknown, steps: steps,
             output: written.filter(function (symbol, i) {
               var id = steps[i].id;  // CharVocab.decode drops these two and keeps <unk>
               return id !== this.target.pad && id !== this.target.sos;
             }, this).join("") };
  };

  var api = {
    decodeWeights: decodeWeights,
    Translator: Translator,
    linear: linear,
    layerNorm: layerNorm,
    attention: attention,
    weightReader: weightReader,
    sinusoidal: sinusoidal,
    softmax: softmax,
    INPUT_ERROR: INPUT_ERROR,
  };
  if (typeof module === "object" && module && module.exports) {
    module.exports = api;
  } else {
    root.attnlibTransformerTranslator = Object.assign(root.attnlibTransformerTranslator || {}, api);
  }
})(typeof self !== "undefined" ? self : this);
