"""The problems table: one row per op (name, normalized-source hash), shared by kernels, sessions
and plans."""

from __future__ import annotations

from sqlalchemy import select
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from forge.core.problem import ProblemSource
from forge.db.models import ProblemRow


def get_or_create_problem(db: Session, spec: ProblemSource, op_hash: str, target: str | None) -> ProblemRow:
    """The op's row, added when it is new. Two drivers sharing a server bank may add the same op at
    once: the loser's insert hits the (name, op_hash) constraint inside a savepoint, which is rolled
    back alone, and it reads the winner's row (its own transaction goes on)."""
    query = select(ProblemRow).where(ProblemRow.name == spec.name, ProblemRow.op_hash == op_hash)
    found = db.scalars(query).first()
    if found is not None:
        return found
    problem = ProblemRow(name=spec.name, op_hash=op_hash, source=spec.source, target_class_path=target)
    try:
        with db.begin_nested():
            db.add(problem)
    except IntegrityError:
        return db.scalars(query).one()
    return problem
