/* attnlib live: the arithmetic of chapters 07-09 (heads, sinusoidal positions, masks).
 *
 * A port of attnlib/reference.py (split_heads, multi_head_attention, entropy,
 * positional_encoding, offset_rotation, rotation_error, encoding_similarity, padding_mask,
 * causal_mask, attention_mask, masked_softmax). tests/test_live.py runs this file in node and
 * checks every number against the NumPy oracle. Needs attention.js (matmul, softmax). Plain
 * ES2017: in a browser it extends window.attnlibLive, in node it is module.exports.
 */
(function (root) {
  "use strict";

  var inNode = typeof module === "object" && module && module.exports;
  var base = inNode ? require("./attention.js") : root.attnlibLive;
  if (!base || !base.matmul) {
    throw new Error("attnlib live: load attention.js before encoder.js");
  }

  function range(n) {
    var out = [];
    for (var i = 0; i < n; i++) {
      out.push(i);
    }
    return out;
  }

  function width(matrix) {
    return matrix.length ? matrix[0].length : 0;
  }

  // --- multi-head attention (chapter 07) ---

  // The divisors of n, smallest first: the head counts a width of n allows.
  function divisors(n) {
    return range(n + 1).filter(function (k) {
      return k > 0 && n % k === 0;
    });
  }

  // (seq, d_model) -> a list of heads, each (seq, d_head); head h is columns h*d_head:(h+1)*d_head.
  function splitHeads(matrix, numHeads) {
    var dModel = width(matrix);
    if (!(numHeads >= 1) || dModel % numHeads !== 0) {
      throw new Error("num_heads=" + numHeads + " does not divide d_model=" + dModel);
    }
    var dHead = dModel / numHeads;
    return range(numHeads).map(function (h) {
      return matrix.map(function (row) {
        return row.slice(h * dHead, (h + 1) * dHead);
      });
    });
  }

  // A list of (seq, d_head) heads -> (seq, heads * d_head), the inverse of splitHeads.
  function mergeHeads(heads) {
    return heads[0].map(function (_, i) {
      return [].concat.apply([], heads.map(function (head) {
        return head[i];
      }));
    });
  }

  // Multi-head self-attention of (n, d_model) inputs, like reference.multi_head_attention:
  // per head softmax(Q_h K_hᵀ / √d_head); options.scaleBy "model" divides by √d_model (the bug).
  function multiHead(inputs, wQ, wK, wV, numHeads, options) {
    var scaleBy = (options && options.scaleBy) || "head";
    if (scaleBy !== "head" && scaleBy !== "model") {
      throw new Error("scaleBy must be 'head' or 'model', got '" + scaleBy + "'");
    }
    var queries = splitHeads(base.matmul(inputs, wQ), numHeads);
    var keys = splitHeads(base.matmul(inputs, wK), numHeads);
    var values = splitHeads(base.matmul(inputs, wV), numHeads);
    var dHead = width(queries[0]);
    var scale = Math.sqrt(scaleBy === "head" ? dHead : dHead * numHeads);
    var scores = queries.map(function (q, h) {
      return base.matmul(q, base.transpose(keys[h])).map(function (row) {
        return row.map(function (x) {
          return x / scale;
        });
      });
    });
    var weights = scores.map(function (head) {
      return head.map(function (row) {
        return base.softmax(row);
      });
    });
    var outputs = mergeHeads(weights.map(function (w, h) {
      return base.matmul(w, values[h]);
    }));
    return { queries: queries, keys: keys, values: values, scale: scale, scores: scores,
      weights: weights, outputs: outputs };
  }

  // Per head: the mean entropy of its query rows (nats) and its largest weight.
  function headSummary(weights) {
    return weights.map(function (head) {
      var total = head.reduce(function (sum, row) {
        return sum + base.entropy(row);
      }, 0);
      var largest = Math.max.apply(null, head.map(function (row) {
        return Math.max.apply(null, row);
      }));
      return { entropy: total / head.length, largest: largest };
    });
  }

  // --- sinusoidal positions (chapter 08) ---

  // ω_i = 1 / base^(2i/d) for i = 0 .. ceil(d/2) - 1.
  function frequencies(dModel, theBase) {
    var b = theBase === undefined ? 10000 : theBase;
    var out = [];
    for (var even = 0; even < dModel; even += 2) {
      out.push(Math.pow(b, -even / dModel));
    }
    return out;
  }

  // PE(pos) as a vector of dModel numbers: sin(pos ω_i) at 2i, cos(pos ω_i) at 2i+1.
  function positionalEncoding(pos, dModel, theBase) {
    if (!(dModel >= 1)) {
      throw new Error("d_model must be at least 1, got " + dModel);
    }
    var omega = frequencies(dModel, theBase);
    var out = [];
    for (var j = 0; j < dModel; j++) {
      var angle = pos * omega[Math.floor(j / 2)];
      out.push(j % 2 === 0 ? Math.sin(angle) : Math.cos(angle));
    }
    return out;
  }

  // The table of positions 0 .. length - 1: (length, dModel).
  function sinusoidalEncoding(length, dModel, theBase) {
    return range(length).map(function (pos) {
      return positionalEncoding(pos, dModel, theBase);
    });
  }

  // Block i of M(k): [[cos kω_i, sin kω_i], [-sin kω_i, cos kω_i]].
  function rotationBlock(offset, i, dModel, theBase) {
    var angle = offset * frequencies(dModel, theBase)[i];
    var c = Math.cos(angle);
    var s = Math.sin(angle);
    return [[c, s], [-s, c]];
  }

  // M(k), block diagonal over the d_model // 2 pairs: PE(pos + k)[:2m] = M(k) PE(pos)[:2m].
  function offsetRotation(offset, dModel, theBase) {
    var pairs = Math.floor(dModel / 2);
    var out = range(2 * pairs).map(function () {
      return range(2 * pairs).map(function () {
        return 0;
      });
    });
    range(pairs).forEach(function (i) {
      var block = rotationBlock(offset, i, dModel, theBase);
      out[2 * i][2 * i] = block[0][0];
      out[2 * i][2 * i + 1] = block[0][1];
      out[2 * i + 1][2 * i] = block[1][0];
      out[2 * i + 1][2 * i + 1] = block[1][1];
    });
    return out;
  }

  // M(k) applied pair by pair to the paired columns of PE(pos) (what M(k) @ PE(pos)[:2m] gives).
  function rotate(offset, vector, dModel, theBase) {
    var out = [];
    for (var i = 0; i < Math.floor(dModel / 2); i++) {
      var block = rotationBlock(offset, i, dModel, theBase);
      var s = vector[2 * i];
      var c = vector[2 * i + 1];
      out.push(block[0][0] * s + block[0][1] * c, block[1][0] * s + block[1][1] * c);
    }
    return out;
  }

  // max |PE(pos + k) - M(k) PE(pos)| over the paired columns: round-off only, about 1e-15.
  function rotationError(pos, offset, dModel, theBase) {
    var here = positionalEncoding(pos, dModel, theBase);
    var there = positionalEncoding(pos + offset, dModel, theBase);
    return rotate(offset, here, dModel, theBase).reduce(function (worst, x, j) {
      return Math.max(worst, Math.abs(there[j] - x));
    }, 0);
  }

  function dot(a, b) {
    return a.reduce(function (sum, x, j) {
      return sum + x * b[j];
    }, 0);
  }

  // PE(pos) · PE(pos + Δ) for each Δ (with an even width Σ_i cos(Δ ω_i), whatever pos is).
  function encodingSimilarity(pos, deltas, dModel, theBase) {
    var here = positionalEncoding(pos, dModel, theBase);
    return deltas.map(function (delta) {
      return dot(here, positionalEncoding(pos + delta, dModel, theBase));
    });
  }

  // --- masks (chapter 09); true means "may attend" ---

  var MASK_KINDS = ["none", "padding", "causal", "padding+causal"];

  // True at real keys: lengths (batch,) -> (batch, 1, maxLen), as attnlib.masks.padding_mask.
  function paddingMask(lengths, maxLen) {
    if (maxLen === undefined || maxLen === null) {
      maxLen = Math.max.apply(null, [0].concat(lengths));
    }
    return lengths.map(function (length) {
      return [range(maxLen).map(function (k) {
        return k < length;
      })];
    });
  }

  // Query j sees keys up to its own position: (nQueries, nKeys), lower triangular.
  function causalMask(nQueries, nKeys) {
    nKeys = nKeys === undefined || nKeys === null ? nQueries : nKeys;
    return range(nQueries).map(function (j) {
      return range(nKeys).map(function (k) {
        return k <= j + nKeys - nQueries;
      });
    });
  }

  // The (n, n) mask of one sequence, like reference.attention_mask: kind from MASK_KINDS, keys
  // at length and beyond are padding, query maskedRow (null for none) attends to nothing.
  function attentionMask(kind, n, length, maskedRow) {
    if (MASK_KINDS.indexOf(kind) < 0) {
      throw new Error("kind must be one of " + MASK_KINDS.join(", ") + ", got '" + kind + "'");
    }
    length = length === undefined || length === null ? n : length;
    var padding = paddingMask([length], n)[0][0];
    var causal = causalMask(n);
    return range(n).map(function (j) {
      return range(n).map(function (k) {
        var allowed = j !== maskedRow;
        if (kind.indexOf("padding") >= 0) {
          allowed = allowed && padding[k];
        }
        if (kind.indexOf("causal") >= 0) {
          allowed = allowed && causal[j][k];
        }
        return allowed;
      });
    });
  }

  // Row by row softmax over allowed keys, masked scores replaced by fill first, like
  // reference.masked_softmax: fill -Infinity gives masked keys exactly 0 and a fully masked row
  // all zeros (never NaN); a finite fill is plain softmax of the filled scores.
  function maskedSoftmax(scores, mask, fill) {
    fill = fill === undefined ? -Infinity : fill;
    if (!(isFinite(fill) || fill === -Infinity)) {
      throw new Error("fill must be finite or -inf, got " + fill);
    }
    return scores.map(function (row, j) {
      var allowed = mask ? mask[j] : row.map(function () {
        return true;
      });
      if (isFinite(fill)) {
        return base.softmax(row.map(function (x, k) {
          return allowed[k] ? x : fill;
        }));
      }
      var kept = row.filter(function (_, k) {
        return allowed[k];
      });
      if (!kept.length) {
        return row.map(function () {
          return 0;
        });
      }
      var weights = base.softmax(kept);
      var next = 0;
      return row.map(function (_, k) {
        return allowed[k] ? weights[next++] : 0;
      });
    });
  }

  var api = {
    divisors: divisors,
    splitHeads: splitHeads,
    mergeHeads: mergeHeads,
    multiHead: multiHead,
    headSummary: headSummary,
    frequencies: frequencies,
    positionalEncoding: positionalEncoding,
    sinusoidalEncoding: sinusoidalEncoding,
    rotationBlock: rotationBlock,
    offsetRotation: offsetRotation,
    rotate: rotate,
    rotationError: rotationError,
    encodingSimilarity: encodingSimilarity,
    MASK_KINDS: MASK_KINDS,
    paddingMask: paddingMask,
    causalMask: causalMask,
    attentionMask: attentionMask,
    maskedSoftmax: maskedSoftmax,
  };

  if (inNode) {
    module.exports = api;
  } else {
    root.attnlibLive = Object.assign(root.attnlibLive || {}, api);
  }
})(typeof self !== "undefined" ? self : this);
