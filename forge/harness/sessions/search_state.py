"""What a session's search has seen so far (``SearchState``: its history, trace and contenders,
read back from the bank on ``--resume``), and why a finished search banked nothing
(``no_gain_reason``)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from forge.agents import HistoryItem
from forge.core.acceptance import beats_eager
from forge.core.candidate_config import CandidateConfig
from forge.core.figures import judged_roofline
from forge.core.statuses import AttemptStatus
from forge.core.verdict import Verdict
from forge.harness.sessions.confirm import Contender
from forge.harness.sessions.steps import Candidate


@dataclass(frozen=True)
class TracePoint:
    """One attempt in a session's trace (the report's chart of speedups over attempts)."""

    round: int
    attempt_id: int | None
    status: AttemptStatus
    speedup: float | None

    def to_json(self) -> dict[str, Any]:
        return {"round": self.round, "attempt_id": self.attempt_id, "status": str(self.status), "speedup": self.speedup}


@dataclass
class SearchState:
    """What the search has seen so far."""

    round: int = 0
    history: list[HistoryItem] = field(default_factory=list)
    trace: list[TracePoint] = field(default_factory=list)
    contenders: list[Contender] = field(default_factory=list)  # passed, faster than eager at the median
    best: Contender | None = None  # the fastest that beat eager beyond the noise in its own round
    top: Contender | None = None  # the fastest that passed with meaningful timings, beating eager or not
    floor: Contender | None = None  # the fastest contender that is Inductor's own code for the op
    rejected: set[int] = field(default_factory=set)  # attempts whose confirmation did not hold up
    pending: list[Candidate] = field(default_factory=list)  # proposed, never verified (a killed run)

    def add(self, item: HistoryItem) -> None:
        self.history.append(item)
        self.trace.append(TracePoint(item.round, item.attempt_id, item.status, item.speedup_vs_eager))

    def consider(self, attempt_id: int, source: str, verdict: Verdict, config: CandidateConfig) -> None:
        """Note a verdict as a contender, and as the round best when it beat eager beyond the noise."""
        if not verdict.passed or not verdict.timing_meaningful:
            return
        entry = Contender(attempt_id, source, verdict, config)
        if self.top is None or (verdict.speedup_vs_eager or 0.0) > (self.top.verdict.speedup_vs_eager or 0.0):
            self.top = entry
        if (verdict.speedup_vs_eager or 0.0) > 1.0:
            self.contenders.append(entry)
            if config.compiler_code and (
                self.floor is None or (verdict.speedup_vs_eager or 0.0) > (self.floor.verdict.speedup_vs_eager or 0.0)
            ):
                self.floor = entry
        ok, _why = beats_eager(verdict)
        # ranked by speedup vs eager measured in the same run: machine drift between runs cancels out
        faster = self.best is None or (verdict.speedup_vs_eager or 0.0) > (self.best.verdict.speedup_vs_eager or 0.0)
        if ok and faster:
            self.best = entry

    def why_none(self) -> str:
        passed = [h for h in self.history if h.status == AttemptStatus.PASSED]
        if passed:
            top = max(passed, key=lambda h: h.speedup_vs_eager or 0.0)
            return f"no candidate beat eager beyond the measured noise (best {top.speedup_vs_eager or 0:.2f}x)"
        if self.history:
            last = self.history[-1]
            return f"no candidate passed verification (last: {last.status}: {last.reason})"
        return "no candidate was proposed"


def no_gain_reason(verdict: Verdict, why: str | None) -> str:
    """Why no kernel, measured: the best passed candidate's speedup over eager with its 95%
    interval, and how close eager already is to this machine's roofline (the room there was)."""
    pair, _ = verdict.timing_stats.headline_pairs()
    speed = f"best kernel {verdict.speedup_vs_eager or 0:.2f}x eager"
    if pair is not None:
        speed += f" (95% interval {pair.low:.2f}-{pair.high:.2f}x over {pair.pairs} pairs)"
    roof = judged_roofline(verdict)
    room = ""
    if roof is not None and roof.fraction_eager is not None and roof.fraction_eager <= 1.0:
        room = f"eager already runs at {roof.fraction_eager:.0%} of this machine's {roof.bound_by}; "
    elif roof is not None and roof.fraction_eager is not None:
        room = f"(no roofline figure: eager would run at {roof.fraction_eager:.0%} of its bound, which cannot hold); "
    if why:  # e.g. a finalist timed again did not hold up: its words stay
        return f"no kernel faster than eager beyond the measured noise: {room}{speed}; {why}"
    return f"no kernel faster than eager beyond the measured noise: {room}{speed}"
