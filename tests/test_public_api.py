"""The names ``forge`` exports, and what importing the kernel-bank runtime loads."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import forge

ROOT = Path(__file__).resolve().parents[1]

EXPORTED = [
    "BankError",
    "CompileError",
    "ForgeError",
    "ForgeSettings",
    "KernelUnavailableError",
    "OptimizeOptions",
    "ProblemError",
    "ProviderError",
    "RunResult",
    "UnknownOpError",
    "UsageError",
    "Verdict",
    "__version__",
    "kernelbank",
    "load_settings",
    "optimize",
    "verify",
]


def test_the_exported_names_are_pinned_and_resolve():
    assert sorted(forge.__all__) == EXPORTED
    for name in forge.__all__:
        assert getattr(forge, name) is not None, name
    from forge.harness import optimize
    from forge.kernelbank import open as open_bank
    from forge.verifier import verify

    assert forge.verify is verify and forge.optimize is optimize and forge.kernelbank.open is open_bank
    assert issubclass(forge.UnknownOpError, forge.BankError) and issubclass(forge.BankError, forge.ForgeError)


def test_importing_the_runtime_does_not_load_the_engine():
    script = (
        "import json, sys, forge.kernelbank\n"
        "heavy = ('pydantic', 'sqlalchemy', 'litellm', 'forge.harness', 'forge.agents', 'forge.db', 'forge.verifier')\n"
        "print(json.dumps([m for m in heavy if m in sys.modules]))\n"
    )
    r = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, cwd=ROOT, timeout=300)
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout.strip().splitlines()[-1]) == []


def _names_imported_for_type_checkers(module: object) -> dict[str, str]:
    """name -> module, for the imports under ``if TYPE_CHECKING:`` in ``module``'s source."""
    import ast
    import inspect

    tree = ast.parse(inspect.getsource(module))  # type: ignore[arg-type]
    block = next(n for n in tree.body if isinstance(n, ast.If) and "TYPE_CHECKING" in ast.unparse(n.test))
    found = {}
    for node in block.body:
        assert isinstance(node, ast.ImportFrom)
        for alias in node.names:
            found[alias.name] = f"{node.module}.{alias.name}" if alias.name in ("events", "kernelbank") else node.module
    return found


def test_names_loaded_on_first_use_are_the_ones_type_checkers_see():
    """The packages that resolve names on first use (forge, forge.harness) list each name three
    times: in __all__, in the table that loads it, and under TYPE_CHECKING: the three agree, and
    each name resolves to the object its module defines."""
    import importlib

    from forge import harness

    for package, table in ((forge, forge._ON_FIRST_USE), (harness, harness._WHERE)):
        typed = _names_imported_for_type_checkers(package)
        assert typed == table, package.__name__
        assert set(package.__all__) - {"__version__"} - set(table) <= {
            n for n in package.__all__ if n[0].isupper() and n.endswith("Error")
        }
        for name, where in table.items():
            module = importlib.import_module(where)
            expected = module if where.endswith(f".{name}") else getattr(module, name)
            assert getattr(package, name) is expected, (package.__name__, name)


def test_engine_names_are_what_they_say_not_a_module_of_the_same_name():
    """A function exported from a module of its own name would be shadowed by the submodule once
    that is imported (``harness.doctor`` was the module, not the function)."""
    import types

    from forge import harness

    for name in harness.__all__:
        harness.__getattr__(name) if name not in vars(harness) else None  # import every source module
    shadowed = [n for n in harness.__all__ if n != "events" and isinstance(getattr(harness, n), types.ModuleType)]
    assert shadowed == []
