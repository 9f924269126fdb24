"""The reference worker's scheduling, watched while a candidate lives.

A candidate runs as the same user as the reference worker, so it may call
``os.sched_setaffinity`` or ``os.setpriority`` on the reference worker's threads (their ids are in
/proc): eager pinned to one of two cores runs about half as fast, and the candidate would read 2x
faster without being faster. Nothing about such a change shows in the outputs, the clocks or the
machine's load. So the parent records each reference thread's CPU affinity and nice value before
the candidate's worker starts, compares them after every eager call and at the end, and a change
fails the verdict (``reference_untouched``). A reference worker found changed is not kept for
the next verification: its state would carry into the next candidate's timing and the null
control.

A thread that appears later (torch's OpenMP pool starts on the first parallel call) must have what
the worker's main thread had at the start: threads inherit their creator's affinity and nice.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

from forge.core.findings import Findings
from forge.core.statuses import VerdictStatus


@dataclass(frozen=True)
class ThreadSched:
    """One thread's scheduling: the CPUs it may run on and its nice value."""

    cpus: frozenset[int]
    nice: int


def thread_sched(pid: int) -> dict[int, ThreadSched]:
    """Each live thread of ``pid``, by thread id (threads that end while being read are skipped;
    an ended process has none)."""
    try:
        tids = [int(t) for t in os.listdir(f"/proc/{pid}/task")]
    except OSError:
        return {}
    out: dict[int, ThreadSched] = {}
    for tid in tids:
        try:
            out[tid] = ThreadSched(frozenset(os.sched_getaffinity(tid)), os.getpriority(os.PRIO_PROCESS, tid))
        except OSError:  # ended in between
            continue
    return out


def _describe(tid: int, was: ThreadSched, now: ThreadSched) -> str:
    parts = []
    if now.cpus != was.cpus:
        parts.append(f"CPU affinity {sorted(was.cpus)} -> {sorted(now.cpus)}")
    if now.nice != was.nice:
        parts.append(f"nice {was.nice} -> {now.nice}")
    return f"thread {tid}: " + ", ".join(parts)


class SchedGuard:
    """The reference worker's threads as they were before a candidate's worker started."""

    def __init__(self, pid: int) -> None:
        self.pid = pid
        self.before = thread_sched(pid)
        main = self.before.get(pid)
        self.inherited = main if main is not None else ThreadSched(frozenset(os.sched_getaffinity(0)), 0)
        self.changed: str | None = None  # the first change seen: it stays (a restore does not undo it)

    def check(self) -> str | None:
        """What changed since then (the first change found, kept once seen), else None."""
        if self.changed is None:  # an ended worker has no threads to compare
            for tid, now in thread_sched(self.pid).items():
                was = self.before.get(tid, self.inherited)
                if now != was:
                    self.changed = _describe(tid, was, now)
                    break
        return self.changed


def record_reference_sched(v: Findings, changed: str | None) -> None:
    """The ``reference_untouched`` check: a change to the reference worker's scheduling while the
    candidate lived fails the verdict's integrity."""
    detail = (
        f"the reference worker's scheduling was changed while the candidate lived ({changed}): eager would "
        "be timed slower than it runs"
        if changed
        else "the reference worker's CPU affinity and nice values unchanged while the candidate lived"
    )
    v.add("reference_untouched", changed is None, detail)
    if changed is not None:
        v.fail(VerdictStatus.FAILED_INTEGRITY, f"reference_untouched: {detail}")
