"""The brief's eager and torch.compile figures taken from the verifier's own pairs.

The brief's process times eager with the verifier's trial (``regime_timing``), in one process with
no other side's calls between. The verdicts time it in the reference's worker alternating with the
candidate's, and another process's calls between two of eager's cost eager time there: on the
2-core VM a cold LayerNorm read 1.11 ms in the brief and 1.55-1.80 ms in every verdict's pairs (a
second process doing nothing but the flush between the calls was enough: 0.99 -> 1.35-1.39 ms).
The agents were told a target no verdict would confirm, and a roofline eager seemed to reach (102%).
So the brief asks the verifier for the null control (the reference verified against itself, as
a finalist's null is) and states the pairs' figures; the process's own stays beside them.
"""

from __future__ import annotations

from forge.core.acceptance import timed_while_busy
from forge.core.op_brief import CompiledBaseline, EagerProfile, OpBrief, PairedBaseline
from forge.core.statuses import TimingRegime
from forge.core.timing_records import TimingSides
from forge.core.verdict import Verdict

# Calls a side: the figure is a median beside the agents' own pairs, not a claim.
PAIRED_TRIALS = 15


def paired_baseline(null: Verdict) -> PairedBaseline | str:
    """Eager's and torch.compile's times in ``null``'s pairs (the reference verified against itself)
    in its judged regime, or why there are none."""
    if not null.passed or not null.timing_meaningful:
        return f"the reference verified against itself did not pass or was not timed ({null.reason or null.status})"
    if timed_while_busy(null):  # not cached: the next session on the op measures it again
        return "the reference verified against itself was timed while other processes loaded the machine"
    ts = null.timing_stats
    warm = ts.regime is TimingRegime.WARM
    eager = ts.warm_eager_time if warm else ts.eager
    if eager is None:
        return "the reference verified against itself gave no eager time"
    return PairedBaseline(
        regime="warm" if warm else "cold",
        pairs=eager.trials,
        eager_ms=eager.median_ms,
        compiled_ms=_compiled_ms(ts, warm),
        null=ts.headline_pairs()[0],
    )


def _compiled_ms(ts: TimingSides, warm: bool) -> float | None:
    if not warm:
        return ts.compile.median_ms if ts.compile is not None else None
    # warm: torch.compile's calls are kept as ratios to the other worker's (the same reference)
    ratio, other = ts.warm_paired_compile, ts.warm_candidate
    return ratio.median * other.median_ms if ratio is not None and other is not None else None


def with_paired(brief: OpBrief, paired: PairedBaseline) -> OpBrief:
    """``brief`` with eager's and torch.compile's figures (and eager's roofline fraction) those of
    ``paired``; the brief process's own eager kept as ``paired.alone_ms``."""
    update: dict[str, object] = {}
    alone = brief.eager.median_ms if brief.eager is not None else None
    if brief.eager is not None:
        update["eager"] = _eager(brief.eager, paired)
    if brief.compiled is not None and paired.compiled_ms:
        update["compiled"] = _compiled(brief.compiled, paired)
    roofline = brief.roofline
    if roofline is not None and roofline.bound_ms:
        fractions = {"fraction_eager": roofline.bound_ms / paired.eager_ms}
        if roofline.fraction_compile is not None and paired.compiled_ms:
            fractions["fraction_compile"] = roofline.bound_ms / paired.compiled_ms
        update["roofline"] = roofline.model_copy(update=fractions)
    update["paired"] = paired.model_copy(update={"alone_ms": alone})
    return brief.model_copy(update=update)


def _eager(eager: EagerProfile, paired: PairedBaseline) -> EagerProfile:
    """The profile's rows are shares of a call: scaled to the pairs' median with it."""
    scale = paired.eager_ms / eager.median_ms if eager.median_ms > 0 else 1.0
    ops = [o.model_copy(update={"self_ms": o.self_ms * scale}) for o in eager.ops]
    update = {"median_ms": paired.eager_ms, "calls": paired.pairs, "regime": paired.regime, "ops": ops}
    return eager.model_copy(update=update)


def _compiled(compiled: CompiledBaseline, paired: PairedBaseline) -> CompiledBaseline:
    assert paired.compiled_ms is not None
    return compiled.model_copy(
        update={
            "eager_ms": paired.eager_ms,
            "compiled_ms": paired.compiled_ms,
            "speedup_vs_eager": paired.eager_ms / paired.compiled_ms,
            "pairs": paired.pairs,
        }
    )


__all__ = ["PAIRED_TRIALS", "paired_baseline", "with_paired"]
