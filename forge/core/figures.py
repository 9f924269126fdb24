"""A verdict's speed as forge shows it everywhere (the agents' prompts, the CLI, the TUI): one
statistic, the paired ratio of the judged regime with its interval, and the candidate's own time
per call. Per-side medians of the baselines are not shown beside it: the ratio of two medians is
not the median of the pairs' ratios, and read side by side they contradict each other.

A verdict timed while the machine was busy (and the load check was on) has no speedup to show:
it says so, with the load the OS reported."""

from __future__ import annotations

from dataclasses import dataclass

from forge.core.acceptance import beats_eager, timed_while_busy
from forge.core.roofline_record import Roofline
from forge.core.statuses import TimingRegime
from forge.core.timing_records import PairedRatio
from forge.core.verdict import Verdict


@dataclass(frozen=True)
class AttemptFigures:
    """What a verdict says about speed, in the form every view shows it."""

    regime: str  # the regime the ratios are judged in: "cold" or "warm"
    vs_eager: PairedRatio | None  # eager's time over the candidate's, per adjacent pair of calls
    vs_compile: PairedRatio | None
    candidate_ms: float | None  # the candidate's median per call in the judged regime (None: not recorded)
    eager_ms: float | None = None  # eager's median per call in the same pairs (None: not recorded)
    busy: str | None = None  # the load the OS reported, when the timed calls competed with it
    meaningful: bool = True  # False: timings that mean nothing (Triton's CPU interpreter)
    standing: str | None = None  # whether the attempt counts toward a kernel (``finalist_standing``)

    @classmethod
    def of(cls, v: Verdict) -> AttemptFigures:
        stats = v.timing_stats
        eager, compiled = stats.headline_pairs()
        # verdicts stored before forge paired its calls carry only the ratio of the medians
        eager = eager or _unpaired(v.speedup_vs_eager)
        compiled = compiled or (_unpaired(v.speedup_vs_compile) if eager is not None and eager.pairs == 0 else None)
        busy = stats.contention.detail if timed_while_busy(v) and stats.contention is not None else None
        return cls(
            regime=str(stats.regime or "cold"),
            vs_eager=eager,
            vs_compile=compiled,
            candidate_ms=_candidate_ms(v),
            eager_ms=_eager_ms(v),
            busy=busy,
            meaningful=v.timing_meaningful,
            standing=finalist_standing(v),
        )

    @property
    def timed(self) -> bool:
        """There is a speedup to show: meaningful timings, taken on a quiet machine."""
        return self.meaningful and self.busy is None and self.vs_eager is not None

    @property
    def speedup_vs_eager(self) -> float | None:
        return self.vs_eager.median if self.timed and self.vs_eager is not None else None

    @property
    def speedup_vs_compile(self) -> float | None:
        return self.vs_compile.median if self.timed and self.vs_compile is not None else None

    def sentence(self) -> str:
        """One line: "1.55x eager (95% CI 1.40-1.70x, 40 paired calls, warm), 1.02x torch.compile
        (0.98-1.05x); the candidate takes 0.2985 ms a call", or why there is no speedup."""
        if not self.meaningful:
            return "not timed: timings are not meaningful here (Triton's CPU interpreter)"
        if self.busy is not None:
            return f"not timed: the machine was busy ({self.busy}); no speedup is known"
        if self.vs_eager is None:
            return "not timed"
        e, c = self.vs_eager, self.vs_compile
        if e.pairs == 0:
            line = f"{e.median:.2f}x eager" + (f", {c.median:.2f}x torch.compile" if c is not None else "")
            line += " (ratios of the medians: no paired calls recorded)"
        else:
            line = f"{e.median:.2f}x eager (95% CI {e.low:.2f}-{e.high:.2f}x, {e.pairs} paired calls, {self.regime})"
            if c is not None:
                line += f", {c.median:.2f}x torch.compile ({c.low:.2f}-{c.high:.2f}x)"
        if self.candidate_ms is not None:
            line += f"; the candidate takes {self.candidate_ms:.4f} ms a call ({self.regime} median)"
        return line


def finalist_standing(v: Verdict) -> str | None:
    """Whether a passed, timed attempt counts toward a banked kernel, in the words an agent acts on:
    a speedup whose interval reaches 1.0x is noise, and says so beside the figure (None: nothing
    was timed to count)."""
    if not v.passed or not v.timing_meaningful or timed_while_busy(v):
        return None
    ok, why = beats_eager(v)
    if ok:
        return "it counts: faster than eager beyond the noise, so it is a finalist (timed again, alone, before banking)"
    paired = v.timing_stats.headline_pairs()[0]
    if paired is not None and paired.median > 1.0:
        return (
            f"it does not count yet: {why}. Its median above 1.0x keeps it a contender: the fastest contenders are "
            "timed again, alone and with more calls, and only one that then clears the noise is banked"
        )
    return "it does not count: it is not faster than eager"


def _eager_ms(v: Verdict) -> float | None:
    """Eager's median per call in the pairs of the judged regime (the verdict's own baseline)."""
    stats = v.timing_stats
    if stats.regime is not None and str(stats.regime) == "warm":
        return stats.warm_eager_time.median_ms if stats.warm_eager_time is not None else None
    return v.timings_ms.eager


def _candidate_ms(v: Verdict) -> float | None:
    """The candidate's median in the judged regime: its warm calls' where it is judged warm (a
    verdict from before they were recorded has none), its cold calls' otherwise."""
    stats = v.timing_stats
    if stats.regime is not None and str(stats.regime) == "warm":
        return stats.warm_candidate.median_ms if stats.warm_candidate is not None else None
    return v.timings_ms.candidate


def judged_roofline(v: Verdict) -> Roofline | None:
    """The verdict's roofline where it bounds the op: judged warm, only a bound from the last-level
    cache's bandwidth (its data comes from there, and a bound from DRAM's bounds nothing)."""
    warm = v.timing_stats.regime is TimingRegime.WARM
    return None if warm and (v.roofline is None or v.roofline.level != "cache") else v.roofline


def _unpaired(ratio: float | None) -> PairedRatio | None:
    return None if ratio is None else PairedRatio(pairs=0, median=ratio, low=ratio, high=ratio)


def fmt_seconds(s: float) -> str:
    """Seconds as a share is shown: whole seconds, tenths below 10 s (a 0.4 s share is not "0 s")."""
    return f"{s:.0f} s" if s >= 10 else f"{s:.1f} s"
