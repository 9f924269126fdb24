"""The candidate's replies to timed calls, gathered batch by batch and checked as they come."""

from __future__ import annotations

from typing import Any

from forge.core.statuses import TimingRegime, VerdictStatus
from forge.core.verdict import Verdict
from forge.verifier import checks
from forge.verifier.process import Ending, WorkerGone
from forge.verifier.timing.paired import BatchTimes

# What a malformed reply from the untrusted worker raises while it is read (a protocol breach).
MALFORMED = (TypeError, ValueError, KeyError, AttributeError, IndexError, RuntimeError)


class CandidateTimes:
    """The candidate's side of every kept timing batch, and what its replies showed."""

    def __init__(self, tol: dict[str, float] | None) -> None:
        self.tol = tol
        self.times: list[int] = []  # cold calls
        self.warm: list[int] = []  # warm calls
        self.called: list[int] = []  # every call, in the order the ticks came
        self.host: list[int] = []
        self.window: list[int] = []
        self.launch: list[int] = []
        self.ticks: list[float] = []
        self.tampered: set[str] = set()
        self.threads = 0
        self.bad_outputs: str | None = None
        self.batches = 0

    def take(self, timing: dict[str, Any], batch: BatchTimes, regime: TimingRegime) -> None:
        msg = batch.cand
        self.batches += 1
        try:
            k = len(timing["sets"])
            times = ns_list(msg.get("times_ns"), k)
            self.called += times
            if regime is TimingRegime.WARM:
                self.warm += times
            else:
                self.times += times
            self.host += ns_list(msg.get("host_ns"), k)
            self.window += ns_list(msg.get("window_ns"), k)
            self.launch += ns_list(msg.get("launch_ns"), k)
            self.ticks += batch.ticks
            facts = dict(msg.get("facts") or {})
            bad = checks.timed_outputs_mismatch(
                timing["expected"], list(msg.get("outputs") or []), self.tol, timing["sets"]
            )
            self.tampered.update(str(t) for t in facts.get("clock_tampering") or [])
            self.threads = max(self.threads, int(facts.get("new_native_threads", 0)))
        except MALFORMED as exc:
            raise WorkerGone(Ending("protocol", f"malformed timing reply from the worker: {exc!r}")) from None
        if bad and self.bad_outputs is None:
            self.bad_outputs = f"batch {self.batches}: {bad}"


def record_timing_checks(v: Verdict, kept: CandidateTimes, device: str) -> None:
    """What the candidate's timed replies showed, as the verdict's checks: its outputs, its clocks
    against the parent's, threads it left running."""
    v.add(
        "timed_outputs",
        kept.bad_outputs is None,
        kept.bad_outputs or f"all {len(kept.called)} timed calls (fresh inputs, cold and warm) correct",
    )
    clock = checks.wall_clock_discrepancy(kept.ticks, kept.called)
    if clock is None and device == "cuda":
        clock = checks.escaped_events(kept.window, kept.host)
    if kept.tampered:
        clock = f"timing functions replaced: {', '.join(sorted(kept.tampered))}" + (f"; {clock}" if clock else "")
    v.add("wall_clock", clock is None, clock or "worker timings agree with the parent's clock")
    if kept.threads:
        v.add("no_background_threads", False, f"{kept.threads} new native thread(s) alive after the timed calls")
    for name, failure in (("timed_outputs", kept.bad_outputs), ("wall_clock", clock)):
        if failure:
            v.fail(VerdictStatus.FAILED_INTEGRITY, f"{name}: {failure}")
    if kept.threads:
        v.fail(VerdictStatus.FAILED_INTEGRITY, "no_background_threads: threads left running after timed calls")


def ns_list(value: Any, n: int) -> list[int]:
    """``n`` non-negative nanosecond counts from a worker's reply (ValueError otherwise)."""
    if not isinstance(value, list) or len(value) != n:
        raise ValueError(f"expected {n} timings")
    out = [int(v) for v in value]
    if any(v < 0 for v in out):
        raise ValueError("negative timing")
    return out
