"""The session's confirm step: its finalists are timed again before one is banked.

Picking the fastest of many noisy timings favours whichever attempt was measured luckiest, and a
round's 5-30 timed calls leave quartiles too coarse to separate a real 10% gain from the noise.
So the fastest contenders (passed, faster than eager at the median) are verified again, one at a
time on the whole machine, with ``confirm_trials`` calls a side on fresh inputs, and the first
that beats eager beyond the noise in that second measurement is banked with it: the speedup a
session reports was measured after the choice, not the draw that made it.

A confirmation that is inconclusive (faster at the median, but its interval reaches 1.0x) is
timed once more with ``EXTEND`` times the calls and judged on that larger sample alone. On a noisy
machine a real 3x kernel can draw an interval of 0.5-6x from 10 calls; refusing it then says
nothing about the kernel. Judging the second sample alone (not pooled with the first) keeps the
chance that a kernel no faster than eager is banked below twice the single test's.

Before a finalist that held up is banked, the op's reference is verified against itself the same
way (``null_control.py``): the finalist's interval must clear what two workers running the same
code read apart now (``acceptance.null_bar``), and the null is carried in its verdict
(``TimingSides.null_eager``), so the bank keeps the evidence. A null that cannot be measured
(it failed, or the machine was busy) leaves the finalist neither banked nor rejected: ``--resume``
confirms it again. ``null_control = false`` skips it (the bar is then 1.0x).

Where Inductor's own code for the op is a contender (the built-in agent's first candidate), it
is the floor: a finalist that holds up against eager yet is slower than torch.compile beyond the
noise gives way to it, so a session does not bank a kernel the user's own torch.compile beats.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass, replace

from forge.core.acceptance import beats_eager, slower_than_compile, timed_while_busy
from forge.core.candidate_config import CandidateConfig
from forge.core.figures import fmt_seconds
from forge.core.settings import ForgeSettings
from forge.core.verdict import Verdict
from forge.harness import events as ev
from forge.harness.sessions.null_control import NullBlocked, NullControl, judged_against
from forge.harness.sessions.steps import SessionIO, StillBusy, attempt_job
from forge.verifier import Verifier

FINALISTS = 2  # contenders timed again before a session gives up on banking a kernel
EXTEND = 3  # an inconclusive confirmation is timed once more with this many times the calls


@dataclass
class Contender:
    """A passed attempt faster than eager at the median: what the session may bank."""

    attempt_id: int
    source: str
    verdict: Verdict
    config: CandidateConfig


def finalists(
    contenders: list[Contender], n: int = FINALISTS, keep: Contender | None = None, floor: Contender | None = None
) -> list[Contender]:
    """The ``n`` fastest contenders by their round's median speedup vs eager, one per distinct
    source (the tuner can reach one kernel through two configs). ``keep`` (the fastest that beat
    eager beyond the noise in its own round) takes the last place if the medians left it out:
    two noisy attempts with higher medians must not push out the one measured clearly faster.
    ``floor`` (Inductor's own code for the op) comes last when the others left it out: a finalist
    slower than torch.compile gives way to it (``confirm_finalists``)."""
    ranked = sorted(contenders, key=lambda c: -(c.verdict.speedup_vs_eager or 0.0))
    out: list[Contender] = []
    for c in ranked:
        if len(out) < n and all(f.source != c.source for f in out):
            out.append(c)
    if keep is not None and n > 0 and all(f.source != keep.source for f in out):
        out = [*out[: n - 1], keep]
    if floor is not None and n > 0 and all(f.source != floor.source for f in out):
        out.append(floor)
    return out


def confirm_timeout(settings: ForgeSettings, c: Contender, trials: int) -> float:
    """Seconds a confirmation may take: the usual limit plus three times its timed calls at the
    speed its round measured (eager, torch.compile and the candidate each take ``trials`` calls),
    so 60 calls of a slow op are not cut short by a limit meant for a round's 5-30."""
    t = c.verdict.timings_ms
    per_call_s = sum(float(ms or 0.0) for ms in (t.candidate, t.eager, t.compile)) / 1000 + 0.01
    return settings.timeout + 3 * trials * per_call_s


@dataclass(frozen=True)
class FinalistJudgement:
    """A finalist timed again and judged as forge banks it (``confirm_finalist``)."""

    verdict: Verdict  # the confirmation's, carrying the null control it was judged against
    accepted: bool
    why: str
    blocked: NullBlocked | None = None  # the null control set no bar, and why


def confirm_finalist(
    timed_again: Callable[[], Verdict],
    null_of: Callable[[Verdict], Verdict] | None,
    *,
    null_for_any_timing: bool = False,
) -> FinalistJudgement:
    """The one judgement of a finalist, in a session's confirm step and in ``forge verify
    --null-control``: ``timed_again`` verifies it again (on the whole machine, and in a user's
    loop), then it must beat eager beyond the noise (``acceptance.beats_eager``) and clear the
    null control ``null_of`` measures for it (None: ``null_control`` is off, the bar is 1.0x). A
    session measures a null only for a finalist about to be banked; ``null_for_any_timing``
    measures one for any finalist that passed with timing that means something (``forge verify``
    shows it whatever the outcome)."""
    verdict = timed_again()
    ok, why = beats_eager(verdict)
    measured = verdict.passed and verdict.timing_meaningful
    if null_of is None or not (ok or (null_for_any_timing and measured)):
        return FinalistJudgement(verdict, ok, why)
    judged, ok, why, blocked = judged_against(verdict, null_of(verdict))
    return FinalistJudgement(judged, ok, why, blocked)


@dataclass(frozen=True)
class Confirmation:
    """The confirm step's outcome: the finalist to bank (its verdict the second measurement's,
    with its confirmation's row id), and why the others were not."""

    chosen: Contender | None
    trials: int
    why_not: tuple[str, ...] = ()
    busy: str | None = None  # a finalist was timed while the machine was busy: the load it saw
    undecided: bool = False  # a finalist's null control could not be measured: not rejected either

    def reason(self, search_reason: str | None, resume: str = "forge optimize --resume ID") -> str | None:
        """Why nothing is banked (after the search's own reason, which is kept); ``resume``: the
        command that continues the session."""
        if self.busy is not None and self.chosen is None:
            told = (
                f"the machine was busy when the finalists were timed again ({self.busy}); nothing measured "
                f"under that load is banked: `{resume}` times them again when the machine is quiet"
            )
            return f"{search_reason}; {told}" if search_reason else told
        said = self._reason(search_reason)
        if self.undecided and self.chosen is None:
            return f"{said}; `{resume}` confirms again"
        return said

    def _reason(self, search_reason: str | None) -> str | None:
        if not self.why_not:
            return search_reason
        told = f"timed again ({self.trials} calls a side), no finalist held up: " + "; ".join(self.why_not)
        return f"{search_reason}; {told}" if search_reason else told


def confirm_finalists(
    candidates: list[Contender],
    verifier: Verifier,
    io: SessionIO,
    settings: ForgeSettings,
    round: int,
    stop: threading.Event,
    rejected: set[int],
    floor: Contender | None = None,
    still_busy: Callable[[str], StillBusy | None] = lambda _load: None,
) -> Confirmation:
    """Time each finalist again until one holds up. Each confirmation is recorded as an attempt of
    role ``confirm`` whose parent is the finalist; a finalist that does not hold up is added to
    ``rejected`` at once (a Ctrl-C later must not bank it).

    With a ``floor`` among them (Inductor's own code for the op), a finalist that holds up against
    eager but is slower than torch.compile beyond the noise (``slower_than_compile``) is not the
    op's best: the next finalist is timed, and it is banked only when none after it holds up.

    After a confirmation timed under load, ``still_busy`` waits (bounded) for a quiet machine
    before the next finalist is timed; when the load stays, the rest are left to ``--resume``."""
    trials = max(settings.confirm_trials, settings.timing_trials or 0)
    confirmer = _Confirmer(verifier, io, settings, round, stop, floor)
    why_not: list[str] = []
    busy: str | None = None
    undecided = False
    below: Contender | None = None  # the first that held up against eager yet fell below the floor
    last_load: str | None = None  # the load the last confirmation (or its null control) was timed under
    for c in candidates:
        still = still_busy(last_load) if last_load is not None else None
        if still is not None:
            busy = f"{last_load}, and {still.now} after waiting {fmt_seconds(still.waited_s)}"
            break
        judged = confirmer.one(c, trials)
        if not judged.held and not judged.below_floor and not judged.undecided and inconclusive(judged.verdict):
            judged = confirmer.one(c, trials * EXTEND)
        last_load = judged.busy
        chosen = replace(c, verdict=judged.verdict.model_copy(update={"confirm_attempt_id": judged.confirm_id}))
        if judged.held:
            return Confirmation(chosen, trials, tuple(why_not), busy, undecided)
        why_not.append(f"attempt {c.attempt_id}: {judged.why}")
        if judged.below_floor:  # banked only if the floor does not hold up
            below = below or chosen
        elif judged.busy is not None or judged.undecided:  # not rejected: a quiet machine or --resume decides
            busy = judged.busy or busy
            undecided = undecided or judged.undecided
        else:
            rejected.add(c.attempt_id)
    if busy is not None or undecided:  # the floor itself was not decided: a quiet machine or --resume decides
        below = None
    return Confirmation(below, trials, tuple(why_not), busy, undecided)


def inconclusive(verdict: Verdict) -> bool:
    """Passed, timed on a quiet machine, faster than eager at the median, yet not beyond the
    noise: more calls can decide it (a busy or a slower verdict is not helped by them)."""
    return verdict.passed and not timed_while_busy(verdict) and (verdict.speedup_vs_eager or 0.0) > 1.0


@dataclass(frozen=True)
class Judged:
    """One confirmation: its verdict (with the null control it was judged against), whether it
    held up and why, its row id, and what left it undecided: the load it or its null control was
    timed under, or a null control that could not be measured."""

    verdict: Verdict
    held: bool
    why: str
    confirm_id: int
    busy: str | None = None
    undecided: bool = False
    below_floor: bool = False  # it beat eager, but torch.compile beats it and Inductor's code is a finalist


class _Confirmer:
    """One confirm step: finalists timed again, each recorded as a confirm attempt, and judged
    against a null control when one would be banked, and against the floor (``floor``:
    Inductor's own code for the op, when it is a finalist)."""

    def __init__(
        self,
        verifier: Verifier,
        io: SessionIO,
        settings: ForgeSettings,
        round: int,
        stop: threading.Event,
        floor: Contender | None = None,
    ) -> None:
        self.verifier, self.io, self.settings, self.round, self.stop = verifier, io, settings, round, stop
        self.nulls = NullControl(verifier, io, settings, stop)
        self.floor = floor

    def one(self, c: Contender, trials: int) -> Judged:
        """Time one finalist again with ``trials`` calls a side, judge it and record it as a
        confirm attempt (recorded too when a Ctrl-C lands during its null control)."""
        if self.stop.is_set():
            raise KeyboardInterrupt
        self.io.events(ev.ConfirmStarted, attempt_id=c.attempt_id, trials=trials)
        job = attempt_job(c.attempt_id, c.source)
        timeout = confirm_timeout(self.settings, c, trials)

        def null_of(finalist: Verdict) -> Verdict:
            try:
                return self.nulls.measure(finalist, trials)
            except KeyboardInterrupt:
                self._record(c, finalist, False, "interrupted while its null control was timed", trials)
                raise

        judged = confirm_finalist(
            lambda: self.verifier.verify_alone(job, trials, timeout), null_of if self.settings.null_control else None
        )
        verdict, ok, why = judged.verdict, judged.accepted, judged.why
        load = verdict.timing_stats.contention
        busy = load.detail if timed_while_busy(verdict) and load is not None else None
        undecided = False
        if judged.blocked is not None:
            busy, undecided = judged.blocked.busy, judged.blocked.busy is None
        below = False
        if ok and self.floor is not None and c.source != self.floor.source:
            slower = slower_than_compile(verdict)
            if slower is not None:
                ok, below = False, True
                why = (
                    f"{slower}; Inductor's own code for the op (attempt {self.floor.attempt_id}) "
                    "is a finalist and is timed instead"
                )
        if not verdict.passed and verdict.reason:
            why = f"{why}: {verdict.reason}"
        cid = self._record(c, verdict, ok, why, trials)
        return Judged(verdict, ok, why, cid, busy, undecided, below)

    def _record(self, c: Contender, verdict: Verdict, held: bool, why: str, trials: int) -> int:
        recorded = verdict.model_copy(update={"confirm_held": held, "confirm_reason": why, "confirm_trials": trials})
        cid = self.io.recorder.confirmed(self.round, c.attempt_id, recorded)
        self.io.events(
            ev.ConfirmFinished,
            attempt_id=c.attempt_id,
            confirm_id=cid,
            held=held,
            reason=why,
            speedup_vs_eager=verdict.speedup_vs_eager,
            speedup_vs_compile=verdict.speedup_vs_compile,
        )
        return cid
