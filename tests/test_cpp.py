"""forge.cpp: fast compile, on-disk cache by source hash, tensor calling convention, errors."""

from __future__ import annotations

import time

import pytest
import torch

from forge import cpp
from forge.core.errors import CompileError

SRC = r"""
#include <cstdint>
extern "C" void axpy(const float* x, float* y, int64_t n, double a) {
    #pragma omp parallel for simd
    for (int64_t i = 0; i < n; ++i) y[i] += (float)a * x[i];
}
extern "C" double total(const float* x, int64_t n) {
    double s = 0;
    for (int64_t i = 0; i < n; ++i) s += x[i];
    return s;
}
"""


@pytest.fixture(autouse=True)
def _cache(tmp_path, monkeypatch):
    monkeypatch.setenv("FORGE_CACHE_DIR", str(tmp_path))


def test_compile_call_and_cache(tmp_path):
    t0 = time.perf_counter()
    path = cpp.build(SRC)
    cold = time.perf_counter() - t0
    assert path.exists() and path.parent == tmp_path / "cpp"
    t0 = time.perf_counter()
    assert cpp.build(SRC) == path
    assert time.perf_counter() - t0 < cold  # the cached build is not recompiled
    lib = cpp.load(SRC)
    x, y = torch.randn(1000), torch.zeros(1000)
    lib.axpy(x, y, x.numel(), 2.0)
    assert torch.allclose(y, 2 * x)
    import ctypes

    assert lib.function("total", restype=ctypes.c_double)(x, x.numel()) == pytest.approx(
        float(x.double().sum()), rel=1e-6
    )
    assert cpp.load(SRC) is lib  # one library object per process


def test_different_source_different_build():
    assert cpp.build(SRC) != cpp.build(SRC + "\n// another\n")


def test_compile_error_shows_compiler_message():
    with pytest.raises(CompileError, match="error"):
        cpp.build('extern "C" void f() { this is not C++ }')


def test_argument_checks():
    lib = cpp.load(SRC)
    x = torch.randn(10, 10)
    with pytest.raises(ValueError, match="not contiguous"):
        lib.axpy(x.t(), x, 100, 1.0)
    with pytest.raises(TypeError, match="unsupported type"):
        lib.axpy(x, x, "100", 1.0)
    with pytest.raises(AttributeError, match="extern"):
        _ = lib.missing_function
