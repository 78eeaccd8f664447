/* attnlib live: chapter 06's arithmetic, one self-attention layer on a short sentence.
 *
 * A port of attnlib.reference.sentence_attention and permutation_shift: queries, keys and
 * values as projections Q = X' (W_Q diag(s)), K = X' W_K, V = X' W_V of the words X' = X[order]
 * (plus the sinusoidal table when positions are asked for), scores Q Kᵀ / √d_k, softmax weights
 * and outputs; and how far SA(PX) is from P SA(X). tests/test_live_qkv.py runs this file in node
 * and checks every number against the NumPy oracle. Plain ES2017, no dependencies: in node it is
 * module.exports; in a browser it sets window.attnlibLive.qkv (qkv_explorer.js draws the page).
 */
(function (root) {
  "use strict";

  var inNode = typeof module === "object" && module && module.exports;

  function range(n) {
    var out = [];
    for (var i = 0; i < n; i++) {
      out.push(i);
    }
    return out;
  }

  // Rows of equal length, every entry a finite number; names the matrix otherwise.
  function checkMatrix(matrix, name) {
    if (!Array.isArray(matrix) || !matrix.length || !matrix.every(Array.isArray)) {
      throw new Error(name + " must be a non-empty list of rows");
    }
    var width = matrix[0].length;
    matrix.forEach(function (row, i) {
      if (row.length !== width) {
        throw new Error(name + " row " + i + " has " + row.length + " numbers, not " + width);
      }
      row.forEach(function (x) {
        if (typeof x !== "number" || !isFinite(x)) {
          throw new Error(name + " must hold finite numbers, got " + x + " in row " + i);
        }
      });
    });
    return [matrix.length, width];
  }

  function shapeText(shape) {
    return "(" + shape[0] + ", " + shape[1] + ")";
  }

  // (n, k) times (k, m) -> (n, m), summed left to right.
  function matmul(a, b) {
    return a.map(function (row) {
      return range(b[0].length).map(function (j) {
        var sum = 0;
        for (var l = 0; l < row.length; l++) {
          sum += row[l] * b[l][j];
        }
        return sum;
      });
    });
  }

  // attnlib.reference.softmax of one row: shift by the largest score, exponentiate, normalise.
  function softmax(row) {
    var largest = Math.max.apply(null, row);
    var exps = row.map(function (x) {
      return Math.exp(x - largest);
    });
    var total = exps.reduce(function (a, b) {
      return a + b;
    }, 0);
    return exps.map(function (x) {
      return x / total;
    });
  }

  // attnlib.reference.sinusoidal_encoding: PE(pos, 2i) = sin(pos ω_i), PE(pos, 2i+1) = cos.
  function sinusoidalEncoding(length, dModel) {
    return range(length).map(function (pos) {
      return range(dModel).map(function (column) {
        var even = column - (column % 2);
        var angle = pos * Math.pow(10000, -even / dModel);
        return column % 2 ? Math.cos(angle) : Math.sin(angle);
      });
    });
  }

  // order as given (a permutation of 0 .. n - 1) or, if missing, 0 .. n - 1.
  function checkOrder(order, n) {
    if (order === undefined || order === null) {
      return range(n);
    }
    var sorted = Array.isArray(order) ? order.slice().sort(function (a, b) {
      return a - b;
    }) : [];
    var ok = sorted.length === n && sorted.every(function (value, i) {
      return value === i;
    });
    if (!ok) {
      var shown = Array.isArray(order) ? "[" + order.join(", ") + "]" : String(order);
      throw new Error("order must be a permutation of 0 .. " + (n - 1) + ", got " + shown);
    }
    return order;
  }

  function checkShapes(x, wQ, wK, wV) {
    var sx = checkMatrix(x, "x");
    var sq = checkMatrix(wQ, "W_Q");
    var sk = checkMatrix(wK, "W_K");
    var sv = checkMatrix(wV, "W_V");
    if (sq[0] !== sk[0] || sq[1] !== sk[1] || sq[0] !== sx[1] || sv[0] !== sx[1]) {
      throw new Error("x " + shapeText(sx) + ", W_Q " + shapeText(sq) + ", W_K " +
        shapeText(sk) + ", W_V " + shapeText(sv) + " do not fit (n, d_model), " +
        "(d_model, d_k), (d_model, d_k), (d_model, d_v)");
    }
  }

  // options: {strengths (d_k multipliers of W_Q's columns), order, positions (bool)}.
  function sentenceAttention(x, wQ, wK, wV, options) {
    options = options || {};
    checkShapes(x, wQ, wK, wV);
    var dK = wQ[0].length;
    var strengths = options.strengths || wQ[0].map(function () {
      return 1;
    });
    if (!Array.isArray(strengths) || strengths.length !== dK) {
      throw new Error("strengths must have d_k=" + dK + " entries, got " +
        (Array.isArray(strengths) ? strengths.length : strengths));
    }
    var order = checkOrder(options.order, x.length);
    var inputs = order.map(function (word) {
      return x[word].slice();
    });
    if (options.positions) {
      var table = sinusoidalEncoding(inputs.length, inputs[0].length);
      inputs = inputs.map(function (row, pos) {
        return row.map(function (value, column) {
          return value + table[pos][column];
        });
      });
    }
    // Scaling column c of W_Q scales query dimension c: how strongly that question is asked.
    var scaledQ = wQ.map(function (row) {
      return row.map(function (w, c) {
        return w * strengths[c];
      });
    });
    var queries = matmul(inputs, scaledQ);
    var keys = matmul(inputs, wK);
    var values = matmul(inputs, wV);
    var rootDK = Math.sqrt(dK);
    var scores = queries.map(function (q) {
      return keys.map(function (k) {
        var dot = 0;
        for (var c = 0; c < dK; c++) {
          dot += q[c] * k[c];
        }
        return dot / rootDK;
      });
    });
    var weights = scores.map(softmax);
    return { inputs: inputs, queries: queries, keys: keys, values: values, scores: scores,
      weights: weights, outputs: matmul(weights, values) };
  }

  // The largest |SA(PX) - P SA(X)| and |weights(PX) - P weights(X) Pᵀ|: {outputs, weights}.
  function permutationShift(x, wQ, wK, wV, order, options) {
    options = options || {};
    order = checkOrder(order, x.length);
    var same = { strengths: options.strengths, positions: options.positions };
    var before = sentenceAttention(x, wQ, wK, wV, same);
    var after = sentenceAttention(x, wQ, wK, wV, Object.assign({ order: order }, same));
    var outputs = 0;
    var weights = 0;
    order.forEach(function (word, i) {
      after.outputs[i].forEach(function (value, c) {
        outputs = Math.max(outputs, Math.abs(value - before.outputs[word][c]));
      });
      order.forEach(function (other, j) {
        weights = Math.max(weights, Math.abs(after.weights[i][j] - before.weights[word][other]));
      });
    });
    return { outputs: outputs, weights: weights };
  }

  // A permutation of 0 .. n - 1 other than `avoid` (n >= 2), drawn with random() in [0, 1).
  function shuffledOrder(n, random, avoid) {
    if (!Number.isInteger(n) || n < 2) {
      throw new Error("a shuffle needs at least 2 words, got " + n);
    }
    avoid = checkOrder(avoid, n);
    for (;;) {
      var order = range(n);
      for (var i = n - 1; i > 0; i--) {  // Fisher-Yates
        var j = Math.floor(random() * (i + 1));
        var kept = order[i];
        order[i] = order[j];
        order[j] = kept;
      }
      if (order.some(function (value, k) {
        return value !== avoid[k];
      })) {
        return order;
      }
    }
  }

  var api = {
    softmax: softmax,
    sinusoidalEncoding: sinusoidalEncoding,
    sentenceAttention: sentenceAttention,
    permutationShift: permutationShift,
    shuffledOrder: shuffledOrder,
    checkOrder: checkOrder,
  };

  if (inNode) {
    module.exports = api;
    return;
  }
  root.attnlibLive = root.attnlibLive || {};
  root.attnlibLive.qkv = api;
})(typeof self !== "undefined" ? self : this);
