"""Importing a Python file as a named module (op files, candidates, bank sources), and parsing
Python source safely from several threads.

Light on purpose: the kernel-bank runtime uses it too.
"""

from __future__ import annotations

import ast
import contextlib
import importlib
import importlib.util
import sys
import threading
import types
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any

# CPython 3.11.7 (this project's CI) keeps the AST-to-Python conversion's recursion counter in
# state shared by threads: two threads parsing at once can raise "SystemError: AST constructor
# recursion depth mismatch" (CPython issue gh-106905). forge parses in its parallel verification
# threads, so every forge parse goes through one lock.
_parse_lock = threading.Lock()


def parse_python(source: str, filename: str = "<unknown>") -> ast.Module:
    """``ast.parse``, one thread at a time (see above); raises SyntaxError as it does."""
    with _parse_lock:
        return ast.parse(source, filename=filename)


def attributes_on_first_use(package: str, where: Mapping[str, str]) -> Callable[[str], Any]:
    """A module ``__getattr__`` (PEP 562) for ``package``: ``where[name]`` is the module that defines
    ``name`` (an attribute of the same name), or the submodule ``name`` itself; it is imported when
    the name is first asked for."""

    def __getattr__(name: str) -> Any:
        module_name = where.get(name)
        if module_name is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        module = importlib.import_module(module_name)
        return module if module_name.endswith(f".{name}") else getattr(module, name)

    return __getattr__


def import_file(name: str, path: str | Path) -> types.ModuleType:
    """Execute ``path`` as module ``name``, registered in sys.modules (removed again if it raises)."""
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        raise ImportError(f"{str(path)!r} cannot be imported as a Python module (is it a .py file?)")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    try:
        spec.loader.exec_module(module)
    except BaseException:
        sys.modules.pop(name, None)
        raise
    return module


# The name candidates import their op's module by (``from forge_reference import Model``): the
# verifier's workers, the user loop and the bank's runtime register the op's module under it.
REFERENCE_MODULE = "forge_reference"


def register_reference(op_module: types.ModuleType) -> None:
    """Make ``op_module`` importable as ``forge_reference`` for the rest of this process (a worker's)."""
    sys.modules[REFERENCE_MODULE] = op_module


def registered_reference() -> types.ModuleType:
    """The op module registered as ``forge_reference`` (``register_reference``)."""
    return sys.modules[REFERENCE_MODULE]


@contextlib.contextmanager
def reference_registered_while(op_module: types.ModuleType) -> Iterator[None]:
    """``op_module`` importable as ``forge_reference`` inside the block, whatever was before it
    restored after (a program loading kernels of several ops)."""
    previous = sys.modules.get(REFERENCE_MODULE)
    register_reference(op_module)
    try:
        yield
    finally:
        if previous is None:
            sys.modules.pop(REFERENCE_MODULE, None)
        else:
            sys.modules[REFERENCE_MODULE] = previous
