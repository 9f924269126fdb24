"""Whether the machine was free while forge timed: what Linux already reports in /proc.

Over a span the parent reads the machine's CPU accounting (``/proc/stat``: busy and steal time,
runnable tasks) and the CPU time of forge's own processes (the parent and both workers, from
``/proc/<pid>/stat``). Busy time that is not forge's is other processes' load; steal time is CPU
the hypervisor gave to other guests. Either, beyond a small allowance for the kernel's own
housekeeping, means the timed calls competed for the cores. Elsewhere (no /proc) nothing is known
and nothing is claimed.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from forge.core.timing_records import Contention

# Other processes' CPU use, in cores, that counts as a busy machine. Idle system daemons and the
# kernel's threads use a few hundredths of a core; a competing job uses most of one.
BUSY_OTHER_CORES = 0.2
BUSY_STEAL = 0.05  # a twentieth of the CPU time taken by other guests
# /proc counts in clock ticks (10 ms): over a short span one tick is a large fraction of a core,
# so load counts only when it adds up to this many ticks (a short span detects only heavy load).
_MIN_TICKS = 3
_TICKS = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100


@dataclass(frozen=True)
class CpuSample:
    wall_s: float
    busy_s: float  # all cores, every process (user, nice, system, irq, softirq)
    steal_s: float
    total_s: float  # all accounted time, idle included
    ours_s: float  # forge's own processes
    running: int  # runnable tasks now (procs_running), forge's included
    # each of forge's live processes' own figure (one that ended is left out: ``between`` counts
    # those alive at both ends, so a worker killed mid-span is not read as its lifetime's load)
    per_pid: tuple[tuple[int, float], ...] = ()


def _machine() -> tuple[float, float, float, int] | None:
    try:
        with open("/proc/stat") as f:
            lines = f.read().splitlines()
    except OSError:
        return None
    fields = [int(v) for v in lines[0].split()[1:]]
    user, nice, system, idle, iowait, irq, softirq = (fields + [0] * 7)[:7]
    steal = fields[7] if len(fields) > 7 else 0
    running = next((int(ln.split()[1]) for ln in lines if ln.startswith("procs_running")), 0)
    busy = user + nice + system + irq + softirq
    total = busy + idle + iowait + steal
    return busy / _TICKS, steal / _TICKS, total / _TICKS, running


def _process_cpu_s(pid: int) -> float | None:
    """A process's CPU seconds so far; None once it has ended."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            after_name = f.read().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return None
    return (int(after_name[11]) + int(after_name[12])) / _TICKS  # utime, stime


class LoadMonitor:
    """Samples the machine around timed spans; ``pids``: forge's worker processes."""

    def __init__(self, pids: Sequence[int], cores: int | None = None) -> None:
        self.pids = [os.getpid(), *pids]
        self.cores = cores or os.cpu_count() or 1

    def sample(self) -> CpuSample | None:
        machine = _machine()
        if machine is None:
            return None
        busy, steal, total, running = machine
        read = ((p, _process_cpu_s(p)) for p in self.pids)
        per_pid = tuple((p, s) for p, s in read if s is not None)
        ours = sum(s for _, s in per_pid)
        return CpuSample(time.monotonic(), busy, steal, total, ours, running, per_pid)

    def between(self, start: CpuSample | None, end: CpuSample | None, retried: int = 0) -> Contention | None:
        """The load over a span; None where /proc is unavailable."""
        if start is None or end is None or end.wall_s <= start.wall_s:
            return None
        wall = end.wall_s - start.wall_s
        other_s = max(0.0, (end.busy_s - start.busy_s) - _ours_between(start, end))
        other = other_s / wall if other_s * _TICKS >= _MIN_TICKS else 0.0
        accounted = end.total_s - start.total_s
        steal_s = end.steal_s - start.steal_s
        steal = steal_s / accounted if accounted > 0 and steal_s * _TICKS >= _MIN_TICKS else 0.0
        running = max(start.running, end.running)
        return judged(
            Contention(
                cores=self.cores,
                other_cores=round(other, 3),
                steal=round(steal, 3),
                max_running=running,
                retried=retried,
            )
        )

    def wait_for_quiet(
        self, limit_s: float, step_s: float = 0.5, stop: Callable[[], bool] | None = None
    ) -> Contention | None:
        """Sample in steps until a step is quiet, ``limit_s`` passes or ``stop`` says so; the last step's load."""
        deadline = time.monotonic() + limit_s
        last = None
        while True:
            start = self.sample()
            time.sleep(step_s)
            last = self.between(start, self.sample())
            if last is None or not last.busy or time.monotonic() >= deadline or (stop is not None and stop()):
                return last


def _ours_between(start: CpuSample, end: CpuSample) -> float:
    """forge's own CPU seconds over a span, process by process where both samples read it: one
    killed in between (a dropped rival) leaves the sum, not its whole lifetime's CPU with it."""
    if not start.per_pid or not end.per_pid:
        return end.ours_s - start.ours_s
    began = dict(start.per_pid)
    return sum(max(0.0, s - began[p]) for p, s in end.per_pid if p in began)


def wait_for_quiet_machine(limit_s: float, stop: Callable[[], bool]) -> tuple[Contention | None, float]:
    """Wait up to ``limit_s`` (or until ``stop`` says so) for a second in which no other process
    loads the machine (this process's own work aside): the last second's load, and the seconds
    waited."""
    began = time.monotonic()
    load = LoadMonitor([]).wait_for_quiet(limit_s, step_s=1.0, stop=stop)
    return load, time.monotonic() - began


def judged(c: Contention) -> Contention:
    """``c`` with ``busy`` and its sentence set from its figures."""
    busy = c.other_cores >= BUSY_OTHER_CORES or c.steal >= BUSY_STEAL
    detail = f"other processes used {c.other_cores:.2f} of {c.cores} cores"
    if c.steal:
        detail += f", the hypervisor stole {c.steal:.0%} of CPU time"
    return c.model_copy(update={"busy": busy, "detail": detail})


def combined(spans: Sequence[Contention]) -> Contention | None:
    """One record for several spans (batches): the busiest span's figures, retries summed."""
    if not spans:
        return None
    worst = max(spans, key=lambda c: (c.busy, c.other_cores, c.steal))
    return judged(
        worst.model_copy(
            update={"retried": sum(c.retried for c in spans), "max_running": max(c.max_running for c in spans)}
        )
    )
