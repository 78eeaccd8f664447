"""pyproject.toml and environment.yml name the same packages, so the two routes cannot drift."""

from __future__ import annotations

import re
import sys
from pathlib import Path

if sys.version_info >= (3, 11):
    import tomllib
else:  # Python 3.10
    import tomli as tomllib

import yaml

ROOT = Path(__file__).resolve().parents[1]
# conda-forge spells a few packages differently from PyPI.
CONDA_NAMES = {"torch": "pytorch"}


def requirement_name(requirement: str) -> str:
    """The bare package name of a requirement such as 'nbval==0.11.0' or 'numpy>=1.24'."""
    return re.split(r"[<>=!~\[; ]", requirement.strip(), maxsplit=1)[0].lower()


def pyproject_packages() -> set[str]:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    requirements = list(project["dependencies"])
    for extra in project["optional-dependencies"].values():
        requirements.extend(extra)
    return {CONDA_NAMES.get(name, name) for name in map(requirement_name, requirements)}


def conda_packages() -> set[str]:
    environment = yaml.safe_load((ROOT / "environment.yml").read_text())
    names = {requirement_name(dep) for dep in environment["dependencies"] if isinstance(dep, str)}
    return names - {"python", "pip"}


def test_every_pyproject_dependency_is_in_environment_yml():
    missing = pyproject_packages() - conda_packages()
    assert missing == set(), f"add to environment.yml: {sorted(missing)}"


def test_environment_yml_adds_no_package_pyproject_lacks():
    extra = conda_packages() - pyproject_packages()
    assert extra == set(), f"add to pyproject.toml: {sorted(extra)}"


def test_nbval_is_pinned_to_0_11_0_in_both():
    project = (ROOT / "pyproject.toml").read_text()
    environment = (ROOT / "environment.yml").read_text()
    assert '"nbval==0.11.0"' in project
    assert "nbval=0.11.0" in environment


def test_environment_installs_attnlib_editable():
    environment = yaml.safe_load((ROOT / "environment.yml").read_text())
    pip_section = next(dep["pip"] for dep in environment["dependencies"] if isinstance(dep, dict))
    assert "-e ." in pip_section
