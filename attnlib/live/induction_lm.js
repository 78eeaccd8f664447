/* attnlib live: chapter 17's decoder-only language model, run in the browser with heads off.
 *
 * A port of attnlib.lm.DecoderOnlyLM in eval mode, as attnlib/live/induction_explorer.py ships
 * it: token embedding x sqrt(d_model) + positions (a learned or sinusoidal table), causal
 * blocks (pre-LN or post-LN; attention-only when d_ff is 0, else a relu feed-forward), a final
 * LayerNorm after a pre-LN stack, the output layer (the embedding itself when tied). Switching a
 * head off multiplies its output by 0 before the output projection, as DecoderOnlyLM.ablated.
 *   - parseTokens: "5 17 3" -> the ids after BOS, or an error named INPUT_ERROR;
 *   - LanguageModel.run(ids, off): logits (n, vocab), every layer's and head's weights (n, n),
 *     the likeliest next token at every position.
 * tests/test_live_induction.py runs it in node and checks logits and weights against PyTorch to
 * 1e-4 and 1e-5, with heads on and off. The arithmetic (linear, layerNorm, attention, softmax,
 * decodeWeights, weightReader) is transformer_translator.js's. Plain ES2017: in a browser it
 * defines window.attnlibInductionLM, in node it is module.exports.
 */
