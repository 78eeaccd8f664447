"""The explorers compute what attnlib.reference computes, and react to their controls."""

from __future__ import annotations

import re

import numpy as np
import pytest

from attnlib import reference
from attnlib.widgets import (
    format_matrix,
    parse_matrix,
    temperature_explorer,
    worked_example_explorer,
)


def table_numbers(html: str, caption: str) -> np.ndarray:
    """The numbers of the readout table with this caption, row by row."""
    table = html.split(f"<b>{caption}</b>", 1)[1].split("</table>", 1)[0]
    rows = re.findall(r"<tr><th>[^<]+</th>(.*?)</tr>", table)
    return np.array([[float(x) for x in re.findall(r"<td>([-\d.]+)</td>", row)] for row in rows])


def test_parse_matrix_reads_rows_and_round_trips():
    matrix = parse_matrix("1 0 1 0; 0 2 0 2\n1,1,1,1", (3, 4), "inputs")
    np.testing.assert_array_equal(matrix, reference.WORKED_INPUTS)
    np.testing.assert_array_equal(parse_matrix(format_matrix(matrix), (3, 4), "x"), matrix)


def test_parse_matrix_names_the_wrong_shape():
    with pytest.raises(ValueError, match=r"W_K must be 4x3, got 2 rows of \[3\]"):
        parse_matrix("1 2 3; 4 5 6", (4, 3), "W_K")


def test_worked_example_explorer_shows_the_exact_weights():
    explorer = worked_example_explorer()
    weights = table_numbers(explorer.readout.value, "attention weights")
    np.testing.assert_allclose(weights, np.round(reference.worked_example().weights, 4))
    assert weights[0].tolist() == [0.0634, 0.4683, 0.4683]


def test_worked_example_explorer_reacts_to_scaling_and_temperature():
    explorer = worked_example_explorer()
    explorer.controls["scale"].value = True
    explorer.controls["temperature"].value = 2.0
    expected = reference.worked_example(scale=True, temperature=2.0)
    shown = table_numbers(explorer.readout.value, "outputs")
    np.testing.assert_allclose(shown, np.round(expected.outputs, 4))


def test_worked_example_explorer_reacts_to_edited_inputs():
    explorer = worked_example_explorer()
    explorer.controls["inputs (3x4)"].value = "1 0 0 0\n0 1 0 0\n0 0 1 0"
    expected = reference.worked_example(inputs=np.eye(3, 4))
    np.testing.assert_allclose(
        table_numbers(explorer.readout.value, "scores (query · key)"), expected.scores
    )


def test_worked_example_explorer_reports_unreadable_input():
    explorer = worked_example_explorer()
    explorer.controls["W_V (4x3)"].value = "1 2"
    assert "W_V (4x3) must be 4x3" in explorer.readout.value


def test_temperature_explorer_matches_reference_softmax():
    explorer = temperature_explorer((2.0, 4.0, 4.0))
    explorer.controls["temperature"].value = 0.5
    shown = table_numbers(explorer.readout.value, "softmax(scores / T)")[0]
    expected = reference.softmax(np.array([2.0, 4.0, 4.0]), temperature=0.5)
    np.testing.assert_allclose(shown, np.round(expected, 4))


def test_temperature_explorer_reports_bad_scores():
    explorer = temperature_explorer()
    explorer.controls["scores"].value = "1 two 3"
    assert "Cannot read scores" in explorer.readout.value
