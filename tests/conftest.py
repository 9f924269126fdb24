"""Shared fixtures: where the test ops and candidates live, and fast verifier settings."""

from __future__ import annotations

from pathlib import Path

import pytest

from forge.core.settings import ForgeSettings

TESTS = Path(__file__).parent
OPS = TESTS / "ops"
CANDIDATES = TESTS / "candidates"
EXAMPLES = TESTS.parent / "examples"


def _has_cuda() -> bool:
    try:
        import torch

        return torch.cuda.is_available()
    except ImportError:
        return False


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if _has_cuda():
        return
    skip = pytest.mark.skip(reason="needs a CUDA GPU")
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip)


@pytest.fixture(scope="session")
def cache_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("forge-cache")


@pytest.fixture(scope="session")
def fast_settings(cache_dir: Path) -> ForgeSettings:
    """Settings for tests: no compile baseline, a short timing budget, generous limits."""
    return ForgeSettings(
        device="cpu",
        compile_baseline=False,
        timeout=120,
        memory_limit_mb=3072,
        timing_budget_s=0.2,
        confirm_trials=10,
        cache_dir=cache_dir,
    )
