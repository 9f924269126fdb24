"""Search strategies over a ``Session``: what to ask the coder next, and when to stop.

- ``refine``: one trajectory. Each round the coder sees the previous attempt (with its verdict and
  the judge's feedback) and proposes one candidate.
- ``evolve``: a population. Each generation takes the top-k passing attempts as parents and asks
  for children of each; a generation is verified in parallel (``--workers``).
Both stop when the rounds are spent, the judge says stop, or a run-wide limit is reached.
"""

from __future__ import annotations

from forge.agents.roles import HistoryItem
from forge.harness import events as ev
from forge.harness.session import Session


def _start_round(session: Session, unit: str) -> tuple[str, str] | None:
    """Begin the next round, or (status, reason) when a run-wide limit stops the session first."""
    stop = "interrupted" if session.limits.stop_requested.is_set() else session.limits.exceeded()
    if stop:
        return stop, f"{stop.replace('_', ' ')} reached after {session.round} {unit}(s)"
    session.round += 1
    session.emit(ev.RoundStarted, round=session.round, rounds=session.options.rounds)
    return None


def _judge_says_stop(items: list[HistoryItem]) -> bool:
    return bool(items) and all(i.feedback is not None and not i.feedback.continue_search for i in items)


def refine(session: Session) -> tuple[str, str | None]:
    """(status, reason): finished | budget | time_limit | interrupted | unsupported."""
    while session.round < session.options.rounds:
        stop = _start_round(session, "round")
        if stop:
            return stop
        parent = session.history[-1] if session.history else None
        batch, fatal = session.propose(session.context(parent))
        if fatal:
            return "unsupported", fatal
        if not batch and session.history and session.history[-1].status != "invalid_reply":
            break  # the coder has nothing left to try
        items = session.evaluate(batch)
        if _judge_says_stop(items):
            break
    return "finished", None


def _parents(session: Session) -> list[HistoryItem | None]:
    passed = [h for h in session.history if h.status == "passed" and h.speedup_vs_eager]
    passed.sort(key=lambda h: -(h.speedup_vs_eager or 0.0))
    top: list[HistoryItem | None] = list(passed[: session.options.top_k])
    if not top:
        top = [session.history[-1]] if session.history else [None]
    return top


def evolve(session: Session) -> tuple[str, str | None]:
    while session.round < session.options.rounds:
        stop = _start_round(session, "generation")
        if stop:
            return stop
        parents = _parents(session)
        per_parent = max(1, session.options.population // len(parents))
        extra = max(0, session.options.population - per_parent * len(parents))
        batch = []
        for i, parent in enumerate(parents):
            want = per_parent + (1 if i < extra else 0)
            proposed, fatal = session.propose(session.context(parent, want=want))
            if fatal:
                return "unsupported", fatal
            batch.extend(proposed)
        if not batch and not any(h.status == "invalid_reply" for h in session.history[-per_parent:]):
            break  # the coder has nothing left to try
        items = session.evaluate(batch)
        if _judge_says_stop(items):
            break
    return "finished", None


STRATEGIES = {"refine": refine, "evolve": evolve}
