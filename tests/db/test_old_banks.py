"""A bank written before verdicts were typed opens, reads back into the types, and resumes.

``tests/data/bank_f089c95.sql`` is a dump of a bank written by forge at commit f089c95 (verdicts
stored as open dicts): a kernel saved by ``forge verify --save`` for an op whose Model is user
code; a built-in refine session (coder rows with configs, judge feedback); an LLM session (a
compile error, a reply without a candidate, an unusable judge answer, a confirmation that held,
a confirmed kernel); and a session interrupted while confirming (a kernel banked unconfirmed) and
then killed with one attempt left pending.
"""

from __future__ import annotations

import sqlite3

import pytest

from forge.core.statuses import AttemptRole, AttemptStatus, KernelStatus, SessionStatus, VerdictStatus
from forge.db.engine import open_for_writing
from forge.db.kernels import kernel_detail, list_kernels
from forge.db.session_reads import list_sessions, load_session
from forge.harness import OptimizeOptions, optimize
from forge.harness.sessions.resume import restore_state


def test_kernels_and_their_evidence_read_back_typed(old_bank):
    engine = open_for_writing(old_bank)
    kernels = list_kernels(engine)
    assert [(k.id, k.op, k.confirmed, k.status) for k in kernels] == [
        (2, "loop_rowsum", True, KernelStatus.ACTIVE),
        (3, "rmsnorm", False, KernelStatus.ACTIVE),
        (1, "user_rmsnorm", None, KernelStatus.ACTIVE),
    ]
    saved, confirmed, provisional = (kernel_detail(engine, i) for i in (1, 2, 3))
    assert saved.target_class == "mylayers.norm:RMSNorm" and saved.evidence.confirmed is None
    assert confirmed.evidence.confirm_attempt_id == 12 and confirmed.evidence.passed
    assert provisional.evidence.confirm_attempt_id is None and provisional.configs[0].config
    for k in (saved, confirmed, provisional):
        ev = k.evidence
        assert ev.status is VerdictStatus.PASSED and ev.checks and ev.timing_stats.candidate is not None
        assert ev.timing_stats.candidate.q1_ms <= ev.timing_stats.candidate.q3_ms and ev.inputs and ev.versions.torch
        assert ev.to_json()["op_hash"] == k.op_hash
    engine.dispose()


def test_sessions_and_every_kind_of_attempt_read_back_typed(old_bank):
    engine = open_for_writing(old_bank)
    listed = {s.id: s for s in list_sessions(engine)}
    assert [(i, s.status, s.kernel_id, s.attempts) for i, s in sorted(listed.items())] == [
        (1, SessionStatus.FINISHED, None, 2),
        (2, SessionStatus.FINISHED, 2, 4),
        (3, SessionStatus.INTERRUPTED, 3, 3),
    ]
    llm = load_session(engine, 2)
    kinds = [(a.role, a.status) for a in llm.attempts]
    assert kinds[:3] == [
        (AttemptRole.CODER, AttemptStatus.COMPILE_ERROR),
        (AttemptRole.JUDGE, AttemptStatus.INVALID_REPLY),
        (AttemptRole.CODER, AttemptStatus.INVALID_REPLY),
    ]
    compile_error, unusable_judge, no_candidate = llm.attempts[:3]
    assert compile_error.verdict is not None and compile_error.verdict.status is VerdictStatus.COMPILE_ERROR
    assert unusable_judge.feedback is None and "unusable twice" in (unusable_judge.judge_error or "")
    assert no_candidate.verdict is None and no_candidate.reason
    reviewed = [a for a in llm.attempts if a.status is AttemptStatus.REVIEWED]
    assert [a.feedback.next_step for a in reviewed if a.feedback] == ["fix it", "drop the 1.01"]
    (confirm,) = [a for a in llm.attempts if a.role is AttemptRole.CONFIRM]
    held = confirm.verdict
    assert held is not None and held.confirm_held is True
    assert held.confirm_trials == 10 and "beyond the measured noise" in (held.confirm_reason or "")
    builtin = load_session(engine, 1)
    assert all(a.config.config for a in builtin.attempts if a.role is AttemptRole.CODER)
    engine.dispose()


def test_a_stored_search_is_restored(old_bank):
    engine = open_for_writing(old_bank)
    state, spend = restore_state(load_session(engine, 3))
    engine.dispose()
    assert [c.attempt_id for c in state.pending] == [17] and state.pending[0].config.config
    assert [h.attempt_id for h in state.history] == [13, 15] and all(h.feedback for h in state.history)
    assert state.best is not None and state.round == 2 and spend.tokens == 0
    engine = open_for_writing(old_bank)
    _, llm_spend = restore_state(load_session(engine, 2))  # a model without a price: its cost is unknown
    engine.dispose()
    assert llm_spend.tokens > 0 and llm_spend.cost_reported is None


@pytest.mark.e2e
def test_an_interrupted_session_of_an_old_bank_resumes(old_bank, fast_settings):
    """Resume verifies the pending attempt, confirms, and replaces the kernel banked unconfirmed."""
    # the session's op at its stored size (4096 rows): at a quarter of it the resumed finalist's
    # margin over the null control was within a noisy VM's spread, and the resume banked nothing
    options = OptimizeOptions(bank=old_bank, resume=3)
    (result,) = optimize([], options, fast_settings).results
    assert result.session_id == 3 and result.status is SessionStatus.FINISHED
    with sqlite3.connect(old_bank) as db:
        statuses = db.execute("SELECT status FROM attempts WHERE session_id = 3 AND role = 'coder'").fetchall()
        kernels = db.execute("SELECT id, json_extract(evidence, '$.confirmed') FROM kernels WHERE session_id = 3")
        kernels = kernels.fetchall()
    assert ("pending",) not in statuses and len(statuses) == 3
    # FINISHED is the state of a session that banked (one that did not ends no_gain): its kernel confirmed
    assert result.accepted and kernels == [(result.kernel_id, 1)], result.reason
