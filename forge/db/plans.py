"""Parallel plans in the bank: a plan attempt of a session (its evidence in place of a verdict),
a banked plan with what it is for, listing, reading, removal and copying between banks.

A plan is banked per (model structure, world size, mesh, device kind, train/infer); the runtime
(``forge.kernelbank``) reads the same rows with plain sqlite3.
"""

from __future__ import annotations

import importlib.metadata
import json
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import ValidationError
from sqlalchemy import Engine, select
from sqlalchemy.orm import Session

from forge.core.errors import BankError
from forge.core.parallel_plan import ParallelPlan
from forge.core.plan_evidence import PlanEvidence
from forge.core.problem import ProblemSource
from forge.core.statuses import AttemptRole, AttemptStatus
from forge.db.engine import session_factory
from forge.db.leases import SessionLease, touch
from forge.db.models import AttemptRow, ParallelPlanRow, ProblemRow, utcnow
from forge.db.problems import get_or_create_problem


@dataclass(frozen=True)
class PlanTarget:
    """What a plan is for: the model (its op identity and structure) on one kind of mesh."""

    op_hash: str
    structure_hash: str
    world_size: int
    mesh: str
    device_kind: str
    train: bool

    @property
    def mode(self) -> str:
        return "train" if self.train else "infer"


def _torch_version() -> str:
    """The torch the plan ran with: the one loaded in this process (the bank's readers, the TUI among
    them, import this module and must not pay for importing torch)."""
    loaded = sys.modules.get("torch")
    return str(loaded.__version__) if loaded is not None else importlib.metadata.version("torch")


@dataclass(frozen=True)
class PlanProvenance:
    session_id: int | None = None
    attempt_id: int | None = None
    agent: str = "manual"
    model: str | None = None


@dataclass(frozen=True)
class PlanSummary:
    """One plan line of ``forge bank list``."""

    id: int
    op: str
    mesh: str
    world_size: int
    device: str
    mode: str
    step_ms: float | None
    predicted_step_ms: float | None
    agent: str | None
    status: str
    created_at: str | None

    def to_json(self) -> dict[str, Any]:
        return dict(self.__dict__)


@dataclass(frozen=True)
class PlanDetail:
    summary: PlanSummary
    plan: ParallelPlan
    evidence: PlanEvidence
    op_hash: str
    structure_hash: str
    op_source: str
    session_id: int | None
    attempt_id: int | None
    model: str | None
    torch_version: str | None


def plan_text(plan: ParallelPlan) -> str:
    """How a plan is stored as an attempt's candidate: its JSON, indented (diffs read well)."""
    return json.dumps(plan.to_json(), indent=2)


def add_plan_attempt(
    engine: Engine,
    lease: SessionLease,
    round: int,
    *,
    plan: ParallelPlan | None,
    evidence: PlanEvidence,
    prompt: str | None = None,
    response: str | None = None,
    tokens: int = 0,
    cost_usd: float | None = None,
) -> int:
    """One plan tried (or a reply that held no valid plan: ``plan`` None, the reason in evidence)."""
    row = AttemptRow(
        session_id=lease.session_id,
        round=round,
        role=str(AttemptRole.PLAN),
        prompt=prompt,
        response=response,
        candidate_source=plan_text(plan) if plan is not None else None,
        backend="plan",
        status=str(evidence.status),
        verdict=evidence.to_json(),
        tokens=tokens,
        cost_usd=cost_usd,
        finished_at=utcnow(),
    )
    with session_factory(engine).begin() as db:
        touch(db, lease)  # only while this driver holds the session
        db.add(row)
        db.flush()
        return int(row.id)


def stored_plan_evidence(data: dict[str, Any], attempt_id: int) -> PlanEvidence:
    try:
        return PlanEvidence.from_json(data)
    except ValidationError as exc:
        raise BankError(f"plan attempt {attempt_id}'s evidence cannot be read ({exc.errors()[0]['msg']})") from exc


