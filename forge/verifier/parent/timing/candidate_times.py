"""The candidate's replies to timed calls, gathered batch by batch and checked as they come."""

from __future__ import annotations

from forge.core.findings import Findings
from forge.core.statuses import TimingRegime, VerdictStatus
from forge.verifier.parent import checks
from forge.verifier.parent.timing.paired import BatchTimes
from forge.verifier.processes.worker_process import Ending, WorkerGone
from forge.verifier.protocol import TimingBatchReply


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
        self.thread_names: set[str] = set()
        self.bad_outputs: str | None = None
        self.batches = 0

    def take(self, inputs: TimingBatchReply, batch: BatchTimes, regime: TimingRegime) -> None:
        reply = batch.cand
        self.batches += 1
        k = len(inputs.sets)
        # Its series have one length (``TimingReply`` checks that): that of the batch it timed.
        if reply is None or len(reply.times_ns) != k:
            raise WorkerGone(Ending("protocol", f"malformed timing reply from the worker: expected {k} timings"))
        self.called += reply.times_ns
        (self.warm if regime is TimingRegime.WARM else self.times).extend(reply.times_ns)
        self.host += reply.host_ns
        self.window += reply.window_ns
        self.launch += reply.launch_ns
        self.ticks += batch.ticks
        bad = checks.timed_outputs_mismatch(inputs.expected, reply.outputs, self.tol, inputs.sets, inputs.behind)
        self.tampered.update(reply.facts.clock_tampering)
        if reply.facts.first_output_overwritten and self.bad_outputs is None:
            self.bad_outputs = (
                f"batch {self.batches}: the first timed call's output, still held, changed as later calls ran "
                "(every call returns one buffer of the candidate's)"
            )
        self.threads = max(self.threads, reply.facts.new_native_threads)
        self.thread_names.update(reply.facts.new_thread_names)
        if bad and self.bad_outputs is None:
            self.bad_outputs = f"batch {self.batches}: {bad}"


def clock_failure(kept: CandidateTimes, device: str) -> str | None:
    """What the worker's own timings show against the parent's clock (and, on CUDA, against the
    events' window), or timing functions it replaced; None when they agree."""
    clock = checks.wall_clock_discrepancy(kept.ticks, kept.called)
    if clock is None and device == "cuda":
        clock = checks.escaped_events(kept.window, kept.host)
    if kept.tampered:
        clock = f"timing functions replaced: {', '.join(sorted(kept.tampered))}" + (f"; {clock}" if clock else "")
    return clock


def record_timing_checks(v: Findings, kept: CandidateTimes, device: str) -> None:
    """What the candidate's timed replies showed, as the timing step's checks: its outputs, its clocks
    against the parent's, threads it left running."""
    v.add(
        "timed_outputs",
        kept.bad_outputs is None,
        kept.bad_outputs or f"all {len(kept.called)} timed calls (fresh inputs, cold and warm) correct",
    )
    clock = clock_failure(kept, device)
    v.add("wall_clock", clock is None, clock or "worker timings agree with the parent's clock")
    named = f" ({', '.join(sorted(kept.thread_names))})" if kept.thread_names else ""
    threads = f"{kept.threads} new native thread(s){named} left running after the timed calls"
    if kept.threads:
        v.add("no_background_threads", False, threads)
    for name, failure in (("timed_outputs", kept.bad_outputs), ("wall_clock", clock)):
        if failure:
            v.fail(VerdictStatus.FAILED_INTEGRITY, f"{name}: {failure}")
    if kept.threads:
        v.fail(VerdictStatus.FAILED_INTEGRITY, f"no_background_threads: {threads}")
