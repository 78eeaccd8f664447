/* attnlib live: the GRU translators of chapters 03-05, run in the browser (and in node).
 *
 * A port of attnlib/seq2seq.py's forward pass, for one source string at a time: the character
 * vocabulary's encode and decode (attnlib.data.text.CharVocab), the embedding and the
 * (bidirectional) GRU encoder with its bridge, the three decoders (PlainDecoder without
 * attention, BahdanauDecoder, LuongDecoder with the dot, general or additive score, input
 * feeding on or off) and Seq2Seq.greedy_decode, which it returns step by step: the token, the
 * probabilities of every target symbol and the attention row of each step.
 * attnlib/live/translator.py ships a model as a spec: {kind, input_feeding, tensors: [[name,
 * shape], ...] in state_dict order and names, weights: base64 of their float32 values,
 * little-endian, one after the other}. tests/test_live_translator.py runs this file in node and
 * checks it token for token, and every probability and weight, against PyTorch.
 * Arithmetic is float64 on the float32 weights. Plain ES2017, no dependencies: in a browser it
 * adds window.attnlibLive.seq2seq, in node it is module.exports.
 */
(function (root) {
  "use strict";

  var KINDS = ["none", "bahdanau", "luong-dot", "luong-general", "luong-additive"];

  // --- weights ---------------------------------------------------------------------------

  function base64Bytes(text) {
    if (typeof atob === "function") {
      var binary = atob(text);
      var bytes = new Uint8Array(binary.length);
      for (var i = 0; i < binary.length; i++) {
        bytes[i] = binary.charCodeAt(i);
      }
      return bytes;
    }
    /* global Buffer */
    return new Uint8Array(Buffer.from(text, "base64"));
  }

  var LITTLE_ENDIAN = new Uint8Array(new Uint16Array([1]).buffer)[0] === 1;

  // float32 little-endian bytes -> Float32Array (a copy, aligned).
  function float32s(bytes, offset, count) {
    if (LITTLE_ENDIAN) {
      return new Float32Array(bytes.buffer.slice(bytes.byteOffset + offset,
        bytes.byteOffset + offset + 4 * count));
    }
    var view = new DataView(bytes.buffer, bytes.byteOffset + offset, 4 * count);
    var out = new Float32Array(count);
    for (var i = 0; i < count; i++) {
      out[i] = view.getFloat32(4 * i, true);
    }
    return out;
  }

  function product(shape) {
    return shape.reduce(function (a, b) {
      return a * b;
    }, 1);
  }

  function shapeText(shape) {
    return "(" + shape.join(", ") + ")";
  }

  // The tensors of a spec by name: {name: {shape, data}}; errors say what does not fit.
  function readTensors(spec) {
    if (!spec || !Array.isArray(spec.tensors) || typeof spec.weights !== "string") {
      throw new Error("a model needs a list of tensors and their weights in base64");
    }
    var bytes = base64Bytes(spec.weights);
    var needed = 4 * spec.tensors.reduce(function (sum, entry) {
      return sum + product(entry[1]);
    }, 0);
    if (bytes.length !== needed) {
      throw new Error("the weights hold " + bytes.length + " bytes, the tensors need " + needed);
    }
    var tensors = {};
    var offset = 0;
    spec.tensors.forEach(function (entry) {
      var count = product(entry[1]);
      tensors[entry[0]] = { shape: entry[1].slice(), data: float32s(bytes, offset, count) };
      offset += 4 * count;
    });
    return tensors;
  }

  // --- the model: sizes read off the tensors, checked -------------------------------------

  function loadModel(spec) {
    if (!spec || KINDS.indexOf(spec.kind) < 0) {
      throw new Error("unknown model kind " + JSON.stringify(spec && spec.kind) +
        "; expected one of " + KINDS.join(", "));
    }
    var t = readTensors(spec);
    function get(name, shape) {
      var tensor = t[name];
      if (!tensor) {
        throw new Error("the " + spec.kind + " model lacks the tensor " + name);
      }
      if (shape && shapeText(tensor.shape) !== shapeText(shape)) {
        throw new Error(name + " has shape " + shapeText(tensor.shape) + ", expected " +
          shapeText(shape));
      }
      return tensor.data;
    }
    var embedding = t["encoder.embedding.weight"];
    var hh = t["encoder.gru.weight_hh_l0"];
    var bridgeWeight = t["encoder.bridge.weight"];
    var targetEmbedding = t["decoder.embedding.weight"];
    if (!embedding || !hh || !bridgeWeight || !targetEmbedding) {
      throw new Error("the " + spec.kind + " model lacks its encoder or decoder embedding");
    }
    var sourceSize = embedding.shape[0];
    var embed = embedding.shape[1];
    var per = hh.shape[1];
    var bidirectional = "encoder.gru.weight_hh_l0_reverse" in t;
    var hidden = bridgeWeight.shape[0];
    var targetSize = targetEmbedding.shape[0];
    var targetEmbed = targetEmbedding.shape[1];
    if (hidden !== (bidirectional ? 2 : 1) * per) {
      throw new Error("the bridge is " + hidden + " wide, the GRU's directions give " +
        (bidirectional ? 2 : 1) * per);
    }
    function gru(suffix, input, size) {
      return {
        input: input, size: size,
        wi: get("encoder.gru.weight_ih_l0" + suffix, [3 * size, input]),
        wh: get("encoder.gru.weight_hh_l0" + suffix, [3 * size, size]),
        bi: get("encoder.gru.bias_ih_l0" + suffix, [3 * size]),
        bh: get("encoder.gru.bias_hh_l0" + suffix, [3 * size]),
      };
    }
    var model = {
      kind: spec.kind,
      sourceSize: sourceSize, targetSize: targetSize, hidden: hidden,
      encoder: {
        embedding: get("encoder.embedding.weight", [sourceSize, embed]),
        embed: embed,
        forward: gru("", embed, per),
        backward: bidirectional ? gru("_reverse", embed, per) : null,
        bridgeWeight: get("encoder.bridge.weight", [hidden, hidden]),
        bridgeBias: get("encoder.bridge.bias", [hidden]),
      },
      embedding: get("decoder.embedding.weight", [targetSize, targetEmbed]),
      embed: targetEmbed,
    };
    var attention = spec.kind !== "none";
    var luong = spec.kind.indexOf("luong-") === 0;
    model.inputFeeding = luong ? spec.input_feeding !== false : false;
    var cellInput = targetEmbed + (luong ? (model.inputFeeding ? hidden : 0) : hidden);
    model.cell = {
      input: cellInput, size: hidden,
      wi: get("decoder.cell.weight_ih", [3 * hidden, cellInput]),
      wh: get("decoder.cell.weight_hh", [3 * hidden, hidden]),
      bi: get("decoder.cell.bias_ih", [3 * hidden]),
      bh: get("decoder.cell.bias_hh", [3 * hidden]),
    };
    var features = luong ? hidden : 2 * hidden + targetEmbed;
    model.features = features;
    model.outputWeight = get("decoder.output.weight", [targetSize, features]);
    model.outputBias = get("decoder.output.bias", [targetSize]);
    if (luong) {
      model.combine = get("decoder.combine.weight", [hidden, 2 * hidden]);
    }
    model.score = attention ? spec.kind === "bahdanau" ? "additive" : spec.kind.slice(6) : null;
    if (model.score === "general") {
      model.keyWeight = get("decoder.score.key_projection.weight", [hidden, hidden]);
    } else if (model.score === "additive") {
      var projection = t["decoder.score.query_projection.weight"];
      var size = projection ? projection.shape[0] : 0;
      model.attention = size;
      model.queryWeight = get("decoder.score.query_projection.weight", [size, hidden]);
      model.keyWeight = get("decoder.score.key_projection.weight", [size, hidden]);
      model.keyBias = get("decoder.score.key_projection.bias", [size]);
      model.vector = get("decoder.score.vector.weight", [1, size]);
    }
    ["sos_id", "eos_id", "pad_id"].forEach(function (name) {
      var id = spec[name];
      if (!(Number.isInteger(id) && id >= 0 && id < targetSize)) {
        throw new Error(name + " must be a target id (0 to " + (targetSize - 1) + "), got " + id);
      }
    });
    model.sos = spec.sos_id;
    model.eos = spec.eos_id;
    model.pad = spec.pad_id;
    return model;
  }

  // --- arithmetic ------------------------------------------------------------------------

  // out[o] = bias[o] + sum_i W[o, i] x[i], W (rows, cols) row-major; offset picks a block of rows.
  function affine(weight, bias, x, rows, cols, rowOffset) {
    var out = new Float64Array(rows);
    var start = (rowOffset || 0) * cols;
    for (var o = 0; o < rows; o++) {
      var sum = 0;
      var base = start + o * cols;
      for (var i = 0; i < cols; i++) {
        sum += weight[base + i] * x[i];
      }
      out[o] = bias ? sum + bias[(rowOffset || 0) + o] : sum;
    }
    return out;
  }

  function sigmoid(x) {
    return 1 / (1 + Math.exp(-x));
  }

  function concat(parts) {
    var length = parts.reduce(function (sum, p) {
      return sum + p.length;
    }, 0);
    var out = new Float64Array(length);
    var at = 0;
    parts.forEach(function (p) {
      out.set(p, at);
      at += p.length;
    });
    return out;
  }

  function row(matrix, index, width) {
    return Float64Array.from(matrix.subarray(index * width, (index + 1) * width));
  }

  // PyTorch's GRU cell: r, z, n in that order, b_hn inside r * (...).
  //   r = σ(W_ir x + b_ir + W_hr h + b_hr), z = σ(W_iz x + b_iz + W_hz h + b_hz),
  //   n = tanh(W_in x + b_in + r ⊙ (W_hn h + b_hn)), h' = (1 − z) ⊙ n + z ⊙ h
  function gruCell(cell, x, h) {
    var size = cell.size;
    var gx = affine(cell.wi, cell.bi, x, 3 * size, cell.input);
    var gh = affine(cell.wh, cell.bh, h, 3 * size, size);
    var out = new Float64Array(size);
    for (var k = 0; k < size; k++) {
      var r = sigmoid(gx[k] + gh[k]);
      var z = sigmoid(gx[size + k] + gh[size + k]);
      var n = Math.tanh(gx[2 * size + k] + r * gh[2 * size + k]);
      out[k] = (1 - z) * n + z * h[k];
    }
    return out;
  }

  // Softmax of a row, in float64, the largest subtracted first.
  function softmax(values) {
    var largest = -Infinity;
    for (var i = 0; i < values.length; i++) {
      largest = Math.max(largest, values[i]);
    }
    var out = new Float64Array(values.length);
    var total = 0;
    for (var j = 0; j < values.length; j++) {
      out[j] = Math.exp(values[j] - largest);
      total += out[j];
    }
    for (var k = 0; k < values.length; k++) {
      out[k] /= total;
    }
    return out;
  }

  // The first index of the largest value, as torch.argmax.
  function argmax(values) {
    var best = 0;
    for (var i = 1; i < values.length; i++) {
      if (values[i] > values[best]) {
        best = i;
      }
    }
    return best;
  }

  // --- the encoder -----------------------------------------------------------------------

  // ids -> {outputs: [T] rows of the hidden width ([forward; backward]), summary: s_0}.
  function encode(model, ids) {
    var enc = model.encoder;
    var steps = ids.length;
    var embedded = ids.map(function (id) {
      return row(enc.embedding, id, enc.embed);
    });
    function run(cell, order) {
      var h = new Float64Array(cell.size);
      var states = new Array(steps);
      order.forEach(function (t) {
        h = gruCell(cell, embedded[t], h);
        states[t] = h;
      });
      return { states: states, last: h };
    }
    var forwardOrder = ids.map(function (_, t) {
      return t;
    });
    var forward = run(enc.forward, forwardOrder);
    var backward = enc.backward ? run(enc.backward, forwardOrder.slice().reverse()) : null;
    var outputs = forward.states.map(function (state, t) {
      return backward ? concat([state, backward.states[t]]) : state;
    });
    var last = backward ? concat([forward.last, backward.last]) : forward.last;
    var summary = affine(enc.bridgeWeight, enc.bridgeBias, last, model.hidden, model.hidden);
    for (var k = 0; k < summary.length; k++) {
      summary[k] = Math.tanh(summary[k]);
    }
    return { outputs: outputs, summary: summary };
  }

  // What every step reads of the source: Decoder.remember, the score's prepare_keys.
  function remember(model, outputs) {
    if (model.score === "general") {
      return outputs.map(function (h) {
        return affine(model.keyWeight, null, h, model.hidden, model.hidden);
      });
    }
    if (model.score === "additive") {
      return outputs.map(function (h) {
        return affine(model.keyWeight, model.keyBias, h, model.attention, model.hidden);
      });
    }
    return outputs;
  }

  // Scores of one query against every prepared key, then weights and the context.
  function attend(model, query, keys, values) {
    var scores = new Float64Array(keys.length);
    if (model.score === "additive") {
      var projected = affine(model.queryWeight, null, query, model.attention, model.hidden);
      keys.forEach(function (key, j) {
        var sum = 0;
        for (var a = 0; a < model.attention; a++) {
          sum += model.vector[a] * Math.tanh(projected[a] + key[a]);
        }
        scores[j] = sum;
      });
    } else {
      keys.forEach(function (key, j) {
        var sum = 0;
        for (var d = 0; d < query.length; d++) {
          sum += query[d] * key[d];
        }
        scores[j] = sum;
      });
    }
    var weights = softmax(scores);
    var context = new Float64Array(model.hidden);
    values.forEach(function (value, j) {
      for (var d = 0; d < value.length; d++) {
        context[d] += weights[j] * value[d];
      }
    });
    return { context: context, weights: weights, scores: scores };
  }

  // One decoder step from the embedded previous symbol: features, state, weights (or null).
  function advance(model, embedded, state, memory) {
    if (model.kind === "none") {
      var plainHidden = gruCell(model.cell, concat([embedded, state.context]), state.hidden);
      return {
        features: concat([plainHidden, state.context, embedded]),
        state: { hidden: plainHidden, context: state.context },
        weights: null,
      };
    }
    if (model.kind === "bahdanau") {
      var looked = attend(model, state.hidden, memory.keys, memory.values);
      var hidden = gruCell(model.cell, concat([embedded, looked.context]), state.hidden);
      return {
        features: concat([hidden, looked.context, embedded]),
        state: { hidden: hidden },
        weights: looked.weights,
      };
    }
    var input = model.inputFeeding ? concat([embedded, state.attentional]) : embedded;
    var current = gruCell(model.cell, input, state.hidden);
    var read = attend(model, current, memory.keys, memory.values);
    var attentional = affine(model.combine, null, concat([read.context, current]),
      model.hidden, 2 * model.hidden);
    for (var k = 0; k < attentional.length; k++) {
      attentional[k] = Math.tanh(attentional[k]);
    }
    return {
      features: attentional,
      state: { hidden: current, attentional: attentional },
      weights: read.weights,
    };
  }

  // Seq2Seq.greedy_decode for one source: the likeliest symbol fed back until the end symbol
  // (included) or maxSteps. Each step: {token, probabilities, weights (or null)}.
  function greedyDecode(model, ids, maxSteps) {
    maxSteps = maxSteps === undefined || maxSteps === null ? 20 : maxSteps;
    if (!Number.isInteger(maxSteps) || maxSteps < 1) {
      throw new Error("maxSteps must be a positive integer, got " + maxSteps);
    }
    if (!Array.isArray(ids) || ids.length === 0) {
      throw new Error("the encoder needs at least one source id");
    }
    ids.forEach(function (id) {
      if (!(Number.isInteger(id) && id >= 0 && id < model.sourceSize)) {
        throw new Error("source id " + id + " is outside the encoder's vocabulary of " +
          model.sourceSize + " symbols");
      }
    });
    var encoded = encode(model, ids);
    var memory = { values: encoded.outputs, keys: remember(model, encoded.outputs) };
    var state = model.kind === "none" ? { hidden: encoded.summary, context: encoded.summary }
      : model.kind === "bahdanau" ? { hidden: encoded.summary }
        : { hidden: encoded.summary, attentional: new Float64Array(model.hidden) };
    var token = model.sos;
    var steps = [];
    for (var t = 0; t < maxSteps; t++) {
      var stepped = advance(model, row(model.embedding, token, model.embed), state, memory);
      state = stepped.state;
      var logits = affine(model.outputWeight, model.outputBias, stepped.features,
        model.targetSize, model.features);
      token = argmax(logits);
      steps.push({ token: token, probabilities: softmax(logits), weights: stepped.weights });
      if (token === model.eos) {
        break;
      }
    }
    return steps;
  }

  // --- vocabularies ----------------------------------------------------------------------

  // {itos, pad_id, sos_id, eos_id, unk_id} -> a vocabulary with stoi; checked.
  function readVocab(data, what) {
    if (!data || !Array.isArray(data.itos) || !data.itos.length) {
      throw new Error("the " + what + " vocabulary needs its list of symbols");
    }
    var stoi = new Map();
    data.itos.forEach(function (symbol, i) {
      if (typeof symbol !== "string" || stoi.has(symbol)) {
        throw new Error("the " + what + " vocabulary repeats or lacks symbol " + i);
      }
      stoi.set(symbol, i);
    });
    var vocab = { itos: data.itos.slice(), stoi: stoi };
    ["pad_id", "sos_id", "eos_id", "unk_id"].forEach(function (name) {
      var id = data[name];
      if (!(Number.isInteger(id) && id >= 0 && id < data.itos.length)) {
        throw new Error("the " + what + " vocabulary's " + name + " is not one of its ids");
      }
      vocab[name] = id;
    });
    return vocab;
  }

  // CharVocab.encode: one id per character (code point, as Python iterates a str); unknown
  // characters map to <unk>. Returns {ids, characters, unknown: distinct unknown characters}.
  function tokenize(text, vocab) {
    var characters = Array.from(text);
    var unknown = [];
    var ids = characters.map(function (c) {
      if (vocab.stoi.has(c)) {
        return vocab.stoi.get(c);
      }
      if (unknown.indexOf(c) < 0) {
        unknown.push(c);
      }
      return vocab.unk_id;
    });
    return { ids: ids, characters: characters, unknown: unknown };
  }

  // CharVocab.decode: skip <pad> and <s>, stop at </s>.
  function decode(ids, vocab) {
    var out = "";
    for (var i = 0; i < ids.length; i++) {
      var id = ids[i];
      if (id === vocab.eos_id) {
        break;
      }
      if (id === vocab.pad_id || id === vocab.sos_id) {
        continue;
      }
      out += id >= 0 && id < vocab.itos.length ? vocab.itos[id] : "<unk>";
    }
    return out;
  }

  // attnlib.tasks.dates.translate: the translation of one string and every step of it.
  function translate(model, text, sourceVocab, targetVocab, maxSteps) {
    if (typeof text !== "string" || !text.length) {
      throw new Error("translate needs a non-empty text");
    }
    var read = tokenize(text, sourceVocab);
    var steps = greedyDecode(model, read.ids, maxSteps);
    var tokens = steps.map(function (step) {
      return step.token;
    });
    return {
      characters: read.characters,
      ids: read.ids,
      unknown: read.unknown,
      steps: steps,
      tokens: tokens,
      text: decode(tokens, targetVocab),
    };
  }

  // attnlib.tasks.copy.copy_marks: for each position of the longer string, whether the output
  // differs there from what it should copy (a wrong, a missing or an extra character).
  function copyMarks(output, expected) {
    var out = Array.from(output);
    var want = Array.from(expected);
    var marks = [];
    for (var i = 0; i < Math.max(out.length, want.length); i++) {
      marks.push(!(i < out.length && i < want.length && out[i] === want[i]));
    }
    return marks;
  }

  var api = {
    KINDS: KINDS,
    base64Bytes: base64Bytes,
    readTensors: readTensors,
    loadModel: loadModel,
    gruCell: gruCell,
    softmax: softmax,
    encode: encode,
    greedyDecode: greedyDecode,
    readVocab: readVocab,
    tokenize: tokenize,
    decode: decode,
    translate: translate,
    copyMarks: copyMarks,
  };

  if (typeof module === "object" && module && module.exports) {
    module.exports = api;
  } else {
    root.attnlibLive = Object.assign(root.attnlibLive || {}, { seq2seq: api });
  }
})(typeof self !== "undefined" ? self : this);