def save_plan(
    engine: Engine,
    spec: ProblemSource,
    target: PlanTarget,
    plan: ParallelPlan,
    evidence: PlanEvidence,
    provenance: PlanProvenance,
    status: str = "active",
) -> int:
    """Bank a plan that passed its real run (``active``: the runtime applies it), or the best one
    the cost model ranked for a mesh too large to run here (``predicted``: shown, never applied)."""
    with session_factory(engine).begin() as db:
        if provenance.attempt_id is not None:  # a resumed session banking the same attempt again
            q = select(ParallelPlanRow.id).where(ParallelPlanRow.attempt_id == provenance.attempt_id)
            if (known := db.scalars(q).first()) is not None:
                return int(known)
        problem = get_or_create_problem(db, spec, target.op_hash, None)
        row = ParallelPlanRow(
            problem_id=problem.id,
            name=spec.name,
            plan=plan.to_json(),
            status=status,
            evidence=evidence.to_json(),
            op_hash=target.op_hash,
            structure_hash=target.structure_hash,
            world_size=target.world_size,
            mesh=target.mesh,
            device_kind=target.device_kind,
            mode=target.mode,
            step_ms=evidence.measured.step_ms if evidence.measured else None,
            predicted_step_ms=evidence.prediction.step_ms if evidence.prediction else None,
            session_id=provenance.session_id,
            attempt_id=provenance.attempt_id,
            agent=provenance.agent,
            model=provenance.model,
            torch_version=_torch_version(),
        )
        db.add(row)
        db.flush()
        return int(row.id)


def _summary(r: ParallelPlanRow) -> PlanSummary:
    return PlanSummary(
        id=r.id,
        op=r.name,
        mesh=r.mesh or "?",
        world_size=r.world_size or 0,
        device=r.device_kind or "?",
        mode=r.mode or "?",
        step_ms=r.step_ms,
        predicted_step_ms=r.predicted_step_ms,
        agent=r.agent,
        status=r.status,
        created_at=r.created_at.isoformat() if r.created_at else None,
    )


def _op_source(db: Session, r: ParallelPlanRow) -> str:
    problem = db.get(ProblemRow, r.problem_id)
    return problem.source if problem is not None else ""


def list_plans(engine: Engine, op: str | None = None) -> list[PlanSummary]:
    q = select(ParallelPlanRow).where(ParallelPlanRow.structure_hash.is_not(None)).order_by(ParallelPlanRow.id)
    if op:
        q = q.where(ParallelPlanRow.name == op)
    with session_factory(engine)() as db:
        return [_summary(r) for r in db.scalars(q)]


def _plan_row(db: Session, plan_id: int) -> ParallelPlanRow:
    row = db.get(ParallelPlanRow, plan_id)
    if row is None or row.structure_hash is None:
        raise BankError(f"no plan {plan_id} in this bank; `forge bank list` shows the plans")
    return row


def plan_detail(engine: Engine, plan_id: int) -> PlanDetail:
    with session_factory(engine)() as db:
        r = _plan_row(db, plan_id)
        try:
            plan = ParallelPlan.from_json(dict(r.plan))
        except ValidationError as exc:
            raise BankError(
                f"plan {plan_id} cannot be read ({exc.errors()[0]['msg']}); the bank may be damaged"
            ) from exc
        return PlanDetail(
            summary=_summary(r),
            plan=plan,
            evidence=stored_plan_evidence(dict(r.evidence or {}), plan_id),
            op_hash=r.op_hash or "",
            structure_hash=r.structure_hash or "",
            op_source=_op_source(db, r),
            session_id=r.session_id,
            attempt_id=r.attempt_id,
            model=r.model,
            torch_version=r.torch_version,
        )


def remove_plan(engine: Engine, plan_id: int) -> None:
    with session_factory(engine).begin() as db:
        db.delete(_plan_row(db, plan_id))


def copy_plans(s_src: Session, s_dst: Session, ops: list[str] | None = None) -> int:
    """Copy banked plans (with their problems) between two open database sessions."""
    q = select(ParallelPlanRow).where(ParallelPlanRow.structure_hash.is_not(None))
    if ops:
        q = q.where(ParallelPlanRow.name.in_(ops))
    n = 0
    for r in s_src.scalars(q):
        spec = ProblemSource(path=Path(r.name), source=_op_source(s_src, r), name=r.name, op_hash=r.op_hash or "")
        problem = get_or_create_problem(s_dst, spec, r.op_hash or "", None)
        fields = {c.name: getattr(r, c.name) for c in ParallelPlanRow.__table__.columns if c.name not in ("id",)}
        fields.update(problem_id=problem.id, session_id=None, attempt_id=None)
        s_dst.add(ParallelPlanRow(**fields))
        n += 1
    return n


def measured_plans(engine: Engine) -> list[PlanEvidence]:
    """Every plan attempt in the bank that passed a real run with a prediction beside it (what a
    simulated session calibrates the cost model on)."""
    q = select(AttemptRow).where(
        AttemptRow.role == str(AttemptRole.PLAN), AttemptRow.status == str(AttemptStatus.PASSED)
    )
    with session_factory(engine)() as db:
        found = [stored_plan_evidence(dict(a.verdict or {}), a.id) for a in db.scalars(q)]
    return [e for e in found if e.measured is not None and e.prediction is not None]
