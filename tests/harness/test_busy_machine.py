"""A session under a load that stays: it waits ``quiet_wait_s`` for quiet once, then ends ``busy``
with the load it saw and the command that resumes it, instead of verifying every round and every
finalist under the load. The verifier, the agents, the machine's load and the clock are stand-ins:
nothing is timed and nothing waits."""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from pathlib import Path
from types import SimpleNamespace
from typing import Any

from forge.agents import AgentKind, Agents, MachineFacts, Proposal, Review
from forge.core.feedback import JudgeFeedback
from forge.core.settings import ForgeSettings
from forge.core.statuses import SessionStatus
from forge.core.timing_records import Contention
from forge.core.verdict import Verdict
from forge.db import open_for_writing
from forge.harness import events as ev
from forge.harness.runs.limits import Limits
from forge.harness.runs.options import OptimizeOptions
from forge.harness.sessions.opening import run_session
from forge.harness.sessions.session import Session, SessionPlan
from forge.harness.sessions.steps import SessionEvents, SessionIO

LOADED = Contention(cores=2, other_cores=1.96, busy=True, detail="other processes used 1.96 of 2 cores")
STILL = Contention(cores=2, other_cores=1.5, busy=True, detail="other processes used 1.50 of 2 cores")
QUIET = Contention(cores=2, other_cores=0.01, busy=False, detail="other processes used 0.01 of 2 cores")
VERIFY_S = 30.0  # what one verification takes on the stand-in clock


def _verdict(load: Contention, speedup: float = 1.5) -> Verdict:
    fast = {"median_ms": 1.0, "iqr_ms": 0.01, "q1_ms": 0.99, "q3_ms": 1.01}
    slow = {"median_ms": speedup, "iqr_ms": 0.01, "q1_ms": speedup - 0.01, "q3_ms": speedup + 0.01}
    timing = {
        "candidate": fast,
        "eager": slow,
        "paired_eager": {"pairs": 30, "median": speedup, "low": speedup - 0.05, "high": speedup + 0.05},
        "contention": load.model_dump(),
    }
    return Verdict.from_json({"status": "passed", "speedup_vs_eager": speedup, "timing_stats": timing})


@dataclass
class Machine:
    """The stand-in clock and load: ``loads`` is what each wait for quiet finds, in turn."""

    loads: list[Contention]
    now: float = 0.0
    waits: list[float] = field(default_factory=list)

    def wait(self, limit_s: float, stop: Any) -> tuple[Contention | None, float]:
        load = self.loads.pop(0)
        waited = limit_s if load.busy else 2.0
        self.waits.append(limit_s)
        self.now += waited
        return load, waited


class Verifier:
    """Every round's verification and every confirmation returns the verdicts given, in turn."""

    node = None

    def __init__(self, machine: Machine, rounds: list[Verdict], confirms: list[Verdict]) -> None:
        self.machine, self.rounds, self.confirms = machine, rounds, confirms
        self.verified, self.confirmed = 0, 0
        self.decided_busy_at: float | None = None  # when a verdict timed under load came back

    def _timed(self, verdict: Verdict) -> Verdict:
        self.machine.now += VERIFY_S
        busy = verdict.timing_stats.contention
        if busy is not None and busy.busy and self.decided_busy_at is None:
            self.decided_busy_at = self.machine.now
        return verdict

    def verify(self, jobs: list[Any]) -> list[Verdict]:
        self.verified += len(jobs)
        return [self._timed(self.rounds.pop(0)) for _ in jobs]

    def verify_alone(self, job: Any, trials: int, timeout: float) -> Verdict:
        self.confirmed += 1
        return self._timed(self.confirms.pop(0))

    def end_workers(self) -> int:
        return 0

    def close(self) -> None:
        pass


class Recorder:
    """The session's rows: none are written, but a confirmed session clears its unconfirmed
    kernels from a real (empty) bank."""

    session_id = 7

    def __init__(self, bank: Path) -> None:
        self.ids = iter(range(1, 1000))
        self.engine = open_for_writing(bank)

    def proposed(self, *args: Any) -> int:
        return next(self.ids)

    def confirmed(self, *args: Any) -> int:
        return next(self.ids)

    def reviewed(self, *args: Any) -> int:
        return next(self.ids)

    def verified(self, *args: Any) -> None:
        pass

    def still_held(self) -> None:
        pass

    def totals(self, *args: Any) -> None:
        pass


class Coder:
    def __init__(self) -> None:
        self.n = 0

    def propose(self, context: Any) -> list[Proposal]:
        self.n += 1
        return [Proposal(source=f"class ModelNew: pass  # {self.n}", backend="cpp")]


class Judge:
    costs_tokens = False

    def review(self, context: Any, verdict: Verdict) -> Review:
        return Review(feedback=JudgeFeedback(next_step="go on", continue_search=True))


