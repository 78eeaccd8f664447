"""pyproject.toml uses the packaging metadata setuptools will keep accepting."""

from __future__ import annotations

import re
import sys
from pathlib import Path

if sys.version_info >= (3, 11):
    import tomllib
else:  # Python 3.10
    import tomli as tomllib

ROOT = Path(__file__).resolve().parents[1]
PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())


def test_license_is_an_spdx_string_with_its_file():
    # The table form, license = { text = "MIT" }, is deprecated and refused after 2027-02-18.
    project = PYPROJECT["project"]
    assert project["license"] == "MIT"
    assert all((ROOT / path).is_file() for path in project["license-files"])


def test_build_backend_knows_the_spdx_form():
    # setuptools reads license = "MIT" and license-files from version 77 on.
    (requirement,) = [r for r in PYPROJECT["build-system"]["requires"] if "setuptools" in r]
    minimum = re.fullmatch(r"setuptools>=(\d+)(\.\d+)*", requirement)
    assert minimum is not None and int(minimum.group(1)) >= 77


def test_package_data_ships_every_file_the_browser_model_loads():
    # A non-editable install must carry the WebAssembly kernel beside the JavaScript.
    patterns = PYPROJECT["tool"]["setuptools"]["package-data"]["attnlib"]
    package = ROOT / "attnlib"
    for name in ("live/imdb.js", "live/linear.wasm", "live/linear.wat"):
        assert (package / name).is_file()
        assert any((package / name).match(str(package / pattern)) for pattern in patterns), name
