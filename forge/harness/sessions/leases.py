"""Keeping this process's session leases (``forge.db.leases``) alive while its sessions run.

One daemon thread per process renews every lease the process holds, whichever run or bank it is
in: a lease says "this process is alive and running the session", so it is renewed as long as the
process lives, however long one verification takes. A lease found gone (another driver took the
session over while this process was stalled) is no longer renewed; the session's next write finds
out too, and stops it (``SessionTakenOverError``). A renewal that fails (the bank unreachable) is
tried again on the next beat: the lease lasts ``LEASE_STALE_S`` without one.
"""

from __future__ import annotations

import contextlib
import logging
import threading
import time

from sqlalchemy import Engine
from sqlalchemy.exc import SQLAlchemyError

from forge.core.errors import BankError
from forge.db import LEASE_RENEW_S, SessionLease, release_lease, renew_leases

log = logging.getLogger(__name__)


class LeaseKeeper:
    """The leases this process holds, and the thread that renews them."""

    def __init__(self, renew_every_s: float = LEASE_RENEW_S) -> None:
        self.renew_every_s = renew_every_s
        self._held: dict[str, tuple[Engine, SessionLease]] = {}  # by token
        self._lock = threading.Lock()
        self._thread: threading.Thread | None = None

    def hold(self, engine: Engine, lease: SessionLease) -> None:
        with self._lock:
            self._held[lease.token] = (engine, lease)
            if self._thread is None:
                self._thread = threading.Thread(target=self._beat, name="forge-leases", daemon=True)
                self._thread.start()

    def drop(self, lease: SessionLease) -> None:
        with self._lock:
            self._held.pop(lease.token, None)

    @property
    def renewing(self) -> bool:
        """Whether the renewing thread runs (it ends once nothing is held)."""
        with self._lock:
            return self._thread is not None

    def held_on(self, engine: Engine) -> list[SessionLease]:
        with self._lock:
            return [lease for e, lease in self._held.values() if e is engine]

    def renew_now(self) -> None:
        """One beat: renew every held lease; one found gone is no longer renewed (the session's
        next write finds out too, and stops it)."""
        with self._lock:
            by_engine: dict[int, tuple[Engine, list[SessionLease]]] = {}
            for engine, lease in self._held.values():
                by_engine.setdefault(id(engine), (engine, []))[1].append(lease)
        for engine, leases in by_engine.values():
            try:
                lost = renew_leases(engine, leases)
            except Exception as exc:  # the bank is away, say: the next beat tries again
                log.warning("could not renew session leases: %s", exc)
                continue
            for lease in lost:
                log.warning("session %d was taken over by another driver", lease.session_id)
                self.drop(lease)

    def _beat(self) -> None:
        try:
            while True:
                time.sleep(self.renew_every_s)
                with self._lock:
                    if not self._held:  # nothing to keep: the next hold starts a new thread
                        self._thread = None
                        return
                self.renew_now()
        except BaseException:
            with self._lock:  # so that the next hold starts a new thread
                self._thread = None
            raise


KEEPER = LeaseKeeper()


def hold_lease(engine: Engine, lease: SessionLease) -> SessionLease:
    KEEPER.hold(engine, lease)
    return lease


def give_back(engine: Engine, lease: SessionLease) -> None:
    """The session ended (its record is written): stop renewing its lease, and give it back if its
    final write has not already."""
    KEEPER.drop(lease)
    with contextlib.suppress(SQLAlchemyError, BankError):
        release_lease(engine, lease)


def give_back_crashed(engine: Engine, lease: SessionLease) -> None:
    """A session forge failed under: ``crashed`` if still marked running (``--resume`` continues
    it), and its lease given back."""
    KEEPER.drop(lease)
    with contextlib.suppress(SQLAlchemyError, BankError):
        release_lease(engine, lease, crashed_if_running=True)


def close_leases(engine: Engine) -> None:
    """A run on ``engine`` is over, however it ended: the sessions it still holds (forge failed
    under them, or they never opened) are closed as ``give_back_crashed`` says."""
    for lease in KEEPER.held_on(engine):
        give_back_crashed(engine, lease)
