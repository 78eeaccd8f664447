"""Chapter 15's and 16's explorers, driven as a reader would and checked against the library.

Each check takes the explorer's root element (a Playwright locator) wherever it is: on a page
made here, on the chapter's book page, or in JupyterLab's output after the chapter has run. It
reads the explorer's inputs back from its ``data-*`` attributes, moves its controls, and after
every move compares what is shown with :func:`attnlib.reference.online_softmax_steps` or
:func:`attnlib.positions.apply_rotary` in float64.
"""

from __future__ import annotations

import json
import math

import numpy as np
import torch

from attnlib import reference
from attnlib.positions import apply_rotary

NEG_INF = float("-inf")
# flash.js prints |x| < 5e-4 as 1.2e-5 (two significant digits), the rest with 4 decimals.
SMALL = 5e-4


def shown_number(text: str) -> float | None:
    """A cell's text as a number: '-∞' is -inf, '·' (not seen yet) and '' are None."""
    text = text.strip().replace("\u2212", "-")
    if text in ("", "\u00b7", "(empty)"):
        return None
    if text == "-\u221e":
        return NEG_INF
    return float(text)


def agrees(text: str, want: float) -> bool:
    """Whether a cell's text is ``want`` as the explorers print it (4 decimals or 2 digits)."""
    got = shown_number(text)
    if got is None:
        return False
    if want == NEG_INF or got == NEG_INF:
        return got == want
    if want != 0 and abs(want) < SMALL:
        return math.isclose(got, want, rel_tol=0.06)
    return abs(got - want) <= 5.01e-5 + 1e-12


def wait_for_texts(cells, want: list[float | str | None], what: str, timeout: float = 5_000):
    """Wait until ``cells`` show ``want`` (numbers as printed, exact texts, None for '·')."""
    page = cells.page
    deadline = timeout
    shown: list[str] = []
    while True:
        shown = [text.strip() for text in cells.all_inner_texts()]
        if len(shown) == len(want) and all(
            (item is None and text == "\u00b7")
            or (isinstance(item, str) and text == item)
            or (isinstance(item, float) and agrees(text, item))
            for text, item in zip(shown, want, strict=True)
        ):
            return
        if deadline <= 0:
            raise AssertionError(f"{what}: shown {shown}, expected {want}")
        page.wait_for_timeout(100)  # the explorer redraws on the next animation frame at most
        deadline -= 100


def control(root, name: str):
    return root.locator(f'[data-control="{name}"]')


def readout(root, name: str):
    return root.locator(f'[data-readout="{name}"]')


def assert_no_nan(root, what: str) -> None:
    text = root.inner_text()
    assert "NaN" not in text and "Infinity" not in text, f"{what}: NaN or Infinity shown"


# chapter 15: the online softmax


def flash_row(text: str) -> np.ndarray:
    items = [NEG_INF if item == "-inf" else float(item) for item in text]
    return np.array(items, dtype=np.float64)


