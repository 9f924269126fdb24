"""Session leases: one driver process at a time runs a session, however many share the bank.

A driver takes a session's lease when it starts or resumes it (a fresh token, its identity, a
heartbeat time), renews the heartbeat while the session runs, and gives the lease back when the
session ends. Another driver may take the lease only from a holder that is gone: its heartbeat is
older than ``LEASE_STALE_S``, or it ran on this machine and its process no longer exists (so a
killed driver's sessions can be resumed at once on the machine it ran on). Taking it is a
compare-and-set on the token, so two drivers racing for one session cannot both win.

Every write to a session's rows (its attempts, its totals, its status) begins by renewing the
lease's heartbeat where the token is still this driver's (``touch``), in the same transaction, so a
driver that lost its lease (it stalled past the stale window and another took over) cannot write
to the session after the new holder took it; ``SessionTakenOverError`` tells it to stop.

Times come from the drivers' clocks: machines sharing a bank are assumed NTP-synchronised, which
is far inside the stale window.
"""

from __future__ import annotations

import os
import socket
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any, cast

from sqlalchemy import CursorResult, Engine, update
from sqlalchemy.orm import Session

from forge.core.errors import BankError
from forge.core.statuses import SessionStatus
from forge.db.engine import session_factory
from forge.db.models import SessionRow, utcnow

LEASE_RENEW_S = 15.0  # how often a driver renews its sessions' heartbeats
LEASE_STALE_S = 120.0  # a holder not heard from for this long is gone


def _read(path: str) -> str:
    try:
        return Path(path).read_text().strip()
    except OSError:
        return ""


def _pid_scope() -> str:
    """Where a pid names one process: this boot of this kernel and this pid namespace (Linux).
    Empty where that cannot be told; then only the heartbeat says whether a holder is gone."""
    boot = _read("/proc/sys/kernel/random/boot_id")
    try:
        namespace = os.readlink("/proc/self/ns/pid")
    except OSError:
        return ""
    return f"{boot} {namespace}" if boot else ""


@dataclass(frozen=True)
class Driver:
    """A driver process as other drivers see it."""

    host: str
    pid: int
    scope: str = ""  # see ``_pid_scope``

    @classmethod
    def this_process(cls) -> Driver:
        return cls(socket.gethostname(), os.getpid(), _pid_scope())

    def shares_pids_with(self, other: Driver) -> bool:
        return bool(self.scope) and self.scope == other.scope and self.host == other.host

    def __str__(self) -> str:
        return f"{self.host} pid {self.pid}"


def pid_exists(pid: int) -> bool:
    """Whether process ``pid`` is alive on this machine (a zombie, killed but not yet reaped, is not)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        pass  # someone else's process, but it exists
    stat = _read(f"/proc/{pid}/stat")
    return not stat or stat.rsplit(")", 1)[-1].split()[:1] != ["Z"]


@dataclass(frozen=True)
class LeaseHolder:
    """Who holds a session's lease, as the bank has it."""

    driver: Driver
    heard_s: float  # seconds since its last heartbeat

    def gone(self, me: Driver, stale_after_s: float = LEASE_STALE_S) -> bool:
        if self.heard_s > stale_after_s:
            return True
        return self.driver.shares_pids_with(me) and not pid_exists(self.driver.pid)

    def __str__(self) -> str:
        return f"{self.driver} (heard from {max(0.0, self.heard_s):.0f} s ago)"


@dataclass(frozen=True)
class SessionLease:
    """This driver's hold on one session."""

    session_id: int
    token: str
    driver: Driver


class SessionHeldError(BankError):
    """Another live driver runs this session."""

    def __init__(self, session_id: int, holder: LeaseHolder) -> None:
        super().__init__(
            f"session {session_id} is being run by {holder}; resume it once that run has ended (it ends on its own, "
            f"or stop it), or after {LEASE_STALE_S:.0f} s without word from it"
        )
        self.session_id, self.holder = session_id, holder


class SessionTakenOverError(BankError):
    """This driver lost a session's lease: another driver resumed it while this one was silent."""

    def __init__(self, session_id: int) -> None:
        super().__init__(
            f"session {session_id} was taken over by another driver after this run went {LEASE_STALE_S:.0f} s "
            "without renewing its lease; this run stopped it and leaves its record to the new driver"
        )
        self.session_id = session_id


