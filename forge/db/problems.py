"""The problems table: one row per op (name, normalized-source hash), shared by kernels, sessions
and plans."""

from __future__ import annotations

from sqlalchemy import select
from sqlalchemy.orm import Session

from forge.core.problem import ProblemSource
from forge.db.models import ProblemRow


def get_or_create_problem(db: Session, spec: ProblemSource, op_hash: str, target: str | None) -> ProblemRow:
    found = db.scalars(select(ProblemRow).where(ProblemRow.name == spec.name, ProblemRow.op_hash == op_hash)).first()
    if found is not None:
        return found
    problem = ProblemRow(name=spec.name, op_hash=op_hash, source=spec.source, target_class_path=target)
    db.add(problem)
    db.flush()
    return problem