def _session(machine: Machine, verifier: Verifier, rounds: int, seen: list[ev.Event], bank: Path) -> Session:
    options = OptimizeOptions(rounds=rounds, bank=Path("/tmp/my bank.db"))
    spec = SimpleNamespace(name="rmsnorm", source="class Model: pass")
    plan = SessionPlan(Path("rmsnorm.py"), spec, "hash", None, "cpu", "cpp", options, MachineFacts("cpu"))  # type: ignore[arg-type]
    io = SessionIO(Recorder(bank), SessionEvents(seen.append, "rmsnorm", 7), Limits())  # type: ignore[arg-type]
    agents = Agents(Coder(), Judge(), AgentKind.BUILTIN)
    settings = ForgeSettings(device="cpu", quiet_wait_s=120.0, null_control=False)
    return Session(plan, agents, io, verifier, settings, waiter=machine.wait)  # type: ignore[arg-type]


RESUME = "`forge optimize --resume 7 --bank '/tmp/my bank.db'` continues the session when the machine is quiet"


def test_a_load_that_stays_ends_the_search_within_the_wait_and_says_how_to_resume(tmp_path):
    machine = Machine(loads=[LOADED])
    verifier = Verifier(machine, rounds=[_verdict(LOADED)] * 8, confirms=[])
    seen: list[ev.Event] = []
    result = run_session(_session(machine, verifier, rounds=8, seen=seen, bank=tmp_path / "bank.db"))

    assert result.status is SessionStatus.BUSY and not result.accepted
    assert verifier.verified == 1 and verifier.confirmed == 0  # not 8 rounds and 2 finalists under the load
    assert machine.waits == [120.0] and verifier.decided_busy_at is not None
    assert machine.now - verifier.decided_busy_at <= 120.0  # ended within the wait of deciding it was busy
    reason = result.reason or ""
    assert "timed under load (other processes used 1.96 of 2 cores)" in reason, reason
    assert "after waiting 120 s" in reason and RESUME in reason, reason
    waits = [e for e in seen if isinstance(e, ev.MachineBusy)]
    assert [(w.waited_s, w.quiet) for w in waits] == [(None, None), (120.0, False)]


def test_a_load_that_stays_after_the_last_round_leaves_the_finalists_unconfirmed(tmp_path):
    machine = Machine(loads=[LOADED])
    verifier = Verifier(machine, rounds=[_verdict(LOADED)], confirms=[])
    result = run_session(_session(machine, verifier, rounds=1, seen=[], bank=tmp_path / "bank.db"))
    assert result.status is SessionStatus.BUSY and verifier.confirmed == 0 and RESUME in (result.reason or "")


def test_a_confirmation_under_a_load_that_stays_leaves_the_next_finalist_to_resume(tmp_path):
    machine = Machine(loads=[STILL])
    verifier = Verifier(machine, rounds=[_verdict(QUIET, 1.5), _verdict(QUIET, 1.4)], confirms=[_verdict(LOADED)])
    result = run_session(_session(machine, verifier, rounds=2, seen=[], bank=tmp_path / "bank.db"))
    assert result.status is SessionStatus.BUSY and verifier.confirmed == 1  # the second finalist is not timed
    assert machine.waits == [120.0]
    reason = result.reason or ""
    said = "(other processes used 1.96 of 2 cores, and other processes used 1.50 of 2 cores after waiting 120 s)"
    assert said in reason, reason
    assert "`forge optimize --resume 7 --bank '/tmp/my bank.db'` times them again" in reason, reason


def test_a_load_that_goes_lets_the_session_go_on(tmp_path):
    machine = Machine(loads=[QUIET])
    verifier = Verifier(machine, rounds=[_verdict(LOADED), _verdict(QUIET, 1.02)], confirms=[_verdict(QUIET, 0.98)] * 2)
    result = run_session(_session(machine, verifier, rounds=2, seen=[], bank=tmp_path / "bank.db"))
    assert verifier.verified == 2 and verifier.confirmed == 2 and machine.waits == [120.0]
    assert result.status is SessionStatus.NO_GAIN, result.reason


def test_a_stop_during_the_wait_is_not_a_busy_machine(tmp_path):
    machine = Machine(loads=[LOADED])
    verifier = Verifier(machine, rounds=[_verdict(LOADED)] * 2, confirms=[])
    session = _session(machine, verifier, rounds=2, seen=[], bank=tmp_path / "bank.db")
    stop: threading.Event = session.io.limits.stop_requested

    def stopped(limit_s: float, asked: Any) -> tuple[Contention | None, float]:
        stop.set()
        return machine.wait(limit_s, asked)

    session.waiter = stopped
    result = run_session(session)
    assert result.status is SessionStatus.INTERRUPTED, result.reason
