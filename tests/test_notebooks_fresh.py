"""Stored notebook outputs are fresh: one clean top-to-bottom run, no errors, widget state kept."""

from __future__ import annotations

import json
import re
from pathlib import Path

import nbformat
import pytest
import yaml

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOKS = sorted((ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb"))
WIDGET_VIEW = "application/vnd.jupyter.widget-view+json"
WIDGET_STATE = "application/vnd.jupyter.widget-state+json"
MARKER = re.compile(r"#\s*NBVAL_\w+")
# The book's text column at 1280 px shows about this many characters of code; longer lines
# scroll sideways.
CODE_COLUMNS = 80


def code_cells(notebook) -> list:
    return [cell for cell in notebook.cells if cell.cell_type == "code" and cell.source.strip()]


@pytest.fixture(params=NOTEBOOKS, ids=[path.name for path in NOTEBOOKS])
def notebook(request):
    return nbformat.read(request.param, as_version=4)


def test_there_are_chapters():
    assert len(NOTEBOOKS) >= 2, "notebooks/ should hold the chapters"


def test_notebook_is_valid_nbformat(notebook):
    nbformat.validate(notebook)
    assert notebook.metadata["kernelspec"]["name"] == "python3"


def test_execution_counts_are_one_to_n(notebook):
    counts = [cell.execution_count for cell in code_cells(notebook)]
    assert counts == list(range(1, len(counts) + 1)), "run `make outputs` to refresh"


def test_no_error_outputs(notebook):
    errors = [
        output.get("ename")
        for cell in code_cells(notebook)
        for output in cell.outputs
        if output.output_type == "error"
    ]
    assert errors == []


def test_every_displayed_widget_has_saved_state(notebook):
    shown = {
        output["data"][WIDGET_VIEW]["model_id"]
        for cell in code_cells(notebook)
        for output in cell.outputs
        if WIDGET_VIEW in output.get("data", {})
    }
    saved = notebook.metadata.get("widgets", {}).get(WIDGET_STATE, {}).get("state", {})
    assert shown <= set(saved), f"widgets without saved state: {sorted(shown - set(saved))}"


def test_widget_cells_are_ignored_by_nbval(notebook):
    for cell in code_cells(notebook):
        if any(WIDGET_VIEW in output.get("data", {}) for output in cell.outputs):
            assert cell.source.splitlines()[0].strip() == "# NBVAL_IGNORE_OUTPUT", cell.source


def test_nbval_markers_stand_alone_on_their_line(notebook):
    for cell in code_cells(notebook):
        for line in cell.source.splitlines():
            if MARKER.search(line):
                assert MARKER.fullmatch(line.strip()), f"marker shares its line: {line!r}"


def test_code_lines_fit_the_books_text_column(notebook):
    long = [
        (index, line)
        for index, cell in enumerate(notebook.cells)
        if cell.cell_type == "code"
        for line in cell.source.splitlines()
        if len(line) > CODE_COLUMNS
    ]
    first = f", the first in cell {long[0][0]}: {long[0][1]!r}" if long else ""
    assert not long, f"{len(long)} code lines over {CODE_COLUMNS} characters{first}"


def test_no_hot_linked_images(notebook):
    text = json.dumps(nbformat.writes(notebook))
    assert re.findall(r"https?://[^\s\"')]+\.(?:png|jpe?g|gif|svg|webp)", text) == []


def test_every_chapter_is_in_the_table_of_contents():
    toc = yaml.safe_load((ROOT / "notebooks" / "_toc.yml").read_text())
    listed = {
        chapter["file"].removesuffix(".ipynb")
        for part in toc["parts"]
        for chapter in part["chapters"]
    }
    missing = {f"notebooks/{path.stem}" for path in NOTEBOOKS} - listed
    assert missing == set()


def test_exercise_solutions_are_folded_away_in_the_book(notebook):
    solutions = [
        following
        for cell, following in zip(notebook.cells[:-1], notebook.cells[1:], strict=True)
        if cell.cell_type == "markdown" and cell.source.startswith("Solution to exercise")
    ]
    assert solutions, "each chapter ends with exercises and their solutions"
    for cell in solutions:
        assert cell.cell_type == "code" and "hide-cell" in cell.metadata.get("tags", [])


def test_every_exercise_is_followed_by_its_own_solution(notebook):
    """Exercise N, then a cell that is just 'Solution to exercise N', then the folded code: the
    same layout in every chapter (not the solutions run into the exercise's text)."""
    cells = notebook.cells
    for index, cell in enumerate(cells):
        heading = re.search(r"^### Exercise (\d+)", cell.source, re.MULTILINE)
        if cell.cell_type != "markdown" or heading is None:
            continue
        assert "Solution to exercise" not in cell.source, f"exercise {heading[1]}: one cell"
        label = cells[index + 1] if index + 1 < len(cells) else None
        assert label is not None and label.cell_type == "markdown", f"exercise {heading[1]}"
        assert label.source.strip() == f"Solution to exercise {heading[1]}", label.source[:80]


WAITING = sorted((ROOT / "notebooks" / "next").glob("*.ipynb"))


@pytest.mark.parametrize("path", WAITING, ids=[path.name for path in WAITING])
def test_a_chapter_waiting_for_its_gpu_run_stores_no_outputs(path):
    """notebooks/next/ holds a chapter's next version until a GPU run stores its outputs: none
    may come from anywhere else, and it replaces a chapter of the same name."""
    waiting = nbformat.read(path, as_version=4)
    nbformat.validate(waiting)
    assert (ROOT / "notebooks" / path.name).is_file(), f"{path.name} replaces no chapter"
    for cell in code_cells(waiting):
        assert cell.outputs == [] and cell.execution_count is None, cell.source[:60]
