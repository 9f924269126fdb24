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

from tests.cli_here import invoke_here

ROOT = Path(__file__).resolve().parents[2]
NORMNET = ROOT / "tests" / "model_probe" / "models" / "normnet.py"
STACKED = ROOT / "tests" / "model_probe" / "models" / "stacked.py"
CHAINED = ROOT / "tests" / "model_probe" / "models" / "chained.py"


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
    kernelized model's training step against the original's, then times training steps. The
    class is chained.py's, thirteen elementwise steps that one fused pass beats by construction,
    forward and backward: it banks, and both instances run its kernel."""
    r = forge(
        "optimize",
        str(CHAINED),
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
    assert r.returncode == 0, r.stderr[-3000:]
    data = json.loads(r.stdout)
    model = data["model"]
    classes = {c["class"]: c for c in model["classes"]}
    assert classes["chained:Chain"]["chosen"] and not classes["chained:Model"]["chosen"]
    (op,) = model["ops"]
    assert op["op"] == "chained_Chain" and op["instances"] == ["first", "second"] and op["accepted"], op
    assert (tmp_path / "forge_ops" / "chained" / "chained_Chain.py").is_file()
    assert [p["problem"] for p in data["problems"]] == ["chained_Chain"]
    proof = model["proof"]
    assert proof["outputs_match"] and proof["kernelized"] == 2, proof
    assert [t["regime"] for t in proof["timings"]] == ["warm", "cold"]
    assert all(t["kernelized_vs_eager"]["pairs"] == 8 for t in proof["timings"])
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
def test_model_run_input_errors_are_named(tmp_path, monkeypatch, args, said):
    """In this process, from the model's folder (the command's own code, without importing torch
    again for each mistake)."""
    monkeypatch.chdir(tmp_path)
    done = invoke_here(args, {"FORGE_CACHE_DIR": str(tmp_path), "FORGE_DEVICE": "cpu"})
    assert done.exit_code == 2, done.output
    assert said in " ".join(done.output.split()) and "Traceback" not in done.output


def _stacked_run(tmp_path: Path, depth: int) -> dict:
    """`forge optimize stackedN.py --modules` on the stacked model at ``depth`` layers. Its norms take
    5-13% of its time here and were left out once in CI (no op for them: under the 3% threshold, it
    seems): no share threshold, so that which classes are searched does not hang on a measured share.
    The model's own class is excluded: its whole-model kernel would run in place of the layers'."""
    folder = tmp_path / f"depth{depth}"
    folder.mkdir()
    model = folder / f"stacked{depth}.py"
    model.write_text(STACKED.read_text().replace("LAYERS = 2", f"LAYERS = {depth}"))
    r = forge(
        "optimize", model.name, "--modules", "--rounds", "1", "--json", "--bank", "bank.db", "--prove-rounds", "8",
        "--min-share", "0", "--exclude", "Model", cwd=folder, cache=tmp_path,
    )  # fmt: skip
    assert r.returncode == 0, r.stderr[-3000:]
    return json.loads(r.stdout)


@pytest.mark.e2e
def test_a_deeper_model_costs_the_same_searches_and_every_bound_instance_was_verified(tmp_path):
    """The stacked model at 2 and 8 layers: its layers (built with their index) are one op, searched
    once; the kernel is verified on every other layer and fails on the last (scaled otherwise),
    which gets an op of its own, searched once more. The same searches at both depths, and the
    kernelized model runs each kernel exactly on the layers it passed on. Its layer's forward is a
    chain of elementwise steps (thirty passes over 2 MiB in eager, one fused): banked by
    construction (5x here). The built-in agent bakes the attributes it traces into its kernel (the
    last layer's factor among them): an agent whose kernel read the factor would pass everywhere,
    and this test would say so."""
    searched = {}
    for depth in (2, 8):
        data = _stacked_run(tmp_path, depth)
        stem = f"stacked{depth}"
        ops = {o["op"].removeprefix(stem): o for o in data["model"]["ops"]}
        classes = {c["class"]: c["reason"] for c in data["model"]["classes"]}
        assert {"_Scaled", "_Scaled_2", "_Norm"} <= set(ops), classes
        searched[depth] = sorted(p["problem"].removeprefix(stem) for p in data["problems"])
        layers, last = ops["_Scaled"], ops["_Scaled_2"]
        assert layers["accepted"] and layers["instances"] == [f"layers.{i}" for i in range(depth)]
        outcomes = [c["outcome"] for c in layers["instance_checks"]]
        assert outcomes == ["searched"] + ["verified"] * (depth - 2) + ["failed"]
        assert layers["runs_on"] == [f"layers.{i}" for i in range(depth - 1)] and layers["verifications"] == depth - 1
        assert last["split_from"] == f"{stem}_Scaled" and last["instances"] == [f"layers.{depth - 1}"]
        assert last["accepted"] and last["runs_on"] == [f"layers.{depth - 1}"]
        assert ops["_Norm"]["instances"] == [f"norms.{i}" for i in range(depth)]  # one op for the norms too
        proof = data["model"]["proof"]
        assert proof["outputs_match"], proof
        calls = {u["op"].removeprefix(stem): (u["calls"], u["kernel_calls"]) for u in proof["ops"]}
        assert calls["_Scaled"] == (depth - 1, depth - 1) and calls["_Scaled_2"] == (1, 1)
    assert searched[2] == searched[8] == ["_Norm", "_Scaled", "_Scaled_2"]
