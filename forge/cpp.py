"""Fast C++ for CPU kernels: compile a source to a shared library, cached on disk by hash.

No torch headers are involved, so a cold compile takes well under the ~50 s of
``torch.utils.cpp_extension.load_inline``. Kernels are plain ``extern "C"`` functions that take
raw pointers and sizes::

    from forge import cpp

    lib = cpp.load(r'''
    #include <cstdint>
    extern "C" void scale(const float* x, float* out, int64_t n, double s) {
        #pragma omp parallel for simd
        for (int64_t i = 0; i < n; ++i) out[i] = x[i] * (float)s;
    }
    ''')
    lib.scale(x, out, x.numel(), 2.0)   # tensors -> data pointers, int -> int64_t, float -> double

Tensor arguments must be contiguous CPU tensors; the call checks this and raises ``ValueError``.
A function returns nothing unless declared with ``lib.function(name, restype=ctypes.c_double)``.

Under torch's profiler (a verifier profiling a candidate), each call is a named range
(``forge.cpp NAME``), so the profile says how much of the time each C function takes; otherwise a
call costs one attribute read more (~30 ns).
"""

from __future__ import annotations

import ctypes
import hashlib
import os
import secrets
import shutil
import subprocess
import sys
import tempfile
import threading
from pathlib import Path
from typing import Any

from forge.core.errors import CompileError

DEFAULT_FLAGS = (
    "-O3",
    "-march=native",
    "-fopenmp",
    "-fPIC",
    "-shared",
    "-std=c++17",
    # Neither changes results (IEEE rounding, NaN and inf are kept); together they let GCC
    # if-convert and vectorise loops with selects and calls such as floor().
    "-fno-math-errno",
    "-fno-trapping-math",
)
__all__ = ["DEFAULT_FLAGS", "CppFunction", "CppLibrary", "build", "cache_dir", "compiler_name", "load"]

_lock = threading.Lock()
_loaded: dict[str, CppLibrary] = {}
_compiler_ids: dict[str, str] = {}


def cache_dir() -> Path:
    """Where built libraries live: $FORGE_CACHE_DIR/cpp, else the per-user cache directory."""
    root = os.environ.get("FORGE_CACHE_DIR")
    if not root:
        import platformdirs

        root = platformdirs.user_cache_dir("forge")
    return Path(root) / "cpp"


def _compiler() -> str:
    cxx = os.environ.get("CXX") or shutil.which("g++") or shutil.which("c++") or shutil.which("clang++")
    if not cxx:
        raise CompileError("no C++ compiler found: install g++ (or set CXX) to build C++ kernels")
    return cxx


def _compiler_id(cxx: str) -> str:
    if cxx not in _compiler_ids:
        try:
            out = subprocess.run([cxx, "--version"], capture_output=True, text=True, timeout=30).stdout
        except (OSError, subprocess.SubprocessError) as exc:
            raise CompileError(f"C++ compiler {cxx!r} does not run: {exc}") from exc
        _compiler_ids[cxx] = out.splitlines()[0] if out else cxx
    return _compiler_ids[cxx]


def compiler_name() -> str:
    """The C++ compiler kernels are built with, as its ``--version`` names it (CompileError if none)."""
    return _compiler_id(_compiler())


def _trim(stderr: str, limit: int = 40) -> str:
    lines = stderr.splitlines()
    errors = [ln for ln in lines if "error" in ln]
    keep = errors[:limit] if errors else lines[:limit]
    return "\n".join(keep)


