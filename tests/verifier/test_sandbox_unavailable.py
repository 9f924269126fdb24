"""Where the kernel offers no Landlock, as on Linux before 5.13 or with it off at boot: forge refuses
to run candidate code unless the user chooses to run it unconfined (``--unsandboxed``). Landlock is
made unavailable here (``sandbox.abi_version`` reads 0 in the parent, which decides), so this runs
on any kernel, where the sandbox's own tests need Landlock ABI 6."""

from __future__ import annotations

import pytest

from forge.core import sandbox
from forge.core.errors import UsageError
from forge.verifier import verify
from tests.cli_here import invoke_here
from tests.conftest import CANDIDATES, OPS

SOFTMAX = OPS / "small_softmax.py"
HONEST = CANDIDATES / "softmax" / "honest_torch.py"


def test_without_landlock_only_an_explicit_choice_runs_candidates(fast_settings, monkeypatch):
    monkeypatch.setattr(sandbox, "abi_version", lambda: 0)
    with pytest.raises(UsageError, match="--unsandboxed"):
        verify(SOFTMAX, HONEST, fast_settings)
    unconfined = verify(SOFTMAX, HONEST, fast_settings.model_copy(update={"sandbox": False}))
    assert unconfined.passed, unconfined.reason


def test_without_landlock_the_cli_refuses_and_names_the_choice(cache_dir, monkeypatch):
    """`forge verify` says what is missing and what to pass, with exit code 2 and no traceback;
    with ``--unsandboxed`` it verifies."""
    monkeypatch.setattr(sandbox, "abi_version", lambda: 0)
    env = {"FORGE_CACHE_DIR": str(cache_dir), "FORGE_TIMING_BUDGET_S": "0.2", "COLUMNS": "300"}
    args = ["verify", str(SOFTMAX), str(HONEST), "--no-compile-baseline"]
    refused = invoke_here(args, env)
    said = " ".join(refused.stderr.split())
    assert refused.exit_code == 2, refused.output
    assert "offers no Landlock" in said and "--unsandboxed" in said and "Traceback" not in said, said
    chosen = invoke_here([*args, "--unsandboxed"], env)
    assert chosen.exit_code == 0, chosen.output
