"""The one WebAssembly kernel of the browser model: a linear layer with 128-bit SIMD.

Chapter 13's explorer runs the IMDB classifier in the reader's browser (``imdb.js``). Nearly
all of its arithmetic is ``x @ W.T + b``; plain JavaScript does that at about 1 GFLOP/s, and
this kernel, four float32 lanes at a time, several times faster. The module is written here,
instruction by instruction, and encoded to bytes by Python (no compiler, no binary in the
repository): :func:`linear_module` is what the page and the node tests load.

The exported function ``linear(x, n, inputs, w, b, outputs, y)`` takes byte addresses in the
module's exported memory: x (n, inputs), w (outputs, inputs) as a ``torch.nn.Linear`` stores
it, b (outputs,), y (n, outputs), all float32. It needs n and inputs to be multiples of 4
(``imdb.js`` pads the rows). Each output sums four lanes of float32 products, then the lanes.
"""

from __future__ import annotations

import base64
from functools import cache

# Opcodes of the WebAssembly MVP and SIMD proposal used below.
BLOCK, LOOP, END, BR, BR_IF = 0x02, 0x03, 0x0B, 0x0C, 0x0D
LOCAL_GET, LOCAL_SET, LOCAL_TEE = 0x20, 0x21, 0x22
I32_CONST, I32_GE_U, I32_ADD, I32_MUL, I32_SHL = 0x41, 0x4F, 0x6A, 0x6C, 0x74
F32_LOAD, F32_STORE, F32_ADD = 0x2A, 0x38, 0x92
SIMD = 0xFD
V128_LOAD, F32X4_SPLAT, F32X4_EXTRACT_LANE, F32X4_ADD, F32X4_MUL = 0x00, 0x13, 0x1F, 0xE4, 0xE6
F32_CONST = 0x43
VOID = 0x40
I32, V128 = 0x7F, 0x7B

# Parameters, then locals, by index.
X, N, INPUTS, W, B, OUTPUTS, Y = range(7)
ROW_INDEX, OUT_INDEX, ROW_BYTES, OUT_BYTES, WP, W_END, X0, X1, X2, X3, YP, BIAS_P = range(7, 19)
A0, A1, A2, A3, WV = range(19, 24)
I32_LOCALS = BIAS_P - ROW_INDEX + 1
V128_LOCALS = WV - A0 + 1


def uleb(value: int) -> bytes:
    """Unsigned LEB128, as WebAssembly encodes sizes and indices."""
    if value < 0:
        raise ValueError(f"uleb needs a non-negative integer, got {value}")
    out = bytearray()
    while True:
        byte, value = value & 0x7F, value >> 7
        out.append(byte | (0x80 if value else 0))
        if not value:
            return bytes(out)


def sleb(value: int) -> bytes:
    """Signed LEB128, for i32.const."""
    out = bytearray()
    while True:
        byte, value = value & 0x7F, value >> 7
        done = (value == 0 and not byte & 0x40) or (value == -1 and byte & 0x40)
        out.append(byte | (0 if done else 0x80))
        if done:
            return bytes(out)


def get(index: int) -> bytes:
    return bytes([LOCAL_GET]) + uleb(index)


def put(index: int) -> bytes:
    return bytes([LOCAL_SET]) + uleb(index)


def const(value: int) -> bytes:
    return bytes([I32_CONST]) + sleb(value)


def simd(opcode: int) -> bytes:
    return bytes([SIMD]) + uleb(opcode)


def v128_load(offset: int = 0) -> bytes:
    return simd(V128_LOAD) + uleb(4) + uleb(offset)  # align 2^4 bytes (a hint only)


def add_to(index: int, amount: bytes) -> bytes:
    """local[index] += amount (an i32 expression)."""
    return get(index) + amount + bytes([I32_ADD]) + put(index)


def loop_while_below(counter: int, limit: int, body: bytes) -> bytes:
    """block { loop { if counter >= limit: break; body; continue } }."""
    test = get(counter) + get(limit) + bytes([I32_GE_U, BR_IF]) + uleb(1)
    return bytes([BLOCK, VOID, LOOP, VOID]) + test + body + bytes([BR, 0, END, END])


def horizontal_sum(accumulator: int) -> bytes:
    """The four lanes of a v128 accumulator added in order: an f32 on the stack."""
    code = get(accumulator) + simd(F32X4_EXTRACT_LANE) + bytes([0])
    for lane in (1, 2, 3):
        code += get(accumulator) + simd(F32X4_EXTRACT_LANE) + bytes([lane, F32_ADD])
    return code