def holder_of(row: SessionRow) -> LeaseHolder | None:
    """Who holds ``row``'s lease (None: nobody)."""
    if row.lease_token is None or row.driver_host is None or row.driver_pid is None:
        return None
    heard = row.heartbeat_at or row.started_at
    age = (utcnow() - heard).total_seconds() if heard is not None else float("inf")
    return LeaseHolder(Driver(row.driver_host, row.driver_pid, row.driver_scope or ""), age)


def lease_values(driver: Driver, token: str | None) -> dict[str, object]:
    """The columns that record ``driver`` holding a session (a new one, or one taken over)."""
    return {
        "driver_host": driver.host,
        "driver_pid": driver.pid,
        "driver_scope": driver.scope,
        "lease_token": token,
        "heartbeat_at": utcnow(),
    }


def new_token() -> str:
    return uuid.uuid4().hex


def claim_session(engine: Engine, session_id: int, me: Driver, stale_after_s: float = LEASE_STALE_S) -> SessionLease:
    """Take session ``session_id``'s lease for ``me``; ``SessionHeldError`` if a live driver holds it.

    The holder is read first, in a transaction of its own; the write is a compare-and-set on the
    token it read, in a transaction that starts with it (so SQLite's writers queue on its busy
    timeout rather than fail on a stale snapshot)."""
    with session_factory(engine)() as db:
        row = db.get(SessionRow, session_id)
        if row is None:
            raise BankError(f"no session {session_id} in this bank; pass the id that `forge optimize` printed")
        holder, old = holder_of(row), row.lease_token
    if holder is not None and not holder.gone(me, stale_after_s):
        raise SessionHeldError(session_id, holder)
    token = new_token()
    with session_factory(engine).begin() as db:
        took = cast(
            CursorResult[Any],
            db.execute(
                update(SessionRow)
                .where(SessionRow.id == session_id)
                .where(SessionRow.lease_token.is_(None) if old is None else SessionRow.lease_token == old)
                .values(**lease_values(me, token))
            ),
        )
        if took.rowcount != 1:  # another driver took it between the read and the write
            now = db.get(SessionRow, session_id)
            winner = holder_of(now) if now is not None else None
            raise SessionHeldError(session_id, winner or LeaseHolder(Driver("another driver", 0), 0.0))
    return SessionLease(session_id, token, me)


def renew_leases(engine: Engine, leases: list[SessionLease]) -> list[SessionLease]:
    """Renew the heartbeats of ``leases``; returns those this driver no longer holds."""
    lost = []
    with session_factory(engine).begin() as db:
        for lease in leases:
            try:
                touch(db, lease)
            except SessionTakenOverError:
                lost.append(lease)
    return lost


def touch(db: Session, lease: SessionLease) -> None:
    """Within ``db``'s transaction: renew ``lease``'s heartbeat if this driver still holds it, else
    raise ``SessionTakenOverError``. As the transaction's first write, it also locks the session's
    row (SQLite: the whole file) until commit, so what the transaction writes next cannot interleave
    with another driver's claim."""
    renewed = cast(
        CursorResult[Any],
        db.execute(
            update(SessionRow)
            .where(SessionRow.id == lease.session_id, SessionRow.lease_token == lease.token)
            .values(heartbeat_at=utcnow())
        ),
    )
    if renewed.rowcount != 1:
        raise SessionTakenOverError(lease.session_id)


def check_held(engine: Engine, lease: SessionLease) -> None:
    """``SessionTakenOverError`` unless this driver still holds ``lease`` (renewing it); taken
    right before a write that does not go through the session's own rows (banking a kernel)."""
    with session_factory(engine).begin() as db:
        touch(db, lease)


def release_lease(engine: Engine, lease: SessionLease, crashed_if_running: bool = False) -> None:
    """Give ``lease`` back (a no-op if it was lost); with ``crashed_if_running``, a session its run
    left ``running`` (forge failed under it) is marked ``crashed`` first, which ``--resume`` continues."""
    with session_factory(engine).begin() as db:
        try:
            touch(db, lease)
        except SessionTakenOverError:
            return
        row = db.get(SessionRow, lease.session_id)
        assert row is not None  # touch found it
        if crashed_if_running and row.status == str(SessionStatus.RUNNING):
            row.status, row.ended_at = str(SessionStatus.CRASHED), utcnow()
        row.lease_token, row.heartbeat_at = None, None
