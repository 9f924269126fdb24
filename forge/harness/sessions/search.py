"""Search strategies over a ``Session``: what to ask the coder next, and when to stop.

- ``refine``: one trajectory. Each round the coder sees the previous round's best attempt (with
  its verdict and the judge's feedback) and proposes a candidate (an LLM coder up to ``best_of``
  in one reply: all verified, the judge reviews the fastest that passed).
- ``evolve``: a population. Each generation takes the top-k passing attempts as parents and asks
  for children of each; a generation is verified in parallel (``--workers``).
Both stop when the rounds are spent, the judge says stop, or a run-wide limit is reached.
"""

from __future__ import annotations

from collections.abc import Callable

from forge.agents import HistoryItem
from forge.core.choices import Strategy
from forge.core.statuses import AttemptStatus, SessionStatus
from forge.harness import events as ev
from forge.harness.sessions.session import Session
from forge.harness.sessions.steps import Candidate

Outcome = tuple[SessionStatus, str | None]


def _start_round(session: Session, unit: str) -> Outcome | None:
    """Begin the next round, or (status, reason) when a run-wide limit or the op's share of it
    stops the session first. A time limit never stops a session before its first round in this
    run (an op after one whose confirmation ran over still gets one); after that, the op's share
    keeps back what confirming its finalists is expected to take (``RoundClock.reserve_s``)."""
    limits, share, done = session.io.limits, session.io.share, f"{session.state.round} {unit}(s)"
    first = session.clock.began == 0
    stop = SessionStatus.INTERRUPTED if limits.stop_requested.is_set() else limits.exceeded()
    if stop is SessionStatus.INTERRUPTED:
        return _interrupted(session, unit)
    if stop is SessionStatus.TIME_LIMIT and first:
        stop = None
    if stop:
        return stop, f"{str(stop).replace('_', ' ')} reached after {done}"
    reserve = 0.0 if first else session.clock.reserve_s()
    used = share.exceeded(limits, session.io.spend.cost_usd, reserve) if share is not None else None
    if used is not None and not (first and used[0] is SessionStatus.TIME_LIMIT):
        return used[0], f"{used[1]} reached after {done}"  # e.g. "its share of the time limit (37 s ...)"
    session.clock.round_began()
    session.state.round += 1
    session.io.events(ev.RoundStarted, round=session.state.round, rounds=session.options.round_limit)
    return None


def _ended(session: Session, unit: str) -> Outcome:
    """How a search whose loop ended stands: a stop asked for during its last round (after the
    round's start looked) still ends it as interrupted, resumable, not finished."""
    if session.io.limits.stop_requested.is_set():
        return _interrupted(session, unit)
    return SessionStatus.FINISHED, None


def _interrupted(session: Session, unit: str) -> Outcome:
    done = f"{session.state.round} {unit}(s)"
    return SessionStatus.INTERRUPTED, f"stopped after {done}; `--resume {session.id}` continues the session"


def _judge_says_stop(items: list[HistoryItem]) -> bool:
    """Every review of the step says stop (an LLM judge reviews passing attempts only: a failed
    one carries no review, and neither keeps the search going nor stops it)."""
    reviewed = [i for i in items if i.feedback is not None]
    return bool(reviewed) and all(i.feedback is not None and not i.feedback.continue_search for i in reviewed)


def refine(session: Session) -> Outcome:
    """(status, reason): finished | budget | time_limit | interrupted | unsupported."""
    history = session.state.history
    parent = history[-1] if history else None
    while session.state.round < session.options.round_limit:
        stop = _start_round(session, "round")
        if stop:
            return stop
        got = session.propose(parent)
        if got.fatal:
            return SessionStatus.UNSUPPORTED, got.fatal
        if not got.candidates and history and history[-1].status != AttemptStatus.INVALID_REPLY:
            break  # the coder has nothing left to try
        reviewed = session.evaluate(got.candidates, review_best=True)
        if _judge_says_stop(reviewed):
            break
        # the next round goes on from this round's best (of one reply's candidates), or its last
        parent = reviewed[-1] if reviewed else history[-1] if history else None
    return _ended(session, "round")


def _parents(session: Session) -> list[HistoryItem | None]:
    history = session.state.history
    passed = [h for h in history if h.status == AttemptStatus.PASSED and h.speedup_vs_eager]
    passed.sort(key=lambda h: -(h.speedup_vs_eager or 0.0))
    top: list[HistoryItem | None] = list(passed[: session.options.top_k])
    if not top:
        top = [history[-1]] if history else [None]
    return top


def evolve(session: Session) -> Outcome:
    history = session.state.history
    while session.state.round < session.options.round_limit:
        stop = _start_round(session, "generation")
        if stop:
            return stop
        parents = _parents(session)
        per_parent = max(1, session.options.population // len(parents))
        extra = max(0, session.options.population - per_parent * len(parents))
        batch: list[Candidate] = []
        for i, parent in enumerate(parents):
            got = session.propose(parent, want=per_parent + (1 if i < extra else 0))
            if got.fatal:
                return SessionStatus.UNSUPPORTED, got.fatal
            batch.extend(got.candidates)
        if not batch and not any(h.status == AttemptStatus.INVALID_REPLY for h in history[-per_parent:]):
            break  # the coder has nothing left to try
        if _judge_says_stop(session.evaluate(batch)):
            break
    return _ended(session, "generation")


STRATEGIES: dict[Strategy, Callable[[Session], Outcome]] = {Strategy.REFINE: refine, Strategy.EVOLVE: evolve}
