"""scripts/gpu_run.sh (staging, on a throwaway git repository) and scripts/rehearse_gpu_run.py."""

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import nbformat
import pytest

from attnlib.tasks.imdb_train import MODEL_FILES
from tests.helpers import script_module

SCRIPT = Path(__file__).resolve().parents[1] / "scripts" / "gpu_run.sh"
TABLE_SCRIPT = SCRIPT.parent / "gpu_table.py"
WEIGHTS = "attnlib/assets/imdb/model.safetensors"
CHAPTER = "notebooks/13_imdb_encoder.ipynb"
NEXT = "notebooks/next/13_imdb_encoder.ipynb"

pytestmark = pytest.mark.skipif(shutil.which("git") is None, reason="needs git")


def git(repo: Path, *args: str) -> str:
    """Run git in ``repo`` and return what it printed."""
    return subprocess.run(
        ["git", *args], cwd=repo, check=True, capture_output=True, text=True
    ).stdout


def gpu_run(repo: Path, *args: str) -> subprocess.CompletedProcess:
    """Run the repository's copy of gpu_run.sh with ``args``, under this Python."""
    return subprocess.run(
        ["bash", "scripts/gpu_run.sh", *args],
        cwd=repo,
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHON": sys.executable},
    )


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    """A git repository holding the script, chapter 13 and its next version, 1 MiB of weights."""
    tmp_path = tmp_path / "repo"
    (tmp_path / "scripts").mkdir(parents=True)
    shutil.copy(SCRIPT, tmp_path / "scripts")
    shutil.copy(TABLE_SCRIPT, tmp_path / "scripts")
    table = script_module("gpu_table")
    (tmp_path / "README.md").write_text(f"before\n{table.BEGIN}\nold table\n{table.END}\nafter\n")
    (tmp_path / WEIGHTS).parent.mkdir(parents=True)
    (tmp_path / WEIGHTS).write_bytes(b"w" * 2**20)
    (tmp_path / "notebooks" / "next").mkdir(parents=True)
    for path in (CHAPTER, NEXT):
        nbformat.write(chapter("print('old')", run=False), tmp_path / path)
    (tmp_path / ".gitignore").write_text("/.whl/\n/data_cache/\n")
    git(tmp_path, "init", "-q")
    git(tmp_path, "add", ".")
    git(tmp_path, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "start")
    return tmp_path


def chapter(source: str, run: bool = True, error: bool = False) -> nbformat.NotebookNode:
    """A one-cell notebook, executed or not, whose output is an error or not."""
    cell = nbformat.v4.new_code_cell(source, execution_count=1 if run else None)
    if error:
        cell.outputs = [nbformat.v4.new_output("error", ename="KeyError", evalue="x", traceback=[])]
    return nbformat.v4.new_notebook(cells=[cell])


def came_back(tmp_path: Path, notebook: nbformat.NotebookNode, model: bool = True) -> Path:
    """A folder like the one a device call's files land in."""
    folder = tmp_path / "back"  # beside the repository, not in it
    folder.mkdir()
    nbformat.write(notebook, folder / "13_imdb_encoder.ipynb")
    for name in MODEL_FILES if model else ():
        (folder / name).write_text(f"new {name}")
    if model:
        (folder / "results.json").write_text(json.dumps(new_record()))
        (folder / "config.json").write_text(json.dumps(CONFIG))
    (folder / "run.log").write_text("done")
    return folder


def bundle(repo: Path, cache_bytes: int) -> None:
    """A fake .whl/ and data_cache/ as `make gpu-bundle` leaves them."""
    (repo / ".whl").mkdir()
    (repo / ".whl" / "a-1.0-py3-none-any.whl").write_bytes(b"z" * 1000)
    (repo / "data_cache").mkdir()
    (repo / "data_cache" / "imdb-aclImdb_v1.cache").write_bytes(b"c" * cache_bytes)


def test_stage_without_a_bundle_refuses_and_leaves_the_weights(repo):
    result = gpu_run(repo, "stage")
    assert result.returncode == 2
    assert "run 'make gpu-bundle' first" in result.stderr
    assert git(repo, "status", "--short") == ""


