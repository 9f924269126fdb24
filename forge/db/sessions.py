"""Sessions and attempts in the bank: every attempt is one row, committed as soon as it exists.

The parent process is the only writer. A coder's attempt is inserted when proposed (``pending``)
and updated when its verdict is in; a session killed in between leaves pending rows that
``--resume`` verifies again. Judge calls are attempts too (role ``judge``, parent = the coder
attempt they reviewed), so prompts, replies, tokens and cost of both roles are on record; so are
the finalists' confirmations (role ``confirm``, parent = the attempt timed again).

An attempt's JSON column holds, by role: the candidate's configs and note (and, once verified, its
verdict; for a reply without a candidate, the reason); the judge's feedback or error. This module
writes that layout and ``session_reads`` reads it back into typed records; nothing else reads it.
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import Engine
from sqlalchemy.orm import Session

from forge.core.candidate_config import CandidateConfig
from forge.core.errors import BankError
from forge.core.evidence import verdict_json
from forge.core.feedback import JudgeFeedback
from forge.core.problem import ProblemSource
from forge.core.statuses import AttemptRole, AttemptStatus, SessionStatus
from forge.core.verdict import Verdict
from forge.db.engine import session_factory
from forge.db.leases import Driver, SessionLease, lease_values, new_token, touch
from forge.db.models import AttemptRow, SessionRow, utcnow
from forge.db.problems import get_or_create_problem


def start_session(
    engine: Engine,
    spec: ProblemSource,
    op_hash: str,
    target: str | None,
    strategy: str,
    agent: str,
    model: str | None,
    settings: dict[str, Any],
    driver: Driver,
) -> SessionLease:
    """A new session, its lease held by ``driver`` from the moment it exists."""
    token = new_token()
    with session_factory(engine).begin() as db:
        problem = get_or_create_problem(db, spec, op_hash, target)
        row = SessionRow(
            problem_id=problem.id,
            strategy=str(strategy),  # a Strategy member stored as its plain value
            agent=agent,
            model=model,
            settings=settings,
            **lease_values(driver, token),
        )
        db.add(row)
        db.flush()
        return SessionLease(int(row.id), token, driver)


def _held_row(db: Session, lease: SessionLease) -> SessionRow:
    """The session's row, locked in ``db``'s transaction, if ``lease`` still holds it."""
    touch(db, lease)
    row = db.get(SessionRow, lease.session_id)
    assert row is not None  # touch found it
    return row


def reopen_session(engine: Engine, lease: SessionLease, settings: dict[str, Any] | None = None) -> None:
    """Mark a session whose lease this driver took (``claim_session``) running again, merging
    ``settings`` into the stored ones."""
    with session_factory(engine).begin() as db:
        row = _held_row(db, lease)
        row.status, row.ended_at = str(SessionStatus.RUNNING), None
        if settings:
            row.settings = {**(row.settings or {}), **settings}  # a new dict: the JSON column sees the change


def _insert(engine: Engine, lease: SessionLease, row: AttemptRow) -> int:
    """Insert an attempt of ``lease``'s session, if this driver still holds it."""
    with session_factory(engine).begin() as db:
        touch(db, lease)
        db.add(row)
        db.flush()
        return int(row.id)


def add_proposal(
    engine: Engine,
    lease: SessionLease,
    round: int,
    *,
    source: str,
    backend: str | None,
    config: CandidateConfig,
    note: str,
    prompt: str | None = None,
    response: str | None = None,
    tokens: int = 0,
    cost_usd: float | None = None,
    parent_id: int | None = None,
) -> int:
    """A candidate the coder proposed, pending its verification (``parent_id``: the attempt it
    was written to improve, when there was one)."""
    payload = {**config.model_dump(), "note": note}
    return _insert(
        engine,
        lease,
        AttemptRow(
            session_id=lease.session_id,
            round=round,
            role=str(AttemptRole.CODER),
            prompt=prompt,
            response=response,
            candidate_source=source,
            backend=backend,
            status=str(AttemptStatus.PENDING),
            verdict=payload,
            tokens=tokens,
            cost_usd=cost_usd,
            parent_id=parent_id,
        ),
    )


