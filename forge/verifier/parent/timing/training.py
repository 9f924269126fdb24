"""Training steps of the op, timed (``forge verify --train``): the same paired, ABBA-ordered
calls in both regimes as the forward's, each call a forward with the inputs requiring grad and a
backward of fixed output gradients (``gradients.training_step``), against eager's and
torch.compile's steps. Written into the verdict as its ``training_step`` figures and a check.

A kernel whose backward was verified is used where autograd needs gradients only when its step
is not measurably slower than eager's (``acceptance.training_standing``): a faster forward with
a slower backward would slow the user's training while the bank claimed a win.
"""

from __future__ import annotations

import statistics

from forge.core.pairing import paired_ratio
from forge.core.statuses import TimingRegime, VerdictStatus
from forge.core.timing_records import PairedRatio, TrainingStepTimes
from forge.verifier.parent import checks
from forge.verifier.parent.steps import TrainingTimed
from forge.verifier.parent.timing.candidate_times import CandidateTimes
from forge.verifier.parent.timing.paired import PairedTimes
from forge.verifier.parent.timing.statistics import regime_line


def _ratio(baseline: list[int], cand: list[int]) -> PairedRatio | None:
    return paired_ratio(baseline, cand) if baseline and len(baseline) == len(cand) else None


def _median_ms(times_ns: list[int]) -> float | None:
    return round(statistics.median(times_ns) / 1e6, 6) if times_ns else None


def _busy(paired: PairedTimes) -> str | None:
    """The load that makes the steps' figures say nothing (as it does the forward's), or None."""
    load = paired.contention
    return load.detail if load is not None and load.busy and load.enforced else None


def record_training_step(
    v: TrainingTimed, kept: CandidateTimes, paired: PairedTimes, regime: TimingRegime | None
) -> None:
    """The training steps' paired ratios (judged in the forward's regime), the check saying them,
    and the outputs the timed steps returned (wrong ones fail the verdict, as timed forward calls do)."""
    regime = regime or TimingRegime.COLD
    warm = regime is TimingRegime.WARM
    steps = TrainingStepTimes(
        eager=_ratio(paired.cold.eager, kept.times),
        compile=_ratio(paired.cold.compiled, kept.times),
        warm_eager=_ratio(paired.warm.eager, kept.warm),
        warm_compile=_ratio(paired.warm.compiled, kept.warm),
        candidate_ms=_median_ms(kept.warm if warm else kept.times),
        eager_ms=_median_ms(paired.warm.eager if warm else paired.cold.eager),
        regime=regime,
        busy=_busy(paired),
        compile_error=paired.compile_error,
    )
    v.training_step = steps
    if kept.bad_outputs is not None:
        said = f"the outputs and gradients of timed training steps: {kept.bad_outputs}"
        v.add("training_outputs", False, said)
        v.fail(VerdictStatus.FAILED_INTEGRITY, f"training_outputs: {kept.bad_outputs}")
        return
    clock = checks.wall_clock_discrepancy(kept.ticks, kept.called)
    if clock is not None:
        v.add("training_wall_clock", False, clock)
        v.fail(VerdictStatus.FAILED_INTEGRITY, f"training_wall_clock: {clock}")
        return
    eager, _ = steps.headline()
    slower = eager is not None and eager.high < 1.0
    said = f"{regime_line('cold', steps.eager, steps.compile)}; "
    said += f"{regime_line('warm', steps.warm_eager, steps.warm_compile)}; judged {regime}"
    said += "; slower than eager's step: the reference keeps training" if slower else ""
    said += f"; the machine was busy: {steps.busy}" if steps.busy else ""
    said += f"; torch.compile's step failed: {steps.compile_error}" if steps.compile_error else ""
    v.add("training_step", not slower and not steps.busy, said, fatal=False)
