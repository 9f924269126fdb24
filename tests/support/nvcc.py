"""Compiling CUDA C++ with nvcc where no GPU is: a CUDA candidate's compile errors show without one.

``cuda_source`` reads the CUDA half of a ``load_inline`` candidate (the string assigned to
``CUDA_SOURCE``) without importing it; ``nvcc_error`` compiles it for sm_90 with torch's headers on
the include path (and Python's), as ``load_inline`` would, and says what nvcc complained of (None: it compiled).
"""

from __future__ import annotations

import ast
import shutil
import subprocess
import sysconfig
from pathlib import Path

from torch.utils.cpp_extension import COMMON_NVCC_FLAGS, include_paths


def find_nvcc() -> str | None:
    return shutil.which("nvcc") or next((str(p) for p in (Path("/usr/local/cuda/bin/nvcc"),) if p.is_file()), None)


def cuda_source(python_text: str) -> str | None:
    """The string a module assigns to ``CUDA_SOURCE``, or None."""
    for node in ast.parse(python_text).body:
        if isinstance(node, ast.Assign) and any(getattr(t, "id", "") == "CUDA_SOURCE" for t in node.targets):
            value = node.value
            if isinstance(value, ast.Constant) and isinstance(value.value, str):
                return value.value
    return None


def one_translation_unit(sources: list[str]) -> str:
    """``sources`` as one file: their ``#include`` lines once, at the top, and each source's body in a
    namespace of its own, so torch's headers are parsed once for all of them (a minute, not one each)."""
    includes: list[str] = []
    bodies: list[str] = []
    for i, source in enumerate(sources):
        lines = source.splitlines()
        includes += [line for line in lines if line.startswith("#include") and line not in includes]
        body = "\n".join(line for line in lines if not line.startswith("#include"))
        bodies.append(f"namespace forge_source_{i} {{\n{body}\n}}  // namespace forge_source_{i}")
    return "\n".join([*includes, *bodies]) + "\n"


def nvcc_error(source: str, into: Path, arch: str = "sm_90") -> str | None:
    """nvcc's complaint about ``source`` compiled for ``arch`` (None: it compiled; a missing nvcc is
    the caller's to check with ``find_nvcc``)."""
    nvcc = find_nvcc()
    if nvcc is None:
        return "nvcc is not installed"
    into.mkdir(parents=True, exist_ok=True)
    cu = into / "candidate.cu"
    cu.write_text(source)
    # torch's CPU build ships c10/cuda's headers but not the one its CUDA build generates, which
    # only marks the library as shared: written here, so c10/cuda (streams, launch checks) compiles
    generated = into / "include" / "c10" / "cuda" / "impl" / "cuda_cmake_macros.h"
    generated.parent.mkdir(parents=True, exist_ok=True)
    generated.write_text("#pragma once\n#define C10_CUDA_BUILD_SHARED_LIBS\n")
    # load_inline's flags: its C++ standard, torch's common ones (half operators off, ...), -fPIC
    cmd = [
        nvcc,
        f"-arch={arch}",
        "-std=c++20",
        *COMMON_NVCC_FLAGS,
        "-Xcompiler",
        "-fPIC",
        "-c",
        str(cu),
        "-o",
        str(into / "c.o"),
        f"-I{into / 'include'}",
        *(f"-I{p}" for p in [*include_paths(), sysconfig.get_paths()["include"]]),
    ]
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=900)
    return None if done.returncode == 0 else (done.stderr or done.stdout)[-3000:]
