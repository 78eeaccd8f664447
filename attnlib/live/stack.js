/* attnlib live: chapter 10's arithmetic, the residual stream through a stack and the two norms.
 *
 * A port of the chapter-10 section of attnlib.reference: hashUniform (a counter-based generator,
 * so the page draws the same Xavier weights as the oracle without being sent them), layerNorm,
 * batchNorm (training-mode statistics), normStatistics, and stackProfile, one forward and one
 * backward pass through a fresh stack of post-LN or pre-LN blocks (self-attention with heads,
 * a ReLU feed-forward network, LayerNorms of gain 1; zero biases; a final LayerNorm for pre-LN),
 * measured per block. tests/test_live_stack.py runs it in node against the oracle, which is
 * itself checked against attnlib's EncoderLayer and torch's norms. In node this file is
 * module.exports; in a browser it adds window.attnlibLive.stack, used by stack_explorer.js.
 */
(function (root) {
  "use strict";

  var inNode = typeof module === "object" && module && module.exports;
  var EPS = 1e-5;  // torch's LayerNorm and BatchNorm1d default
  var WIDTH = 32;
  var HEADS = 4;
  var FF = 128;
  var SEQ = 16;
  var MATRICES = ["W_Q", "W_K", "W_V", "W_O", "W_1", "W_2"];
  var QUANTITIES = ["stream std", "stream gradient", "cosine", "all"].concat(MATRICES);

  // --- numbers from (seed, stream, index): lowbias32, as reference.hash_uniform ---

  function mix32(x) {
    x = x >>> 0;
    x ^= x >>> 16;
    x = Math.imul(x, 0x7feb352d);
    x ^= x >>> 15;
    x = Math.imul(x, 0x846ca68b);
    x ^= x >>> 16;
    return x >>> 0;
  }

  function hashUniform(seed, stream, count) {
    var key = mix32(mix32(seed) ^ stream);
    var out = new Array(count);
    for (var i = 0; i < count; i++) {
      out[i] = (mix32(key ^ mix32(i)) + 0.5) / 4294967296;
    }
    return out;
  }

  // [0, 1, ..., n - 1]
  function indices(n) {
    var out = [];
    for (var i = 0; i < n; i++) {
      out.push(i);
    }
    return out;
  }

  // (rows, columns) from a flat list, row by row.
  function reshape(flat, rows, columns, scale) {
    var out = [];
    for (var r = 0; r < rows; r++) {
      var row = new Array(columns);
      for (var c = 0; c < columns; c++) {
        row[c] = (2 * flat[r * columns + c] - 1) * scale;
      }
      out.push(row);
    }
    return out;
  }

  function xavierMatrix(seed, stream, fanIn, fanOut) {
    var bound = Math.sqrt(6 / (fanIn + fanOut));
    return reshape(hashUniform(seed, stream, fanIn * fanOut), fanIn, fanOut, bound);
  }

  // Block l's six matrices (in, out), streams 8 l + k: they do not depend on the depth.
  function stackWeights(seed, layers) {
    var shapes = { W_Q: [WIDTH, WIDTH], W_K: [WIDTH, WIDTH], W_V: [WIDTH, WIDTH],
      W_O: [WIDTH, WIDTH], W_1: [WIDTH, FF], W_2: [FF, WIDTH] };
    return indices(layers).map(function (l) {
      var block = {};
      MATRICES.forEach(function (name, k) {
        block[name] = xavierMatrix(seed, 8 * l + k, shapes[name][0], shapes[name][1]);
      });
      return block;
    });
  }

  function stackInput(seed, std) {
    return reshape(hashUniform(seed, 1000001, SEQ * WIDTH), SEQ, WIDTH, Math.sqrt(3) * std);
  }

  function stackReadout(seed) {
    return reshape(hashUniform(seed, 1000002, SEQ * WIDTH), SEQ, WIDTH, Math.sqrt(3) / SEQ);
  }

  // --- small matrix helpers (arrays of rows) ---

  function zeros(rows, columns) {
    var out = [];
    for (var r = 0; r < rows; r++) {
      out.push(new Array(columns).fill(0));
    }
    return out;
  }

  function matmul(a, b) {
    var n = a.length;
    var k = b.length;
    var m = b[0].length;
    var out = zeros(n, m);
    for (var i = 0; i < n; i++) {
      var row = out[i];
      for (var p = 0; p < k; p++) {
        var x = a[i][p];
        var bp = b[p];
        for (var j = 0; j < m; j++) {
          row[j] += x * bp[j];
        }
      }
    }
    return out;
  }

  function transpose(a) {
    var out = zeros(a[0].length, a.length);
    for (var i = 0; i < a.length; i++) {
      for (var j = 0; j < a[0].length; j++) {
        out[j][i] = a[i][j];
      }
    }
    return out;
  }

  function add(a, b) {
    return a.map(function (row, i) {
      return row.map(function (x, j) {
        return x + b[i][j];
      });
    });
  }

  function sumSquares(a) {
    var total = 0;
    a.forEach(function (row) {
      row.forEach(function (x) {
        total += x * x;
      });
    });
    return total;
  }

  function columnSums(a) {
    var out = new Array(a[0].length).fill(0);
    a.forEach(function (row) {
      row.forEach(function (x, j) {
        out[j] += x;
      });
    });
    return [out];
  }

  // Columns h dh .. (h + 1) dh of a (seq, d) matrix: head h.
  function head(a, h, dh) {
    return a.map(function (row) {
      return row.slice(h * dh, (h + 1) * dh);
    });
  }

  function mean(values) {
    var total = 0;
    values.forEach(function (x) {
      total += x;
    });
    return total / values.length;
  }

  // --- the norms ---

  function checkBatch(x) {
    if (!Array.isArray(x) || x.length === 0 || !Array.isArray(x[0]) || x[0].length === 0) {
      throw new Error("the batch must have at least one example and one feature");
    }
    x.forEach(function (row, i) {
      if (row.length !== x[0].length) {
        throw new Error("example " + (i + 1) + " has " + row.length + " features, example 1 has " +
          x[0].length);
      }
      row.forEach(function (value) {
        if (typeof value !== "number" || !isFinite(value)) {
          throw new Error("example " + (i + 1) + " holds a value that is not a finite number");
        }
      });
    });
  }

  // Each row to mean 0 and biased variance 1: torch.nn.LayerNorm(d), gain 1, bias 0.
  function layerNorm(x, eps) {
    eps = eps === undefined ? EPS : eps;
    checkBatch(x);
    return x.map(function (row) {
      var mu = mean(row);
      var centred = row.map(function (v) {
        return v - mu;
      });
      var variance = mean(centred.map(function (v) {
        return v * v;
      }));
      var scale = Math.sqrt(variance + eps);
      return centred.map(function (v) {
        return v / scale;
      });
    });
  }

  // Each column over the batch, training-mode statistics: torch.nn.BatchNorm1d(features).
  function batchNorm(x, eps) {
    checkBatch(x);
    return transpose(layerNorm(transpose(x), eps));
  }

  // Means and biased standard deviations per row (axis 1) or per column (axis 0).
  function normStatistics(x, axis) {
    checkBatch(x);
    var lines = axis === 0 ? transpose(x) : x;
    var means = lines.map(mean);
    var stds = lines.map(function (line, i) {
      return Math.sqrt(mean(line.map(function (v) {
        return (v - means[i]) * (v - means[i]);
      })));
    });
    return { mean: means, std: stds };
  }

  // --- the stack: forward and backward, as reference._block_forward / _block_backward ---

  function layerNormBackward(grad, x) {
    var dx = [];
    var gain = new Array(x[0].length).fill(0);
    var bias = new Array(x[0].length).fill(0);
    x.forEach(function (row, t) {
      var mu = mean(row);
      var centred = row.map(function (v) {
        return v - mu;
      });
      var inverse = 1 / Math.sqrt(mean(centred.map(function (v) {
        return v * v;
      })) + EPS);
      var normed = centred.map(function (v) {
        return v * inverse;
      });
      var g = grad[t];
      var gMean = mean(g);
      var gNormed = mean(g.map(function (v, j) {
        return v * normed[j];
      }));
      dx.push(g.map(function (v, j) {
        return inverse * (v - gMean - normed[j] * gNormed);
      }));
      g.forEach(function (v, j) {
        gain[j] += v * normed[j];
        bias[j] += v;
      });
    });
    return { dx: dx, gain: [gain], bias: [bias] };
  }

  function softmaxRow(row) {
    var top = Math.max.apply(null, row);
    var e = row.map(function (v) {
      return Math.exp(v - top);
    });
    var total = 0;
    e.forEach(function (v) {
      total += v;
    });
    return e.map(function (v) {
      return v / total;
    });
  }

  function attention(x, w) {
    var q = matmul(x, w.W_Q);
    var k = matmul(x, w.W_K);
    var v = matmul(x, w.W_V);
    var dh = WIDTH / HEADS;
    var mixed = zeros(x.length, WIDTH);
    var p = indices(HEADS).map(function (h) {
      var scores = matmul(head(q, h, dh), transpose(head(k, h, dh)));
      var weights = scores.map(function (row) {
        return softmaxRow(row.map(function (s) {
          return s / Math.sqrt(dh);
        }));
      });
      matmul(weights, head(v, h, dh)).forEach(function (row, t) {
        row.forEach(function (value, j) {
          mixed[t][h * dh + j] = value;
        });
      });
      return weights;
    });
    return { out: matmul(mixed, w.W_O), cache: { x: x, q: q, k: k, v: v, p: p, mixed: mixed } };
  }

  function attentionBackward(grad, w, cache) {
    var dh = WIDTH / HEADS;
    var grads = { W_O: matmul(transpose(cache.mixed), grad), b_O: columnSums(grad) };
    var dMixed = matmul(grad, transpose(w.W_O));
    var seq = grad.length;
    var dq = zeros(seq, WIDTH);
    var dk = zeros(seq, WIDTH);
    var dv = zeros(seq, WIDTH);
    indices(HEADS).forEach(function (h) {
      var p = cache.p[h];
      var dOut = head(dMixed, h, dh);
      var dP = matmul(dOut, transpose(head(cache.v, h, dh)));
      var dScores = p.map(function (row, i) {
        var inner = 0;
        row.forEach(function (value, j) {
          inner += dP[i][j] * value;
        });
        return row.map(function (value, j) {
          return value * (dP[i][j] - inner) / Math.sqrt(dh);
        });
      });
      var parts = [
        [dq, matmul(dScores, head(cache.k, h, dh))],
        [dk, matmul(transpose(dScores), head(cache.q, h, dh))],
        [dv, matmul(transpose(p), dOut)],
      ];
      parts.forEach(function (pair) {
        pair[1].forEach(function (row, t) {
          row.forEach(function (value, j) {
            pair[0][t][h * dh + j] = value;
          });
        });
      });
    });
    var dx = zeros(seq, WIDTH);
    [["Q", dq], ["K", dk], ["V", dv]].forEach(function (pair) {
      grads["W_" + pair[0]] = matmul(transpose(cache.x), pair[1]);
      grads["b_" + pair[0]] = columnSums(pair[1]);
      dx = add(dx, matmul(pair[1], transpose(w["W_" + pair[0]])));
    });
    return { dx: dx, grads: grads };
  }

  function feedForward(x, w) {
    var z = matmul(x, w.W_1);
    var hidden = z.map(function (row) {
      return row.map(function (v) {
        return Math.max(v, 0);
      });
    });
    return { out: matmul(hidden, w.W_2), cache: { x: x, z: z, hidden: hidden } };
  }

  function feedForwardBackward(grad, w, cache) {
    var dHidden = matmul(grad, transpose(w.W_2));
    var dz = dHidden.map(function (row, t) {
      return row.map(function (v, j) {
        return cache.z[t][j] > 0 ? v : 0;
      });
    });
    var grads = { W_2: matmul(transpose(cache.hidden), grad), b_2: columnSums(grad),
      W_1: matmul(transpose(cache.x), dz), b_1: columnSums(dz) };
    return { dx: matmul(dz, transpose(w.W_1)), grads: grads };
  }

  // One block: post-LN LN(x + f(x)), pre-LN x + f(LN(x)).
  function blockForward(x, w, normFirst) {
    var attended;
    var fed;
    if (normFirst) {
      attended = attention(layerNorm(x), w);
      var h = add(x, attended.out);
      fed = feedForward(layerNorm(h), w);
      return { out: add(h, fed.out), cache: { x: x, h: h, attention: attended.cache,
        feed: fed.cache } };
    }
    attended = attention(x, w);
    var s1 = add(x, attended.out);
    var normed = layerNorm(s1);
    fed = feedForward(normed, w);
    var s2 = add(normed, fed.out);
    return { out: layerNorm(s2), cache: { s1: s1, s2: s2, attention: attended.cache,
      feed: fed.cache } };
  }

  function blockBackward(grad, w, cache, normFirst) {
    var feed;
    var att;
    var ln1;
    var ln2;
    var dx;
    if (normFirst) {
      feed = feedForwardBackward(grad, w, cache.feed);
      ln2 = layerNormBackward(feed.dx, cache.h);
      var dh = add(grad, ln2.dx);
      att = attentionBackward(dh, w, cache.attention);
      ln1 = layerNormBackward(att.dx, cache.x);
      dx = add(dh, ln1.dx);
    } else {
      ln2 = layerNormBackward(grad, cache.s2);
      feed = feedForwardBackward(ln2.dx, w, cache.feed);
      var dNormed = add(ln2.dx, feed.dx);
      ln1 = layerNormBackward(dNormed, cache.s1);
      att = attentionBackward(ln1.dx, w, cache.attention);
      dx = add(ln1.dx, att.dx);
    }
    var grads = Object.assign({}, feed.grads, att.grads, { g_1: ln1.gain, c_1: ln1.bias,
      g_2: ln2.gain, c_2: ln2.bias });
    return { dx: dx, grads: grads };
  }

  function meanCosine(h) {
    var units = h.map(function (row) {
      var length = Math.sqrt(sumSquares([row]));
      return row.map(function (v) {
        return v / length;
      });
    });
    var total = 0;
    matmul(units, transpose(units)).forEach(function (row) {
      row.forEach(function (v) {
        total += v;
      });
    });
    var seq = h.length;
    return (total - seq) / (seq * (seq - 1));
  }

  // The unbiased standard deviation of every entry, as torch's Tensor.std().
  function streamStd(h) {
    var flat = [].concat.apply([], h);
    var mu = mean(flat);
    var total = 0;
    flat.forEach(function (v) {
      total += (v - mu) * (v - mu);
    });
    return Math.sqrt(total / (flat.length - 1));
  }

  function checkStack(layers, seed, inputStd) {
    if (!Number.isInteger(layers) || layers < 1) {
      throw new Error("the number of blocks must be an integer >= 1, got " + layers);
    }
    if (!Number.isInteger(seed) || seed < 0) {
      throw new Error("seed must be an integer >= 0, got " + seed);
    }
    if (typeof inputStd !== "number" || !(inputStd > 0) || !isFinite(inputStd)) {
      throw new Error("the input's standard deviation must be a positive number, got " +
        inputStd);
    }
  }

  // Per block, as reference.stack_profile: {quantity: [value of block 1, ..., block L]}.
  function stackProfile(normFirst, layers, seed, inputStd) {
    inputStd = inputStd === undefined ? 1 : inputStd;
    checkStack(layers, seed, inputStd);
    var weights = stackWeights(seed, layers);
    var h = stackInput(seed, inputStd);
    var streams = [];
    var caches = [];
    weights.forEach(function (w) {
      var step = blockForward(h, w, normFirst);
      h = step.out;
      streams.push(h);
      caches.push(step.cache);
    });
    var readout = stackReadout(seed);
    var grad = normFirst ? layerNormBackward(readout, h).dx : readout;
    var record = {};
    QUANTITIES.forEach(function (name) {
      record[name] = new Array(layers);
    });
    indices(layers).reverse().forEach(function (l) {
      record["stream gradient"][l] = Math.sqrt(sumSquares(grad));
      var back = blockBackward(grad, weights[l], caches[l], normFirst);
      grad = back.dx;
      var all = 0;
      Object.keys(back.grads).forEach(function (name) {
        all += sumSquares(back.grads[name]);
      });
      MATRICES.forEach(function (name) {
        record[name][l] = Math.sqrt(sumSquares(back.grads[name]));
      });
      record.all[l] = Math.sqrt(all);
      record["stream std"][l] = streamStd(streams[l]);
      record.cosine[l] = meanCosine(streams[l]);
    });
    return record;
  }

  var api = {
    EPS: EPS,
    WIDTH: WIDTH,
    HEADS: HEADS,
    FF: FF,
    SEQ: SEQ,
    MATRICES: MATRICES,
    QUANTITIES: QUANTITIES,
    hashUniform: hashUniform,
    xavierMatrix: xavierMatrix,
    stackWeights: stackWeights,
    stackInput: stackInput,
    stackReadout: stackReadout,
    layerNorm: layerNorm,
    batchNorm: batchNorm,
    normStatistics: normStatistics,
    meanCosine: meanCosine,
    stackProfile: stackProfile,
  };

  if (inNode) {
    module.exports = api;
    return;
  }
  root.attnlibLive = root.attnlibLive || {};
  root.attnlibLive.stack = api;
})(typeof self !== "undefined" ? self : this);
