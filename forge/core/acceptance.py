"""The acceptance rule: when a passing candidate counts as faster than eager PyTorch."""

from __future__ import annotations

from forge.core.verdict import Verdict


def beats_eager(verdict: Verdict) -> tuple[bool, str]:
    """A passed verdict is accepted only when the candidate beats eager by more than the noise:
    the candidate's upper timing quartile must lie below eager's lower quartile. (Verdicts stored
    before quartiles were recorded fall back to median ± IQR/2.)"""
    if not verdict.passed:
        return False, f"did not pass ({verdict.status})"
    if not verdict.timing_meaningful:
        return False, "its timings are not meaningful on this device (e.g. Triton in the CPU interpreter)"
    cand, eager = verdict.timing_stats.candidate, verdict.timing_stats.eager
    if cand is None or eager is None:
        return False, "no timings"
    speedup = eager.median_ms / cand.median_ms if cand.median_ms else 0.0
    if cand.upper_ms < eager.lower_ms:
        return True, f"{speedup:.2f}x faster than eager, beyond the measured noise"
    return False, f"{speedup:.2f}x eager is within the measured noise (quartiles overlap) or slower"
