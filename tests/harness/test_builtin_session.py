"""The built-in agent through the engine (in process): events, the evolve strategy with parallel
verification, what lands in the bank."""

from __future__ import annotations

import json
import re
import sqlite3
import time
from dataclasses import replace

import pytest

from forge.agents.llm.agents import LLMCoder
from forge.agents.roles import CoderContext
from forge.core.figures import fmt_seconds, judged_roofline
from forge.core.verdict import Verdict
from forge.db.engine import open_for_writing
from forge.db.kernels import list_kernels
from forge.db.session_reads import load_session
from forge.harness import OptimizeOptions, optimize
from forge.harness import events as ev
from forge.harness.sessions.resume import restore_state
from forge.harness.sessions.search_state import no_gain_reason
from forge.verifier import Job, VerifierService
from tests.agents.test_prompts import FakeClient
from tests.conftest import OPS

QUICK_RMSNORM = OPS / "quick_rmsnorm.py"  # a session banks its kernel (~2x eager) in ~12 s
CHAIN = OPS / "pointwise_chain.py"  # one fused pass where eager makes eleven: ~8x eager, certain to bank


def _attempt_id(job: Job) -> int:
    return int(job.name.removeprefix("attempt_"))


@pytest.mark.e2e
def test_evolve_verifies_generations_in_parallel_and_records_everything(tmp_path, fast_settings, monkeypatch):
    """Every generation verified for real and recorded; the finalist's confirmation, real, is read
    as a clear winner, the rounds' passing kernels as contenders (what is recorded is under test
    here, not whether small_softmax banks: its kernels read 0.46x eager on this machine)."""
    _rounds_read_as_contenders(monkeypatch)
    _confirmations_read_as_clear_winners(monkeypatch)
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
    assert sum(isinstance(e, ev.JudgeReviewed) for e in seen) == n
    assert all(e.to_dict()["event"] == type(e).__name__ for e in seen)
    with sqlite3.connect(bank) as db:
        coder = db.execute("SELECT round, status FROM attempts WHERE role='coder' ORDER BY id").fetchall()
        judged = db.execute("SELECT count(*) FROM attempts WHERE role='judge' AND status='reviewed'").fetchone()
        query = "SELECT json_extract(verdict, '$.config') FROM attempts WHERE role='coder'"
        configs = [c for (c,) in db.execute(query)]
        (status,) = db.execute("SELECT status FROM sessions").fetchone()
    assert coder == [(1, "passed")] * 3 + [(2, "passed")] * (n - 3)
    assert judged == (n,) and result.accepted and status == "finished", result.reason
    assert len(set(configs)) == n  # every child a different config
    # the winner was timed again alone before it was banked
    assert any(isinstance(e, ev.KernelAccepted) and e.kernel_id == result.kernel_id for e in seen)


def test_time_limit_stops_before_the_next_round(tmp_path, fast_settings):
    """A limit spent before the session opens still leaves it its first round (an op after one
    whose confirmation ran over is not starved), and no second."""
    options = OptimizeOptions(rounds=5, bank=tmp_path / "bank.db", time_limit_s=0.001)
    run = optimize([OPS / "small_softmax.py"], options, fast_settings)
    (result,) = run.results
    assert result.status == "time_limit" and result.attempts == 1
    assert [p.round for p in result.trace] == [1]


@pytest.mark.e2e
def test_attempts_and_the_bank_record_a_kernel_without_its_inert_knobs(tmp_path, fast_settings, monkeypatch):
    """The one-pass layernorm accumulates in double whatever ``acc`` says: its attempt keeps the
    tuner's full config (the search reasons over it) but records, and banks, the config without
    ``acc``; every other attempt's kernel config is its whole config. (What is recorded is under
    test, not whether it banks: the round's kernels are read as 2x eager and confirmed as clear
    winners against a tight null.)"""
    bank = tmp_path / "bank.db"
    _rounds_read_as_contenders(monkeypatch)
    _confirmations_read_as_clear_winners(monkeypatch)
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
    assert result.accepted, result.reason
    ((aid,),), ((stored,),) = winner, banked
    assert json.loads(stored) == next(k for a, _, k in rows if a == aid)


