"""How the machine's figures are read: a copy and a read of a size, the library's best square
matmul, and a copy and a read at each working set up to half the last-level cache, each the best
of a few timed calls (``full_measurement``), and the quick probe a check compares with its own
earlier reading (``quick_probe``). ``machine_figures`` keeps what they read."""

from __future__ import annotations

import dataclasses
import mmap
import time
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from typing import Any


@dataclass(frozen=True)
class WorkingSetBandwidth:
    """A copy whose source and destination together are ``bytes``, repeated back to back so that
    it stays wherever that much data stays (a cache level, or DRAM past the last), and a read of
    as many bytes alone: the bandwidths a warm op with that working set gets its data at."""

    bytes: int
    copy_gbs: float
    read_gbs: float


@dataclass(frozen=True)
class Readings:
    """What one measurement read: memory bandwidth (GB/s) and fp32 matmul throughput (GFLOP/s),
    and (a full measurement) the last-level cache's copy bandwidth."""

    bandwidth_gbs: float
    peak_gflops: float
    cache_gbs: float | None = None
    read_gbs: float | None = None
    cache_read_gbs: float | None = None
    working_sets: tuple[WorkingSetBandwidth, ...] = ()
    fresh_write_gbs: float | None = None  # writing memory mapped fresh (a CPU's: ``fresh_write_gbs``)

    def off_from(self, other: Readings) -> float:
        """How far these readings are from ``other``'s: the larger relative difference of the two."""
        return max(abs(self.bandwidth_gbs / other.bandwidth_gbs - 1.0), abs(self.peak_gflops / other.peak_gflops - 1.0))


def best_call_seconds(device: str, fn: Callable[[], Any], reps: int, inner: int = 1) -> float:
    """Seconds a call of ``fn``: the best of ``reps`` timings of ``inner`` calls back to back."""
    import torch

    fn()
    times = []
    for _ in range(reps):
        if device == "cuda":
            torch.cuda.synchronize()
        t0 = time.perf_counter()
        for _ in range(inner):
            fn()
        if device == "cuda":
            torch.cuda.synchronize()
        times.append((time.perf_counter() - t0) / inner)
    return min(times)


