"""attnlib.claims and scripts/seed_spread.py: claims kept, and read back over seeds."""

from __future__ import annotations

import subprocess
import sys

import nbformat
import pytest

from attnlib import claims
from tests.helpers import SCRIPTS, script_module


@pytest.fixture(autouse=True)
def no_claims_kept(monkeypatch):
    monkeypatch.delenv(claims.RECORD_ONLY, raising=False)
    claims.forget()
    yield
    claims.forget()


def test_a_claim_within_its_bounds_is_kept_and_returns_nothing():
    assert claims.claim("final accuracy", 0.93, at_least=0.9) is None
    claims.claim("loss", 1.3, at_least=1.1, at_most=1.4)
    assert claims.measurements() == [
        {"name": "final accuracy", "value": 0.93, "at_least": 0.9, "at_most": None},
        {"name": "loss", "value": 1.3, "at_least": 1.1, "at_most": 1.4},
    ]


def test_a_bound_is_inclusive():
    claims.claim("exact", 0.95, at_least=0.95, at_most=0.95)
    assert claims.measurements()[0]["value"] == 0.95


def test_a_broken_claim_names_itself_its_value_and_its_bound():
    with pytest.raises(
        AssertionError, match=r"final accuracy: measured 0.882, the claim is >= 0.9"
    ):
        claims.claim("final accuracy", 0.882, at_least=0.9)
    assert len(claims.measurements()) == 1  # kept all the same


def test_nan_breaks_every_claim():
    with pytest.raises(AssertionError, match="measured nan"):
        claims.claim("loss", float("nan"), at_most=10.0)


def test_record_only_keeps_a_broken_claim_without_raising(monkeypatch):
    monkeypatch.setenv(claims.RECORD_ONLY, "1")
    claims.claim("gap", -0.2, at_least=0.0)
    assert not claims.Measurement(**claims.measurements()[0]).held


@pytest.mark.parametrize(
    ("kwargs", "error", "message"),
    [
        ({}, ValueError, "needs a bound: at_least=, at_most= or both"),
        ({"at_least": 0.9, "at_most": 0.1}, ValueError, "at_least=0.9 is above at_most=0.1"),
        ({"at_least": 0.5, "value": "high"}, TypeError, "measures a number, got str"),
        ({"at_least": 0.5, "name": " "}, ValueError, "a name that says what it measures"),
    ],
)
def test_a_malformed_claim_is_refused(kwargs, error, message):
    arguments = {"name": "accuracy", "value": 0.5} | kwargs
    with pytest.raises(error, match=message):
        claims.claim(arguments.pop("name"), arguments.pop("value"), **arguments)
    assert claims.measurements() == []


@pytest.mark.parametrize(
    ("low", "high", "text"),
    [(0.9, None, ">= 0.9"), (None, 0.5, "<= 0.5"), (0.15, 0.5, "in [0.15, 0.5]")],
)
def test_a_bound_reads_as_text(low, high, text):
    assert claims.Measurement("x", 0.3, low, high).bound() == text


def test_the_table_gives_each_claims_range_per_split_and_counts_the_broken():
    spread = script_module("seed_spread")
    runs = {
        "fitting": [
            {"name": "acc", "value": v, "at_least": 0.9, "at_most": None} for v in (0.96, 0.99)
        ],
        "held-out": [
            {"name": "acc", "value": v, "at_least": 0.9, "at_most": None} for v in (0.88, 0.97)
        ],
    }
    assert spread.claim_table(runs).splitlines()[2] == (
        "| acc | >= 0.9 | 0.96 to 0.99 (2) | 0.88 to 0.97 (2) | 1 |"
    )


@pytest.mark.parametrize(
    ("text", "seeds"), [("0-3", [0, 1, 2, 3]), ("100,104", [100, 104]), ("7", [7])]
)
def test_seed_lists_parse(text, seeds):
    assert script_module("seed_spread").parse_seeds(text) == seeds


def run_seed_spread(*args: str) -> subprocess.CompletedProcess:
    """scripts/seed_spread.py with these arguments, in a fresh process."""
    return subprocess.run(
        [sys.executable, str(SCRIPTS / "seed_spread.py"), *args],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )


def chapter_with_seeds(path, source: str) -> None:
    notebook = nbformat.v4.new_notebook()
    notebook.cells = [nbformat.v4.new_code_cell(source)]
    nbformat.write(notebook, path)


def test_a_chapter_runs_on_fitting_and_held_out_seeds_and_reports_each_claim(tmp_path):
    chapter = tmp_path / "chapter.ipynb"
    chapter_with_seeds(
        chapter,
        "from attnlib.claims import claim\nSEEDS = (0, 1)  # the chapter's own\n"
        "for seed in SEEDS:\n    claim('seed is small', seed, at_most=5)\n",
    )
    result = run_seed_spread(
        str(chapter), "--fit", "0-2", "--held-out", "6,7", "--out", str(tmp_path / "out")
    )
    assert result.returncode == 1, result.stderr  # the held-out seeds break the claim
    assert "| seed is small | <= 5 | 0 to 2 (3) | 6 to 7 (2) | 2 |" in result.stdout
    assert "2 claim value(s) outside their bounds" in result.stdout
    assert (tmp_path / "out" / "chapter_held-out_own.ipynb").is_file()


def test_each_seed_runs_alone_for_a_chapter_that_reads_its_first_seed(tmp_path):
    chapter = tmp_path / "chapter.ipynb"
    chapter_with_seeds(
        chapter,
        "from attnlib.claims import claim\nSEEDS = [0]\n"
        "claim('first seed is small', SEEDS[0], at_most=5)\n",
    )
    result = run_seed_spread(
        str(chapter), "--held-out", "4,6", "--each", "--out", str(tmp_path / "out")
    )
    assert result.returncode == 1, result.stderr
    assert "| first seed is small | <= 5 | 4 to 6 (2) | 1 |" in result.stdout
    assert (tmp_path / "out" / "chapter_held-out_own_seed6.ipynb").is_file()


def test_held_out_seeds_that_are_also_fitting_seeds_are_refused(tmp_path):
    chapter = tmp_path / "chapter.ipynb"
    chapter_with_seeds(chapter, "SEEDS = [0]")
    result = run_seed_spread(
        str(chapter), "--fit", "0-7", "--held-out", "7-9", "--out", str(tmp_path)
    )
    assert result.returncode == 2
    assert "held-out seeds must not be fitting seeds: [7]" in result.stderr
