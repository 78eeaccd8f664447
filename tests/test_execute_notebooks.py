"""scripts/execute_notebooks.py: what it stores besides the outputs themselves."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import nbformat

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
    monkeypatch.setattr(execute_notebooks, "execute", lambda path, timeout: 0.0)
    monkeypatch.setenv("ATEN_CPU_CAPABILITY", "avx2")
    monkeypatch.setenv("MKL_CBWR", "AVX2")
    monkeypatch.setenv("ONEDNN_MAX_CPU_ISA", "AVX2")
    assert execute_notebooks.main([str(notebook)]) == 0
    assert "not pinned (MKL_CBWR=COMPATIBLE expected)" in capsys.readouterr().err
