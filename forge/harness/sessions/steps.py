"""The steps of a session, each a function with typed inputs and outputs: propose (the coder),
verify (the verifier service), record the verdict, review (the judge). The confirm and bank steps
are in ``confirm.py`` and ``banking.py``. A step writes what it produced through ``SessionIO``: a
row in the bank (at once), an event for the front end, and what an LLM call cost.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Concatenate, ParamSpec

from forge.agents import Coder, CoderContext, HistoryItem, Judge, Proposal
from forge.core.candidate_config import CandidateConfig
from forge.core.feedback import JudgeFeedback
from forge.core.figures import fmt_seconds
from forge.core.timing_records import Contention
from forge.core.verdict import Verdict
from forge.harness import events as ev
from forge.harness.runs.limits import Limits, OpShare, Spend
from forge.harness.sessions.attempts import history_item, invalid_item
from forge.harness.sessions.recorder import SessionRecorder
from forge.verifier import Job, Verifier, wait_for_quiet_machine

EventFields = ParamSpec("EventFields")


class SessionEvents:
    """Emits a session's events: each is stamped with the op's name and the session's id."""

    def __init__(self, emit: ev.Emit, problem: str, session_id: int) -> None:
        self.emit, self.problem, self.session_id = emit, problem, session_id

    def __call__(
        self,
        event_cls: Callable[Concatenate[str, int, EventFields], ev.Event],
        /,
        *args: EventFields.args,
        **fields: EventFields.kwargs,
    ) -> None:
        """``event_cls`` made with this session's op and id and ``fields`` (checked by mypy against the
        event's own fields)."""
        self.emit(event_cls(self.problem, self.session_id, *args, **fields))


@dataclass
class SessionIO:
    """Where a step's outputs go: the session's rows, its events, and its spending (charged to the
    run's limits too, and counted against the op's share of them)."""

    recorder: SessionRecorder
    events: SessionEvents
    limits: Limits
    spend: Spend = field(default_factory=Spend)
    share: OpShare | None = None  # this op's part of the run's limits (None: the whole of them)

    def charge(self, tokens: int, cost_usd: float | None, known: bool) -> None:
        if not tokens and cost_usd is None and known:
            return
        self.spend.add(tokens, cost_usd, known)
        self.limits.charge(tokens, cost_usd, known)
        self.recorder.totals(self.spend)
        self.events(ev.CostUpdated, tokens=self.limits.tokens, cost_usd=self.limits.cost_reported)


@dataclass(frozen=True)
class Candidate:
    """A proposed candidate, recorded as an attempt, to verify."""

    attempt_id: int
    round: int
    source: str
    config: CandidateConfig

    def job(self) -> Job:
        return attempt_job(self.attempt_id, self.source)


def attempt_job(attempt_id: int, source: str) -> Job:
    """The verifier's job for an attempt's candidate (its file is named after the attempt)."""
    return Job(f"attempt_{attempt_id}", source)


@dataclass
class Proposed:
    """The propose step's outcome: candidates to verify, replies that held none (already in the
    history), or ``fatal``: why the coder cannot handle this op at all (the session stops)."""

    candidates: list[Candidate] = field(default_factory=list)
    invalid: list[HistoryItem] = field(default_factory=list)
    fatal: str | None = None


def propose(coder: Coder, context: CoderContext, round: int, io: SessionIO) -> Proposed:
    """Ask the coder; record each proposal as an attempt."""
    out = Proposed()
    for p in coder.propose(context):
        io.charge(p.tokens, p.cost_usd, p.cost_known)
        if p.source is None:
            if p.fatal:  # what was recorded before stays in the history; nothing is verified
                return Proposed(invalid=out.invalid, fatal=p.error or "the coder produced no candidate")
            out.invalid.append(_invalid(p, round, io))
            continue
        # its parent: the attempt the coder was asked to improve (refine's last, evolve's parent)
        aid = io.recorder.proposed(round, p, context.parent.attempt_id if context.parent else None)
        io.events(ev.CandidateProposed, round=round, attempt_id=aid, note=p.note)
        out.candidates.append(Candidate(aid, round, p.source, p.configs))
    return out


