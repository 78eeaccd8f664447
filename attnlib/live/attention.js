/* attnlib live: the worked example's arithmetic in the browser (and in node, for the tests).
 *
 * A line-by-line port of attnlib/reference.py (softmax and worked_example) and of
 * attnlib.widgets.parse_matrix. tests/test_live.py runs this file in node and checks every
 * number against attnlib.reference, so the Python oracle stays the one source of truth.
 * Plain ES2017, no dependencies: in a browser it defines window.attnlibLive, in node it is
 * module.exports.
 */
(function (root) {
  "use strict";

  function shape(matrix) {
    return [matrix.length, matrix.length ? matrix[0].length : 0];
  }

  function shapeText(matrix) {
    var s = shape(matrix);
    return "(" + s[0] + ", " + s[1] + ")";
  }

  // Rows of equal length, every entry a number; names the matrix in the error otherwise.
  function checkMatrix(matrix, name) {
    if (!Array.isArray(matrix) || !matrix.every(Array.isArray)) {
      throw new Error(name + " must be a list of rows");
    }
    var width = matrix.length ? matrix[0].length : 0;
    matrix.forEach(function (row, i) {
      if (row.length !== width) {
        throw new Error(name + " row " + (i + 1) + " has " + row.length + " numbers, not " + width);
      }
    });
  }

  // (n, k) times (k, m) -> (n, m); the inner sizes must agree.
  function matmul(a, b) {
    checkMatrix(a, "left matrix");
    checkMatrix(b, "right matrix");
    var n = a.length;
    var k = n ? a[0].length : 0;
    var m = b.length ? b[0].length : 0;
    if (k !== b.length) {
      throw new Error("cannot multiply " + shapeText(a) + " by " + shapeText(b));
    }
    var out = [];
    for (var i = 0; i < n; i++) {
      var row = [];
      for (var j = 0; j < m; j++) {
        var sum = 0;
        for (var l = 0; l < k; l++) {
          sum += a[i][l] * b[l][j];
        }
        row.push(sum);
      }
      out.push(row);
    }
    return out;
  }

  function transpose(matrix) {
    checkMatrix(matrix, "matrix");
    var s = shape(matrix);
    var out = [];
    for (var j = 0; j < s[1]; j++) {
      var row = [];
      for (var i = 0; i < s[0]; i++) {
        row.push(matrix[i][j]);
      }
      out.push(row);
    }
    return out;
  }

  // softmax(row / temperature), stable: the row maximum is subtracted before exp().
  function softmax(row, temperature) {
    if (temperature === undefined) {
      temperature = 1;
    }
    if (!(temperature > 0)) {
      throw new Error("temperature must be positive, got " + temperature);
    }
    if (!row.length) {
      throw new Error("softmax needs at least one score");
    }
    var shifted = row.map(function (x) {
      return x / temperature;
    });
    var top = Math.max.apply(null, shifted);
    var exps = shifted.map(function (x) {
      return Math.exp(x - top);
    });
    var total = exps.reduce(function (a, b) {
      return a + b;
    }, 0);
    return exps.map(function (x) {
      return x / total;
    });
  }

  // Every intermediate of self-attention on (n, d_in) inputs with (d_in, d) weights, like
  // attnlib.reference.worked_example: {keys, queries, values, scores, weights, outputs}.
  function workedExample(inputs, keyWeights, queryWeights, valueWeights, options) {
    options = options || {};
    var scale = Boolean(options.scale);
    var temperature = options.temperature === undefined ? 1 : options.temperature;
    var keys = matmul(inputs, keyWeights);
    var queries = matmul(inputs, queryWeights);
    var values = matmul(inputs, valueWeights);
    var dK = keys.length ? keys[0].length : 0;
    if ((queries.length ? queries[0].length : 0) !== dK) {
      throw new Error(
        "keys have d_k=" + dK + " but queries have d_k=" + (queries.length ? queries[0].length : 0)
      );
    }
    var scores = matmul(queries, transpose(keys));
    if (scale) {
      var sqrtDk = Math.sqrt(dK);
      scores = scores.map(function (row) {
        return row.map(function (x) {
          return x / sqrtDk;
        });
      });
    }
    var weights = scores.map(function (row) {
      return softmax(row, temperature);
    });
    return {
      inputs: inputs,
      keys: keys,
      queries: queries,
      values: values,
      scores: scores,
      weights: weights,
      outputs: matmul(weights, values),
    };
  }

  // What Python's float() accepts: decimals with an optional exponent, inf, nan.
  var NUMBER = /^[+-]?(\d+(_\d+)*\.?(\d+(_\d+)*)?|\.\d+(_\d+)*)([eE][+-]?\d+(_\d+)*)?$/;
  var SPECIAL = /^[+-]?(inf|infinity|nan)$/i;

  function parseNumber(text, name) {
    if (NUMBER.test(text)) {
      return Number(text.replace(/_/g, ""));
    }
    if (SPECIAL.test(text)) {
      var sign = text.charAt(0) === "-" ? -1 : 1;
      return /nan/i.test(text) ? NaN : sign * Infinity;
    }
    throw new Error(name + ": '" + text + "' is not a number");
  }

  // Read a rows x cols matrix written as rows separated by ';' or newlines, numbers by spaces
  // or commas (attnlib.widgets.parse_matrix); the error names the expected shape.
  function parseMatrix(text, rows, cols, name) {
    name = name || "matrix";
    var lines = String(text)
      .replace(/;/g, "\n")
      .split(/\r\n|\r|\n/)
      .filter(function (line) {
        return line.trim() !== "";
      });
    var values = lines.map(function (line) {
      return line
        .replace(/,/g, " ")
        .trim()
        .split(/\s+/)
        .map(function (word) {
          return parseNumber(word, name);
        });
    });
    if (values.length !== rows) {
      throw new Error(name + " needs " + rows + " rows of " + cols + " numbers, one row per " +
        "line; it has " + values.length + (values.length === 1 ? " row" : " rows"));
    }
    for (var i = 0; i < rows; i++) {
      if (values[i].length !== cols) {
        throw new Error(name + " needs " + cols + " numbers in each row; row " + (i + 1) +
          " has " + values[i].length);
      }
    }
    return values;
  }

  // A row of scores, numbers separated by spaces or commas (chapter 02's explorer).
  function parseScores(text) {
    var words = String(text).replace(/,/g, " ").trim().split(/\s+/).filter(Boolean);
    if (!words.length) {
      throw new Error("scores: type at least one score");
    }
    return words.map(function (word) {
      return parseNumber(word, "scores");
    });
  }

  // Entropy in nats of a row of weights (0 when one key takes all, ln m when uniform).
  function entropy(weights) {
    return -weights.reduce(function (sum, w) {
      return sum + w * Math.log(Math.max(w, 1e-300));
    }, 0);
  }

  var api = {
    // The worked example of chapter 01 (attnlib.reference.WORKED_*; tests/test_live.py checks).
    WORKED_INPUTS: [[1, 0, 1, 0], [0, 2, 0, 2], [1, 1, 1, 1]],
    WORKED_KEY_WEIGHTS: [[0, 0, 1], [1, 1, 0], [0, 1, 0], [1, 1, 0]],
    WORKED_QUERY_WEIGHTS: [[1, 0, 1], [1, 0, 0], [0, 0, 1], [0, 1, 1]],
    WORKED_VALUE_WEIGHTS: [[0, 2, 0], [0, 3, 0], [1, 0, 3], [1, 1, 0]],
    matmul: matmul,
    transpose: transpose,
    softmax: softmax,
    workedExample: workedExample,
    parseMatrix: parseMatrix,
    parseScores: parseScores,
    entropy: entropy,
  };

  if (typeof module === "object" && module && module.exports) {
    module.exports = api;
  } else {
    root.attnlibLive = Object.assign(root.attnlibLive || {}, api);
  }
})(typeof self !== "undefined" ? self : this);
