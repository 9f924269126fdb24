"""What a front end reads about sessions: every session in a bank, and one in full (its attempts
with their verdicts, the judge's feedback, the confirmations)."""

from __future__ import annotations

from forge.core.paths import BankLocation
from forge.core.statuses import SessionStatus
from forge.db import SessionSummary, StoredSession, list_sessions, load_session, open_bank


def session_list(
    bank: BankLocation | None, op: str | None = None, status: SessionStatus | None = None
) -> list[SessionSummary]:
    """The bank's sessions, newest first (only one op's, or only those with ``status``, when given)."""
    with open_bank(bank) as engine:
        return list_sessions(engine, op, status)


def session_show(bank: BankLocation | None, session_id: int) -> StoredSession:
    with open_bank(bank) as engine:
        return load_session(engine, session_id)
