"""The parent's statistics over what both workers timed: per-side figures, speedups, paired
ratios per cache regime, the roofline fraction and the launch cost, written into the timing
step's record (``steps.TimingFigures``), which the verdict is built from."""

from __future__ import annotations

from forge.core.pairing import paired_ratio
from forge.core.roofline_record import Roofline
from forge.core.statuses import TimingRegime
from forge.core.timing_records import Contention, PairedRatio, TimingStats
from forge.verifier.parent.steps import TimingFigures


def record_speedups(
    v: TimingFigures,
    cand_ns: list[int],
    eager_ns: list[int],
    compile_ns: list[int],
    compile_error: str | None,
) -> None:
    """Timing statistics and speedups."""
    cand, eager = TimingStats.from_ns(cand_ns), TimingStats.from_ns(eager_ns)
    compiled = TimingStats.from_ns(compile_ns) if compile_ns else None
    if compiled is None and compile_error:
        v.warnings.append(f"torch.compile baseline failed: {compile_error}")
    for side, stats in (("candidate", cand), ("eager", eager), ("compile", compiled)):
        if stats is not None:
            setattr(v.timing_stats, side, stats.rounded())
            setattr(v.timings_ms, side, round(stats.median_ms, 6))
    cand_ms = cand.median_ms
    if not v.timing_meaningful:
        v.add(
            "timing",
            True,
            "Triton ran under TRITON_INTERPRET=1 on CPU: timings are not meaningful, no speedup",
            fatal=False,
        )
        return
    v.speedup_vs_eager = round(eager.median_ms / cand_ms, 4) if cand_ms > 0 else None
    if compiled is not None and cand_ms > 0:
        v.speedup_vs_compile = round(compiled.median_ms / cand_ms, 4)
    spread = cand.iqr_ms / cand_ms if cand_ms else 0.0
    v.add(
        "timing",
        True,
        f"median {cand_ms:.4f} ms over {cand.trials} trials (IQR {spread:.1%})",
        fatal=False,
    )


def record_pairs(
    v: TimingFigures, cand_ns: list[int], eager_ns: list[int], compile_ns: list[int], contention: Contention | None
) -> None:
    """The per-pair ratios (the speedups the verdict reports, being immune to load that lands on
    both calls of a pair) and the machine's load while they were timed."""
    v.timing_stats.contention = contention
    if contention is not None and contention.busy:
        note = f"the machine was busy while timing: {contention.detail}"
        if contention.retried:
            note += f" (after timing {contention.retried} batch(es) again)"
        v.warnings.append(note + ("; the speedup is not accepted" if contention.enforced else ""))
        v.add("quiet_machine", False, note, fatal=False)
    elif contention is not None:
        v.add("quiet_machine", True, contention.detail, fatal=False)
    if not v.timing_meaningful or len(eager_ns) != len(cand_ns):
        return
    v.timing_stats.paired_eager = paired_ratio(eager_ns, cand_ns)
    if v.timing_stats.paired_eager is not None:
        v.speedup_vs_eager = v.timing_stats.paired_eager.median
    if compile_ns and len(compile_ns) == len(cand_ns):
        v.timing_stats.paired_compile = paired_ratio(compile_ns, cand_ns)
        if v.timing_stats.paired_compile is not None:
            v.speedup_vs_compile = v.timing_stats.paired_compile.median


def fits_half_cache(working_set: int | None, cache: int | None) -> bool:
    """The warm regime's rule: one call's inputs and outputs (``working_set``) fit in half the
    last-level cache (``cache``), as a model's activations of that size are still there when the
    op runs. The verdicts and the op brief both judge by it."""
    return working_set is not None and cache is not None and working_set <= cache // 2


def record_regimes(
    v: TimingFigures,
    cand_ns: list[int],
    eager_ns: list[int],
    compile_ns: list[int],
    working_set: int | None,
    cache: int | None,
) -> None:
    """The warm regime's per-pair ratios, and which regime the verdict is judged in: warm when one
    call's inputs and outputs fit in half the last-level cache (a model's activations that small
    are still cached when the op runs: the layer before just wrote them), cold otherwise. The
    headline speedups become that regime's."""
    ts = v.timing_stats
    ts.working_set_bytes, ts.cache_bytes = working_set, cache
    if not v.timing_meaningful or not cand_ns or len(eager_ns) != len(cand_ns):
        return
    ts.warm_paired_eager = paired_ratio(eager_ns, cand_ns)
    ts.warm_candidate = TimingStats.from_ns(cand_ns).rounded()
    ts.warm_eager_time = TimingStats.from_ns(eager_ns).rounded()
    if compile_ns and len(compile_ns) == len(cand_ns):
        ts.warm_paired_compile = paired_ratio(compile_ns, cand_ns)
    fits = fits_half_cache(working_set, cache)
    ts.regime = TimingRegime.WARM if fits and ts.warm_paired_eager is not None else TimingRegime.COLD
    eager, compiled = ts.headline_pairs()
    if eager is not None:
        v.speedup_vs_eager = eager.median
    if ts.regime is TimingRegime.WARM:
        v.speedup_vs_compile = compiled.median if compiled is not None else None
    where = (
        f"one call's data ({(working_set or 0) / 1e6:.2f} MB) {'fits in' if fits else 'exceeds'} half the "
        f"last-level cache ({(cache or 0) / 1e6:.1f} MB)"
        if cache
        else "the cache size is unknown"
    )
    v.add(
        "regimes",
        True,
        f"{regime_line('cold', ts.paired_eager, ts.paired_compile)}; "
        f"{regime_line('warm', ts.warm_paired_eager, ts.warm_paired_compile)}; judged {ts.regime}: {where}",
        fatal=False,
    )


