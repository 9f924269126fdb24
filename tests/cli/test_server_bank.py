"""Two drivers sharing one PostgreSQL bank through the real CLI, at the same time: `forge verify
--save` from both banks both kernels; two `forge optimize` runs record every session and attempt
and bank exactly what their reports say; `forge doctor` describes the bank; `--resume` reads it."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from sqlalchemy import text

from forge.db.engine import open_for_writing
from tests.conftest import EXAMPLES, OPS

pytestmark = pytest.mark.postgres
ROOT = Path(__file__).resolve().parents[2]


def _env(cache: Path) -> dict[str, str]:
    # Both drivers share this machine's two cores: each times on one thread, and the other
    # driver's load is recorded rather than refused (the load check's own tests cover that).
    return {
        **os.environ,
        "FORGE_CACHE_DIR": str(cache),
        "FORGE_TIMING_BUDGET_S": "0.3",
        "FORGE_DEVICE": "cpu",
        "FORGE_CONFIRM_TRIALS": "10",
        "FORGE_THREADS": "1",
        "FORGE_LOAD_CHECK": "false",
    }


def _at_once(*commands: list[str], cache: Path) -> list[subprocess.CompletedProcess[str]]:
    env = _env(cache)
    pipes = {"stdout": subprocess.PIPE, "stderr": subprocess.PIPE}
    procs = [
        subprocess.Popen([sys.executable, "-m", "forge", *c], cwd=ROOT, env=env, text=True, **pipes)  # type: ignore[call-overload]
        for c in commands
    ]
    done = []
    for c, p in zip(commands, procs, strict=True):
        out, err = p.communicate(timeout=900)
        done.append(subprocess.CompletedProcess(c, p.returncode, out, err))
    return done


def _count(url: str, sql: str) -> int:
    engine = open_for_writing(url)
    try:
        with engine.connect() as conn:
            return int(conn.execute(text(sql)).scalar() or 0)
    finally:
        engine.dispose()


def test_two_drivers_save_to_one_server_bank_at_once(pg_bank, cache_dir):
    pairs = [("rmsnorm", "rmsnorm_cpp"), ("scale_bias_gelu", "scale_bias_gelu_cpp")]
    runs = _at_once(
        *[
            [
                "verify",
                str(EXAMPLES / "ops" / f"{op}.py"),
                str(EXAMPLES / "candidates" / f"{cand}.py"),
                "--save",
                "--bank",
                pg_bank,
                "--json",
                "--no-compile-baseline",
            ]
            for op, cand in pairs
        ],
        cache=cache_dir,
    )
    for r in runs:  # both candidates are correct: each passes and is saved, whatever its speed
        assert r.returncode == 0, r.stderr
    saved = [json.loads(r.stdout).get("kernel_id") for r in runs]
    assert None not in saved, saved
    listed = subprocess.run(
        [sys.executable, "-m", "forge", "bank", "list", "--bank", pg_bank, "--json"],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env=_env(cache_dir),
        timeout=300,
    )
    assert listed.returncode == 0, listed.stderr
    kernels = json.loads(listed.stdout)
    assert sorted(k["id"] for k in kernels) == sorted(saved)
    assert {k["op"] for k in kernels} == {op for op, _ in pairs}


def test_two_optimize_drivers_share_one_server_bank(pg_bank, cache_dir):
    # small ops that bank by construction (~8x and ~5x eager): the shipped examples at full size took ~4 min here
    ops = ["pointwise_chain", "weighted_chain"]  # sorted: the reports are compared in order
    runs = _at_once(
        *[
            [
                "optimize",
                str(OPS / f"{op}.py"),
                "--rounds",
                "1",  # one round each: what is checked is two drivers writing one bank at once
                "--no-compile-baseline",
                "--bank",
                pg_bank,
                "--json",
            ]
            for op in ops
        ],
        cache=cache_dir,
    )
    reports = []
    for r in runs:
        assert r.returncode == 0, r.stderr
        reports += json.loads(r.stdout)["problems"]
    assert sorted(p["problem"] for p in reports) == ops and all(p["accepted"] for p in reports), reports
    # every attempt either driver made is in the bank once, and every kernel a report claims
    assert _count(pg_bank, "SELECT count(*) FROM attempts WHERE role = 'coder'") == sum(p["attempts"] for p in reports)
    banked = sorted(p["kernel_id"] for p in reports if p["accepted"])
    assert sorted(k["id"] for k in _kernels(pg_bank, cache_dir)) == banked
    assert _count(pg_bank, "SELECT count(*) FROM sessions WHERE status IN ('running', 'crashed')") == 0
    assert _count(pg_bank, "SELECT count(*) FROM sessions WHERE lease_token IS NOT NULL") == 0  # given back

    doctor = subprocess.run(
        [sys.executable, "-m", "forge", "doctor", "--bank", pg_bank, "--json"],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env=_env(cache_dir),
        timeout=300,
    )
    (finding,) = [f for f in json.loads(doctor.stdout)["findings"] if f["topic"] == "bank"]
    assert finding["ok"] and f"{len(banked)} kernels, 2 sessions" in finding["detail"], finding

    sid = reports[0]["session_id"]
    resumed = subprocess.run(
        [
            sys.executable,
            "-m",
            "forge",
            "optimize",
            "--resume",
            str(sid),
            "--rounds",
            "3",
            "--bank",
            pg_bank,
            "--json",
            "--no-compile-baseline",
        ],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env=_env(cache_dir),
        timeout=900,
    )
    assert resumed.returncode == 0, resumed.stderr  # its kernel stays banked
    (again,) = json.loads(resumed.stdout)["problems"]
    assert again["session_id"] == sid and again["attempts"] == 3 and again["accepted"], again  # two stored, one more


def _kernels(url: str, cache: Path) -> list[dict[str, object]]:
    listed = subprocess.run(
        [sys.executable, "-m", "forge", "bank", "list", "--bank", url, "--json"],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env=_env(cache),
        timeout=300,
    )
    assert listed.returncode == 0, listed.stderr
    return list(json.loads(listed.stdout))
