"""A round's candidates timed together: the figures that choose between them.

Each candidate's own verification times it against eager alone, minutes apart from its siblings;
on a shared machine the load drifts 10-30% over minutes, so two verdicts' speedups carry two
noises. A round with several passing candidates has them timed again in one verification (the
round's fastest as the candidate, the others as its rivals), each call of each side next to the
others' in the same batches, so one noise covers every side: ``RoundMatch`` is what that reads.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

from forge.core.timing_records import PairedRatio

_LENIENT = ConfigDict(extra="ignore")


class MatchedSide(BaseModel):
    """One candidate of the match: its speedup over eager in these batches, or why it has none
    (its timed outputs were wrong, it raised, its worker died, it left threads running)."""

    model_config = _LENIENT
    name: str
    vs_eager: PairedRatio | None = None
    failed: str | None = None


class MatchedPair(BaseModel):
    """How much faster ``faster`` ran than ``slower``, call by call in the same batches
    (``slower``'s time over ``faster``'s: its interval's low end above 1.0 decides)."""

    model_config = _LENIENT
    faster: str
    slower: str
    ratio: PairedRatio


class RoundMatch(BaseModel):
    """The round's candidates timed together (``sides``: the leader first), the regime the
    figures come from, and their head-to-head ratios; ``failed`` when the match decides nothing
    (its verification failed or was timed while the machine was busy)."""

    model_config = _LENIENT
    sides: list[MatchedSide] = Field(default_factory=list)
    pairs: list[MatchedPair] = Field(default_factory=list)
    regime: str | None = None
    failed: str | None = None
    leader_failed: bool = False  # the leader's own verification failed this time (not the load, not a rival)

    @property
    def ranked(self) -> list[MatchedSide]:
        """The sides with a figure, fastest over eager first."""
        timed = [s for s in self.sides if s.failed is None and s.vs_eager is not None]
        return sorted(timed, key=lambda s: -(s.vs_eager.median if s.vs_eager else 0.0))

    @property
    def winner(self) -> str | None:
        """The side that ran faster than every other beyond the noise head to head (eager's noise
        left out), else the fastest by its median over eager; None when the match decided nothing."""
        ranked = self.ranked
        if self.failed is not None or not ranked:
            return None
        clear = [s.name for s in ranked if self._beats_all(s.name)]
        return clear[0] if clear else ranked[0].name

    @property
    def decisive(self) -> bool:
        """The winner ran faster than every other timed side beyond the noise (each head-to-head
        interval above 1.0); otherwise the match only ranks them by their medians."""
        winner = self.winner
        return winner is not None and len(self.ranked) > 1 and self._beats_all(winner)

    def _beats_all(self, name: str) -> bool:
        others = [s.name for s in self.ranked if s.name != name]
        beaten = {p.slower for p in self.pairs if p.faster == name and p.ratio.low > 1.0}
        return bool(others) and all(o in beaten for o in others)

    def summary(self, label: dict[str, str] | None = None) -> str:
        """One line for a prompt, an event or a log: each side's figure, and the decision."""
        label = label or {}
        parts = []
        for s in self.sides:
            name = label.get(s.name, s.name.replace("_", " "))
            if s.failed is not None or s.vs_eager is None:
                parts.append(f"{name}: no figure ({s.failed or 'not timed'})")
            else:
                r = s.vs_eager
                parts.append(f"{name} {r.median:.2f}x eager [{r.low:.2f}-{r.high:.2f}]")
        if self.failed is not None:
            return f"timed together: decided nothing ({self.failed})"
        winner = self.winner
        how = "beyond the noise" if self.decisive else "by the median only (within the noise)"
        chosen = f"; {label.get(winner, winner.replace('_', ' '))} chosen {how}" if winner is not None else ""
        return f"timed together ({self.regime or 'cold'}): " + ", ".join(parts) + chosen
