"""The process's lease keeper against a real SQLite bank: its thread renews what this process holds
and stops when nothing is held; a session another driver took over stops at its next write; a
run's leftover leases are closed as crashed."""

from __future__ import annotations

import time
from datetime import timedelta
from pathlib import Path

import pytest
from sqlalchemy import Engine, update

from forge.agents import Proposal
from forge.core.paths import BankLocation
from forge.core.problem import read_problem_source
from forge.core.statuses import SessionStatus
from forge.db import Driver, SessionTakenOverError, claim_session, load_session
from forge.db.engine import open_for_writing, session_factory
from forge.db.models import SessionRow, utcnow
from forge.db.sessions import start_session
from forge.harness.runs.limits import Spend
from forge.harness.sessions.leases import KEEPER, LeaseKeeper, close_leases
from forge.harness.sessions.recorder import SessionRecorder
from tests.kernelbank.helpers import OP


@pytest.fixture
def engine(tmp_path: Path):
    e = open_for_writing(BankLocation.parse(str(tmp_path / "bank.db")))
    yield e
    for lease in KEEPER.held_on(e):
        KEEPER.drop(lease)
    e.dispose()


def _heartbeat(engine: Engine, session_id: int, back_s: float | None = None):
    with session_factory(engine).begin() as db:
        if back_s is not None:
            when = utcnow() - timedelta(seconds=back_s)
            db.execute(update(SessionRow).where(SessionRow.id == session_id).values(heartbeat_at=when))
        row = db.get(SessionRow, session_id)
        assert row is not None
        return row.heartbeat_at


def _start(engine: Engine):
    spec = read_problem_source(OP)
    return start_session(engine, spec, "h" * 64, None, "refine", "builtin", None, {}, Driver.this_process())


def test_the_keepers_thread_renews_held_leases_and_ends_when_none_are_left(engine):
    keeper = LeaseKeeper(renew_every_s=0.05)
    lease = _start(engine)
    stale = _heartbeat(engine, lease.session_id, back_s=3600)
    keeper.hold(engine, lease)
    end = time.monotonic() + 10
    while _heartbeat(engine, lease.session_id) == stale and time.monotonic() < end:
        time.sleep(0.05)
    assert (utcnow() - _heartbeat(engine, lease.session_id)).total_seconds() < 5
    assert keeper.renewing
    keeper.drop(lease)
    end = time.monotonic() + 5
    while keeper.renewing and time.monotonic() < end:
        time.sleep(0.05)
    assert not keeper.renewing


def test_a_session_taken_over_stops_at_its_next_write(engine):
    recorder = SessionRecorder(engine, _start(engine))
    sid = recorder.session_id
    _heartbeat(engine, sid, back_s=3600)  # this process went silent (stalled, say) for an hour
    theirs = claim_session(engine, sid, Driver("another-host", 42))
    # before any renewal: the writes themselves find out
    with pytest.raises(SessionTakenOverError, match=f"session {sid} was taken over"):
        recorder.proposed(1, Proposal(source="class ModelNew: pass", backend="cpp"))
    with pytest.raises(SessionTakenOverError):
        recorder.still_held()
    with pytest.raises(SessionTakenOverError):
        recorder.totals(Spend(tokens=3), SessionStatus.FINISHED)
    assert recorder.lease in KEEPER.held_on(engine)
    KEEPER.renew_now()  # the next beat finds it gone, and stops renewing it
    assert recorder.lease not in KEEPER.held_on(engine)
    close_leases(engine)  # leaves the new holder's session as it is
    with session_factory(engine)() as db:
        row = db.get(SessionRow, sid)
        assert row is not None and row.lease_token == theirs.token and row.status == "running"
    assert load_session(engine, sid).attempts == []


def test_a_runs_leftover_sessions_are_closed_as_crashed(engine):
    recorder = SessionRecorder(engine, _start(engine))
    done = SessionRecorder(engine, _start(engine))
    done.totals(Spend(), SessionStatus.FINISHED)  # ended: its lease is already given back
    assert KEEPER.held_on(engine) == [recorder.lease]
    close_leases(engine)
    assert KEEPER.held_on(engine) == []
    assert load_session(engine, recorder.session_id).status is SessionStatus.CRASHED
    assert load_session(engine, done.session_id).status is SessionStatus.FINISHED
