from __future__ import annotations

import sys

import pytest

from forge.kernelbank import loader
from tests.kernelbank.helpers import FIXTURES

# The user's own package (mylayers) must import at collection time, as it would in their program.
if str(FIXTURES) not in sys.path:
    sys.path.insert(0, str(FIXTURES))


@pytest.fixture(autouse=True)
def _isolated_runtime(monkeypatch, tmp_path):
    """Each test starts with the runtime's per-process caches empty and the user package importable."""
    monkeypatch.setenv("FORGE_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.delenv("FORGE_KERNELBANK", raising=False)
    for cache in (loader._warned, loader.bad_kernels, loader._reference_modules, loader._kernel_modules):
        cache.clear()
    yield
    for name in [m for m in sys.modules if m.startswith("forge_bank_")]:
        del sys.modules[name]