def test_stage_takes_the_weights_out_and_counts_what_travels(repo):
    bundle(repo, cache_bytes=3000)
    result = gpu_run(repo, "stage")
    assert result.returncode == 0, result.stderr
    assert git(repo, "status", "--short").split() == ["D", WEIGHTS]
    assert not (repo / WEIGHTS).exists()
    # Every file there (the carried bundle included) but git's own and the 1 MiB of weights.
    expected = sum(
        p.stat().st_size for p in repo.rglob("*") if p.is_file() and ".git" not in p.parts
    )
    assert f"({expected} bytes; at most {64 * 2**20})" in result.stdout


def test_unstage_puts_the_weights_back(repo):
    bundle(repo, cache_bytes=10)
    assert gpu_run(repo, "stage").returncode == 0
    assert gpu_run(repo, "unstage").returncode == 0
    assert git(repo, "status", "--short") == ""
    assert (repo / WEIGHTS).stat().st_size == 2**20


def test_stage_refuses_more_than_a_call_can_carry(repo):
    bundle(repo, cache_bytes=64 * 2**20)
    result = gpu_run(repo, "stage")
    assert result.returncode == 1
    assert "too much to travel" in result.stderr


def test_land_puts_the_run_in_place_and_stages_it(repo, tmp_path):
    bundle(repo, cache_bytes=10)
    assert gpu_run(repo, "stage").returncode == 0
    result = gpu_run(repo, "land", str(came_back(tmp_path, chapter("print('new')"))))
    assert result.returncode == 0, result.stderr
    assert "print('new')" in (repo / CHAPTER).read_text()
    assert not (repo / NEXT).exists()
    assert (repo / WEIGHTS).read_text() == "new model.safetensors"
    assert oct((repo / WEIGHTS).stat().st_mode & 0o777) == "0o644"
    staged = git(repo, "status", "--short").splitlines()
    assert f"M  {CHAPTER}" in staged and f"D  {NEXT}" in staged and f"M  {WEIGHTS}" in staged
    assert "A  attnlib/assets/imdb/results.json" in staged


@pytest.mark.parametrize(
    "notebook, model, message",
    [
        (chapter("1 / 0", error=True), True, "failed in cells [0] and did not run cells []"),
        (chapter("x = 1", run=False), True, "failed in cells [] and did not run cells [0]"),
        (chapter("x = 1"), False, "has no config.json"),
    ],
)
def test_land_refuses_an_unfinished_run(repo, tmp_path, notebook, model, message):
    result = gpu_run(repo, "land", str(came_back(tmp_path, notebook, model=model)))
    assert result.returncode == 1
    assert message in result.stderr
    assert git(repo, "status", "--short") == ""


def test_an_unknown_verb_prints_the_usage(repo):
    result = gpu_run(repo, "go")
    assert result.returncode == 2
    assert result.stderr.startswith(
        "usage: scripts/gpu_run.sh all|install|run|stage|land DIR|unstage|bench"
    )


def test_the_rehearsal_takes_every_gpu_only_branch_of_chapter_13():
    rehearsal = script_module("rehearse_gpu_run")
    root = SCRIPT.parents[1]
    source = (
        root / rehearsal.NEXT if (root / rehearsal.NEXT).is_file() else root / rehearsal.CHAPTER
    )
    code = "\n".join(
        c.source for c in rehearsal.rehearsal_notebook(source, 420.0).cells if c.cell_type == "code"
    )
    assert "quick_mode()" not in code and 'device.type == "cuda" or' not in code
    assert (
        "RETRAIN = True" in code and "FINISH_WITHIN_S = 420.0" in code and "n_eval = None" in code
    )


def test_the_rehearsal_refuses_a_chapter_it_no_longer_matches(tmp_path):
    rehearsal = script_module("rehearse_gpu_run")
    notebook = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell("RETRAIN = False")])
    nbformat.write(notebook, tmp_path / "chapter.ipynb")
    with pytest.raises(SystemExit, match="the chapter has 0 copies of 'RETRAIN = device.type"):
        rehearsal.rehearsal_notebook(tmp_path / "chapter.ipynb", None)


CONFIG = {"pretrain_batch": 128, "max_len": 512, "n_valid": 1000}


