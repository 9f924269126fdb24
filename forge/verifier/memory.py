"""How much memory a verification may hold, and what it held.

The bound is the op's own working set: max(1 GiB, 8 x the bytes of one call's inputs and outputs)
per process. Everything a worker holds beyond a case or two (the timing batches, the heap grown
before timed calls) is sized from what is left of that bound, and each process's peak resident
size (the kernel's high-water mark, not a sample) goes into the verdict.
"""

from __future__ import annotations

import contextlib
import ctypes
import resource
from pathlib import Path

from forge.core.verdict import MemoryPeak, Verdict

FLOOR_BYTES = 1 << 30
# glibc's allocator in the workers: blocks above this are mapped on their own (not from the heap),
# and freed heap memory up to the trim threshold stays in the process (see worker_env.worker_env).
MMAP_THRESHOLD_BYTES = 32 << 20
TRIM_THRESHOLD_BYTES = 1 << 30
WORKING_SET_FACTOR = 8


def budget_bytes(working_set: int) -> int:
    """What one verification process may hold for an op whose call reads and writes ``working_set`` bytes."""
    return max(FLOOR_BYTES, WORKING_SET_FACTOR * max(0, int(working_set)))


def _status_kib(pid: int | str, field: str) -> int | None:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith(field + ":"):
                return int(line.split()[1])
    except (OSError, ValueError, IndexError):
        return None
    return None


def resident_bytes() -> int:
    """This process's resident size now (0 where /proc is not there)."""
    kib = _status_kib("self", "VmRSS")
    return (kib or 0) * 1024


def resident_mib(pid: int) -> int | None:
    """A live process's resident size now (VmRSS), in MiB; None once it is gone."""
    kib = _status_kib(pid, "VmRSS")
    return None if kib is None else kib // 1024


def peak_mib(pid: int) -> int | None:
    """The peak resident size of a live process (its VmHWM), in MiB; None once it is gone."""
    kib = _status_kib(pid, "VmHWM")
    return None if kib is None else kib // 1024


def own_peak_mib() -> int:
    """This process's peak resident size so far, in MiB."""
    return int(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss) // 1024


def release_free_memory() -> None:
    """Give the heap's free pages back to the system (glibc keeps up to its trim threshold, which
    the workers set high so timed calls do not fault): called between phases, so one phase's
    freed memory does not add to the next phase's peak."""
    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL(None).malloc_trim(0)


def record_peaks(v: Verdict, candidate_mib: int | None, reference_mib: int | None, working_set: int) -> None:
    """Each process's peak resident size against the op's bound, in the verdict and as a check
    that never fails it (the candidate's own allocations count in its worker's peak)."""
    peak = MemoryPeak(
        candidate_mib=candidate_mib,
        reference_mib=reference_mib,
        forge_mib=own_peak_mib(),
        bound_mib=budget_bytes(working_set) >> 20 if working_set else None,
    )
    v.memory = peak
    if peak.bound_mib is None:
        return
    said = ", ".join(
        f"{name} {mib} MiB"
        for name, mib in (("candidate", candidate_mib), ("reference", reference_mib), ("forge", peak.forge_mib))
        if mib is not None
    )
    bound = f"bound {peak.bound_mib} MiB: max(1 GiB, 8x the {working_set / 2**20:.1f} MiB a call reads and writes)"
    v.add("memory", peak.within_bound, f"peak resident {said}; {bound}", fatal=False)