@pytest.mark.e2e
def test_finalists_are_timed_again_and_only_a_confirmation_that_holds_is_banked(tmp_path, fast_settings):
    """The kernel banked carries its confirmation's timings (more calls, fresh inputs, after the
    choice); a finalist whose confirmation does not beat eager beyond the noise is not banked,
    and the next fastest distinct one is tried before the session gives up."""
    bank = tmp_path / "bank.db"
    seen: list[ev.Event] = []
    options = OptimizeOptions(rounds=1, bank=bank)  # ~8x eager from the first kernel: it holds up
    (result,) = optimize([CHAIN], options, fast_settings, seen.append).results
    confirms = [e for e in seen if isinstance(e, ev.ConfirmFinished)]
    assert confirms and [type(e).__name__ for e in seen].index("ConfirmStarted") > max(
        i for i, e in enumerate(seen) if isinstance(e, ev.VerdictReady)
    )
    with sqlite3.connect(bank) as db:
        rows = db.execute(
            "SELECT id, parent_id, json_extract(verdict, '$.trials'), json_extract(verdict, '$.held'),"
            " json_extract(verdict, '$.timing_stats.candidate.trials') FROM attempts WHERE role='confirm'"
        ).fetchall()
        kernels = db.execute("SELECT attempt_id, speedup_vs_eager, evidence FROM kernels").fetchall()
    assert [(r[0], r[1]) for r in rows] == [(e.confirm_id, e.attempt_id) for e in confirms]
    # confirm_trials, not the budget's: a kernel ~8x eager is conclusive at once
    assert [trials for _, _, trials, _, _ in rows] == [10] and all(timed >= 10 for *_, timed in rows)
    assert result.accepted, result.reason
    ((attempt_id, speedup, evidence),) = kernels
    held = confirms[-1]
    assert held.held and held.attempt_id == attempt_id and speedup == held.speedup_vs_eager
    assert json.loads(evidence)["confirmed"] is True and result.speedup_vs_eager == speedup
    roof = judged_roofline(Verdict.from_json(json.loads(evidence)))  # the summary's "of bound": the kernel's own
    assert roof is not None and roof.holds and result.bound_fraction == roof.fraction_candidate > 0, roof
    assert result.eager_bound_fraction == roof.fraction_eager and result.to_json()["bound_fraction"] > 0
    assert result.compile_bound_fraction == roof.fraction_compile
    _a_resumed_round_is_told_the_confirmation(bank, result, confirms[-1])


def _a_resumed_round_is_told_the_confirmation(bank, result, last: ev.ConfirmFinished) -> None:
    """The history a resume restores carries each finalist's confirmation (its figure, whether it
    held, the kernel banked from it), and the coder's prompt says it under that attempt."""
    engine = open_for_writing(bank)
    state, _ = restore_state(load_session(engine, result.session_id))
    engine.dispose()
    finalist = next(h for h in state.history if h.attempt_id == last.attempt_id)
    c = finalist.confirmation
    assert c is not None and c.held and c.held == last.held and c.trials == 10, c
    assert c.kernel_id == result.kernel_id, (c, result)
    ctx = CoderContext("pointwise_chain", CHAIN.read_text(), "cpu", "cpp", history=state.history)
    text = LLMCoder(FakeClient([])).prompt(ctx)[-1]["content"]  # type: ignore[arg-type]
    said = f"banked as kernel {result.kernel_id}: the figure a new candidate must beat"
    assert "- as a finalist, timed again alone (" in text and said in text, text


@pytest.mark.e2e
def test_a_session_banks_nothing_when_no_finalist_holds_up(tmp_path, fast_settings, monkeypatch):
    def noisy(self, job, trials, timeout):  # as if eager's and the candidate's quartiles overlapped
        stats = {"median_ms": 1.0, "iqr_ms": 0.2, "q1_ms": 0.9, "q3_ms": 1.1}
        timing = {"candidate": stats, "eager": stats}
        return Verdict.from_json({"status": "passed", "speedup_vs_eager": 1.0, "timing_stats": timing})

    monkeypatch.setattr(VerifierService, "verify_alone", noisy)
    seen: list[ev.Event] = []
    options = OptimizeOptions(rounds=2, bank=tmp_path / "bank.db")
    run = optimize([QUICK_RMSNORM], options, fast_settings, seen.append)
    (result,) = run.results
    faster = {e.attempt_id for e in seen if isinstance(e, ev.VerdictReady) and (e.speedup_vs_eager or 0) > 1}
    tried = [e.attempt_id for e in seen if isinstance(e, ev.ConfirmStarted)]
    assert faster, "the built-in RMSNorm should beat eager at the median"
    assert len(tried) == min(2, len(faster)) and set(tried) <= faster
    assert not result.accepted and run.exit_code == 1
    assert result.status == "no_gain" and "best kernel" in (result.reason or "")  # measured, not just "none"
    if tried:
        assert "no finalist held up" in (result.reason or "") and "within the measured noise" in (result.reason or "")


