"""The built-in judge: reads a verdict with the history and tells the coder which config to try.

It is the tuner's voice: a diagnosis for failures, the bottleneck for passing candidates (from the
roofline fraction the verifier measured), and the next config from ``tuner.next_configs``.
"""

from __future__ import annotations

from forge.agents.builtin.coder import BuiltinCoder
from forge.agents.builtin.tuner import effective_config, next_configs, trials_from
from forge.agents.roles import CoderContext, Review
from forge.core.feedback import JudgeFeedback
from forge.core.roofline_record import Roofline
from forge.core.verdict import Verdict


def _bottleneck(verdict: Verdict) -> str:
    roof = verdict.roofline or Roofline()
    frac = roof.fraction_candidate
    if not frac:
        return "no roofline estimate for this op; judged on time alone"
    if not roof.holds:
        return "the roofline estimate does not hold for this op (eager beats it); judged on time alone"
    kind = "arithmetic" if "matmul" in roof.bound_by else "memory traffic"
    where = f"{kind}: at {frac:.0%} of the estimated bound ({roof.bound_ms or 0:.3f} ms)"
    if frac >= 0.8:
        return where + " — close to the machine's limit; little left to gain from launch configs"
    if frac < TARGET_FRACTION:
        return where + f" — under {TARGET_FRACTION:.0%} of it: far from the machine's limit, the search goes on"
    return where


# Below this fraction of its bound a kernel is far from the machine's limit: the search goes on
# while rounds and configs remain, and a stop says that it was the configs that ran out.
TARGET_FRACTION = 0.6


def _stop_step(verdict: Verdict) -> str:
    """Why the search stops when every neighbouring config has been tried, against the bound."""
    said = "every neighbouring config of every passing one has been tried; stop"
    roof = verdict.roofline
    frac = roof.fraction_candidate if roof is not None and roof.holds else None
    if verdict.passed and frac is not None and frac < TARGET_FRACTION:
        said += (
            f", at {frac:.0%} of the bound: the built-in coder's schedules for this op have nothing left to try "
            "(an LLM coder, --model, writes others)"
        )
    return said


class BuiltinJudge:
    """Coordinate-descent tuner over the built-in coder's knobs."""

    costs_tokens = False  # its reviews are free, and say why the search stops, in the last round too

    def __init__(self, coder: BuiltinCoder) -> None:
        self.coder = coder

    def review(self, context: CoderContext, verdict: Verdict) -> Review:
        space = self.coder.space()
        if space is None:
            return Review(None, error="the built-in judge only tunes the built-in coder's kernels")
        nxt = next_configs(space, trials_from(context.history), n=1, canonical=self.coder.canonical)
        diagnosis = bottleneck = ""
        if not verdict.passed:
            diagnosis = f"{verdict.status}: {verdict.reason or 'no reason given'}"
        else:
            bottleneck = _bottleneck(verdict)
        if not nxt:
            return Review(
                JudgeFeedback.model_validate(
                    {
                        "diagnosis": diagnosis,
                        "bottleneck": bottleneck,
                        "next_step": _stop_step(verdict),
                        "continue": False,
                    }
                )
            )
        # the knobs that change the kernel it renders (another family's are inert under this one)
        shown = effective_config(space, nxt[0], self.coder.canonical)
        step = ", ".join(f"{k}={v!r}" for k, v in shown.items())
        return Review(JudgeFeedback(diagnosis=diagnosis, bottleneck=bottleneck, next_step=f"try {step}", config=nxt[0]))
