"""Session leases on a real SQLite bank (and, marked postgres, a real server): one driver at a time
runs a session; a holder that is gone (dead pid on this machine, or silent past the stale window)
gives way at once; a driver that lost its lease can write nothing more to the session; racing
claims have exactly one winner."""

from __future__ import annotations

import re
import subprocess
import sys
import threading
from datetime import timedelta
from pathlib import Path

import pytest
from sqlalchemy import Engine, update

from forge.core.candidate_config import CandidateConfig
from forge.core.errors import BankError
from forge.core.paths import BankLocation
from forge.core.problem import read_problem_source
from forge.core.statuses import SessionStatus
from forge.db import (
    Driver,
    SessionHeldError,
    SessionLease,
    SessionTakenOverError,
    check_held,
    claim_session,
    load_session,
    release_lease,
    renew_leases,
)
from forge.db.engine import open_for_writing, session_factory
from forge.db.leases import pid_exists
from forge.db.models import SessionRow, utcnow
from forge.db.sessions import add_proposal, reopen_session, start_session, update_session
from tests.kernelbank.helpers import OP

ME = Driver.this_process()


def _bank(where: Path | str) -> Engine:
    return open_for_writing(BankLocation.parse(str(where)))


def _session(engine: Engine, driver: Driver = ME) -> SessionLease:
    return start_session(engine, read_problem_source(OP), "h" * 64, None, "refine", "builtin", None, {}, driver)


def _dead_pid() -> int:
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    child.wait()  # reaped: its pid names no process now
    return child.pid


def _heard_ago(engine: Engine, session_id: int, seconds: float) -> None:
    with session_factory(engine).begin() as db:
        db.execute(
            update(SessionRow)
            .where(SessionRow.id == session_id)
            .values(heartbeat_at=utcnow() - timedelta(seconds=seconds))
        )


def _token(engine: Engine, session_id: int) -> str | None:
    with session_factory(engine)() as db:
        row = db.get(SessionRow, session_id)
        assert row is not None
        return row.lease_token


@pytest.fixture
def engine(tmp_path: Path):
    e = _bank(tmp_path / "bank.db")
    yield e
    e.dispose()


def test_a_live_driver_keeps_its_session_and_is_named(engine):
    lease = _session(engine)
    with pytest.raises(SessionHeldError) as held:
        claim_session(engine, lease.session_id, Driver("another-host", 7))
    assert re.search(rf"being run by {re.escape(ME.host)} pid {ME.pid} \(heard from \d+ s ago\)", str(held.value))
    with pytest.raises(BankError, match="no session 99"):
        claim_session(engine, 99, ME)


def test_a_dead_driver_on_this_machine_gives_way_at_once(engine):
    gone = Driver(ME.host, _dead_pid(), ME.scope)
    assert not pid_exists(gone.pid) and pid_exists(ME.pid)
    lease = _session(engine, gone)
    mine = claim_session(engine, lease.session_id, ME)
    assert _token(engine, lease.session_id) == mine.token != lease.token
    # the same dead pid seen from another pid namespace proves nothing: only the heartbeat counts there
    elsewhere = _session(engine, Driver(ME.host, gone.pid, "another boot"))
    with pytest.raises(SessionHeldError):
        claim_session(engine, elsewhere.session_id, ME)


def test_a_silent_driver_elsewhere_gives_way_after_the_stale_window(engine):
    lease = _session(engine, Driver("another-host", 1234, "their scope"))
    _heard_ago(engine, lease.session_id, 60)
    with pytest.raises(SessionHeldError, match="heard from 60 s ago"):
        claim_session(engine, lease.session_id, ME, stale_after_s=120)
    _heard_ago(engine, lease.session_id, 121)
    mine = claim_session(engine, lease.session_id, ME, stale_after_s=120)
    # the old holder comes back: its renewal finds the lease gone, and it can write nothing more
    assert renew_leases(engine, [lease, mine]) == [lease]
    with pytest.raises(SessionTakenOverError, match=f"session {lease.session_id} was taken over"):
        update_session(engine, lease, status=SessionStatus.FINISHED, tokens=5, cost_usd=None)
    with pytest.raises(SessionTakenOverError):
        reopen_session(engine, lease, {"rounds": 3})
    release_lease(engine, lease, crashed_if_running=True)  # a no-op for a lease it lost
    assert _token(engine, lease.session_id) == mine.token
    assert load_session(engine, lease.session_id).status is SessionStatus.RUNNING


