"""Sessions and attempts read back from the bank into typed records (the layout
``forge.db.sessions`` writes): one session whole, with its attempts (``load_session``), or every
session as a list shows it (``list_sessions``)."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from pydantic import ValidationError
from sqlalchemy import Engine, func, select

from forge.core.candidate_config import CandidateConfig
from forge.core.errors import BankError
from forge.core.feedback import JudgeFeedback
from forge.core.plan_evidence import PlanEvidence
from forge.core.statuses import AttemptRole, AttemptStatus, SessionStatus
from forge.core.verdict import Verdict
from forge.db.engine import session_factory
from forge.db.models import AttemptRow, KernelRow, ProblemRow, SessionRow
from forge.db.plans import stored_plan_evidence


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
    banked: dict[int, int] = field(default_factory=dict)  # attempt id -> the kernel banked from it


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
            banked={
                int(attempt): int(kernel)
                for kernel, attempt in db.execute(
                    select(KernelRow.id, KernelRow.attempt_id).where(KernelRow.session_id == session_id)
                )
                if attempt is not None
            },
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