def _invalid(p: Proposal, round: int, io: SessionIO) -> HistoryItem:
    reason = p.error or "the reply held no candidate"
    aid = io.recorder.invalid_reply(round, p, reason)
    io.events(ev.CandidateProposed, round=round, attempt_id=aid, note=p.note, error=reason)
    return invalid_item(round, reason, p.response, aid)


def verify(verifier: Verifier, candidates: list[Candidate]) -> list[Verdict]:
    """Verdicts for a batch, in its order (in parallel where the service has several workers)."""
    return verifier.verify([c.job() for c in candidates])


def record_verdict(candidate: Candidate, verdict: Verdict, io: SessionIO) -> HistoryItem:
    """The verdict into the attempt's row, an event, and the history item the agents will see."""
    io.recorder.verified(candidate.attempt_id, verdict, candidate.config)
    item = history_item(candidate.round, candidate.source, verdict, candidate.config, candidate.attempt_id)
    figures = item.figures
    io.events(
        ev.VerdictReady,
        round=candidate.round,
        attempt_id=candidate.attempt_id,
        status=verdict.status,
        reason=verdict.reason,
        speedup_vs_eager=figures.speedup_vs_eager if figures else None,
        speedup_vs_compile=figures.speedup_vs_compile if figures else None,
        timings_ms=verdict.timings_ms.model_copy(),
        busy=figures.busy if figures else None,
    )
    return item


# Waits up to ``limit_s`` (or until the callable says stop) for a quiet second: that second's load
# (None: not known) and the seconds waited. ``wait_for_quiet_machine`` on this machine; tests give stand-ins.
QuietWaiter = Callable[[float, Callable[[], bool]], tuple[Contention | None, float]]


@dataclass(frozen=True)
class StillBusy:
    """The machine stayed loaded through a session's bounded wait: the load it saw when the
    verification was timed (``timed``) and at the wait's end (``now``), and how long it waited."""

    timed: str
    now: str
    waited_s: float

    def reason(self, resume: str) -> str:
        """Why the session ends here, with the command that continues it."""
        return (
            f"the machine stayed busy: a verification was timed under load ({self.timed}) and the load was "
            f"still there after waiting {fmt_seconds(self.waited_s)} ({self.now}); nothing timed under load is "
            f"counted or banked: `{resume}` continues the session when the machine is quiet"
        )


class MachineStayedBusy(Exception):
    """Raised where a session would verify on a machine that stayed busy: the session ends ``busy``."""

    def __init__(self, still: StillBusy) -> None:
        super().__init__(still.now)
        self.still = still


def wait_for_quiet(
    busy: str, round: int, limit_s: float, io: SessionIO, waiter: QuietWaiter = wait_for_quiet_machine
) -> StillBusy | None:
    """After a verification timed on a busy machine: wait (bounded) for the load to go, saying so,
    so the next verification is not timed under it too. None when it went; else what stayed."""
    left = io.share.time_left() if io.share is not None else None
    limit_s = min(limit_s, left / 4) if left is not None else limit_s  # most of the op's time stays its search's
    io.events(ev.MachineBusy, round=round, detail=busy, limit_s=limit_s)
    load, waited = waiter(limit_s, io.limits.stop_requested.is_set)
    quiet = load is None or not load.busy
    detail = load.detail if load else busy
    io.events(
        ev.MachineBusy,
        round=round,
        detail=detail,
        limit_s=limit_s,
        waited_s=float(f"{waited:.1f}"),
        quiet=quiet,
    )
    return None if quiet or io.limits.stop_requested.is_set() else StillBusy(busy, detail, waited)


def review(judge: Judge, context: CoderContext, item: HistoryItem, verdict: Verdict, io: SessionIO) -> None:
    """Ask the judge about ``item`` (the context's parent) and note its feedback on the item."""
    got = judge.review(context, verdict)
    io.charge(got.tokens, got.cost_usd, got.cost_known)
    io.recorder.reviewed(item.round, item.attempt_id, got)
    item.feedback = got.feedback
    fb = got.feedback or JudgeFeedback()
    io.events(
        ev.JudgeReviewed,
        round=item.round,
        attempt_id=item.attempt_id or 0,
        diagnosis=fb.diagnosis,
        bottleneck=fb.bottleneck,
        next_step=fb.next_step,
        continue_search=fb.continue_search,
        error=None if got.feedback else got.error,
    )
