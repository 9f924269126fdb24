"""`forge optimize` through the real CLI: built-in agent end to end on shipped examples, exit codes,
clean stops (Ctrl-C) and resume after a kill, all against a real SQLite bank."""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest
from typer.testing import CliRunner

from forge.cli.app import app
from forge.core.verdict import Verdict
from tests.cli_here import invoke_here
from tests.conftest import EXAMPLES, OPS

ROOT = Path(__file__).resolve().parents[2]
CHAIN = OPS / "pointwise_chain.py"  # one fused pass where eager makes eleven: ~8x eager, certain to bank


def _env(cache: Path) -> dict[str, str]:
    return {
        **os.environ,
        "FORGE_CACHE_DIR": str(cache),
        "FORGE_TIMING_BUDGET_S": "0.3",
        "FORGE_DEVICE": "cpu",
        "FORGE_CONFIRM_TRIALS": "10",
    }


def forge(*args: str, cache: Path, **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "forge", *args],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env={**_env(cache), **env},
        timeout=900,
    )


def _load_banked_rmsnorm(bank: Path, device: str, rows: int) -> subprocess.CompletedProcess[str]:
    """A fresh process loads the banked rmsnorm onto ``device`` and checks it against the reference;
    it prints ok."""
    script = (
        "import sys, torch, forge.kernelbank as kb\n"
        "sys.path.insert(0, 'examples/ops')\n"
        "import rmsnorm\n"
        "bank = kb.open(sys.argv[1], strict=True)\n"
        f"m = bank.load('rmsnorm', *rmsnorm.get_init_inputs()).to('{device}')\n"
        "assert type(m).__name__ != 'Model', type(m)\n"
        f"x = torch.randn({rows}, 1024, device='{device}')\n"
        f"ref = rmsnorm.Model(*rmsnorm.get_init_inputs()).to('{device}')\n"
        "torch.testing.assert_close(m(x), ref(x))\n"
        "print('ok')\n"
    )
    return subprocess.run([sys.executable, "-c", script, str(bank)], capture_output=True, text=True, cwd=ROOT)