def test_a_no_gain_reason_gives_the_room_eager_left_and_the_best_speedup_with_its_interval():
    timing = {"paired_eager": {"pairs": 60, "median": 1.05, "low": 0.98, "high": 1.12}, "regime": "cold"}
    roof = {
        "bytes": 32_000_000,
        "flops": 8_000_000,
        "bandwidth_gbs": 20.0,
        "peak_gflops": 150.0,
        "fraction_eager": 0.86,
    }
    verdict = Verdict.from_json(
        {"status": "passed", "speedup_vs_eager": 1.05, "timing_stats": timing, "roofline": roof}
    )
    assert no_gain_reason(verdict, None) == (
        "no kernel faster than eager beyond the measured noise: eager already runs at 86% of this machine's "
        "measured memory bandwidth; best kernel 1.05x eager (95% interval 0.98-1.12x over 60 pairs)"
    )
    compute_bound = {**roof, "bytes": 1000, "flops": 10**10}
    verdict = Verdict.from_json({"status": "passed", "speedup_vs_eager": 0.9, "roofline": compute_bound})
    assert no_gain_reason(verdict, "timed again") == (
        "no kernel faster than eager beyond the measured noise: eager already runs at 86% of this machine's "
        "measured matmul peak; best kernel 0.90x eager; timed again"
    )
    # eager 2.37x past the bound: the estimate is wrong for this op, never quoted as a fraction
    past = {**roof, "fraction_eager": 2.37}
    broken = Verdict.from_json({"status": "passed", "speedup_vs_eager": 0.9, "roofline": past})
    said = no_gain_reason(broken, None)
    assert "237%" in said and "cannot hold" in said and "already runs at" not in said
    # judged warm, the op's data comes from cache: eager's share of a DRAM bound is no room figure
    warm = Verdict.from_json(
        {"status": "passed", "speedup_vs_eager": 1.05, "roofline": roof, "timing_stats": {**timing, "regime": "warm"}}
    )
    assert "already runs at" not in no_gain_reason(warm, None) and "1.05x eager" in no_gain_reason(warm, None)


def _confirm_verdict(cand_ms: float, low: float, pairs: int) -> Verdict:
    """A passed confirmation 1/cand_ms faster than eager at the median, its interval from ``low``."""
    ratio = 1.0 / cand_ms
    pair = {"median": ratio, "low": low, "high": ratio * 2, "pairs": pairs}
    cand = {"median_ms": cand_ms, "iqr_ms": 0.1, "q1_ms": cand_ms - 0.05, "q3_ms": cand_ms + 0.05}
    eager = {"median_ms": 1.0, "iqr_ms": 0.1, "q1_ms": 0.95, "q3_ms": 1.05}
    timing = {"candidate": cand, "eager": eager, "paired_eager": pair, "regime": "cold"}
    return Verdict.from_json({"status": "passed", "speedup_vs_eager": ratio, "timing_stats": timing})


def _confirmations_read_as_clear_winners(monkeypatch) -> None:  # type: ignore[no-untyped-def]
    """Each confirmation runs for real (its config, its checks), then reads as 2x eager with an
    interval far above a tight null: for tests of what a session records once it banks."""
    real = VerifierService.verify_alone

    def confirmed(self, job, trials, timeout):  # type: ignore[no-untyped-def]
        clear = _clear_winner(self, job, trials, timeout)
        update = {"speedup_vs_eager": clear.speedup_vs_eager, "timing_stats": clear.timing_stats}
        return real(self, job, trials, timeout).model_copy(update=update)

    monkeypatch.setattr(VerifierService, "verify_alone", confirmed)
    monkeypatch.setattr(VerifierService, "verify_null", lambda self, trials, timeout: _null_verdict(0.98, 1.02))


