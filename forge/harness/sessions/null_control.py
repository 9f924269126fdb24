"""The confirm step's null control: the op's reference verified against itself before a finalist
is banked.

Two workers running the same code read a few to 15% apart on a small VM. Within one session the
offset is mostly the kept reference worker's: a fresh worker running the reference reads on the
same side as the candidate's fresh worker does (``python -m benchmarks.claims.timing_stability
--null --control``). So the null is verified the way the finalist was (``VerifierService.verify_null``:
a clean worker, the same reference worker, as many calls, the same baselines), and the finalist's
interval must clear ``acceptance.null_bar`` of it. A null that did not pass, or was timed while
the machine was busy, sets no bar: the finalist is then neither banked nor rejected, and is never
judged against 1.0x instead.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass

from forge.core.acceptance import beats_eager, null_bar, timed_while_busy
from forge.core.settings import ForgeSettings
from forge.core.verdict import Verdict
from forge.harness import events as ev
from forge.harness.sessions.steps import SessionIO
from forge.verifier import Verifier


@dataclass(frozen=True)
class NullBlocked:
    """Why a null control sets no bar: its load (the machine was busy) or its failure."""

    why: str
    busy: str | None = None  # the load it was timed under, when that is the reason


def null_blocked(null: Verdict) -> NullBlocked | None:
    """Why ``null`` cannot judge a finalist, or None when it can."""
    load = null.timing_stats.contention
    if timed_while_busy(null) and load is not None:
        return NullBlocked(f"the machine was busy while the null control was timed ({load.detail})", load.detail)
    what = "the null control (the reference verified against itself)"
    if not null.passed:
        return NullBlocked(f"{what} did not pass ({null.status}" + (f": {null.reason})" if null.reason else ")"))
    if null.timing_stats.headline_pairs()[0] is None:
        return NullBlocked(f"{what} has no paired calls")
    return None


def with_null_control(finalist: Verdict, null: Verdict) -> Verdict:
    """The finalist's verdict carrying the null control's paired ratio (``null`` must be usable:
    ``null_blocked`` is None), the bar acceptance then applies."""
    stats = finalist.timing_stats.model_copy(update={"null_eager": null.timing_stats.headline_pairs()[0]})
    steps = finalist.training_step
    if steps is not None and null.training_step is not None and not null.training_step.busy:
        # a training session's null times the reference's steps against themselves too
        steps = steps.model_copy(update={"null_eager": null.training_step.headline()[0]})
    return finalist.model_copy(update={"timing_stats": stats, "training_step": steps})


def judged_against(finalist: Verdict, null: Verdict) -> tuple[Verdict, bool, str, NullBlocked | None]:
    """The finalist judged as a session judges it: its verdict carrying the null, whether it is
    accepted and why; a null that sets no bar refuses it (and is returned, saying why)."""
    blocked = null_blocked(null)
    if blocked is not None:
        return finalist, False, f"{blocked.why}; nothing is banked without its null control", blocked
    judged = with_null_control(finalist, null)
    ok, why = beats_eager(judged)
    return judged, ok, why, None


def null_timeout(settings: ForgeSettings, finalist: Verdict, trials: int) -> float:
    """Seconds a null control with ``trials`` calls a side may take: the usual limit plus three
    times its calls at the speed ``finalist``'s verification measured the reference (eager twice,
    as both sides, and torch.compile)."""
    t = finalist.timings_ms
    per_call_s = (2 * float(t.eager or 0.0) + float(t.compile or 0.0)) / 1000 + 0.01
    return settings.timeout + 3 * trials * per_call_s


class NullControl:
    """The null controls of one confirm step, measured on demand, once per count of calls a side:
    a finalist judged after another with as many calls is judged against the same null. Only a
    usable null is kept; a failed or busy one is measured again for the next finalist."""

    def __init__(self, verifier: Verifier, io: SessionIO, settings: ForgeSettings, stop: threading.Event) -> None:
        self.verifier, self.io, self.settings, self.stop = verifier, io, settings, stop
        self.usable: dict[int, Verdict] = {}

    def measure(self, finalist: Verdict, trials: int) -> Verdict:
        """The null with ``trials`` calls a side (timed after ``finalist`` unless one is kept)."""
        if trials in self.usable:
            return self.usable[trials]
        if self.stop.is_set():
            raise KeyboardInterrupt
        self.io.events(ev.NullControlStarted, trials=trials)
        null = self.verifier.verify_null(trials, null_timeout(self.settings, finalist, trials))
        blocked = null_blocked(null)
        paired = null.timing_stats.headline_pairs()[0] if blocked is None else None
        if blocked is None:
            self.usable[trials] = null
        self.io.events(
            ev.NullControlFinished,
            trials=trials,
            median=paired.median if paired else None,
            low=paired.low if paired else None,
            high=paired.high if paired else None,
            bar=null_bar(paired) if paired else None,
            note=blocked.why if blocked else "",
        )
        return null
