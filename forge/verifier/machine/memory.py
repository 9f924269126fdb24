"""How much memory a verification may hold, and what it held.

The bound is the op's own working set: max(1 GiB, 8 x the bytes of one call's inputs and outputs)
per process. Everything a worker holds beyond a case or two (the timing batches, the heap grown
before timed calls) is sized from what is left of that bound, and each process's peak resident
size (the kernel's high-water mark, not a sample) goes into the verdict.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import resource
from pathlib import Path

from forge.core.findings import Findings
from forge.core.statuses import VerdictStatus
from forge.core.verdict import MemoryPeak

FLOOR_BYTES = 1 << 30
# glibc's allocator in the workers: blocks above this are mapped on their own (not from the heap),
# and freed heap memory up to the trim threshold stays in the process (see worker_env.worker_env).
MMAP_THRESHOLD_BYTES = 32 << 20
TRIM_THRESHOLD_BYTES = 1 << 30
WORKING_SET_FACTOR = 8
LIMIT_MARGIN_MIB = 256


def mmap_threshold() -> int:
    """The allocator's mmap threshold in this process: what ``MALLOC_MMAP_THRESHOLD_`` sets (the
    workers set it: ``worker_env``), where glibc takes it (no more than 32 MiB on a 64-bit
    machine); else the most glibc's own rising threshold reaches, 32 MiB. A tensor this large or
    larger is mapped anew by every allocation (``timing.heap_room``)."""
    try:
        asked = int(os.environ.get("MALLOC_MMAP_THRESHOLD_", MMAP_THRESHOLD_BYTES))
    except ValueError:
        return MMAP_THRESHOLD_BYTES
    return asked if 0 < asked <= MMAP_THRESHOLD_BYTES else MMAP_THRESHOLD_BYTES


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


def candidate_limit_mib(bound_mib: int, reference_mib: int | None, working_set: int) -> int:
    """What the candidate's worker may peak at: the op's bound, or the reference's own peak plus
    a margin (256 MiB, or twice one call's data if more) where that is more. The reference worker
    imports the same libraries and holds the same cases; a candidate's peak beyond it and the
    margin is memory the kernel itself takes, which a user's model would run out of."""
    if reference_mib is None:
        return bound_mib
    margin = max(LIMIT_MARGIN_MIB, (2 * max(0, working_set)) >> 20)
    return max(bound_mib, reference_mib + margin)


def record_peaks(v: Findings, candidate_mib: int | None, reference_mib: int | None, working_set: int) -> MemoryPeak:
    """Each process's peak resident size, and the candidate's against its limit
    (``candidate_limit_mib``) as a check in ``v`` that fails the verdict when it is over."""
    bound = budget_bytes(working_set) >> 20 if working_set else None
    limit = candidate_limit_mib(bound, reference_mib, working_set) if bound is not None else None
    peak = MemoryPeak(
        candidate_mib=candidate_mib,
        reference_mib=reference_mib,
        forge_mib=own_peak_mib(),
        bound_mib=bound,
        limit_mib=limit,
    )
    if limit is None or candidate_mib is None:
        return peak
    others = ", ".join(
        f"{name} {mib} MiB"
        for name, mib in (("reference", reference_mib), ("forge", peak.forge_mib))
        if mib is not None
    )
    said = (
        f"peak resident candidate {candidate_mib} MiB, limit {limit} MiB (the larger of the op's bound, max(1 GiB, "
        f"8x the {working_set / 2**20:.1f} MiB a call reads and writes) = {bound} MiB, and the reference's peak plus "
        f"a margin); {others}"
    )
    v.add("memory", peak.within_limit, said)
    if not peak.within_limit:
        v.fail(
            VerdictStatus.FAILED_INTEGRITY,
            f"the candidate's worker peaked at {candidate_mib} MiB, over its limit "
            f"of {limit} MiB: a drop-in kernel may not need far more memory than the reference",
        )
    return peak
