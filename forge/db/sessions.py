"""Sessions and attempts in the bank: every attempt is one row, committed as soon as it exists.

The parent process is the only writer. An attempt is inserted when the coder proposes it
(``pending``) and updated when its verdict is in; a session killed in between leaves pending rows
that ``--resume`` verifies again. Judge calls are attempts too (``role="judge"``, parent = the
coder attempt they reviewed), so prompts, replies, tokens and cost of both roles are on record;
so are the finalists' confirmations (``role="confirm"``, parent = the attempt timed again).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from sqlalchemy import Engine, select

from forge.db.engine import session_factory
from forge.db.models import Attempt, Problem, Session, utcnow
from forge.db.store import get_or_create_problem
from forge.errors import BankError
from forge.harness.problem import ProblemSource


@dataclass
class StoredAttempt:
    id: int
    round: int
    role: str
    parent_id: int | None
    status: str
    source: str | None
    backend: str | None
    prompt: str | None
    response: str | None
    verdict: dict[str, Any] | None
    tokens: int
    cost_usd: float | None


@dataclass
class StoredSession:
    id: int
    problem_name: str
    problem_source: str
    op_hash: str
    strategy: str
    agent: str
    model: str | None
    settings: dict[str, Any]
    status: str
    tokens: int
    cost_usd: float | None
    attempts: list[StoredAttempt] = field(default_factory=list)


def start_session(
    engine: Engine,
    spec: ProblemSource,
    op_hash: str,
    target: str | None,
    strategy: str,
    agent: str,
    model: str | None,
    settings: dict[str, Any],
) -> int:
    with session_factory(engine).begin() as db:
        problem = get_or_create_problem(db, spec, op_hash, target)
        row = Session(problem_id=problem.id, strategy=strategy, agent=agent, model=model, settings=settings)
        db.add(row)
        db.flush()
        return int(row.id)


def reopen_session(engine: Engine, session_id: int, settings: dict[str, Any] | None = None) -> None:
    """Mark a session running again, merging ``settings`` into the stored ones."""
    with session_factory(engine).begin() as db:
        row = db.get(Session, session_id)
        if row is None:
            raise BankError(f"no session {session_id} in this bank; `forge bank` lists what is there")
        row.status, row.ended_at = "running", None
        if settings:
            row.settings = {**(row.settings or {}), **settings}  # a new dict: the JSON column sees the change


def add_attempt(
    engine: Engine,
    session_id: int,
    round: int,
    *,
    role: str = "coder",
    parent_id: int | None = None,
    prompt: str | None = None,
    response: str | None = None,
    source: str | None = None,
    backend: str | None = None,
    status: str = "pending",
    verdict: dict[str, Any] | None = None,
    tokens: int = 0,
    cost_usd: float | None = None,
) -> int:
    with session_factory(engine).begin() as db:
        row = Attempt(
            session_id=session_id,
            round=round,
            role=role,
            parent_id=parent_id,
            prompt=prompt,
            response=response,
            candidate_source=source,
            backend=backend,
            status=status,
            verdict=verdict,
            tokens=tokens,
            cost_usd=cost_usd,
            finished_at=None if status == "pending" else utcnow(),
        )
        db.add(row)
        db.flush()
        return int(row.id)


def finish_attempt(engine: Engine, attempt_id: int, verdict: dict[str, Any]) -> None:
    with session_factory(engine).begin() as db:
        row = db.get(Attempt, attempt_id)
        if row is None:
            raise BankError(f"attempt {attempt_id} vanished from the bank while it was being verified")
        row.verdict = verdict
        row.status = str(verdict.get("status", "crashed"))
        row.speedup_vs_eager = verdict.get("speedup_vs_eager")
        row.speedup_vs_compile = verdict.get("speedup_vs_compile")
        row.finished_at = utcnow()


def update_session(
    engine: Engine, session_id: int, *, status: str | None = None, tokens: int, cost_usd: float | None
) -> None:
    with session_factory(engine).begin() as db:
        row = db.get(Session, session_id)
        if row is None:
            raise BankError(f"session {session_id} vanished from the bank")
        row.tokens, row.cost_usd = tokens, cost_usd
        if status is not None:
            row.status = status
            row.ended_at = None if status == "running" else utcnow()


def load_session(engine: Engine, session_id: int) -> StoredSession:
    with session_factory(engine)() as db:
        row = db.get(Session, session_id)
        if row is None:
            raise BankError(f"no session {session_id} in this bank; pass the id that `forge optimize` printed")
        problem = db.get(Problem, row.problem_id)
        assert problem is not None  # a foreign key
        attempts = db.scalars(select(Attempt).where(Attempt.session_id == session_id).order_by(Attempt.id)).all()
        return StoredSession(
            id=row.id,
            problem_name=problem.name,
            problem_source=problem.source,
            op_hash=problem.op_hash,
            strategy=row.strategy,
            agent=row.agent,
            model=row.model,
            settings=dict(row.settings or {}),
            status=row.status,
            tokens=row.tokens or 0,
            cost_usd=row.cost_usd,
            attempts=[
                StoredAttempt(
                    id=a.id,
                    round=a.round,
                    role=a.role,
                    parent_id=a.parent_id,
                    status=a.status,
                    source=a.candidate_source,
                    backend=a.backend,
                    prompt=a.prompt,
                    response=a.response,
                    verdict=a.verdict,
                    tokens=a.tokens or 0,
                    cost_usd=a.cost_usd,
                )
                for a in attempts
            ],
        )
