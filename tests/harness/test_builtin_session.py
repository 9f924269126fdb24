"""The built-in agent through the engine (in process): events, the evolve strategy with parallel
verification, what lands in the bank."""

from __future__ import annotations

import json
import sqlite3

from forge.harness import events as ev
from forge.harness.optimize import optimize
from forge.harness.session import OptimizeOptions
from tests.conftest import OPS


def test_evolve_verifies_generations_in_parallel_and_records_everything(tmp_path, fast_settings):
    seen: list[ev.Event] = []
    bank = tmp_path / "bank.db"
    options = OptimizeOptions(strategy="evolve", rounds=2, population=3, workers=2, bank=bank)
    run = optimize([OPS / "small_softmax.py"], options, fast_settings, seen.append)
    (result,) = run.results
    kinds = [type(e).__name__ for e in seen]
    assert kinds[0] == "SessionStarted" and kinds[-1] == "SessionFinished"
    verdicts = [e for e in seen if isinstance(e, ev.VerdictReady)]
    # generation 1: three children of the default; generation 2: up to three more, fewer when the
    # tuner's neighbourhood of the best runs out (the search never repeats a config)
    n = len(verdicts)
    assert 4 <= n <= 6 and all(v.status == "passed" for v in verdicts)
    assert [v.round for v in verdicts[:3]] == [1, 1, 1] and {v.round for v in verdicts[3:]} == {2}
    assert sum(isinstance(e, ev.RoundStarted) for e in seen) == 2
    assert sum(isinstance(e, ev.JudgeFeedback) for e in seen) == n
    assert all(e.to_dict()["event"] == type(e).__name__ for e in seen)
    with sqlite3.connect(bank) as db:
        coder = db.execute("SELECT round, status FROM attempts WHERE role='coder' ORDER BY id").fetchall()
        judged = db.execute("SELECT count(*) FROM attempts WHERE role='judge' AND status='reviewed'").fetchone()
        query = "SELECT json_extract(verdict, '$.config') FROM attempts WHERE role='coder'"
        configs = [c for (c,) in db.execute(query)]
        (status,) = db.execute("SELECT status FROM sessions").fetchone()
    assert coder == [(1, "passed")] * 3 + [(2, "passed")] * (n - 3)
    assert judged == (n,) and status == "finished"
    assert len(set(configs)) == n  # every child a different config
    if result.accepted:  # the winner was timed again alone before it was banked
        assert any(isinstance(e, ev.KernelAccepted) and e.kernel_id == result.kernel_id for e in seen)
    else:
        assert result.reason


def test_time_limit_stops_before_the_next_round(tmp_path, fast_settings):
    options = OptimizeOptions(rounds=5, bank=tmp_path / "bank.db")
    run = optimize([OPS / "small_softmax.py"], options, fast_settings, time_limit_s=0.001)
    (result,) = run.results
    assert result.status == "time_limit" and result.attempts == 0 and not result.accepted
    assert run.exit_code == 4 and "time limit reached" in (result.reason or "")


def test_attempts_and_the_bank_record_a_kernel_without_its_inert_knobs(tmp_path, fast_settings):
    """The one-pass layernorm accumulates in double whatever ``acc`` says: its attempt keeps the
    tuner's full config (the search reasons over it) but records, and banks, the config without
    ``acc``; every other attempt's kernel config is its whole config."""
    bank = tmp_path / "bank.db"
    options = OptimizeOptions(strategy="evolve", rounds=1, population=4, workers=2, bank=bank)
    (result,) = optimize([OPS / "small_layernorm.py"], options, fast_settings).results
    with sqlite3.connect(bank) as db:
        query = "SELECT id, json_extract(verdict, '$.config'), json_extract(verdict, '$.kernel_config') FROM attempts"
        rows = [(aid, json.loads(c), json.loads(k)) for aid, c, k in db.execute(query + " WHERE role='coder'")]
        banked = db.execute("SELECT config FROM kernel_configs").fetchall()
        winner = db.execute("SELECT attempt_id FROM kernels").fetchall()
    one_pass = [(c, k) for _, c, k in rows if c["moments"] == "one_pass"]
    assert len(rows) == 4 and len(one_pass) == 1
    config, kernel = one_pass[0]
    assert "acc" in config and kernel == {k: v for k, v in config.items() if k != "acc"}
    assert all(k == c for _, c, k in rows if c["moments"] != "one_pass")
    if result.accepted:
        ((aid,),), ((stored,),) = winner, banked
        assert json.loads(stored) == next(k for a, _, k in rows if a == aid)