@pytest.mark.e2e
def test_builtin_agent_banks_faster_kernels_that_load(tmp_path, cache_dir):
    bank, report = tmp_path / "bank.db", tmp_path / "report"
    # one shipped example: several ops in one run are covered by the time-limit test below
    ops = [str(EXAMPLES / "ops" / "rmsnorm.py")]
    r = forge(
        "optimize",
        *ops,
        "--rounds",
        "2",
        "--no-compile-baseline",
        "--bank",
        str(bank),
        "--json",
        "--report",
        str(report),
        cache=cache_dir,
        FORGE_USER_LOOP="true",
    )
    assert r.returncode == 0, r.stderr
    data = json.loads(r.stdout)
    assert set(data) == {"problems", "tokens", "cost_usd", "skipped"} and data["tokens"] == 0 and data["skipped"] == []
    assert [p["problem"] for p in data["problems"]] == ["rmsnorm"]
    for p in data["problems"]:
        assert p["accepted"] and p["kernel_id"] and p["backend"] == "cpp" and p["reason"] is None, p
        assert p["speedup_vs_eager"] > 1.0 and p["attempts"] == 2
    assert "round 2/2" in r.stderr and "banked" in r.stderr  # live progress on stderr
    said = " ".join(r.stderr.split())  # rich wraps long lines
    assert said.count("null control: the reference timed against itself") >= 1  # before the banking
    assert (report / "speedups.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert json.loads((report / "results.json").read_text())["problems"] == data["problems"]
    # the banked kernels load and agree with the reference
    run = _load_banked_rmsnorm(bank, "cpu", rows=8)
    assert run.stdout.strip() == "ok", run.stderr
    with sqlite3.connect(bank) as db:
        configs = db.execute("SELECT config FROM kernel_configs").fetchall()
        sessions = db.execute("SELECT status, agent FROM sessions").fetchall()
        evidence = [Verdict.from_json(json.loads(e)) for (e,) in db.execute("SELECT evidence FROM kernels")]
    for v in evidence:  # each kept the null control its acceptance was judged against
        null, paired = v.timing_stats.null_eager, v.timing_stats.headline_pairs()[0]
        assert null is not None and paired is not None and null.pairs == paired.pairs, v.timing_stats
        assert paired.low > max(null.high, 1 / null.median), v.timing_stats
        # and its time in a user's plain loop (one process here), beating eager there too
        assert v.user_loop is not None and len(v.user_loop.processes) == 1, v.user_loop
        assert v.user_loop.eager is not None and v.user_loop.eager.median > 1.0, v.user_loop
    assert len(configs) == 1 and all(json.loads(c) for (c,) in configs)  # the tuned config per bucket
    assert sessions == [("finished", "builtin")]


@pytest.mark.e2e
def test_a_batchs_time_limit_is_shared_among_its_ops(tmp_path, cache_dir):
    """--time-limit over two ops: the progress line and the JSON give each op's share; the second
    op still gets its attempts (the arithmetic is checked against a clock in tests/harness)."""
    ops = [str(OPS / f"{name}.py") for name in ("pointwise_chain", "weighted_chain")]  # each banks (5-8x eager)
    r = forge(
        "optimize",
        *ops,
        "--rounds",
        "40",
        "--time-limit",
        "30",
        "--no-compile-baseline",
        "--json",
        "--bank",
        str(tmp_path / "bank.db"),
        cache=cache_dir,
    )
    assert r.returncode == 0, r.stderr
    problems = json.loads(r.stdout)["problems"]
    shares = [p["share_s"] for p in problems]
    assert len(problems) == 2 and all(p["attempts"] >= 1 and p["accepted"] for p in problems), problems
    # half of what the 30 s left once the first op started: the start-up (4 s on a slow CI machine)
    # comes off it first; the whole limit would be over 15 s, a third of it under 10 s
    assert 10.0 < shares[0] <= 15.0 and f"on cpu, share {shares[0]:.0f} s" in " ".join(r.stderr.split())
    assert 0 < shares[1] < 30 and all(p["share_usd"] is None for p in problems)


def test_unsupported_op_and_usage_errors(tmp_path, cache_dir):
    bank = str(tmp_path / "bank.db")
    r = forge("optimize", str(OPS / "row_sort.py"), "--bank", bank, "--json", cache=cache_dir)
    assert r.returncode == 1
    (p,) = json.loads(r.stdout)["problems"]
    assert not p["accepted"] and "can't handle row_sort" in p["reason"] and "--model" in p["reason"]
    for args, needle in (
        (["optimize", str(tmp_path / "nope.py")], "no such op file"),
        (["optimize", str(OPS / "small_softmax.py"), "--backend", "triton"], "needs a CUDA device"),
        (["optimize", str(OPS / "small_softmax.py"), "--strategy", "greedy"], "choose refine or evolve"),
        (["optimize", str(OPS / "small_softmax.py"), "--judge", "openai/x"], "--judge needs --model"),
        (["optimize"], "name at least one op file"),
        (["optimize", "--resume", "99"], "no session 99"),
    ):
        # in this process: what is refused here is refused before anything is imported or started
        env = {"FORGE_CACHE_DIR": str(cache_dir), "COLUMNS": "200"}
        done = CliRunner().invoke(app, [*args, "--bank", bank], env=env)
        said = " ".join(done.output.replace("│", " ").split())
        assert done.exit_code == 2, (args, done.output)
        assert needle in said and "Traceback" not in said, said


def test_provider_unreachable_exits_3(tmp_path, cache_dir):
    """In the test's process (tests/cli_here.py): an exception other than the exit fails it."""
    args = ["optimize", str(OPS / "small_softmax.py"), "--model", "openai/some-model"]
    args += ["--api-base", "http://127.0.0.1:9/v1", "--bank", str(tmp_path / "b.db"), "--json"]
    r = invoke_here(args, _env(cache_dir))
    assert r.exit_code == 3, r.output
    assert json.loads(r.stdout)["error"]["kind"] == "ProviderError"
    assert "Traceback" not in r.stderr


def _wait_for_attempts(bank: Path, n: int, proc: subprocess.Popen[str], limit_s: float = 300) -> None:
    end = time.monotonic() + limit_s
    while time.monotonic() < end:
        assert proc.poll() is None, proc.communicate()
        if bank.exists():
            try:
                with sqlite3.connect(bank) as db:
                    done = db.execute("SELECT count(*) FROM attempts WHERE role='coder' AND status != 'pending'")
                    if done.fetchone()[0] >= n:
                        return
            except sqlite3.OperationalError:
                pass
        time.sleep(0.2)
    raise AssertionError("the session made no progress")


def _start(args: list[str], cache: Path) -> subprocess.Popen[str]:
    return subprocess.Popen(args, cwd=ROOT, env=_env(cache), text=True, stdout=subprocess.PIPE, stderr=subprocess.PIPE)


@pytest.mark.e2e
def test_ctrl_c_stops_cleanly_and_a_killed_session_resumes(tmp_path, cache_dir):
    bank = tmp_path / "bank.db"
    args = [
        sys.executable,
        "-m",
        "forge",
        "optimize",
        str(CHAIN),
        "--rounds",
        "4",
        "--no-compile-baseline",
        "--bank",
        str(bank),
    ]
    # Ctrl-C: exit 130, the session marked interrupted, the best-so-far is not lost
    proc = subprocess.Popen(
        args, cwd=ROOT, env=_env(cache_dir), text=True, stdout=subprocess.PIPE, stderr=subprocess.PIPE
    )
    _wait_for_attempts(bank, 1, proc)
    proc.send_signal(signal.SIGINT)
    _out, err = proc.communicate(timeout=120)
    assert proc.returncode == 130, err
    with sqlite3.connect(bank) as db:
        assert db.execute("SELECT status FROM sessions").fetchall() == [("interrupted",)]

    # SIGKILL mid-session: the bank stays consistent and --resume finishes the session
    proc = subprocess.Popen(
        args, cwd=ROOT, env=_env(cache_dir), text=True, stdout=subprocess.PIPE, stderr=subprocess.PIPE
    )
    _wait_for_attempts(bank, 2, proc)  # one attempt of the first session, at least one of this one
    proc.kill()
    proc.communicate()
    with sqlite3.connect(bank) as db:
        assert db.execute("PRAGMA integrity_check").fetchone() == ("ok",)
        (sid, status) = db.execute("SELECT id, status FROM sessions ORDER BY id DESC").fetchone()
        before = db.execute("SELECT count(*) FROM attempts WHERE session_id=? AND role='coder'", (sid,)).fetchone()
    assert status == "running"
    # a new --rounds replaces the stored one (4) and is remembered
    r = forge(
        "optimize",
        "--resume",
        str(sid),
        "--rounds",
        "3",
        "--bank",
        str(bank),
        "--json",
        "--no-compile-baseline",
        cache=cache_dir,
    )
    assert r.returncode == 0, r.stderr  # the fused chain (~8x eager) banks
    assert "resuming" in r.stderr
    (p,) = json.loads(r.stdout)["problems"]
    assert p["session_id"] == sid and p["attempts"] >= before[0] and p["accepted"], p
    with sqlite3.connect(bank) as db:
        assert db.execute("SELECT status FROM sessions WHERE id=?", (sid,)).fetchone() == ("finished",)
        pending = db.execute("SELECT count(*) FROM attempts WHERE session_id=? AND status='pending'", (sid,))
        assert pending.fetchone() == (0,)
        rounds = [r for (r,) in db.execute("SELECT round FROM attempts WHERE session_id=? AND role='coder'", (sid,))]
        (stored,) = db.execute("SELECT settings FROM sessions WHERE id=?", (sid,)).fetchone()
    assert rounds == sorted(rounds) and max(rounds) <= 3 and json.loads(stored)["rounds"] == 3


@pytest.mark.gpu
def test_builtin_agent_banks_triton_kernels_on_gpu(tmp_path, cache_dir):
    """The same job on CUDA: the built-in coder writes Triton, the verifier times it with events,
    and the banked kernel loads onto the GPU and agrees with the reference there."""
    bank = tmp_path / "bank.db"
    ops = [str(EXAMPLES / "ops" / "rmsnorm.py"), str(EXAMPLES / "ops" / "scale_bias_gelu.py")]
    env = {**_env(cache_dir), "FORGE_DEVICE": "cuda"}
    r = subprocess.run(
        [
            sys.executable,
            "-m",
            "forge",
            "optimize",
            *ops,
            "--rounds",
            "2",
            "--no-compile-baseline",
            "--bank",
            str(bank),
            "--json",
        ],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env=env,
        timeout=900,
    )
    assert r.returncode == 0, r.stderr
    for p in json.loads(r.stdout)["problems"]:
        assert p["accepted"] and p["backend"] == "triton" and p["speedup_vs_eager"] > 1.0, p
    run = _load_banked_rmsnorm(bank, "cuda", rows=64)
    assert run.stdout.strip() == "ok", run.stderr


@pytest.mark.e2e
def test_a_live_drivers_session_is_left_alone_and_resume_all_takes_a_killed_ones(tmp_path, cache_dir):
    """Two drivers on one bank: a session its driver still runs is refused to another (`--resume N`
    exits 2 naming that driver; `--resume all` leaves it alone); once that driver is killed,
    `--resume all` finishes it, and then finds nothing left."""
    bank = tmp_path / "bank.db"
    proc = _start(
        [
            sys.executable,
            "-m",
            "forge",
            "optimize",
            str(OPS / "small_layernorm.py"),
            "--rounds",
            "40",  # still running while the two resumes ask: 6 rounds finished first on a quiet VM
            "--no-compile-baseline",
            "--bank",
            str(bank),
        ],
        cache_dir,
    )
    try:
        _wait_for_attempts(bank, 1, proc)
        with sqlite3.connect(bank) as db:
            (sid,) = db.execute("SELECT id FROM sessions").fetchone()
        r = forge("optimize", "--resume", str(sid), "--bank", str(bank), cache=cache_dir)
        assert r.returncode == 2 and f"session {sid} is being run by" in r.stderr and f"pid {proc.pid}" in r.stderr
        assert "Traceback" not in r.stderr
        r = forge("optimize", "--resume", "all", "--bank", str(bank), "--json", cache=cache_dir)
        assert r.returncode == 0, r.stderr
        data = json.loads(r.stdout)
        assert data["problems"] == [] and [s["session_id"] for s in data["skipped"]] == [sid]
        assert f"pid {proc.pid}" in data["skipped"][0]["reason"] and "left alone" in r.stderr
    finally:
        proc.kill()
        proc.communicate()
    r = forge(
        "optimize",
        "--resume",
        "all",
        "--rounds",
        "2",
        "--bank",
        str(bank),
        "--json",
        "--no-compile-baseline",
        cache=cache_dir,
    )
    # the layernorm's 32 configs keep the first driver running while the resumes ask (the fused
    # chain has 4); whether it banks rests on its timing, so the session must end in the one state
    # its bank allows: finished (exit 0) with its kernel, or no_gain (exit 1) with none
    (p,) = json.loads(r.stdout)["problems"]
    assert p["session_id"] == sid and f"resuming {sid}" in r.stderr, r.stderr
    with sqlite3.connect(bank) as db:
        kernels = db.execute("SELECT count(*) FROM kernels WHERE session_id = ?", (sid,)).fetchone()[0]
        state = db.execute("SELECT status, lease_token FROM sessions").fetchall()
    assert (r.returncode, state, kernels) in ((0, [("finished", None)], 1), (1, [("no_gain", None)], 0)), (
        r.returncode,
        state,
        kernels,
        p,
    )
    r = forge("optimize", "--resume", "all", "--bank", str(bank), cache=cache_dir)
    assert r.returncode == 0 and "nothing to resume" in r.stdout, (r.stdout, r.stderr)
    r = forge("optimize", "--resume", "all", "--resume", "3", "--bank", str(bank), cache=cache_dir)
    assert r.returncode == 2 and "give no" in r.stderr and "Traceback" not in r.stderr
    r = forge("optimize", "--resume", "last", "--bank", str(bank), cache=cache_dir)
    assert r.returncode == 2 and "a session id (a number) or `all`" in r.stderr


def test_resume_all_picks_only_sessions_cut_short_oldest_first(tmp_path, cache_dir):
    """Sessions of every status, the cut-short ones held by a live driver (this test's process), so
    that `--resume all` lists what it would take, in order, and runs none of them."""
    from forge.core.paths import BankLocation
    from forge.core.problem import read_problem_source
    from forge.core.statuses import SessionStatus
    from forge.db import Driver, claim_session
    from forge.db.engine import open_for_writing
    from forge.db.sessions import start_session, update_session

    bank = tmp_path / "bank.db"
    engine = open_for_writing(BankLocation.parse(str(bank)))
    me, spec = Driver.this_process(), read_problem_source(OPS / "small_layernorm.py")
    held: list[int] = []
    try:
        for status in (
            "time_limit",
            "interrupted",
            "finished",
            "crashed",
            "budget",
            "running",
            "unsupported",
            "busy",
            "no_gain",
            "unconfirmed",
            "provider_error",
        ):
            lease = start_session(engine, spec, "h" * 64, None, "refine", "builtin", None, {}, me)
            if status != "running":
                update_session(engine, lease, status=SessionStatus(status), tokens=0, cost_usd=None)
                claim_session(engine, lease.session_id, me)  # held again, by a live process
            if SessionStatus(status).cut_short:
                held.append(lease.session_id)
        plan = start_session(engine, spec, "h" * 64, None, "parallel", "builtin", None, {}, me)
        update_session(engine, plan, status=SessionStatus.INTERRUPTED, tokens=0, cost_usd=None)
    finally:
        engine.dispose()
    r = forge("optimize", "--resume", "all", "--bank", str(bank), "--json", cache=cache_dir)
    assert r.returncode == 0, r.stderr
    data = json.loads(r.stdout)
    assert data["problems"] == []
    assert [s["session_id"] for s in data["skipped"]] == [*held, plan.session_id]
    assert all(f"being run by {me}" in s["reason"] for s in data["skipped"][:-1])
    assert "forge plan --resume" in data["skipped"][-1]["reason"]
    assert len(held) == 6  # running, interrupted, crashed, busy, unconfirmed, provider_error


def test_train_banks_a_kernel_whose_backward_was_verified_and_is_used_under_grad(tmp_path, cache_dir):
    """--train: the built-in coder's kernels carry a backward lowered from the joint graph; each
    is verified for gradients, the banked one is marked for training, the session keeps the
    choice, and a program's training step runs the kernel's backward with the reference's grads.
    ~5x eager by construction: the decision holds beside the suite's other workers."""
    bank = tmp_path / "bank.db"
    op = str(OPS / "weighted_chain.py")  # ~5x eager in training: quick_rmsnorm's ~1.8x failed under CI's load
    args = ("optimize", op, "--train", "--rounds", "1", "--no-compile-baseline", "--bank", str(bank), "--json")
    r = forge(*args, cache=cache_dir)
    assert r.returncode == 0, r.stderr
    (problem,) = json.loads(r.stdout)["problems"]
    assert problem["accepted"], problem
    assert problem["training"]["used"] and "training step" in problem["training"]["why"], problem
    with sqlite3.connect(bank) as db:
        (evidence,) = [json.loads(e) for (e,) in db.execute("SELECT evidence FROM kernels")]
        (stored,) = [json.loads(s) for (s,) in db.execute("SELECT settings FROM sessions")]
    assert evidence["gradients_verified"] is True and stored["train"] is True
    assert any(c["name"] == "gradients" and c["passed"] for c in evidence["checks"])
    assert evidence["training_step"]["eager"]["median"] > 1.0, evidence["training_step"]  # its steps timed too
    # the confirmation's null control timed the reference's steps too (the load is recorded, not enforced)
    assert evidence["training_step"].get("null_eager") is not None, evidence["training_step"]
    listed = forge("bank", "list", "--bank", str(bank), cache=cache_dir)
    assert "+train" in listed.stdout, listed.stdout
    script = (
        "import sys, torch, forge.kernelbank as kb\n"
        "sys.path.insert(0, 'tests/ops')\n"
        "import weighted_chain as op\n"
        "m = kb.open(sys.argv[1], strict=True).load('weighted_chain', *op.get_init_inputs())\n"
        "ref = op.Model(*op.get_init_inputs())\n"
        "ref.weight.data.copy_(m.weight.data)\n"
        "x = torch.randn(1024, 1024)\n"
        "a, b = x.clone().requires_grad_(), x.clone().requires_grad_()\n"
        "y = m(a)\n"
        "assert type(y.grad_fn).__name__ == '_JointBackward', y.grad_fn\n"
        "g = torch.randn_like(y)\n"
        "y.backward(g)\n"
        "ref(b).backward(g)\n"
        "torch.testing.assert_close(a.grad, b.grad)\n"
        "torch.testing.assert_close(m.weight.grad, ref.weight.grad, rtol=1e-4, atol=1e-4)\n"
        "print('ok')\n"
    )
    run = subprocess.run([sys.executable, "-c", script, str(bank)], capture_output=True, text=True, cwd=ROOT)
    assert run.stdout.strip() == "ok", run.stderr
