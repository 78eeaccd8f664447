"""The Python side of the explorers: the matrix text format."""

from __future__ import annotations

import numpy as np
import pytest

from attnlib import reference
from attnlib.widgets import parse_matrix


def test_parse_matrix_reads_rows_separated_by_semicolons_or_lines():
    matrix = parse_matrix("1 0 1 0; 0 2 0 2\n1,1,1,1", (3, 4), "inputs")
    np.testing.assert_array_equal(matrix, reference.WORKED_INPUTS)


def test_parse_matrix_names_the_wrong_shape():
    with pytest.raises(ValueError, match="W_K needs 4 rows of 3 numbers, .* it has 2 rows"):
        parse_matrix("1 2 3; 4 5 6", (4, 3), "W_K")
