"""The package installs as declared: the Python it names is the one linted, typed and tested, every
data file the code reads is in the wheel, and the version is one literal."""

from __future__ import annotations

import fnmatch
import re
import subprocess
import sys
import tomllib
from pathlib import Path

from forge import __version__

ROOT = Path(__file__).resolve().parents[1]
PROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())


def test_the_declared_python_is_the_one_linted_typed_and_tested():
    project = PROJECT
    lowest = re.fullmatch(r">=3\.(\d+)", project["project"]["requires-python"])
    assert lowest, "requires-python is a lower bound"
    minor = int(lowest.group(1))
    assert project["tool"]["ruff"]["target-version"] == f"py3{minor}"
    assert project["tool"]["mypy"]["python_version"] == f"3.{minor}"
    assert f"Programming Language :: Python :: 3.{minor}" in project["project"]["classifiers"]
    assert sys.version_info >= (3, minor)
    assert project["project"]["name"] != "forge"  # taken on PyPI by an unrelated project


def test_forge_version_prints_the_package_version():
    done = subprocess.run([sys.executable, "-m", "forge", "--version"], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == f"forge {__version__}"


def test_every_data_file_in_the_package_is_declared_for_the_wheel():
    declared = PROJECT["tool"]["setuptools"]["package-data"]["forge"]
    package = ROOT / "forge"
    data = [
        p.relative_to(package).as_posix()
        for p in package.rglob("*")
        if p.is_file() and p.suffix not in (".py", ".pyc") and "__pycache__" not in p.parts
    ]
    assert "tui/app.tcss" in data  # the walk sees the data files
    missing = [f for f in data if not any(fnmatch.fnmatch(f, glob) for glob in declared)]
    assert not missing, f"not in [tool.setuptools.package-data] (the wheel would lack them): {missing}"
