"""Sessions and attempts in the bank: every attempt is one row, committed as soon as it exists.

The parent process is the only writer. A coder's attempt is inserted when proposed (``pending``)
and updated when its verdict is in; a session killed in between leaves pending rows that
``--resume`` verifies again. Judge calls are attempts too (role ``judge``, parent = the coder
attempt they reviewed), so prompts, replies, tokens and cost of both roles are on record; so are
the finalists' confirmations (role ``confirm``, parent = the attempt timed again).

An attempt's JSON column holds, by role: the candidate's configs and note (and, once verified, its
verdict; for a reply without a candidate, the reason); the judge's feedback or error. This module
writes that layout and reads it back into typed records; nothing else reads it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from pydantic import ValidationError
from sqlalchemy import Engine, func, select
from sqlalchemy.orm import Session

from forge.core.candidate_config import CandidateConfig
from forge.core.errors import BankError
from forge.core.feedback import JudgeFeedback
from forge.core.plan_evidence import PlanEvidence
from forge.core.problem import ProblemSource
from forge.core.statuses import AttemptRole, AttemptStatus, SessionStatus
from forge.core.verdict import Verdict
from forge.db.engine import session_factory
from forge.db.kernels import evidence_json
from forge.db.leases import Driver, SessionLease, lease_values, new_token, touch
from forge.db.models import AttemptRow, KernelRow, ProblemRow, SessionRow, utcnow
from forge.db.plans import stored_plan_evidence
from forge.db.problems import get_or_create_problem


@dataclass
class StoredAttempt:
    id: int
    round: int
    role: AttemptRole
    parent_id: int | None
    status: AttemptStatus
    source: str | None
    backend: str | None
    prompt: str | None
    response: str | None
    tokens: int
    cost_usd: float | None
    config: CandidateConfig = field(default_factory=CandidateConfig)
    note: str = ""
    verdict: Verdict | None = None  # coder and confirm rows, once verified
    plan_evidence: PlanEvidence | None = None  # plan rows: the static rules, prediction, real run
    reason: str | None = None  # a coder reply that held no candidate: why
    feedback: JudgeFeedback | None = None  # a judge row with a usable answer
    judge_error: str | None = None  # a judge row without one
    created_at: datetime | None = None
    finished_at: datetime | None = None


@dataclass
class StoredSession:
    id: int
    problem_name: str
    problem_source: str
    op_hash: str
    strategy: str
    agent: str
    model: str | None
    settings: dict[str, Any]  # what the engine stored to resume it (harness.runs.options.StoredOptions)
    status: SessionStatus
    tokens: int
    cost_usd: float | None
    started_at: datetime | None = None
    ended_at: datetime | None = None
    attempts: list[StoredAttempt] = field(default_factory=list)


@dataclass(frozen=True)
class SessionSummary:
    """One session as a list shows it: the best passing attempt and the kernel it banked, if any."""

    id: int
    op: str
    agent: str
    model: str | None
    strategy: str
    status: SessionStatus
    attempts: int  # the coder's attempts
    best_speedup_vs_eager: float | None  # over its passing attempts, as their rounds measured
    best_speedup_vs_compile: float | None
    kernel_id: int | None  # the kernel it banked (the newest, when a resume banked again)
    kernel_speedup_vs_eager: float | None  # that kernel's confirmed figure (what the bank claims)
    tokens: int
    cost_usd: float | None
    started_at: datetime | None
    ended_at: datetime | None


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
        row.verdict = evidence_json(verdict, config)
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


def _judge_answer(data: dict[str, Any]) -> tuple[JudgeFeedback | None, str | None]:
    """A judge row's feedback, or its error. Feedback that no longer validates is read as none
    (the session goes on without it, as it does when a judge gives no usable answer)."""
    error = data.get("error")
    if not data.get("feedback"):
        return None, None if error is None else str(error)
    try:
        return JudgeFeedback.model_validate(data["feedback"]), None
    except ValidationError as exc:
        return None, f"the stored feedback cannot be read ({exc.errors()[0]['msg']})"


def _stored_attempt(a: AttemptRow) -> StoredAttempt:
    data: dict[str, Any] = dict(a.verdict or {})
    role, status = AttemptRole(a.role), AttemptStatus(a.status)
    out = StoredAttempt(
        id=a.id,
        round=a.round,
        role=role,
        parent_id=a.parent_id,
        status=status,
        source=a.candidate_source,
        backend=a.backend,
        prompt=a.prompt,
        response=a.response,
        tokens=a.tokens or 0,
        cost_usd=a.cost_usd,
        created_at=a.created_at,
        finished_at=a.finished_at,
    )
    try:
        if role is AttemptRole.JUDGE:
            out.feedback, out.judge_error = _judge_answer(data)
            return out
        if role is AttemptRole.PLAN:
            out.plan_evidence = stored_plan_evidence(data, a.id)
            out.reason = None if out.plan_evidence.passed else out.plan_evidence.reason
            return out
        out.config = CandidateConfig.model_validate(data)
        out.note = str(data.get("note") or "")
        if status is AttemptStatus.INVALID_REPLY:
            out.reason = str(data.get("reason", "no usable candidate"))
        elif status.verified:
            out.verdict = Verdict.from_json(data)
    except ValidationError as exc:  # a damaged row is reported, not guessed at
        raise BankError(f"attempt {a.id} in the bank cannot be read ({exc.errors()[0]['msg']})") from exc
    return out


def load_session(engine: Engine, session_id: int) -> StoredSession:
    with session_factory(engine)() as db:
        row = db.get(SessionRow, session_id)
        if row is None:
            raise BankError(f"no session {session_id} in this bank; pass the id that `forge optimize` printed")
        problem = db.get(ProblemRow, row.problem_id)
        assert problem is not None  # a foreign key
        attempts = db.scalars(select(AttemptRow).where(AttemptRow.session_id == session_id).order_by(AttemptRow.id))
        return StoredSession(
            id=row.id,
            problem_name=problem.name,
            problem_source=problem.source,
            op_hash=problem.op_hash,
            strategy=row.strategy,
            agent=row.agent,
            model=row.model,
            settings=dict(row.settings or {}),
            status=SessionStatus(row.status),
            tokens=row.tokens or 0,
            cost_usd=row.cost_usd,
            started_at=row.started_at,
            ended_at=row.ended_at,
            attempts=[_stored_attempt(a) for a in attempts],
        )


def list_sessions(engine: Engine, op: str | None = None, status: SessionStatus | None = None) -> list[SessionSummary]:
    """Every session in the bank (newest first), optionally only one op's or one status's."""
    proposer = AttemptRow.role.in_([str(AttemptRole.CODER), str(AttemptRole.PLAN)])  # a kernel or a plan
    coder = (AttemptRow.session_id == SessionRow.id) & proposer
    passed = coder & (AttemptRow.status == str(AttemptStatus.PASSED))
    q = (
        select(
            SessionRow,
            ProblemRow.name,
            select(func.count(AttemptRow.id)).where(coder).scalar_subquery(),
            select(func.max(AttemptRow.speedup_vs_eager)).where(passed).scalar_subquery(),
            select(func.max(AttemptRow.speedup_vs_compile)).where(passed).scalar_subquery(),
            select(func.max(KernelRow.id)).where(KernelRow.session_id == SessionRow.id).scalar_subquery(),
            select(KernelRow.speedup_vs_eager)
            .where(KernelRow.session_id == SessionRow.id)
            .order_by(KernelRow.id.desc())
            .limit(1)
            .scalar_subquery(),
        )
        .join(ProblemRow, ProblemRow.id == SessionRow.problem_id)
        .order_by(SessionRow.id.desc())
    )
    if op:
        q = q.where(ProblemRow.name == op)
    if status is not None:
        q = q.where(SessionRow.status == str(status))
    with session_factory(engine)() as db:
        return [_summary(*row) for row in db.execute(q)]


def _summary(
    s: SessionRow,
    op: str,
    attempts: int | None,
    best: float | None,
    best_compile: float | None,
    kernel: int | None,
    kernel_speedup: float | None,
) -> SessionSummary:
    return SessionSummary(
        id=s.id,
        op=op,
        agent=s.agent,
        model=s.model,
        strategy=s.strategy,
        status=SessionStatus(s.status),
        attempts=int(attempts or 0),
        best_speedup_vs_eager=best,
        best_speedup_vs_compile=best_compile,
        kernel_id=kernel,
        kernel_speedup_vs_eager=kernel_speedup,
        tokens=s.tokens or 0,
        cost_usd=s.cost_usd,
        started_at=s.started_at,
        ended_at=s.ended_at,
    )
