"""Run-wide limits (budget, time) and the acceptance rule for kernels."""

from __future__ import annotations

import contextlib
import signal
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any


@dataclass
class Limits:
    """Shared by every session of one ``forge optimize`` run (several ops share one budget)."""

    budget_usd: float | None = None
    time_limit_s: float | None = None
    started: float = field(default_factory=time.monotonic)
    tokens: int = 0
    cost_usd: float = 0.0
    cost_unknown: bool = False  # some call's price was unknown: the sum is a lower bound
    stop_requested: threading.Event = field(default_factory=threading.Event)

    def charge(self, tokens: int, cost_usd: float | None, known: bool = True) -> None:
        self.tokens += tokens
        if cost_usd is not None:
            self.cost_usd += cost_usd
        if not known:
            self.cost_unknown = True

    def exceeded(self) -> str | None:
        """'budget' or 'time_limit' when a limit is reached, else None."""
        if self.budget_usd is not None and self.cost_usd >= self.budget_usd:
            return "budget"
        if self.time_limit_s is not None and time.monotonic() - self.started >= self.time_limit_s:
            return "time_limit"
        return None

    def remaining_s(self) -> float | None:
        if self.time_limit_s is None:
            return None
        return max(0.0, self.time_limit_s - (time.monotonic() - self.started))

    @property
    def cost_reported(self) -> float | None:
        """The total, or None when a price was unknown and nothing was priced at all."""
        return None if self.cost_unknown and self.cost_usd == 0 else round(self.cost_usd, 6)


@contextlib.contextmanager
def ctrl_c_stops(limits: Limits) -> Iterator[None]:
    """Ctrl-C ends the run cleanly even when it lands where Python swallows the KeyboardInterrupt.

    A SIGINT that arrives while a worker is being forked raises inside an at-fork hook, where the
    exception is printed and dropped. So the signal also sets ``stop_requested`` (checked after
    every verification and before every round) and ends the running workers at once.
    """
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def on_sigint(signum: int, frame: Any) -> None:
        from forge.verifier.process import kill_all

        limits.stop_requested.set()
        kill_all()
        raise KeyboardInterrupt

    previous = signal.signal(signal.SIGINT, on_sigint)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)


def beats_eager(verdict: dict[str, Any]) -> tuple[bool, str]:
    """A passed verdict is accepted only when the candidate beats eager by more than the noise:
    the candidate's upper timing quartile must lie below eager's lower quartile. (Verdicts stored
    before quartiles were recorded fall back to median ± IQR/2.)"""
    if verdict.get("status") != "passed":
        return False, f"did not pass ({verdict.get('status')})"
    if not verdict.get("timing_meaningful", True):
        return False, "its timings are not meaningful on this device (e.g. Triton in the CPU interpreter)"
    stats = verdict.get("timing_stats") or {}
    cand, eager = stats.get("candidate"), stats.get("eager")
    if not cand or not eager:
        return False, "no timings"
    cand_hi = cand.get("q3_ms") or cand["median_ms"] + cand["iqr_ms"] / 2
    eager_lo = eager.get("q1_ms") or eager["median_ms"] - eager["iqr_ms"] / 2
    speedup = eager["median_ms"] / cand["median_ms"] if cand["median_ms"] else 0.0
    if cand_hi < eager_lo:
        return True, f"{speedup:.2f}x faster than eager, beyond the measured noise"
    return False, f"{speedup:.2f}x eager is within the measured noise (quartiles overlap) or slower"
