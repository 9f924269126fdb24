"""The sessions a bank stores, as a front end reads them: every session in a bank, and one in full (its attempts
with their verdicts, the judge's feedback, the confirmations)."""

from __future__ import annotations

from pydantic import ValidationError

from forge.core.choices import Strategy
from forge.core.errors import BankError
from forge.core.paths import BankLocation
from forge.core.statuses import SessionStatus
from forge.db import SessionSummary, StoredSession, list_sessions, load_session, open_bank
from forge.harness.plans.options import DEFAULT_PLAN_ROUNDS, StoredPlanOptions
from forge.harness.runs.options import DEFAULT_ROUNDS, StoredOptions


def session_list(
    bank: BankLocation | None, op: str | None = None, status: SessionStatus | None = None
) -> list[SessionSummary]:
    """The bank's sessions, newest first (only one op's, or only those with ``status``, when given)."""
    with open_bank(bank) as engine:
        return list_sessions(engine, op, status)


def session_show(bank: BankLocation | None, session_id: int) -> StoredSession:
    with open_bank(bank) as engine:
        return load_session(engine, session_id)


def session_rounds(session: StoredSession) -> int:
    """The rounds a stored session runs, as its settings say (the default where they cannot be read)."""
    try:
        if session.strategy == Strategy.PARALLEL:
            return StoredPlanOptions.read(session.settings).round_limit
        return StoredOptions.read(session.settings).round_limit
    except (ValidationError, BankError):
        return DEFAULT_PLAN_ROUNDS if session.strategy == Strategy.PARALLEL else DEFAULT_ROUNDS
