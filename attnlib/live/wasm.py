"""The one WebAssembly kernel of the browser model: a linear layer with 128-bit SIMD.

Chapter 13's explorer runs the IMDB classifier in the reader's browser (``imdb.js``). Nearly
all of its arithmetic is ``x @ W.T + b``; plain JavaScript does that at about 1 GFLOP/s, and
this kernel, four float32 lanes at a time, several times faster.

Its source is ``linear.wat``, WebAssembly's text format, next to this file. wabt's ``wat2wasm``
(the npm package ``wabt``, pinned in ``package.json``) assembles it into ``linear.wasm``
(``npm run wasm``), which is committed, so neither a learner's JupyterLab nor the book needs
Node to load it; ``tests/test_live_imdb.py`` checks that assembling the text again gives
exactly these bytes, and runs them against NumPy. :func:`linear_module` is what the page and
the Node tests load.

The exported function ``linear(x, n, inputs, w, b, outputs, y)`` takes byte addresses in the
module's exported memory: x (n, inputs), w (outputs, inputs) as a ``torch.nn.Linear`` stores
it, b (outputs,), y (n, outputs), all float32. It needs n and inputs to be multiples of 4
(``imdb.js`` pads the rows). Each output sums four lanes of float32 products, then the lanes.
"""

from __future__ import annotations

import base64
from functools import cache
from importlib import resources

SOURCE = "linear.wat"
MODULE = "linear.wasm"


@cache
def linear_module() -> bytes:
    """The assembled module: memory "memory" (1 page, growable) and function "linear"."""
    return resources.files(__package__).joinpath(MODULE).read_bytes()


def linear_module_base64() -> str:
    """:func:`linear_module` as base64, the form the page's script carries it in."""
    return base64.b64encode(linear_module()).decode("ascii")