def linear_body() -> bytes:
    """The instructions of ``linear``: four rows of x at a time, one output at a time."""
    zero = bytes([F32_CONST]) + b"\x00\x00\x00\x00" + simd(F32X4_SPLAT)
    clear = b"".join(zero + put(a) for a in (A0, A1, A2, A3))
    rows = get(X) + get(ROW_INDEX) + get(ROW_BYTES) + bytes([I32_MUL, I32_ADD]) + put(X0)
    for previous, row in ((X0, X1), (X1, X2), (X2, X3)):
        rows += get(previous) + get(ROW_BYTES) + bytes([I32_ADD]) + put(row)
    weights = (
        get(W) + get(OUT_INDEX) + get(ROW_BYTES) + bytes([I32_MUL, I32_ADD, LOCAL_TEE]) + uleb(WP)
    )
    weights += get(ROW_BYTES) + bytes([I32_ADD]) + put(W_END)
    # acc_k += x_k[i:i+4] * w[i:i+4]
    step = get(WP) + v128_load() + put(WV)
    for accumulator, row in zip((A0, A1, A2, A3), (X0, X1, X2, X3), strict=True):
        step += get(accumulator) + get(row) + v128_load() + get(WV) + simd(F32X4_MUL)
        step += simd(F32X4_ADD) + put(accumulator)
    for pointer in (WP, X0, X1, X2, X3):
        step += add_to(pointer, const(16))
    # y[(t + k) * outputs + o] = sum(acc_k) + b[o]
    store = get(B) + get(OUT_INDEX) + const(2) + bytes([I32_SHL, I32_ADD]) + put(BIAS_P)
    store += get(Y) + get(ROW_INDEX) + get(OUTPUTS) + bytes([I32_MUL]) + get(OUT_INDEX)
    store += bytes([I32_ADD]) + const(2) + bytes([I32_SHL, I32_ADD]) + put(YP)
    for accumulator in (A0, A1, A2, A3):
        store += get(YP) + horizontal_sum(accumulator) + get(BIAS_P)
        store += bytes([F32_LOAD]) + uleb(2) + uleb(0) + bytes([F32_ADD])
        store += bytes([F32_STORE]) + uleb(2) + uleb(0) + add_to(YP, get(OUT_BYTES))
    per_output = clear + rows + weights + loop_while_below(WP, W_END, step) + store
    per_output += add_to(OUT_INDEX, const(1))
    per_block = const(0) + put(OUT_INDEX) + loop_while_below(OUT_INDEX, OUTPUTS, per_output)
    per_block += add_to(ROW_INDEX, const(4))
    setup = get(INPUTS) + const(2) + bytes([I32_SHL]) + put(ROW_BYTES)
    setup += get(OUTPUTS) + const(2) + bytes([I32_SHL]) + put(OUT_BYTES)
    setup += const(0) + put(ROW_INDEX)
    return setup + loop_while_below(ROW_INDEX, N, per_block)


def section(kind: int, payload: bytes) -> bytes:
    return bytes([kind]) + uleb(len(payload)) + payload


def vector(items: list[bytes]) -> bytes:
    return uleb(len(items)) + b"".join(items)


def name(text: str) -> bytes:
    encoded = text.encode()
    return uleb(len(encoded)) + encoded


@cache
def linear_module() -> bytes:
    """The whole module: memory "memory" (1 page, growable) and function "linear"."""
    function_type = bytes([0x60]) + vector([bytes([I32])] * 7) + vector([])
    locals_ = vector([uleb(I32_LOCALS) + bytes([I32]), uleb(V128_LOCALS) + bytes([V128])])
    body = locals_ + linear_body() + bytes([END])
    return (
        b"\x00asm\x01\x00\x00\x00"
        + section(1, vector([function_type]))  # types
        + section(3, vector([uleb(0)]))  # functions: one, of type 0
        + section(5, vector([bytes([0x00]) + uleb(1)]))  # memory: min 1 page, no max
        + section(7, vector([name("memory") + b"\x02\x00", name("linear") + b"\x00\x00"]))
        + section(10, vector([uleb(len(body)) + body]))  # code
    )


def linear_module_base64() -> str:
    """:func:`linear_module` as base64, the form the page's script carries it in."""
    return base64.b64encode(linear_module()).decode("ascii")