def new_record() -> dict:
    """A record shaped like the one the next chapter 13 writes (three seeds, McNemar)."""
    seeds = {"pretrained, seed 0": 0.93, "pretrained, seed 1": 0.92, "pretrained, seed 2": 0.925}
    finetuning = {key: {"seconds": [15.0, 30.0, 45.0]} for key in seeds}
    finetuning["from scratch"] = {"seconds": [14.0, 28.0, 42.0]}
    return {
        "device": "NVIDIA H200",
        "software": "torch 2.13.0, CUDA 13.0",
        "test_reviews": 25000,
        "test_accuracy": 0.93,
        "scratch_test_accuracy": 0.88,
        "seed_test_accuracies": seeds,
        "seconds_to_90_valid": 301.4,
        "mcnemar_nbsvm": {
            "reviews": 25000,
            "encoder_only": 1300,
            "nbsvm_only": 900,
            "p_value": 1.2e-17,
        },
        "pretraining": {
            "steps": 12000,
            "seconds": [10.0, 250.0],
            "tokens_per_second": 3.0e6,
            "steady_tokens_per_second": 3.5e6,
            "flops_per_token": 40e6,
            "peak_tflops": 989.0,
        },
        "finetuning": finetuning,
        "baselines": {"NBSVM-style 1-3-grams": 0.9127},
    }


def test_the_gpu_table_of_a_run_with_seeds_and_a_paired_test():
    rows = dict(script_module("gpu_table").table_rows(new_record(), CONFIG))
    assert rows["device"] == "NVIDIA H200 (989 TFLOP/s dense bf16 peak)"
    assert rows["software"] == "torch 2.13.0, CUDA 13.0"
    assert rows["masked-LM pretraining"] == "12,000 steps of 128 × 512 tokens in 250 s"
    # 3e6 tokens/s x 40 MFLOP/token = 120 TFLOP/s, 12% of 989; 3.5e6 tokens/s: 140, 14%.
    assert rows["pretraining throughput"].endswith("= 120 TFLOP/s at 40.0 MFLOP/token, 12% of peak")
    assert rows["the same, after the first twentieth (compilation left out)"].startswith(
        "3.5 M tokens/s = 140 TFLOP/s"
    )
    assert rows["fine-tuning"].startswith("3 epochs in 45 s (15 s per epoch")
    assert rows["time to 90% validation accuracy"] == "301 s, pretraining included"
    assert rows["test accuracy (25,000 reviews)"].startswith(
        "93.00% pretrained and fine-tuned (seed 0; shipped); 88.00% from scratch"
    )
    assert rows["over 3 fine-tuning seeds"] == "92.50% ± 0.50% (mean ± sd; 93.00%, 92.00%, 92.50%)"
    assert rows["shipped encoder against NBSVM, review by review"] == (
        "only the encoder right on 1,300, only NBSVM on 900, of 25,000; exact McNemar p < 0.0001"
    )


def test_the_readme_table_is_the_shipped_record():
    table = script_module("gpu_table")
    readme = table.README.read_text()
    assert table.table() in readme, "run: python scripts/gpu_table.py --write"
    results = json.loads((table.MODEL / "results.json").read_text())
    chapter_line = next(line for line in readme.splitlines() if line.startswith("| 13 |"))
    for number in (results["test_accuracy"], max(results["baselines"].values())):
        assert f"{number:.2%}" in chapter_line, (
            "the README's line for chapter 13 is not the record's"
        )


def test_the_gpu_table_needs_its_markers():
    with pytest.raises(ValueError, match="the README has no table between"):
        script_module("gpu_table").replace_table("no markers here", "| a | b |")


def test_land_writes_the_readme_table_from_the_new_record(repo, tmp_path):
    result = gpu_run(repo, "land", str(came_back(tmp_path, chapter("print('new')"))))
    assert result.returncode == 0, result.stderr
    readme = (repo / "README.md").read_text()
    assert readme.startswith("before\n") and readme.endswith("\nafter\n")
    assert "old table" not in readme and "| device | NVIDIA H200 (989 TFLOP/s" in readme
    assert "M  README.md" in git(repo, "status", "--short").splitlines()


def test_land_refuses_a_record_the_table_cannot_read(repo, tmp_path):
    folder = came_back(tmp_path, chapter("print('new')"))
    (folder / "results.json").write_text("{}")
    result = gpu_run(repo, "land", str(folder))
    assert result.returncode == 1
    assert "cannot read the record that came back: nothing landed" in result.stderr
    assert git(repo, "status", "--short") == ""
