"""The GPU suite's dry run: every part of ``python -m benchmarks.gpu_suite`` on the CPU (two examples,
Triton in its interpreter, CUDA steps skipped with the reason), so the suite does not rot between
the loans of a GPU. Minutes: marked ``gpu_suite``, which the default run leaves out and .ci/run runs."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

pytestmark = pytest.mark.gpu_suite

ROOT = Path(__file__).resolve().parents[1]


def _suite(*args: str, cache: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "FORGE_CACHE_DIR": str(cache)}
    cmd = [sys.executable, "-m", "benchmarks.gpu_suite", *args]
    return subprocess.run(cmd, capture_output=True, text=True, cwd=ROOT, env=env, timeout=1800)


def test_the_dry_run_runs_every_part_and_writes_the_report(tmp_path, cache_dir):
    out, back = tmp_path / "suite", tmp_path / "back"
    done = _suite("--out", str(out), "--dry-run", "--copy-to", str(back), cache=cache_dir)
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-3000:]
    report = json.loads((out / "report.json").read_text())
    statuses = {p["name"]: p["status"] for p in report["parts"]}
    assert statuses == {
        "env": "passed",
        "gpu_tests": "passed",
        "hacks": "passed",
        "optimize": "passed",
        "runtime": "passed",
        "llm_cuda": "passed",
        "training": "passed",
        "model": "passed",
        "catalog": "passed",
    }, report
    assert report["dry_run"] is True
    hacks = next(p for p in report["parts"] if p["name"] == "hacks")
    rows = hacks["tables"][0]["rows"]
    assert all(r[4] in ("yes", "-") for r in rows) and any("skipped: needs CUDA" in r[2] for r in rows)
    optimize = next(p for p in report["parts"] if p["name"] == "optimize")
    banked = [r for r in optimize["state"]["rows"].values() if r["status"] == "accepted"]
    assert banked and all(r["runs_in_eval"] == "yes" for r in banked)  # each banked kernel runs in eval mode
    training = next(p for p in report["parts"] if p["name"] == "training")
    (example,) = training["state"]["rows"].values()  # banked, used under autograd, its loop held
    assert example["held"] and example["standing"].startswith("used") and "0 fallbacks" in example["loop"]
    model = next(p for p in report["parts"] if p["name"] == "model")
    (proof,) = model["state"]["rows"].values()
    assert proof["status"] == "proven" and proof["kernelized"].endswith(")"), proof  # timed, with an interval
    assert proof["training"].startswith("gradients match"), proof  # --train: the training step proven too
    assert all(p["commit"] for p in report["parts"])  # each part names the commit it ran at
    md = (out / "report.md").read_text()
    assert "dry run" in md and "## hacks: passed" in md and "## model: passed" in md

    # Resumable: a second run finds every part done and runs none; --redo runs the one named again.
    again = _suite("--out", str(out), "--dry-run", "--list", cache=cache_dir)
    assert again.returncode == 0 and again.stdout.count("(done)") == 9, again.stdout
    redo = _suite("--out", str(out), "--dry-run", "--part", "env", "--redo", cache=cache_dir)
    assert redo.returncode == 0 and "[1/9] env" in redo.stdout and "[2/9]" not in redo.stdout, redo.stdout

    # What a loan brings back (two files) is what a fresh machine continues from.
    assert sorted(p.name for p in back.iterdir()) == ["report.md", "suite.tar.gz"]
    fresh = tmp_path / "fresh"
    resumed = _suite(
        "--out", str(fresh), "--dry-run", "--resume-from", str(back / "suite.tar.gz"), "--list", cache=cache_dir
    )
    assert resumed.returncode == 0 and resumed.stdout.count("(done)") == 9, resumed.stdout
    assert (fresh / "work" / "optimize.db").stat().st_size > 0  # the bank the runtime part reads


@pytest.mark.skipif(torch.cuda.is_available(), reason="here the real suite would run")
def test_without_a_gpu_the_real_suite_says_to_use_the_dry_run(tmp_path, cache_dir):
    done = _suite("--out", str(tmp_path / "suite"), cache=cache_dir)
    assert done.returncode == 2 and "--dry-run" in done.stderr and "Traceback" not in done.stderr
