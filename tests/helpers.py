"""Helpers that more than one test module needs."""

from __future__ import annotations

import importlib.util
import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

SCRIPTS = Path(__file__).resolve().parents[1] / "scripts"
NODE = shutil.which("node") or ("/usr/bin/node" if Path("/usr/bin/node").is_file() else None)


def script_module(name: str):
    """scripts/<name>.py, imported as a script would see it (scripts/ on the path)."""
    sys.path.insert(0, str(SCRIPTS))
    try:
        spec = importlib.util.spec_from_file_location(name, SCRIPTS / f"{name}.py")
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
    finally:
        sys.path.remove(str(SCRIPTS))
    return module


def node_answers(
    harness: str, scripts: list[Path], cases: list[dict], timeout: float = 120
) -> list:
    """Every case through ``harness`` (run with the scripts' paths) in one node process; its
    answers, in the cases' order. Skips the test where node is not installed."""
    if NODE is None:
        pytest.skip("node is not installed: the browser-side arithmetic cannot be checked")
    finished = subprocess.run(
        [NODE, "-e", harness, *map(str, scripts)],
        input=json.dumps(cases),
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )
    assert finished.returncode == 0, finished.stderr
    return json.loads(finished.stdout)