def _copy_gbs(device: str, nbytes: int, reps: int, inner: int = 1) -> float:
    """The bandwidth of copying ``nbytes`` (read and write counted), best of ``reps``."""
    import torch

    n = max(nbytes // 4, 1024)
    src = torch.ones(n, device=device)
    dst = torch.empty_like(src)
    return 2 * (n * 4) / best_call_seconds(device, lambda: dst.copy_(src), reps, inner) / 1e9


def _read_only_gbs(device: str, nbytes: int, reps: int, inner: int = 1) -> float:
    """The bandwidth of reading ``nbytes`` once (a sum over them), best of ``reps``."""
    import torch

    src = torch.ones(max(nbytes // 4, 1024), device=device)
    return src.numel() * 4 / best_call_seconds(device, src.sum, reps, inner) / 1e9


FRESH_WRITE_BYTES = 64 << 20  # above glibc's largest mmap threshold (32 MiB): mapped anew by every call


def fresh_write_gbs(reps: int) -> float:
    """The bandwidth of writing 64 MiB just mapped, best of ``reps``: glibc maps a tensor that large
    anew for every allocation, so each write first takes a page fault per 4 KiB page and the
    kernel's zeroing of it (in a user's loop as in the workers: ``timing.heap_room``). An op's
    output that large is written at this rate, not at a copy's. Each repetition maps its own
    private memory: a worker's heap keeps what it frees (its trim threshold), and a 64 MiB tensor
    there could land on memory already touched."""
    import torch

    def write_fresh() -> None:
        with mmap.mmap(-1, FRESH_WRITE_BYTES, flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS) as mapped:
            view = torch.frombuffer(mapped, dtype=torch.uint8)
            view.fill_(1)
            del view  # the mapping closes only once no tensor exports it

    return FRESH_WRITE_BYTES / best_call_seconds("cpu", write_fresh, reps) / 1e9


def working_set_sizes(cache_bytes: int, dram_bytes: int) -> list[int]:
    """The working sets ``working_sets`` measures: 1 MiB, doubling, up to half the last-level
    cache (and never past the DRAM copy's size, which already reads memory)."""
    sizes, size = [], 1 << 20
    while size <= min(cache_bytes // 2, dram_bytes):
        sizes.append(size)
        size *= 2
    return sizes


def working_sets(device: str, cache_bytes: int, dram_bytes: int, reps: int) -> tuple[WorkingSetBandwidth, ...]:
    """A copy of each of ``working_set_sizes`` and a read of as many bytes, best of ``reps`` or
    more timings each, a small one's of several calls back to back (one copy of 1 MiB takes
    microseconds, near the clock's and the dispatcher's own cost, which still weigh on it)."""
    found = []
    for size in working_set_sizes(cache_bytes, dram_bytes):
        times, inner = max(reps, min(64, (64 << 20) // size)), max(1, (8 << 20) // size)
        copy, read = _copy_gbs(device, size // 2, times, inner), _read_only_gbs(device, size, times, inner)
        found.append(WorkingSetBandwidth(size, copy, read))
    return tuple(found)


def _read(
    device: str, copy_mib: int, sizes: tuple[int, ...], reps: int, cache_bytes: int | None = None, reads: bool = False
) -> Readings:
    """A copy's bandwidth and the fastest of square matmuls of ``sizes``; with ``cache_bytes``
    (the last-level cache's size), a copy whose source and destination fill half of it, back to
    back, so that it stays in the cache: the bandwidth a warm op's data comes at. With ``reads``,
    a read of each size alone too, and (with ``cache_bytes``) both at each of ``working_sets``."""
    import torch

    dram = _copy_gbs(device, copy_mib << 20, reps)
    peak = 0.0
    for m in sizes:
        x = torch.randn(m, m, device=device)
        peak = max(peak, 2 * m**3 / best_call_seconds(device, partial(torch.matmul, x, x), reps) / 1e9)
    cached = _copy_gbs(device, cache_bytes // 4, 4 * reps) if cache_bytes else None
    if not reads:
        return Readings(dram, peak, cached)
    read = _read_only_gbs(device, copy_mib << 20, reps)
    cache_read = _read_only_gbs(device, cache_bytes // 2, 4 * reps) if cache_bytes else None
    # Not on a GPU: a copy of a few MiB in its L2 is a microsecond of device time, which the host's
    # launch and synchronize around it would outweigh, where a candidate is timed by device events
    # (its warm bound reads the half-L2 figure above).
    sets = working_sets(device, cache_bytes, copy_mib << 20, reps) if cache_bytes and device != "cuda" else ()
    return Readings(dram, peak, cached, read, cache_read, sets)


def full_measurement(device: str, cache_bytes: int | None = None) -> Readings:
    """A copy well beyond any cache, and the library's best path, all of the process's threads:
    large square GEMMs (oneDNN/MKL on CPU, cuBLAS on CUDA), the fastest size counted. One 1024
    matmul on the CPU read 2-3x under what an op's own GEMMs or convolutions reached, and eager then
    "ran at 237% of the peak". With ``cache_bytes``, the last-level cache's copy bandwidth too."""
    if device == "cuda":  # the caching allocator keeps freed memory: no output is mapped fresh
        return _read(device, 256, (4096, 8192), reps=5, cache_bytes=cache_bytes, reads=True)
    found = _read(device, 128, (1024, 2048), reps=5, cache_bytes=cache_bytes, reads=True)
    # best of 20 (15 ms each): an op whose reads hide under its faults writes at this rate, and best
    # of 5 read 3% under what such an op's fastest calls reached, which then beat the bound
    return dataclasses.replace(found, fresh_write_gbs=fresh_write_gbs(reps=20))


def quick_probe(device: str) -> Readings:
    """A smaller copy (twice a common last-level cache on a CPU) and one small matmul, two timed
    calls each: a tenth of a second on a quiet CPU. It reads below the full measurement, and is
    only ever compared with its own earlier reading."""
    return _read(device, 256, (2048,), reps=2) if device == "cuda" else _read(device, 64, (512,), reps=2)


__all__ = [
    "Readings",
    "WorkingSetBandwidth",
    "best_call_seconds",
    "fresh_write_gbs",
    "full_measurement",
    "quick_probe",
    "working_set_sizes",
    "working_sets",
]
