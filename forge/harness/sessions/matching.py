"""The choice among one round's candidates (an LLM coder's ``--best-of`` variants in one reply).

Each candidate's verdict was timed against eager in its own verification, minutes from its
siblings'; choosing by those medians compares two noises. When two or more passed and were
timed, the verifier times them again together (``Verifier.time_together``: the round's fastest
as the candidate, up to ``MATCHED`` - 1 others as its rivals, call by call in the same batches),
and the round goes on from the one that ran fastest there. A match that decides nothing (it
failed, or the machine was busy) leaves the choice to the verdicts' medians.
"""

from __future__ import annotations

from forge.agents import HistoryItem
from forge.core.statuses import AttemptStatus
from forge.harness import events as ev
from forge.harness.sessions.steps import Candidate, SessionIO
from forge.verifier import Verifier

MATCHED = 3  # candidates of a round timed together at most (each adds a call to every pair)


def round_best(items: list[HistoryItem]) -> HistoryItem:
    """Of one round's items, the passing one fastest against eager, else the last."""
    passed = _timed(items)
    return max(passed, key=lambda i: i.speedup_vs_eager or 0.0) if passed else items[-1]


def _timed(items: list[HistoryItem]) -> list[HistoryItem]:
    return [i for i in items if i.status == AttemptStatus.PASSED and i.speedup_vs_eager]


def round_choice(
    verifier: Verifier, candidates: list[Candidate], items: list[HistoryItem], io: SessionIO, last_round: bool
) -> HistoryItem:
    """The round's item to go on from: by the match when two or more candidates passed and were
    timed (the match is kept on the chosen item, for the next prompt), else ``round_best``. The
    last round has no next round to go on: its candidates are not matched (the finalists are
    chosen, and timed again, by the confirm step)."""
    best = round_best(items)
    by_id = {c.attempt_id: c for c in candidates}
    timed = [i for i in sorted(_timed(items), key=lambda i: -(i.speedup_vs_eager or 0.0)) if i.attempt_id in by_id]
    timed = timed[:MATCHED]
    if len(timed) < 2 or last_round:
        return best
    named = {by_id[i.attempt_id].job().name: i for i in timed if i.attempt_id is not None}
    match = verifier.time_together([by_id[i.attempt_id].job() for i in timed if i.attempt_id is not None])
    chosen = named.get(match.winner) if match.winner is not None else None
    # a leader that failed its verification this time gives way to the next by its verdict
    kept = chosen or (timed[1] if match.leader_failed else best)
    kept.matched = match
    io.events(
        ev.RoundMatched,
        round=kept.round,
        attempts=[i.attempt_id for i in timed if i.attempt_id is not None],
        chosen=chosen.attempt_id if chosen is not None else None,
        decisive=match.decisive,
        summary=match.summary(),
    )
    return kept
