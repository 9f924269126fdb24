"""A front end's long-lived view of a bank (the TUI polls it): sessions, attempts and kernels,
read through one read-only engine that holds no lock between queries, so a ``forge optimize``
writing the same bank in another process is never blocked and shows up on the next read."""

from __future__ import annotations

from forge.core.paths import BankLocation, bank_or_default
from forge.core.statuses import SessionStatus
from forge.db import (
    KernelDetail,
    KernelSummary,
    SessionSummary,
    StoredSession,
    bank_exists,
    kernel_detail,
    list_kernels,
    list_sessions,
    load_session,
    open_reader,
)

__all__ = ["BankReader", "bank_exists"]


class BankReader:
    """Reads of the bank at ``bank`` (default: $FORGE_BANK or the per-user bank); BankError when
    there is no bank there yet."""

    def __init__(self, bank: BankLocation | None = None) -> None:
        self.location = bank_or_default(bank)
        self._engine = open_reader(self.location)

    def sessions(self, op: str | None = None, status: SessionStatus | None = None) -> list[SessionSummary]:
        return list_sessions(self._engine, op, status)

    def session(self, session_id: int) -> StoredSession:
        return load_session(self._engine, session_id)

    def kernels(self, op: str | None = None) -> list[KernelSummary]:
        return list_kernels(self._engine, op)

    def kernel(self, kernel_id: int) -> KernelDetail:
        return kernel_detail(self._engine, kernel_id)

    def close(self) -> None:
        self._engine.dispose()
