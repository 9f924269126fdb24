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
        """The side that ran faster than every other beyond the noise head to head; else the one
        faster head to head (at the median, a dead heat no win) than the most others, then the one
        beaten beyond the noise by the fewest, then the better median over eager. Head to head,
        eager's noise is left out. None when the match decided nothing."""
        ranked = self.ranked
        if self.failed is not None or not ranked:
            return None
        clear = [s.name for s in ranked if self._beats_all(s.name)]
        if clear:
            return clear[0]
        wins = {s.name: sum(p.faster == s.name and p.ratio.median > 1.0 for p in self.pairs) for s in ranked}
        lost = {s.name: sum(p.slower == s.name and p.ratio.low > 1.0 for p in self.pairs) for s in ranked}
        # max keeps the first of equals: ranked's order, the better median over eager
        return max(ranked, key=lambda s: (wins[s.name], -lost[s.name])).name

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
        """One line for a prompt, an event or a log: the head-to-head ratios (what decides), the
        decision, and each side's figure over eager in the match. Those can read lower than the
        sides' own verdicts: the workers take turns, and with three or four of them less of each
        one's data is still in cache when its turn comes."""
        if self.failed is not None:
            return f"timed together: decided nothing ({self.failed})"
        label = label or {}

        def named(name: str) -> str:
            return label.get(name, name.replace("_", " "))

        heads = [
            f"{named(p.faster)} ran {p.ratio.median:.2f}x as fast as {named(p.slower)} "
            f"[{p.ratio.low:.2f}-{p.ratio.high:.2f}]"
            for p in self.pairs
        ]
        winner = self.winner
        how = "beyond the noise" if self.decisive else "within the noise, by the median"
        if len(self.ranked) == 1:
            how = "as the only side timed"
        chosen = f"{named(winner)} chosen {how}" if winner is not None else "none chosen"
        figures = []
        for s in self.sides:
            if s.failed is not None or s.vs_eager is None:
                figures.append(f"{named(s.name)}: no figure ({s.failed or 'not timed'})")
            else:
                figures.append(f"{named(s.name)} {s.vs_eager.median:.2f}x")
        in_match = f"over eager in the match (workers taking turns): {', '.join(figures)}"
        return f"timed together ({self.regime or 'cold'}): {'; '.join(heads) or 'no pair timed'}; {chosen}; {in_match}"
