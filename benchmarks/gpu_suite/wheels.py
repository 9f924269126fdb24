"""Wheels of what forge needs and a lent GPU machine lacks, for the GPU suite there.

The GPU machines forge is checked on come with PyTorch, Triton, pytest and much else, but not with
all of forge's own dependencies, and they reach no package index. This script downloads, on a
machine that does, the wheels of the packages the machine's image lacks (for its Python and
platform), into a folder that travels with the working tree. There, before the suite:

    python3 -m pip install -q --no-index --no-deps --target /tmp/site .whl/*.whl
    PYTHONPATH=/tmp/site:. python3 -m benchmarks.gpu_suite --out "$OUT/suite" --commit SHA

Usage: python -m benchmarks.gpu_suite.wheels [--dest .whl] [--python-version 3.12]
The folder is left out of git by ``.git/info/exclude`` (the script adds it there).
"""

from __future__ import annotations

import argparse
import subprocess
import sys
from collections.abc import Iterable
from pathlib import Path

from benchmarks.support.paths import ROOT

# What forge imports that the lent machines' image (its package list: the device tool's KINDS.md)
# does not hold, with what those need in turn. Pinned to versions seen to work with forge here.
MISSING = (
    "sqlalchemy",
    "alembic",
    "mako",
    "greenlet",
    "pydantic",
    "pydantic-core",
    "annotated-types",
    "typing-inspection",
    "pydantic-settings",
    "python-dotenv",
    "platformdirs",
    "textual",
    "mdit-py-plugins",
    "linkify-it-py",
    "uc-micro-py",
    "litellm",
    "h2",  # httpx[http2], which litellm imports at once (the llm part's first loan: No module named 'h2')
    "hpack",
    "hyperframe",
    "openai",
    "httpx2",
    "jiter",
    "distro",
    "sniffio",
    "jsonschema",
    "jsonschema-specifications",
    "referencing",
    "rpds-py",
    "importlib-metadata",
    "fastuuid",
    "httpcore2",
    "truststore",
    "pytest-asyncio",
    "pytest-textual-snapshot",
    "syrupy",
    "pytest-xdist",  # pyproject's addopts passes -n: pytest refuses the option without it
    "execnet",
)
PLATFORMS = (
    "manylinux_2_28_x86_64",
    "manylinux_2_27_x86_64",
    "manylinux_2_17_x86_64",
    "manylinux2014_x86_64",
    "manylinux1_x86_64",
    "any",
)


def _installed_version(name: str) -> str | None:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version(name)
    except PackageNotFoundError:
        return None


def download(dest: Path, python_version: str) -> list[str]:
    """Each missing package's wheel, at the version installed here where there is one; returns the
    packages that could not be fetched."""
    dest.mkdir(exist_ok=True)
    failed = []
    for name in MISSING:
        pinned = _installed_version(name)
        spec = f"{name}=={pinned}" if pinned else name
        cmd = [
            sys.executable,
            "-m",
            "pip",
            "download",
            "-q",
            "--no-deps",
            "--only-binary=:all:",
            "-d",
            str(dest),
            "--python-version",
            python_version,
            "--implementation",
            "cp",
            *(f"--platform={p}" for p in PLATFORMS),
            spec,
        ]
        if subprocess.run(cmd, capture_output=True, text=True).returncode != 0:
            failed.append(spec)
    return failed


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--dest", type=Path, default=ROOT / ".whl")
    ap.add_argument("--python-version", default="3.12", help="the lent machine's Python (KINDS.md: 3.12)")
    a = ap.parse_args()
    exclude = ROOT / ".git" / "info" / "exclude"
    if exclude.parent.is_dir() and f"/{a.dest.name}/" not in (exclude.read_text() if exclude.is_file() else ""):
        with exclude.open("a") as f:
            f.write(f"/{a.dest.name}/\n")
    failed = download(a.dest, a.python_version)
    size = sum(p.stat().st_size for p in a.dest.glob("*.whl")) / 2**20
    print(
        f"{len(list(a.dest.glob('*.whl')))} wheels, {size:.1f} MiB in {a.dest}"
        + (f"; not found: {failed}" if failed else "")
    )
    travels = size + _tracked_mib() + _mib((ROOT / ".gpu-suite").glob("*"))
    said = f"with the tracked files and the suite's archive (.gpu-suite): {travels:.1f} MiB"
    print(f"{said} of the {TRAVEL_LIMIT_MIB} MiB a call may send")
    if travels > TRAVEL_LIMIT_MIB:
        print("too large for the lent machine: leave the largest wheels out (the llm_cuda part needs litellm)")
        return 1
    return 1 if failed else 0


TRAVEL_LIMIT_MIB = 64  # what a call to the lent machine may send: the working tree and carried paths


def _tracked_mib() -> float:
    """The size of the files git tracks (what travels with every call beside the wheels)."""
    listed = subprocess.run(["git", "ls-files", "-z"], cwd=ROOT, capture_output=True, text=True)
    return _mib(ROOT / name for name in listed.stdout.split("\0") if name)


def _mib(files: Iterable[Path]) -> float:
    return sum(f.stat().st_size for f in files if f.is_file()) / 2**20


if __name__ == "__main__":
    sys.exit(main())
