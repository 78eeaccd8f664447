"""scripts/execute_notebooks.py: what it stores besides the outputs themselves."""

from __future__ import annotations

import importlib.util
import os
import signal
import subprocess
import sys
from pathlib import Path

import nbformat
import pytest
from nbclient.exceptions import CellExecutionError

SCRIPT = Path(__file__).resolve().parents[1] / "scripts" / "execute_notebooks.py"
spec = importlib.util.spec_from_file_location("execute_notebooks", SCRIPT)
execute_notebooks = importlib.util.module_from_spec(spec)
spec.loader.exec_module(execute_notebooks)


def stream(name: str, text: str) -> nbformat.NotebookNode:
    return nbformat.v4.new_output("stream", name=name, text=text)


def test_consecutive_prints_are_stored_as_one_output():
    cell = nbformat.v4.new_code_cell("print(1)")
    figure = nbformat.v4.new_output("display_data", data={"text/plain": "<Figure>"})
    cell.outputs = [
        stream("stdout", "exact output 1   ="),
        stream("stdout", " [1.9366 6.6831 1.5951]\n"),
        stream("stderr", "a warning\n"),
        stream("stdout", "after\n"),
        figure,
        stream("stdout", "last\n"),
    ]
    notebook = nbformat.v4.new_notebook(cells=[cell, nbformat.v4.new_markdown_cell("text")])
    execute_notebooks.merge_streams(notebook)
    shown = [(o.output_type, o.get("name"), o.get("text")) for o in notebook.cells[0].outputs]
    assert shown == [
        ("stream", "stdout", "exact output 1   = [1.9366 6.6831 1.5951]\n"),
        ("stream", "stderr", "a warning\n"),
        ("stream", "stdout", "after\n"),
        ("display_data", None, None),
        ("stream", "stdout", "last\n"),
    ]
    assert "outputs" not in notebook.cells[1]


def test_the_pin_is_read_from_the_makefile_and_pins_mkl_on_every_maker():
    pinned = execute_notebooks.pinned_kernels()
    assert set(pinned) == {"ATEN_CPU_CAPABILITY", "MKL_CBWR", "ONEDNN_MAX_CPU_ISA"}
    # MKL follows MKL_CBWR=AVX2 on Intel processors only; on AMD ones it dispatches as it likes.
    assert pinned["MKL_CBWR"] == "COMPATIBLE"


def test_an_unpinned_run_is_warned_about(tmp_path, monkeypatch, capsys):
    notebook = tmp_path / "empty.ipynb"
    nbformat.write(nbformat.v4.new_notebook(), notebook)
    monkeypatch.setattr(execute_notebooks, "execute", lambda path, timeout, *flags: 0.0)
    monkeypatch.setenv("ATEN_CPU_CAPABILITY", "avx2")
    monkeypatch.setenv("MKL_CBWR", "AVX2")
    monkeypatch.setenv("ONEDNN_MAX_CPU_ISA", "AVX2")
    assert execute_notebooks.main([str(notebook)]) == 0
    assert "not pinned (MKL_CBWR=COMPATIBLE expected)" in capsys.readouterr().err


def code_notebook(path: Path, *sources: str) -> Path:
    """Write a notebook to `path`: a markdown cell, then a code cell for each source."""
    cells = [nbformat.v4.new_markdown_cell("# A chapter")]
    cells += [nbformat.v4.new_code_cell(source) for source in sources]
    nbformat.write(nbformat.v4.new_notebook(cells=cells), path)
    return path


def test_the_log_shows_what_a_terminal_would():
    cell = nbformat.v4.new_code_cell("")
    cell.outputs = [stream("stdout", "one\n10%\r50%\r100%\n"), stream("stderr", "noise\n")]
    assert execute_notebooks.last_lines(cell) == ["one", "100%"]
    assert execute_notebooks.last_lines(cell, count=1) == ["100%"]


def test_a_failed_cell_keeps_the_cells_run_so_far(tmp_path, capsys):
    path = code_notebook(tmp_path / "fail.ipynb", "print('kept')", "assert False, 'claim'", "1")
    with pytest.raises(CellExecutionError):
        execute_notebooks.execute(path, 60, log_cells=True, keep_partial=True)
    cells = nbformat.read(path, as_version=4).cells
    assert cells[1].outputs[0].text == "kept\n"
    assert cells[2].outputs[0].ename == "AssertionError"
    assert cells[3].execution_count is None and cells[3].outputs == []
    assert "  [1] " in capsys.readouterr().out


def test_a_stopped_run_marks_the_cell_it_stopped_in(tmp_path, monkeypatch):
    path = code_notebook(tmp_path / "stopped.ipynb", "1", "2")

    def execute(client):
        client.on_cell_start(cell=client.nb.cells[0], cell_index=0)  # markdown
        client.on_cell_start(cell=client.nb.cells[2], cell_index=2)
        raise execute_notebooks.Stopped("stopped by SIGTERM")

    monkeypatch.setattr(execute_notebooks.NotebookClient, "execute", execute)
    with pytest.raises(execute_notebooks.Stopped):
        execute_notebooks.execute(path, 60, keep_partial=True)
    stopped = nbformat.read(path, as_version=4).cells[2].outputs
    assert [(o.ename, o.evalue) for o in stopped] == [("Stopped", "Stopped: stopped by SIGTERM")]


def test_a_run_stopped_by_sigterm_stores_what_it_ran(tmp_path):
    # `timeout` sends SIGTERM to the whole process group, the kernel included, as here.
    path = code_notebook(
        tmp_path / "slow.ipynb", "print('kept')", "import time; time.sleep(60)", "1"
    )
    run = subprocess.Popen(
        [sys.executable, str(SCRIPT), "--log-cells", "--keep-partial", str(path)],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
        env={**os.environ, **execute_notebooks.pinned_kernels()},
        start_new_session=True,
    )
    for line in run.stdout:
        if line.startswith("  [1] "):  # the first cell has run; the second is sleeping
            os.killpg(run.pid, signal.SIGTERM)
            break
    assert "the run stopped early" in run.stdout.read()
    assert run.wait(timeout=30) != 0
    cells = nbformat.read(path, as_version=4).cells
    assert cells[1].outputs[0].text == "kept\n"
    assert [o.output_type for o in cells[2].outputs] == ["error"]  # stopped there
    assert cells[3].execution_count is None