def record_roofline(v: TimingFigures, roofline: Roofline | None) -> None:
    """The roofline bound and the fractions of it the candidate and eager reach, in the regime the
    verdict is judged in (after ``record_regimes``): cold, the data comes from DRAM; warm, from the
    last-level cache, at its measured bandwidth where it was measured. ``roofline``: the reference
    worker's estimate (bytes, FLOPs, the machine's figures, both bounds)."""
    if not v.timing_meaningful or v.timing_stats.candidate is None:
        return
    roof = roofline.model_copy() if roofline is not None else Roofline()
    v.roofline = roof
    if not roof.bound_ms:
        return
    ts = v.timing_stats
    cand_ms = v.timings_ms.candidate
    eager_ms = ts.eager.median_ms if ts.eager is not None else None
    compile_ms = ts.compile.median_ms if ts.compile is not None else None
    warm, pairs = ts.warm_candidate, ts.warm_paired_eager
    cached = ts.regime is TimingRegime.WARM and bool(roof.cache_bound_ms)
    if cached and warm is not None and pairs is not None:
        # eager's (and torch.compile's) warm calls are kept only as ratios to the candidate's: their
        # times from the pairs
        cand_ms, eager_ms = warm.median_ms, warm.median_ms * pairs.median
        compiled = ts.warm_paired_compile
        compile_ms = warm.median_ms * compiled.median if compiled is not None else None
    roof = roof.beside_eager(eager_ms)
    v.roofline = roof
    if cached and warm is not None and pairs is not None and roof.cache_bound_ms:
        roof.level, roof.bound_ms = "cache", roof.cache_bound_ms
    bound = roof.bound_ms or 0.0
    roof.fraction_candidate = round(bound / cand_ms, 4) if cand_ms else None
    roof.fraction_eager = round(bound / eager_ms, 4) if eager_ms else None
    roof.fraction_compile = round(bound / compile_ms, 4) if compile_ms else None
    reads = f", {roof.cache_read_bandwidth_gbs:.1f} GB/s reading alone" if roof.cache_read_bandwidth_gbs else ""
    where = ""
    if roof.level:
        where = f" from {roof.cache_bandwidth_gbs:.1f} GB/s{reads}, measured for {roof.cache_measured} (judged warm)"
    said = (
        f"estimated bound {roof.bound_ms:.4f} ms{where} ({(roof.bytes or 0) / 1e6:.1f} MB, "
        f"{(roof.flops or 0) / 1e9:.2f} GFLOP of matmul{roof.unneeded_note}{roof.transcendental_note}"
        f"{roof.second_read_note}{roof.fresh_note}); "
        "candidate at "
        f"{roof.fraction_candidate or 0:.0%} of it"
    )
    if not roof.holds:
        # Past the bound is the model of the machine failing, never a suspect result: the
        # outputs are checked, in every timed call too (``timed_outputs``).
        said += (
            f", eager at {roof.fraction_eager or 0:.0%}: past 100%, the estimate does not hold for this op (data "
            f"that stays in a nearer cache, the bytes or FLOPs it counts, or this machine's {roof.bound_by}): the "
            "model of the machine is wrong here, not the result, and no fraction of it is a fact"
        )
    v.add("roofline", roof.holds, said, fatal=False)


def regime_line(name: str, eager: PairedRatio | None, compiled: PairedRatio | None) -> str:
    if eager is None:
        return f"{name}: not timed"
    line = f"{name} {eager.median:.2f}x eager ({eager.low:.2f}-{eager.high:.2f})"
    return line + (f", {compiled.median:.2f}x torch.compile" if compiled is not None else "")


def record_launch_cost(v: TimingFigures, cand_launch_ns: list[int], eager_launch_ns: list[int]) -> None:
    """CUDA: the host time one call spends launching its work, against eager's, as a warning when
    it exceeds the call's device time. The speedups are device time (the launch hides behind work
    already queued); a launch-bound kernel only keeps them where the caller keeps the GPU busy."""
    device = v.timing_stats.candidate
    if not cand_launch_ns or not v.timing_meaningful or device is None:
        return
    launch = TimingStats.from_ns(cand_launch_ns)
    v.timing_stats.candidate_launch = launch.rounded()
    eager = "not measured"
    if eager_launch_ns:
        eager_launch = TimingStats.from_ns(eager_launch_ns)
        v.timing_stats.eager_launch = eager_launch.rounded()
        eager = f"{eager_launch.median_ms * 1e3:.1f} us"
    device_ms = device.median_ms
    bound = launch.median_ms > device_ms
    v.add(
        "launch_cost",
        not bound,
        f"host time per call {launch.median_ms * 1e3:.1f} us (eager {eager}), device time {device_ms * 1e3:.1f} us"
        + (
            " — launch-bound at this size: the speedup holds where the model keeps the GPU busy (queued work, "
            "CUDA graphs); a lone call from Python waits on the launch"
            if bound
            else ""
        ),
        fatal=False,
    )