(function (root) {
  "use strict";

  var inNode = typeof module === "object" && module && module.exports;
  var base = inNode ? require("./transformer_translator.js") : root.attnlibTransformerTranslator;
  if (!base || !base.attention) {
    throw new Error("attnlib live: load transformer_translator.js before induction_lm.js");
  }

  // The error of a sequence the model cannot read (a token outside its vocabulary, too long).
  var INPUT_ERROR = "InductionInputError";

  function inputError(message) {
    var error = new Error(message);
    error.name = INPUT_ERROR;
    return error;
  }

  // tensors from decodeWeights + the config induction_explorer.py writes -> a model.
  function LanguageModel(tensors, config) {
    ["vocab_size", "d_model", "num_heads", "num_layers", "max_len"].forEach(function (key) {
      if (!(Number.isInteger(config[key]) && config[key] >= 1)) {
        throw new Error("config." + key + " must be a positive integer, got " + config[key]);
      }
    });
    if (!(Number.isInteger(config.d_ff) && config.d_ff >= 0)) {
      throw new Error("config.d_ff must be 0 or a positive integer, got " + config.d_ff);
    }
    if (config.d_model % config.num_heads !== 0) {
      throw new Error("config.num_heads (" + config.num_heads + ") does not divide d_model (" +
                      config.d_model + ")");
    }
    if (config.positions !== "sinusoidal" && config.positions !== "learned") {
      throw new Error("positions must be 'sinusoidal' or 'learned', got " + config.positions);
    }
    var d = config.d_model;
    var eps = config.layer_norm_eps || 1e-5;
    var read = base.weightReader(tensors, d, eps);
    var need = read.need;
    var dense = read.dense;
    var norm = read.norm;
    this.config = config;
    this.d = d;
    this.heads = config.num_heads;
    this.vocab = config.vocab_size;
    this.embedding = need("embedding.weight", this.vocab * d);
    this.positions = config.positions === "learned" ?
      need("positions.weight", config.max_len * d) : base.sinusoidal(config.max_len, d);
    this.layers = [];
    for (var l = 0; l < config.num_layers; l++) {
      var p = "layers." + l + ".";
      this.layers.push({
        query: dense(p + "attention.query_projection", d, d),
        key: dense(p + "attention.key_projection", d, d),
        value: dense(p + "attention.value_projection", d, d),
        output: dense(p + "attention.output_projection", d, d),
        norm1: norm(p + "norm1"),
        // without a feed-forward sublayer there is no second norm (an identity in PyTorch)
        norm2: config.d_ff ? norm(p + "norm2") : null,
        up: config.d_ff ? dense(p + "feed_forward.linear1", d, config.d_ff) : null,
        down: config.d_ff ? dense(p + "feed_forward.linear2", config.d_ff, d) : null,
      });
    }
    this.finalNorm = config.norm_first ? norm("final_norm") : null;
    this.output = { weight: config.tie_weights ? this.embedding :
      need("output.weight", this.vocab * d), bias: need("output.bias", this.vocab),
    inputs: d, outputs: this.vocab };
  }

  LanguageModel.prototype.linear = function (layer, x, n) {
    return base.linear(x, n, layer.inputs, layer.weight, layer.bias, layer.outputs);
  };

  // Ids (n,) -> emb x sqrt(d) + positions 0..n-1: (n, d).
  LanguageModel.prototype.embed = function (ids) {
    var d = this.d;
    var scale = Math.fround(Math.sqrt(d));
    var x = new Float32Array(ids.length * d);
    for (var t = 0; t < ids.length; t++) {
      for (var i = 0; i < d; i++) {
        x[t * d + i] = Math.fround(this.embedding[ids[t] * d + i] * scale) +
          this.positions[t * d + i];
      }
    }
    return x;
  };

  // Causal self-attention of x (n, d) with the heads of `gate` (1 on, 0 off):
  // -> {out (n, d) after the output projection, weights[h] (n, n)}.
  LanguageModel.prototype.attend = function (layer, x, n, gate) {
    var d = this.d;
    var attended = base.attention(this.linear(layer.query, x, n), this.linear(layer.key, x, n),
      this.linear(layer.value, x, n), n, n, d, this.heads, function (i) { return i; });
    var width = d / this.heads;
    for (var h = 0; h < this.heads; h++) {
      if (gate[h] === 0) {
        for (var t = 0; t < n; t++) {
          attended.out.fill(0, t * d + h * width, t * d + (h + 1) * width);
        }
      }
    }
    return { out: this.linear(layer.output, attended.out, n), weights: attended.weights };
  };

  function addInPlace(x, y) {
    for (var i = 0; i < x.length; i++) {
      x[i] += y[i];
    }
    return x;
  }

  LanguageModel.prototype.feedForward = function (layer, x, n) {
    var hidden = this.linear(layer.up, x, n);
    for (var i = 0; i < hidden.length; i++) {
      hidden[i] = Math.max(hidden[i], 0);
    }
    return this.linear(layer.down, hidden, n);
  };

  // The [layer, head] pairs of `off` (0-based) -> one gate per layer, 1 on and 0 off.
  LanguageModel.prototype.gates = function (off) {
    var heads = this.heads;
    var gates = this.layers.map(function () { return new Array(heads).fill(1); });
    (off || []).forEach(function (pair) {
      var l = pair[0];
      var h = pair[1];
      if (!(Number.isInteger(l) && l >= 0 && l < gates.length)) {
        throw new Error("layer " + l + " is outside 0.." + (gates.length - 1));
      }
      if (!(Number.isInteger(h) && h >= 0 && h < heads)) {
        throw new Error("head " + h + " is outside 0.." + (heads - 1));
      }
      gates[l][h] = 0;
    });
    return gates;
  };

  // Ids (n,), the first BOS, and the heads switched off ([[layer, head], ...], 0-based) ->
  // {logits (n, vocab), weights[layer][head] (n, n), predicted (n,): the likeliest next token
  // at each position, the first of equal largest logits as torch.argmax}.
  LanguageModel.prototype.run = function (ids, off) {
    var n = ids.length;
    if (n === 0 || n > this.config.max_len) {
      throw inputError("a sequence holds 1 to " + this.config.max_len + " tokens, got " + n);
    }
    ids.forEach(function (id, t) {
      if (!(Number.isInteger(id) && id >= 0 && id < this.vocab)) {
        throw inputError("token " + id + " at position " + t + " is outside the vocabulary 0.." +
                         (this.vocab - 1));
      }
    }, this);
    var gates = this.gates(off);
    var d = this.d;
    var self = this;
    var x = this.embed(ids);
    var weights = [];
    this.layers.forEach(function (layer, l) {
      var attended;
      if (self.config.norm_first) {
        attended = self.attend(layer, base.layerNorm(x, n, d, layer.norm1), n, gates[l]);
        x = addInPlace(new Float32Array(x), attended.out);
        if (layer.up) {
          x = addInPlace(x, self.feedForward(layer, base.layerNorm(x, n, d, layer.norm2), n));
        }
      } else {
        attended = self.attend(layer, x, n, gates[l]);
        x = base.layerNorm(addInPlace(attended.out, x), n, d, layer.norm1);
        if (layer.up) {
          x = base.layerNorm(addInPlace(self.feedForward(layer, x, n), x), n, d, layer.norm2);
        }
      }
      weights.push(attended.weights);
    });
    if (this.finalNorm) {
      x = base.layerNorm(x, n, d, this.finalNorm);
    }
    var logits = this.linear(this.output, x, n);
    var predicted = [];
    for (var t = 0; t < n; t++) {
      var best = 0;
      for (var v = 1; v < this.vocab; v++) {
        if (logits[t * this.vocab + v] > logits[t * this.vocab + best]) {
          best = v;
        }
      }
      predicted.push(best);
    }
    return { logits: logits, weights: weights, predicted: predicted };
  };

  // The probabilities of the next token after position t of a run: (vocab,), float64.
  LanguageModel.prototype.probabilities = function (result, t) {
    return base.softmax(result.logits.subarray(t * this.vocab, (t + 1) * this.vocab));
  };

  // "5 17 3" (tokens separated by spaces or commas) -> ids (the BOS not included). Each must be
  // a whole number from 1 to vocab - 1 (0 is the BOS, which only starts a sequence), at most
  // maxTokens of them; anything else is an error named INPUT_ERROR.
  function parseTokens(text, vocab, maxTokens) {
    if (typeof text !== "string") {
      throw new TypeError("text must be a string, got " + typeof text);
    }
    var parts = text.split(/[\s,]+/).filter(function (part) { return part !== ""; });
    if (parts.length === 0) {
      throw inputError("type some tokens: numbers from 1 to " + (vocab - 1) + ", spaced");
    }
    if (parts.length > maxTokens) {
      throw inputError(parts.length + " tokens, but the model has room for " + maxTokens +
                       " after the start token: remove " + (parts.length - maxTokens));
    }
    return parts.map(function (part) {
      var id = /^\d+$/.test(part) ? parseInt(part, 10) : NaN;
      if (!(id >= 1 && id < vocab)) {
        throw inputError("\"" + part + "\" is not a token: tokens are whole numbers from 1 to " +
                         (vocab - 1) + " (0 is the start token)");
      }
      return id;
    });
  }

  var api = {
    LanguageModel: LanguageModel,
    parseTokens: parseTokens,
    decodeWeights: base.decodeWeights,
    INPUT_ERROR: INPUT_ERROR,
  };
  if (inNode) {
    module.exports = api;
  } else {
    root.attnlibInductionLM = Object.assign(root.attnlibInductionLM || {}, api);
  }
})(typeof self !== "undefined" ? self : this);
