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