def test_ending_a_session_gives_its_lease_back(engine):
    lease = _session(engine)
    update_session(engine, lease, tokens=1, cost_usd=None)  # totals alone keep it
    assert _token(engine, lease.session_id) == lease.token
    update_session(engine, lease, status=SessionStatus.INTERRUPTED, tokens=1, cost_usd=None)
    assert _token(engine, lease.session_id) is None
    again = claim_session(engine, lease.session_id, Driver("another-host", 7))
    reopen_session(engine, again, {"rounds": 5})
    stored = load_session(engine, lease.session_id)
    assert stored.status is SessionStatus.RUNNING and stored.settings["rounds"] == 5


def test_a_run_that_failed_leaves_its_running_session_crashed(engine):
    lease = _session(engine)
    release_lease(engine, lease, crashed_if_running=True)
    assert load_session(engine, lease.session_id).status is SessionStatus.CRASHED
    assert _token(engine, lease.session_id) is None


def _race(where: Path | str, drivers: int) -> tuple[list[SessionLease], list[SessionHeldError]]:
    """``drivers`` threads, each with its own engine (as separate processes would have), claim one
    session whose holder is gone, released together."""
    engine = _bank(where)
    lease = _session(engine, Driver("gone-host", 1, "x"))
    _heard_ago(engine, lease.session_id, 10_000)
    engine.dispose()
    won: list[SessionLease] = []
    lost: list[SessionHeldError] = []
    failed: list[BaseException] = []
    start = threading.Barrier(drivers)

    def claim(n: int) -> None:
        e = _bank(where)
        try:
            start.wait()
            won.append(claim_session(e, lease.session_id, Driver(f"driver-{n}", n)))
        except SessionHeldError as exc:
            lost.append(exc)
        except BaseException as exc:  # anything else (a database error) fails the test below
            failed.append(exc)
        finally:
            e.dispose()

    threads = [threading.Thread(target=claim, args=(n,)) for n in range(drivers)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=60)
    assert not any(t.is_alive() for t in threads) and not failed, failed
    assert len(won) == 1 and len(lost) == drivers - 1, (won, lost)
    assert all(f"being run by {won[0].driver}" in str(exc) for exc in lost), lost
    return won, lost


def test_racing_claims_on_a_file_bank_have_one_winner(tmp_path):
    _race(tmp_path / "bank.db", 6)


@pytest.mark.postgres
def test_racing_claims_on_a_server_bank_have_one_winner(pg_bank):
    _race(pg_bank, 6)


def test_a_driver_taken_over_cannot_write_to_the_session_at_all(engine):
    """No renewal needed: every write names the token, in its own transaction."""
    lease = _session(engine, Driver("stalled-host", 5, "theirs"))
    _heard_ago(engine, lease.session_id, 10_000)
    mine = claim_session(engine, lease.session_id, ME)
    with pytest.raises(SessionTakenOverError):
        add_proposal(engine, lease, 1, source="x = 1", backend="cpp", config=CandidateConfig(), note="")
    with pytest.raises(SessionTakenOverError):
        check_held(engine, lease)
    assert add_proposal(engine, mine, 1, source="x = 1", backend="cpp", config=CandidateConfig(), note="") > 0
    assert [a.source for a in load_session(engine, lease.session_id).attempts] == ["x = 1"]
