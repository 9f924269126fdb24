"""The brief's eager and torch.compile figures are the verifier's own pairs': the reference
verified against itself when the brief is measured, its judged regime's medians put in the brief
(the profile's rows scaled with them, the roofline's fractions from them), the brief process's own
figure kept beside them; and the prompt says which figure it is."""

from __future__ import annotations

from forge.agents.llm.prompts import render
from forge.core.op_brief import CompiledBaseline, EagerProfile, OpBrief, ProfiledOp
from forge.core.roofline_record import Roofline
from forge.core.statuses import TimingRegime, VerdictStatus
from forge.core.timing_records import PairedRatio, TimingSides, TimingStats
from forge.core.verdict import Verdict
from forge.verifier import VerifierService
from forge.verifier.briefing.measure import measure_op_brief
from forge.verifier.briefing.paired_baseline import paired_baseline, with_paired
from tests.conftest import OPS


def _stats(ms: float, trials: int = 15) -> TimingStats:
    return TimingStats(median_ms=ms, trials=trials)


def _null(regime: TimingRegime) -> Verdict:
    sides = TimingSides(
        eager=_stats(1.6),
        compile=_stats(2.0),
        candidate=_stats(1.5),
        warm_eager_time=_stats(1.2),
        warm_candidate=_stats(1.0),
        paired_eager=PairedRatio(pairs=15, median=1.05, low=0.9, high=1.2),
        warm_paired_eager=PairedRatio(pairs=15, median=0.97, low=0.93, high=1.01),
        warm_paired_compile=PairedRatio(pairs=15, median=1.3, low=1.2, high=1.4),
        regime=regime,
    )
    return Verdict(status=VerdictStatus.PASSED, passed=True, timing_stats=sides)


def _brief() -> OpBrief:
    row = ProfiledOp(name="aten::layer_norm", self_ms=0.9, share=0.9, calls=1)
    eager = EagerProfile(median_ms=1.0, calls=21, regime="cold", ops=[row])
    compiled = CompiledBaseline(speedup_vs_eager=0.8, pairs=21, eager_ms=1.0, compiled_ms=1.25, code="", code_chars=0)
    roofline = Roofline(
        bytes=24_000_000, bandwidth_gbs=30.0, peak_gflops=190.0, bound_ms=0.8, fraction_eager=0.8, fraction_compile=0.64
    )
    return OpBrief(device="cpu", eager=eager, compiled=compiled, roofline=roofline, regime="cold")


def test_the_judged_regimes_medians_from_the_null_are_the_briefs():
    cold = paired_baseline(_null(TimingRegime.COLD))
    assert not isinstance(cold, str)
    assert (cold.regime, cold.eager_ms, cold.compiled_ms, cold.pairs) == ("cold", 1.6, 2.0, 15)
    assert cold.null is not None and cold.null.median == 1.05
    warm = paired_baseline(_null(TimingRegime.WARM))
    assert not isinstance(warm, str)
    # warm torch.compile is kept as its ratio to the other worker's calls: 1.3 x 1.0 ms
    assert (warm.regime, warm.eager_ms, warm.compiled_ms) == ("warm", 1.2, 1.3)
    assert warm.null is not None and warm.null.median == 0.97

    brief = with_paired(_brief(), cold)
    assert brief.eager is not None and brief.compiled is not None and brief.roofline is not None
    assert (brief.eager.median_ms, brief.eager.calls) == (1.6, 15)
    assert abs(brief.eager.ops[0].self_ms - 0.9 * 1.6) < 1e-9  # the same share of the pairs' call
    assert (brief.compiled.eager_ms, brief.compiled.compiled_ms, brief.compiled.speedup_vs_eager) == (1.6, 2.0, 0.8)
    assert abs(brief.roofline.fraction_eager - 0.5) < 1e-9 and abs(brief.roofline.fraction_compile - 0.4) < 1e-9
    assert brief.paired is not None and brief.paired.alone_ms == 1.0


def test_a_null_that_failed_gives_no_figure():
    failed = Verdict(status=VerdictStatus.FAILED_CORRECTNESS, passed=False, reason="correctness: differs")
    assert "did not pass" in str(paired_baseline(failed))
    untimed = _null(TimingRegime.COLD).model_copy(update={"timing_meaningful": False})
    assert isinstance(paired_baseline(untimed), str)


def test_the_prompt_says_the_figure_is_the_pairs_and_gives_the_other():
    brief = with_paired(_brief(), paired_baseline(_null(TimingRegime.COLD)))  # type: ignore[arg-type]
    text = render("brief.j2", brief=brief)
    line = next(ln for ln in text.splitlines() if ln.startswith("- eager:"))
    assert line.startswith("- eager: 1.6000 ms a call (median of 15 calls timed as every verdict times eager")
    assert "the same trial read 1.0000 ms" in line and "read 1.05x apart (0.90-1.20x, 95%)" in line
    assert "eager runs at 50% of it" in text
    unpaired = render("brief.j2", brief=_brief())
    assert "timed as the verdicts time the judged cold regime" in unpaired and "read 1.05x apart" not in unpaired


def test_a_session_brief_asks_the_verifier_once_and_keeps_its_pairs(fast_settings):
    """Real: the reference verified against itself in the service's workers; the brief cached with
    it, so the next session on the op reads it back without another null."""
    op = OPS / "small_softmax.py"
    with VerifierService(op, fast_settings, "cpu") as service:
        brief = measure_op_brief(op, "small-softmax-paired", "cpu", fast_settings, service)
    assert brief.paired is not None and brief.eager is not None, brief.missing
    assert brief.eager.median_ms == brief.paired.eager_ms and brief.paired.alone_ms is not None
    assert brief.paired.null is not None and brief.paired.null.pairs >= 5

    class NoNull:
        def verify_null(self, trials: int, timeout: float) -> Verdict:
            raise AssertionError("a cached brief with its pairs asked for another null")

    again = measure_op_brief(op, "small-softmax-paired", "cpu", fast_settings, NoNull())  # type: ignore[arg-type]
    assert again.paired == brief.paired