def build(
    source: str, flags: tuple[str, ...] = DEFAULT_FLAGS, extra_flags: tuple[str, ...] = (), timeout_s: float = 300.0
) -> Path:
    """Compile ``source`` (or reuse the cached build) and return the shared library's path;
    CompileError when the compiler fails or runs past ``timeout_s``."""
    cxx = _compiler()
    all_flags = (*flags, *extra_flags)
    key = hashlib.sha256("\0".join([source, *all_flags, _compiler_id(cxx)]).encode()).hexdigest()[:24]
    out_dir = cache_dir()
    target = out_dir / f"k{key}.so"
    if target.exists():
        return target
    out_dir.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="forge-cpp-") as tmp:
        src = Path(tmp) / f"k{key}.cpp"
        src.write_text(source)
        # unique across processes that share the cache, a sandboxed worker's PID namespace included
        partial = out_dir / f".k{key}.{secrets.token_hex(8)}.so"
        try:
            proc = subprocess.run(
                [cxx, *all_flags, str(src), "-o", str(partial)], capture_output=True, text=True, timeout=timeout_s
            )
        except subprocess.TimeoutExpired as exc:
            raise CompileError(f"C++ compile took more than {timeout_s:.0f} s") from exc
        if proc.returncode != 0:
            partial.unlink(missing_ok=True)
            raise CompileError(f"C++ compile failed ({Path(cxx).name}):\n{_trim(proc.stderr)}")
        os.replace(partial, target)  # atomic: concurrent builders of one source both succeed
    return target


class CppFunction:
    """A C function that converts tensors, ints and floats to C arguments at call time."""

    def __init__(self, fn: Any, name: str) -> None:
        self._fn = fn
        self.name = name
        # torch's profiler state, where torch is loaded (its tensors are what the calls pass);
        # torch is not imported here for it
        self._profiler = sys.modules.get("torch.autograd.profiler")

    @property
    def restype(self) -> Any:
        return self._fn.restype

    @restype.setter
    def restype(self, value: Any) -> None:
        self._fn.restype = value

    def __call__(self, *args: Any) -> Any:
        c_args = [_c_arg(a, i, self.name) for i, a in enumerate(args)]
        if self._profiler is None or not self._profiler._is_profiler_enabled:
            return self._fn(*c_args)
        with self._profiler.record_function(f"forge.cpp {self.name}"):
            return self._fn(*c_args)


def _c_arg(a: Any, i: int, fname: str) -> Any:
    data_ptr = getattr(a, "data_ptr", None)
    if data_ptr is not None:  # a torch.Tensor (duck-typed: torch need not be imported here)
        if a.device.type != "cpu":
            raise ValueError(f"{fname}: argument {i} is on {a.device}; forge.cpp kernels take CPU tensors")
        if not a.is_contiguous():
            raise ValueError(f"{fname}: argument {i} is not contiguous; pass t.contiguous()")
        return ctypes.c_void_p(data_ptr())
    if isinstance(a, bool):
        return ctypes.c_int(int(a))
    if isinstance(a, int):
        return ctypes.c_int64(a)
    if isinstance(a, float):
        return ctypes.c_double(a)
    if a is None or isinstance(a, ctypes._SimpleCData | ctypes.Array):
        return a
    raise TypeError(f"{fname}: argument {i} has unsupported type {type(a).__name__} (tensor, int, float)")


class CppLibrary:
    """A loaded library; attribute access returns its ``extern "C"`` functions."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._lib = ctypes.CDLL(str(path), mode=os.RTLD_NOW | os.RTLD_LOCAL)
        self._funcs: dict[str, CppFunction] = {}

    def function(self, name: str, restype: Any = None) -> CppFunction:
        if name not in self._funcs:
            try:
                raw = getattr(self._lib, name)
            except AttributeError:
                raise AttributeError(f'{self.path.name} has no function {name!r}; declare it extern "C"') from None
            raw.restype = None
            self._funcs[name] = CppFunction(raw, name)
        fn = self._funcs[name]
        if restype is not None:
            fn.restype = restype
        return fn

    def __getattr__(self, name: str) -> CppFunction:
        if name.startswith("_"):
            raise AttributeError(name)
        return self.function(name)


def load(
    source: str, extra_flags: tuple[str, ...] = (), flags: tuple[str, ...] = DEFAULT_FLAGS, timeout_s: float = 300.0
) -> CppLibrary:
    """Build (cached by source hash) and load a C++ source; one library object per process."""
    path = build(source, flags, extra_flags, timeout_s)
    with _lock:
        lib = _loaded.get(str(path))
        if lib is None:
            lib = _loaded[str(path)] = CppLibrary(path)
    return lib
