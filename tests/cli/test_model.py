"""`forge optimize MODEL --modules` through the real CLI on a real model: profiled, its class
carved out and optimized with the built-in agent, the kernelized model proven against the
original and timed four ways; and clear errors for what a user can get wrong."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
NORMNET = ROOT / "tests" / "model_probe" / "models" / "normnet.py"


def forge(*args: str, cwd: Path, cache: Path) -> subprocess.CompletedProcess[str]:
    env = {
        **os.environ,
        "FORGE_CACHE_DIR": str(cache),
        "FORGE_TIMING_BUDGET_S": "0.3",
        "FORGE_DEVICE": "cpu",
        "FORGE_CONFIRM_TRIALS": "10",
    }
    return subprocess.run(
        [sys.executable, "-m", "forge", *args], capture_output=True, text=True, cwd=cwd, env=env, timeout=1200
    )


@pytest.mark.e2e
def test_model_run_profiles_optimizes_and_proves(tmp_path):
    """With --train the ops' sessions verify backward passes too, and the proof takes the
    kernelized model's training step against the original's, then times training steps."""
    r = forge(
        "optimize",
        str(NORMNET),
        "--modules",
        "--train",
        "--rounds",
        "1",
        "--json",
        "--bank",
        "bank.db",
        "--report",
        "report",
        "--prove-rounds",
        "8",
        cwd=tmp_path,
        cache=tmp_path,
    )
    assert r.returncode in (0, 1), r.stderr[-3000:]
    data = json.loads(r.stdout)
    model = data["model"]
    classes = {c["class"]: c for c in model["classes"]}
    assert classes["normnet:ScaleNorm"]["chosen"] and not classes["torch.nn:Linear"]["chosen"]
    (op,) = model["ops"]
    assert op["op"] == "normnet_ScaleNorm" and op["instances"] == ["norm_a", "norm_b"]
    assert (tmp_path / "forge_ops" / "normnet" / "normnet_ScaleNorm.py").is_file()
    assert [p["problem"] for p in data["problems"]] == ["normnet_ScaleNorm"]
    proof = model["proof"]
    assert proof["outputs_match"], proof
    assert proof["kernelized"] == (2 if op["accepted"] else 0)
    assert [t["regime"] for t in proof["timings"]] == ["warm", "cold"]
    assert all(t["kernelized_vs_eager"]["pairs"] == 8 for t in proof["timings"])
    assert (r.returncode == 0) is op["accepted"]
    assert "profiled:" in r.stderr and "proven: outputs match; training step: gradients match" in r.stderr
    training = proof["training"]
    assert training["gradients_match"] and [t["regime"] for t in training["timings"]] == ["warm", "cold"]
    assert all(t["kernelized_vs_eager"]["pairs"] == 8 and t["compiled_ms"] is None for t in training["timings"])
    written = json.loads((tmp_path / "report" / "results.json").read_text())
    assert written["model"]["proof"] == proof and (tmp_path / "report" / "model.png").stat().st_size > 1000


@pytest.mark.parametrize(
    ("args", "said"),
    [
        (["optimize", "a.py", "b.py", "--modules"], "--modules takes one model"),
        (["optimize", "missing_model.py", "--modules"], "no such model file"),
        (["optimize", "x.py", "--include", "Norm"], "add --modules"),
        (["optimize", "nopkg.nomod:build", "--modules"], "importing the model raised ModuleNotFoundError"),
        (["optimize", str(NORMNET), "--modules", "--include", "Nope"], "Nope: no such class in the model"),
    ],
)
def test_model_run_input_errors_are_named(tmp_path, args, said):
    r = forge(*args, cwd=tmp_path, cache=tmp_path)
    assert r.returncode == 2, r.stdout + r.stderr
    assert said in r.stdout + r.stderr and "Traceback" not in r.stderr
