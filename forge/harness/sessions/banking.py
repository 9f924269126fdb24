"""The session's bank step: the kernel it settled on goes into the bank with its evidence."""

from __future__ import annotations

from sqlalchemy import Engine

from forge.core.problem import ProblemSource
from forge.db import Provenance, save_kernel
from forge.harness.sessions.confirm import Contender


def bank_kernel(
    engine: Engine,
    spec: ProblemSource,
    chosen: Contender,
    *,
    confirmed: bool,
    session_id: int,
    agent: str,
    model: str | None,
    cost_usd: float | None,
) -> int:
    """Save ``chosen`` (its verdict: the confirmation's measurement, or its round's when a Ctrl-C
    came first, ``confirmed`` False) with where it came from. Returns the kernel id."""
    provenance = Provenance(
        session_id=session_id,
        attempt_id=chosen.attempt_id,
        agent=agent,
        model=model,
        cost_usd=cost_usd,
        config=chosen.config.banked(),
    )
    evidence = chosen.verdict.model_copy(update={"confirmed": confirmed})
    return save_kernel(engine, spec, chosen.source, evidence, provenance, chosen.config)
