"""A session's record in the bank: every step writes what it produced, as soon as it exists.

``SessionRecorder`` binds the bank and the session's id and turns the agents' values (proposals,
reviews) and the verifier's verdicts into rows (``forge.db.sessions`` owns their layout). Each
write is committed at once, so a killed process leaves a consistent bank that ``--resume``
continues from. It writes only while this process holds the session's lease (``leases``).
"""

from __future__ import annotations

from sqlalchemy import Engine

from forge.agents import Proposal, Review
from forge.core.candidate_config import CandidateConfig
from forge.core.problem import ProblemSource
from forge.core.statuses import SessionStatus
from forge.core.verdict import Verdict
from forge.db import Driver, SessionLease, check_held
from forge.db import sessions as rows
from forge.harness.runs.limits import Spend
from forge.harness.sessions.leases import give_back, hold_lease


class SessionRecorder:
    """Writes one session's rows while this process holds its lease (kept alive by ``KEEPER``):
    every write checks, in its own transaction, that no other driver took the session over."""

    def __init__(self, engine: Engine, lease: SessionLease) -> None:
        self.engine, self.lease, self.session_id = engine, hold_lease(engine, lease), lease.session_id

    @classmethod
    def start(
        cls,
        engine: Engine,
        spec: ProblemSource,
        op_hash: str,
        target: str | None,
        *,
        strategy: str,
        agent: str,
        model: str | None,
        settings: dict[str, object],
    ) -> SessionRecorder:
        driver = Driver.this_process()
        return cls(engine, rows.start_session(engine, spec, op_hash, target, strategy, agent, model, settings, driver))

    @classmethod
    def reopen(cls, engine: Engine, lease: SessionLease, rounds: int) -> SessionRecorder:
        """A stored session, whose lease this process took, running again; ``rounds`` replaces its
        stored count."""
        recorder = cls(engine, lease)
        rows.reopen_session(engine, lease, {"rounds": rounds})
        return recorder

    def proposed(self, round: int, p: Proposal, parent_id: int | None = None) -> int:
        """A candidate to verify (pending until its verdict is recorded); ``parent_id``: the
        attempt it was written to improve."""
        assert p.source is not None
        return rows.add_proposal(
            self.engine,
            self.lease,
            round,
            source=p.source,
            backend=p.backend,
            config=p.configs,
            note=p.note,
            prompt=p.prompt,
            response=p.response,
            tokens=p.tokens,
            cost_usd=p.cost_usd,
            parent_id=parent_id,
        )

    def invalid_reply(self, round: int, p: Proposal, reason: str) -> int:
        return rows.add_invalid_reply(
            self.engine,
            self.lease,
            round,
            reason=reason,
            backend=p.backend,
            config=p.configs,
            note=p.note,
            prompt=p.prompt,
            response=p.response,
            tokens=p.tokens,
            cost_usd=p.cost_usd,
        )

    def verified(self, attempt_id: int, verdict: Verdict, config: CandidateConfig) -> None:
        rows.finish_attempt(self.engine, self.lease, attempt_id, verdict, config)

    def reviewed(self, round: int, attempt_id: int | None, review: Review) -> int:
        return rows.add_review(
            self.engine,
            self.lease,
            round,
            attempt_id,
            feedback=review.feedback,
            error=review.error,
            prompt=review.prompt,
            response=review.response,
            tokens=review.tokens,
            cost_usd=review.cost_usd,
        )

    def confirmed(self, round: int, attempt_id: int, verdict: Verdict) -> int:
        """A finalist's confirmation: its own row, whose parent is the finalist."""
        return rows.add_confirmation(self.engine, self.lease, round, attempt_id, verdict)

    def still_held(self) -> None:
        """``SessionTakenOverError`` if another driver took the session over: checked right before
        this driver banks a kernel for it or removes its provisional ones."""
        check_held(self.engine, self.lease)

    def totals(self, spend: Spend, status: SessionStatus | None = None) -> None:
        """The session's totals, and with a final ``status`` its end: its lease is given back."""
        cost = spend.cost_usd if spend.cost_known else None  # the sum as it is (reports round it)
        rows.update_session(self.engine, self.lease, status=status, tokens=spend.tokens, cost_usd=cost)
        if status is not None and status is not SessionStatus.RUNNING:
            give_back(self.engine, self.lease)