def _rounds_read_as_contenders(monkeypatch) -> None:  # type: ignore[no-untyped-def]
    """The round's verifications run for real (each kernel loaded, checked and timed), and a
    passing one is then read as 2x eager: these tests decide what the confirm step does with a
    contender, and a machine loaded by parallel test workers can time the quick RMSNorm's round
    within the noise, leaving no contender to confirm."""
    real = VerifierService.verify

    def verify(self, jobs):  # type: ignore[no-untyped-def]
        said = real(self, jobs)
        return [
            v.model_copy(update={"speedup_vs_eager": 2.0, "timing_meaningful": True}) if v.passed else v for v in said
        ]

    monkeypatch.setattr(VerifierService, "verify", verify)


@pytest.mark.parametrize("second_low", [1.4, 0.8])
def test_an_inconclusive_confirmation_is_timed_once_more_with_more_calls(
    tmp_path, fast_settings, monkeypatch, second_low
):
    """Faster at the median but an interval reaching 1.0x: one more confirmation, three times the
    calls, judged alone; it banks the kernel only if that larger sample clears the noise."""
    asked: list[int] = []

    def inconclusive_first(self, job, trials, timeout):
        asked.append(trials)
        return _confirm_verdict(0.5, 0.7 if len(asked) == 1 else second_low, 3 * trials)

    nulls: list[int] = []

    def tight_null(self, trials, timeout):
        nulls.append(trials)
        return _null_verdict(0.98, 1.02)

    monkeypatch.setattr(VerifierService, "verify_alone", inconclusive_first)
    monkeypatch.setattr(VerifierService, "verify_null", tight_null)
    _rounds_read_as_contenders(monkeypatch)
    seen: list[ev.Event] = []
    options = OptimizeOptions(rounds=1, bank=tmp_path / "bank.db")
    (result,) = optimize([QUICK_RMSNORM], options, fast_settings, seen.append).results
    confirms = [e for e in seen if isinstance(e, ev.ConfirmFinished)]
    # CI once saw no confirmation asked for (not reproduced since): say what the session did instead
    verdicts = [e for e in seen if isinstance(e, ev.VerdictReady)]
    attempts = [(e.attempt_id, e.status, e.speedup_vs_eager, (e.reason or "")[:200]) for e in verdicts]
    assert asked[:2] == [10, 30], f"confirmations asked {asked}; {result.reason}; attempts {attempts}"
    assert confirms[0].attempt_id == confirms[1].attempt_id
    assert not confirms[0].held and "reaches 1.0x" in confirms[0].reason
    assert confirms[1].held is (second_low > 1) and result.accepted is (second_low > 1)
    # the null control is measured only for a finalist about to be banked, with its count of calls
    assert nulls == ([30] if second_low > 1 else [])
    if second_low < 1:  # each finalist gets one extension, no more
        assert asked == [10, 30] * (len(asked) // 2) and "reaches 1.0x" in (result.reason or "")


def _null_verdict(low: float, high: float) -> Verdict:
    """The reference verified against itself: passed, its paired interval ``low``-``high``."""
    pair = {"median": (low + high) / 2, "low": low, "high": high, "pairs": 60}
    return Verdict.from_json({"status": "passed", "timing_stats": {"paired_eager": pair, "regime": "cold"}})


def test_a_finalist_within_the_null_controls_offset_is_not_banked(tmp_path, fast_settings, monkeypatch):
    """A confirmation whose interval clears 1.0x but not the null control's bar is inconclusive:
    timed once more with three times the calls, against a null with as many, and refused; the
    recorded confirmations keep the null they were judged against."""
    nulls: list[int] = []

    def offset_null(self, trials, timeout):
        nulls.append(trials)
        return _null_verdict(0.85, 0.92)  # the candidate's side read 8-15% apart from eager's

    monkeypatch.setattr(
        VerifierService, "verify_alone", lambda self, job, trials, timeout: _confirm_verdict(0.8, 1.08, 3 * trials)
    )
    monkeypatch.setattr(VerifierService, "verify_null", offset_null)
    _rounds_read_as_contenders(monkeypatch)
    seen: list[ev.Event] = []
    bank = tmp_path / "bank.db"
    options = OptimizeOptions(rounds=1, bank=bank)
    (result,) = optimize([QUICK_RMSNORM], options, fast_settings, seen.append).results
    assert not result.accepted and "does not clear 1.13x" in (result.reason or ""), result.reason
    finished = [e for e in seen if isinstance(e, ev.NullControlFinished)]
    assert nulls == [10, 30] and len(finished) == 2  # one null per count of calls, kept for the next finalist
    assert all(e.bar is not None and abs(e.bar - 1 / 0.885) < 1e-9 for e in finished)
    with sqlite3.connect(bank) as db:
        judged = [
            Verdict.from_json(json.loads(v))
            for (v,) in db.execute("SELECT verdict FROM attempts WHERE role = 'confirm'")
        ]
    assert judged and all(v.timing_stats.null_eager is not None and not v.confirm_held for v in judged)


def _clear_winner(self, job, trials, timeout):  # 2x eager, its interval far above any null's bar
    return _confirm_verdict(0.5, 1.6, trials)


def test_a_finalist_whose_null_control_fails_waits_for_resume(tmp_path, fast_settings, monkeypatch):
    """A null control that did not pass sets no bar: the finalist is neither banked (never judged
    against 1.0x instead) nor rejected, and ``--resume`` confirms it again, with a new null."""
    nulls: list[int] = []

    def failing_null(self, trials, timeout):
        nulls.append(trials)
        return Verdict.from_json({"status": "timeout", "reason": "the worker ran past 60 s"})

    bank = tmp_path / "bank.db"
    options = OptimizeOptions(rounds=1, bank=bank)
    _rounds_read_as_contenders(monkeypatch)
    with monkeypatch.context() as m:
        m.setattr(VerifierService, "verify_alone", _clear_winner)
        m.setattr(VerifierService, "verify_null", failing_null)
        (result,) = optimize([QUICK_RMSNORM], options, fast_settings).results
    reason = result.reason or ""
    assert not result.accepted and nulls == [10]  # no extension: more calls cannot make a null pass
    assert "did not pass (timeout: the worker ran past 60 s); nothing is banked without its null control" in reason
    assert f"`forge optimize --resume {result.session_id} --bank {bank}` confirms again" in reason
    with monkeypatch.context() as m:
        m.setattr(VerifierService, "verify_alone", _clear_winner)
        m.setattr(VerifierService, "verify_null", lambda self, trials, timeout: _null_verdict(0.97, 1.03))
        (again,) = optimize([], replace(options, resume=result.session_id), fast_settings).results
    assert again.accepted and again.speedup_vs_eager == 2.0


@pytest.mark.e2e
def test_null_control_off_judges_against_one_and_ctrl_c_during_it_keeps_the_confirmation(
    tmp_path, fast_settings, monkeypatch
):
    def never(self, trials, timeout):
        raise AssertionError("null_control = false must not measure a null")

    monkeypatch.setattr(VerifierService, "verify_alone", _clear_winner)
    monkeypatch.setattr(VerifierService, "verify_null", never)
    _rounds_read_as_contenders(monkeypatch)
    seen: list[ev.Event] = []
    off = fast_settings.model_copy(update={"null_control": False})
    options = OptimizeOptions(rounds=1, bank=tmp_path / "off.db")
    (result,) = optimize([QUICK_RMSNORM], options, off, seen.append).results
    assert result.accepted and not any(isinstance(e, ev.NullControlStarted) for e in seen)

    def interrupted(self, trials, timeout):
        raise KeyboardInterrupt

    monkeypatch.setattr(VerifierService, "verify_null", interrupted)
    bank = tmp_path / "bank.db"
    run = optimize([QUICK_RMSNORM], replace(options, bank=bank), fast_settings)
    assert run.interrupted and run.exit_code == 130
    with sqlite3.connect(bank) as db:  # the finalist's measurement was taken: its row is there
        rows = db.execute("SELECT verdict FROM attempts WHERE role = 'confirm'").fetchall()
    (confirm,) = [Verdict.from_json(json.loads(v)) for (v,) in rows]
    assert confirm.confirm_held is False and confirm.confirm_reason == "interrupted while its null control was timed"


@pytest.mark.e2e
def test_each_op_gets_an_equal_part_of_the_time_left_when_it_opens(tmp_path, fast_settings):
    """Three ops under a 24 s limit: each op's share is what was left when its session opened,
    over the ops not yet done (checked against this test's own clock), and a search its share
    ends says so."""
    opened: list[tuple[float, ev.SessionStarted]] = []

    def note(e: ev.Event) -> None:
        if isinstance(e, ev.SessionStarted):
            opened.append((time.monotonic(), e))

    # ops of 16-32 configs each: no search runs out of configs (ending finished) within an 8 s share
    ops = [OPS / "small_layernorm.py", OPS / "quick_rmsnorm.py", OPS / "small_softmax.py"]
    t0 = time.monotonic()
    run = optimize(ops, OptimizeOptions(rounds=40, bank=tmp_path / "bank.db", time_limit_s=24), fast_settings, note)
    assert [e.shared_among for _, e in opened] == [3, 2, 1]
    for i, (at, e) in enumerate(opened):
        expected = max(0.0, 24 - (at - t0)) / (3 - i)
        assert e.share_s is not None and expected - 0.1 <= e.share_s <= expected + 1.5 / (3 - i), (i, e, at - t0)
    # 40 rounds cannot end in a share of 8 s or less: every search ends on the time limit (the load
    # check is off in the tests: a loaded machine is recorded, not waited for)
    for r, (_, e) in zip(run.results, opened, strict=True):
        assert r.share_s == e.share_s and r.attempts >= 1
        assert r.status == "time_limit", (r.status, r.reason)
        # a session that banked has no reason to give; one that did not names its share, or the
        # run's limit where the whole of it was spent first, then why its finalists (if any were
        # timed again in the part of the share kept for that) did not hold up
        share = re.escape(f"its share of the time limit ({fmt_seconds(e.share_s or 0)}")
        said = rf"^({share}.*\)|time limit) reached after \d+ round\(s\)(; timed again \(.*)?$"
        assert r.reason is None if r.accepted else re.search(said, r.reason or ""), r.reason


@pytest.mark.e2e
def test_the_next_finalist_is_banked_when_the_first_does_not_hold_up(tmp_path, fast_settings, monkeypatch):
    real = VerifierService.verify_alone
    calls: list[int] = []

    def first_fails(self, job, trials, timeout):
        calls.append(_attempt_id(job))
        if len(calls) == 1:
            return Verdict.from_json({"status": "failed_correctness", "reason": "max abs error 1.0 on case 3"})
        return real(self, job, trials, timeout)

    monkeypatch.setattr(VerifierService, "verify_alone", first_fails)
    seen: list[ev.Event] = []
    bank = tmp_path / "bank.db"
    options = OptimizeOptions(rounds=2, bank=bank)
    # an op whose fused kernel wins by ~8x: a shared machine's timing noise cannot undo the finalist
    (result,) = optimize([OPS / "pointwise_chain.py"], options, fast_settings, seen.append).results
    first, *_, second = (e for e in seen if isinstance(e, ev.ConfirmFinished))
    assert not first.held and "max abs error 1.0 on case 3" in first.reason
    assert second.held and result.accepted, result.reason
    with sqlite3.connect(bank) as db:
        ((attempt_id, config),) = db.execute(
            "SELECT k.attempt_id, c.config FROM kernels k JOIN kernel_configs c ON c.kernel_id = k.id"
        ).fetchall()
        (kernel_config,) = db.execute(
            "SELECT json_extract(verdict, '$.kernel_config') FROM attempts WHERE id = ?", (attempt_id,)
        ).fetchone()
    assert attempt_id == second.attempt_id == calls[1] != calls[0]
    assert json.loads(config) == json.loads(kernel_config)  # the second finalist's own config


@pytest.mark.e2e
def test_ctrl_c_while_confirming_banks_the_round_best_unconfirmed_and_resume_decides(
    tmp_path, fast_settings, monkeypatch
):
    def interrupted(self, job, trials, timeout):
        raise KeyboardInterrupt

    bank = tmp_path / "bank.db"
    options = OptimizeOptions(rounds=1, bank=bank)
    with monkeypatch.context() as m:
        m.setattr(VerifierService, "verify_alone", interrupted)
        run = optimize([OPS / "pointwise_chain.py"], options, fast_settings)
    (result,) = run.results
    assert result.status == "interrupted" and run.exit_code == 130
    assert result.accepted, ("the fused chain (~8x eager) beats eager beyond the noise in its round", result.reason)
    query = "SELECT id, json_extract(evidence, '$.confirmed') FROM kernels WHERE session_id = ?"
    with sqlite3.connect(bank) as db:
        assert db.execute(query, (result.session_id,)).fetchall() == [(result.kernel_id, 0)]
    engine = open_for_writing(bank)
    assert [(k.id, k.confirmed) for k in list_kernels(engine)] == [(result.kernel_id, False)]  # bank list says so
    engine.dispose()
    # --resume: no rounds left, so it confirms; the provisional kernel gives way to what holds up
    resumed = optimize([], replace(options, resume=result.session_id), fast_settings)
    (again,) = resumed.results
    with sqlite3.connect(bank) as db:
        kernels = db.execute(query, (result.session_id,)).fetchall()
        (status,) = db.execute("SELECT status FROM sessions WHERE id = ?", (result.session_id,)).fetchone()
    # the fused chain (~8x eager) holds up when timed again: the one state its bank allows
    assert again.accepted and status == "finished", again.reason
    assert kernels == [(again.kernel_id, 1)]


@pytest.mark.e2e
def test_a_busy_machine_banks_nothing_and_resume_times_the_finalists_again(tmp_path, fast_settings, monkeypatch):
    """A confirmation timed while other processes loaded the machine is neither banked nor
    rejected: the session ends "busy", says why, and ``--resume`` confirms on the quiet machine."""

    def busy(self, job, trials, timeout):  # a wild speedup, measured while the cores were taken
        fast = {"median_ms": 0.1, "iqr_ms": 0.02, "q1_ms": 0.09, "q3_ms": 0.11}
        slow = {"median_ms": 1.4, "iqr_ms": 0.2, "q1_ms": 1.3, "q3_ms": 1.5}
        load = {"cores": 2, "other_cores": 0.9, "busy": True, "detail": "other processes used 0.90 of 2 cores"}
        timing = {
            "candidate": fast,
            "eager": slow,
            "paired_eager": {"pairs": 60, "median": 14.0, "low": 13.0, "high": 15.0},
            "contention": load,
        }
        return Verdict.from_json({"status": "passed", "speedup_vs_eager": 14.0, "timing_stats": timing})

    bank = tmp_path / "bank.db"
    options = OptimizeOptions(rounds=1, bank=bank)
    with monkeypatch.context() as m:
        _rounds_read_as_contenders(m)  # a loaded machine may time the round within the noise
        m.setattr(VerifierService, "verify_alone", busy)
        # the load is the stand-in's: the real machine's is not waited for between finalists
        m.setattr("forge.harness.sessions.session.wait_for_quiet_machine", lambda limit_s, stop: (None, 0.0))
        run = optimize([QUICK_RMSNORM], options, fast_settings)
    (result,) = run.results
    assert result.status == "busy" and not result.accepted and run.exit_code == 1
    assert "machine was busy" in (result.reason or "") and "0.90 of 2 cores" in (result.reason or "")
    assert f"--resume {result.session_id}" in (result.reason or "")
    with sqlite3.connect(bank) as db:
        assert db.execute("SELECT count(*) FROM kernels").fetchone() == (0,)
    with monkeypatch.context() as m:  # the quiet machine's confirmation: a clear winner, a tight null
        m.setattr(VerifierService, "verify_alone", _clear_winner)
        m.setattr(VerifierService, "verify_null", lambda self, trials, timeout: _null_verdict(0.98, 1.02))
        resumed = optimize([], replace(options, resume=result.session_id), fast_settings)
    (again,) = resumed.results
    assert again.status == "finished" and again.accepted, again.reason
    with sqlite3.connect(bank) as db:
        confirms = db.execute("SELECT count(*) FROM attempts WHERE role='confirm'").fetchone()[0]
        kernels = db.execute("SELECT count(*) FROM kernels").fetchone()[0]
    assert confirms >= 2 and kernels == 1  # the finalist was timed again by the resumed run, and banked