def add_invalid_reply(
    engine: Engine,
    lease: SessionLease,
    round: int,
    *,
    reason: str,
    backend: str | None,
    config: CandidateConfig,
    note: str,
    prompt: str | None = None,
    response: str | None = None,
    tokens: int = 0,
    cost_usd: float | None = None,
) -> int:
    """A coder reply that held no usable candidate, with why."""
    status = str(AttemptStatus.INVALID_REPLY)
    payload = {**config.model_dump(), "note": note, "status": status, "reason": reason}
    return _insert(
        engine,
        lease,
        AttemptRow(
            session_id=lease.session_id,
            round=round,
            role=str(AttemptRole.CODER),
            prompt=prompt,
            response=response,
            backend=backend,
            status=status,
            verdict=payload,
            tokens=tokens,
            cost_usd=cost_usd,
            finished_at=utcnow(),
        ),
    )


def finish_attempt(
    engine: Engine, lease: SessionLease, attempt_id: int, verdict: Verdict, config: CandidateConfig
) -> None:
    """A proposed candidate's verdict is in."""
    with session_factory(engine).begin() as db:
        touch(db, lease)
        row = db.get(AttemptRow, attempt_id)
        if row is None:
            raise BankError(f"attempt {attempt_id} vanished from the bank while it was being verified")
        row.verdict = verdict_json(verdict, config)
        row.status = str(AttemptStatus.of(verdict.status))
        row.speedup_vs_eager = verdict.speedup_vs_eager
        row.speedup_vs_compile = verdict.speedup_vs_compile
        row.finished_at = utcnow()


def add_review(
    engine: Engine,
    lease: SessionLease,
    round: int,
    parent_id: int | None,
    *,
    feedback: JudgeFeedback | None,
    error: str | None,
    prompt: str | None = None,
    response: str | None = None,
    tokens: int = 0,
    cost_usd: float | None = None,
) -> int:
    """The judge's review of attempt ``parent_id``: its feedback, or the error when it gave none."""
    status = AttemptStatus.REVIEWED if feedback is not None else AttemptStatus.INVALID_REPLY
    payload = {"feedback": feedback.model_dump(by_alias=True)} if feedback is not None else {"error": error}
    return _insert(
        engine,
        lease,
        AttemptRow(
            session_id=lease.session_id,
            round=round,
            role=str(AttemptRole.JUDGE),
            parent_id=parent_id,
            prompt=prompt,
            response=response,
            status=str(status),
            verdict=payload,
            tokens=tokens,
            cost_usd=cost_usd,
            finished_at=utcnow(),
        ),
    )


def add_confirmation(engine: Engine, lease: SessionLease, round: int, parent_id: int, verdict: Verdict) -> int:
    """A finalist (attempt ``parent_id``) timed again; ``verdict`` carries the confirmation fields."""
    return _insert(
        engine,
        lease,
        AttemptRow(
            session_id=lease.session_id,
            round=round,
            role=str(AttemptRole.CONFIRM),
            parent_id=parent_id,
            backend=verdict.backend,
            status=str(AttemptStatus.of(verdict.status)),
            verdict=verdict.to_json(),
            speedup_vs_eager=verdict.speedup_vs_eager,
            speedup_vs_compile=verdict.speedup_vs_compile,
            finished_at=utcnow(),
        ),
    )


def update_session(
    engine: Engine, lease: SessionLease, *, status: SessionStatus | None = None, tokens: int, cost_usd: float | None
) -> None:
    """A session's totals, and its status when given; a status other than running ends it and
    gives its lease back. ``SessionTakenOverError`` if this driver no longer holds it."""
    with session_factory(engine).begin() as db:
        row = _held_row(db, lease)
        row.tokens, row.cost_usd = tokens, cost_usd
        if status is not None:
            row.status = str(status)
            row.ended_at = None if status is SessionStatus.RUNNING else utcnow()
            if status is not SessionStatus.RUNNING:
                row.lease_token, row.heartbeat_at = None, None