def expect_online_softmax(root, row: np.ndarray, values: np.ndarray, block: int, t: int) -> None:
    """The row table, the state table and the readouts after block ``t`` (1-based)."""
    what = f"online softmax of {row.tolist()} in blocks of {block}, after block {t}"
    values = values[: len(row)]
    steps = reference.online_softmax_steps(row, block, values)
    exact = reference.online_softmax_steps(row, len(row), values)[-1]
    current = steps[t - 1]
    blocks = [float(j // block + 1) for j in range(len(row))]
    seen = [float(w) for w in current.weights] + [None] * (len(row) - current.end)
    wait_for_texts(
        readout(root, "row").locator("td"),
        [*map(float, row), *blocks, *seen, *map(float, exact.weights)],
        f"{what}: the row table",
    )
    lines: list[float | str | None] = []
    for i, step in enumerate(steps[:t]):
        start = i * block
        lines += [f"{start + 1}\u2013{step.end}", float(row[start : step.end].max())]
        lines += [float(step.running_max), "(empty)" if i == 0 else float(step.rescale)]
        lines += [float(step.running_sum), *map(float, step.output)]
    lines += [f"1\u2013{len(row)}", "", float(row.max()), "", float(exact.running_sum)]
    lines += [*map(float, exact.output)]
    wait_for_texts(readout(root, "state").locator("td"), lines, f"{what}: the state table")
    assert readout(root, "step").inner_text().strip() == f"{t} of {len(steps)}", what
    weight_error = float(
        np.abs(np.append(current.weights, [0.0] * (len(row) - current.end)) - exact.weights).max()
    )
    output_error = float(np.abs(current.output - exact.output).max())
    for name, want in (("weight-error", weight_error), ("output-error", output_error)):
        got = float(readout(root, name).inner_text())
        assert math.isclose(got, want, rel_tol=0.06, abs_tol=1e-12), f"{what}: {name} {got}"
    assert_no_nan(root, what)


def check_online_softmax_explorer(root) -> None:
    """Step through the starting row, change the block size, load examples, type a row."""
    examples = {
        name: flash_row(row)
        for name, row in json.loads(root.get_attribute("data-examples")).items()
    }
    values = np.array(json.loads(root.get_attribute("data-values")), dtype=np.float64)
    block = int(root.get_attribute("data-block"))
    first = next(iter(examples.values()))
    assert control(root, "block").input_value() == str(block)
    expect_online_softmax(root, first, values, block, 1)

    # next block, to the last: the partial row becomes the exact one
    n_steps = len(reference.online_softmax_steps(first, block))
    for t in range(2, n_steps + 1):
        control(root, "next").click()
        expect_online_softmax(root, first, values, block, t)
    assert control(root, "next").is_disabled()
    assert float(readout(root, "weight-error").inner_text()) < 1e-12
    control(root, "previous").click()
    expect_online_softmax(root, first, values, block, n_steps - 1)

    # another block size starts the row again, with its own number of blocks
    control(root, "block").select_option("5")
    expect_online_softmax(root, first, values, 5, 1)
    control(root, "step").fill(str(len(reference.online_softmax_steps(first, 5))))
    expect_online_softmax(root, first, values, 5, len(reference.online_softmax_steps(first, 5)))

    # every example button; a row of -inf gives zeros, never NaN
    for name, row in examples.items():
        root.locator(f'[data-control="example"][data-example="{name}"]').click()
        size = min(5, len(row))
        expect_online_softmax(root, row, values, size, 1)
    # a typed row, a typographic minus and -inf included
    control(root, "scores").fill("3 \u22121 -inf 2.5 0")
    expect_online_softmax(root, np.array([3, -1, NEG_INF, 2.5, 0.0]), values, 5, 1)
    control(root, "scores").fill("3 oops")
    error = readout(root, "error")
    error.wait_for(state="visible")
    assert "Cannot read the scores" in error.inner_text() and "oops" in error.inner_text()
    control(root, "scores").fill("1 2")
    error.wait_for(state="hidden")
    expect_online_softmax(root, np.array([1.0, 2.0]), values, 2, 1)


# chapter 16: rotary positions


def rotated(x: np.ndarray, position: int, base: float) -> np.ndarray:
    """attnlib's rotation of one vector (d,) to ``position``, in float64."""
    tensor = torch.tensor(x, dtype=torch.float64).reshape(1, -1)
    return apply_rotary(tensor, torch.tensor([position]), base=base).reshape(-1).numpy()


def expect_rotary(root, q: np.ndarray, k: np.ndarray, base: float) -> None:
    """The pair table and the scores, for the positions the sliders show now."""
    n = int(control(root, "position").input_value())
    offset = int(control(root, "offset").input_value())
    s = int(control(root, "shift").input_value())
    m = n + offset
    what = f"rotary, q at {m}, k at {n}, shifted by {s}, base {base:g}"
    here = rotated(q, m, base) * rotated(k, n, base)
    there = rotated(q, m + s, base) * rotated(k, n + s, base)
    shares, shifted_shares = here[0::2] + here[1::2], there[0::2] + there[1::2]
    omegas = base ** (-np.arange(0, len(q), 2) / len(q))
    score = float(here.sum())
    wait_for_texts(readout(root, "score"), [score], f"{what}: q·k")
    wait_for_texts(readout(root, "shifted-score"), [float(there.sum())], f"{what}: shifted q·k")
    want: list[tuple[str, float]] = []  # (how it is printed, value), row by row
    for i, omega in enumerate(omegas):
        want.append(("4 significant digits", float(omega)))
        want += [("4 decimals", float(x)) for x in (m * omega, n * omega, offset * omega)]
        want += [("4 decimals", float(shares[i])), ("4 decimals", float(shifted_shares[i]))]
    shown = [text.strip() for text in readout(root, "pairs").locator("td").all_inner_texts()]
    assert len(shown) == len(want), f"{what}: {len(shown)} cells, expected {len(want)}"
    for text, (how, value) in zip(shown, want, strict=True):
        ok = (
            math.isclose(float(text), value, rel_tol=1e-3)
            if how.startswith("4 sig")
            else (agrees(text, value))
        )
        assert ok, f"{what}: shown {shown}, expected {[round(v, 4) for _, v in want]}"
    assert abs(float(there.sum()) - score) < 1e-9, "the rotary law itself"
    assert float(readout(root, "shift-error").inner_text()) < 1e-9, what
    for name, value in (("n", n), ("offset", offset), ("m", m), ("shift", s)):
        assert readout(root, name).inner_text().strip() == str(value), f"{what}: {name}"
    assert_no_nan(root, what)


def check_rotary_explorer(root) -> None:
    """Move every slider, change the base, type vectors, read an error, reset."""
    q = np.array(json.loads(root.get_attribute("data-query")), dtype=np.float64)
    k = np.array(json.loads(root.get_attribute("data-key")), dtype=np.float64)
    base = float(root.get_attribute("data-base"))
    expect_rotary(root, q, k, base)
    for name, value in (("offset", "-7"), ("position", "40"), ("shift", "3"), ("offset", "16")):
        control(root, name).fill(value)
        expect_rotary(root, q, k, base)
    options = control(root, "base").locator("option").all_inner_texts()
    other = next(option for option in options if float(option) != base)
    control(root, "base").select_option(other)
    expect_rotary(root, q, k, float(other))
    control(root, "query").fill("1 0 0 1")
    control(root, "key").fill("0 1 1 \u22120.5")
    expect_rotary(root, np.array([1.0, 0, 0, 1]), np.array([0, 1.0, 1, -0.5]), float(other))
    control(root, "key").fill("0 1 1")
    error = readout(root, "error")
    error.wait_for(state="visible")
    assert "Cannot read the vectors" in error.inner_text(), error.inner_text()
    control(root, "reset").click()
    error.wait_for(state="hidden")
    expect_rotary(root, q, k, base)
