"""The speed-of-light estimate a verdict carries: the op's bytes, matmul FLOPs and transcendental
evaluations against this machine's measured bandwidths, matmul peak and exp rate, and the
fraction of that bound the candidate, eager and torch.compile's code reach. A typed record stored
inside a verdict's JSON and read back leniently, as the verdict is."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, model_serializer

from forge.core.timing_records import LENIENT, without_none


def memory_s(
    nbytes: int,
    bytes_read: int | None,
    copy_gbs: float,
    read_gbs: float | None,
    fresh: int = 0,
    fresh_gbs: float | None = None,
) -> float:
    """Seconds to move ``nbytes`` at a copy's bandwidth (its reads and writes counted); with the
    bytes read and the read bandwidth, the reads at that and each byte written at what a copy's
    write costs beyond its read (2/copy - 1/read): a copy's bound is then a copy's time, and an op
    that only reads is bound by reading (a copy's figure put it at half its speed or less). With
    ``fresh_gbs``, the larger of that and the time of writing the ``fresh`` bytes (outputs the
    allocator maps anew every call, each page faulted in on its first touch) at that rate: not their
    sum, since a kernel's reads overlapped its faults in part (an elementwise product of two 64 MiB
    tensors took 15.7 ms, its reads 3.5 ms and a fresh 64 MiB fill 13.7 ms on their own); a fresh
    write costs at least a touched one, so the first term still counts them as written."""
    if fresh and fresh_gbs:
        return max(memory_s(nbytes, bytes_read, copy_gbs, read_gbs), fresh / (fresh_gbs * 1e9))
    if bytes_read is None or not read_gbs:
        return nbytes / (copy_gbs * 1e9)
    # a sum is a lower bound on what reading alone reaches: never below a copy's counted rate, so
    # that no op's bound is looser than the copy's figure alone made it
    read_gbs = max(read_gbs, copy_gbs)
    per_written = max(2 / copy_gbs - 1 / read_gbs, 0.0) / 1e9
    return bytes_read / (read_gbs * 1e9) + max(nbytes - bytes_read, 0) * per_written


class Roofline(BaseModel):
    """The speed-of-light estimate: the op's bytes and FLOPs against this machine's measured
    bandwidth and matmul peak, and the fraction of it the candidate and eager reach."""

    model_config = LENIENT
    bytes: int | None = None
    bytes_read: int | None = None  # of ``bytes``: the inputs and the state read (the rest is written)
    flops: int | None = None  # matmul and convolution multiply-adds some output needs, 2 per MAC
    # matmul work the reference does that no output needs (a causal mask's half: see needed_matmul)
    unneeded_flops: int | None = None
    transcendentals: int | None = None  # elements through exp, log, tanh, erf, ... (no peak prices them)
    device_name: str | None = None
    bandwidth_gbs: float | None = None
    peak_gflops: float | None = None
    bound_ms: float | None = None
    fraction_candidate: float | None = None
    fraction_eager: float | None = None
    fraction_compile: float | None = None  # torch.compile's code for the op, in the same regime
    # a copy's measured bandwidth where one call's data stays in a cache: at the working set
    # ``cache_working_set`` (the largest measured not above ``bytes``), or (None) half the last-level cache
    cache_bandwidth_gbs: float | None = None
    read_bandwidth_gbs: float | None = None  # a read alone, from DRAM (None: not measured)
    cache_read_bandwidth_gbs: float | None = None  # a read alone, where the cache's copy was measured
    cache_working_set: int | None = None
    cache_bound_ms: float | None = None  # the bound where one call's data stays in that cache
    # "cache": the op is judged warm and ``bound_ms`` is the cache's bound; None: DRAM's
    level: str | None = None
    # the measured matmul peak that eager's own call beat (``peak_gflops`` is then eager's rate:
    # a peak a library call exceeds bounds nothing); None: the measured peak stands
    measured_peak_gflops: float | None = None
    # bytes the op's math needs read a second time (after a reduction over groups of
    # ``reread_group_bytes`` of them, larger than the cache keeps between its reads), counted in
    # ``bound_ms`` (DRAM's) and, those past the fastest cache level, in ``cache_bound_ms``
    reread_bytes: int | None = None
    reread_group_bytes: int | None = None
    cache_reread_bytes: int | None = None
    # of the bytes written, the outputs so large (a CPU's, 32 MiB or more) that the allocator maps
    # them anew every call, in a user's loop as in the workers, and the rate a fresh mapping is
    # written at on this machine (each page faulted in): both bounds count them at that rate
    fresh_bytes: int | None = None
    fresh_write_gbs: float | None = None

    def memory_s(self, cache: bool, copy_gbs: float, read_gbs: float | None) -> float:
        """Seconds to move the op's bytes, and those it reads again, at these bandwidths (the
        cache's: ``cache``)."""
        again = (self.cache_reread_bytes if cache else self.reread_bytes) or 0
        read = self.bytes_read + again if self.bytes_read is not None else None
        return memory_s(
            (self.bytes or 0) + again, read, copy_gbs, read_gbs, self.fresh_bytes or 0, self.fresh_write_gbs
        )

    @property
    def fresh_note(self) -> str:
        """ "; its 67.11 MB of output is mapped fresh ..." where the bound counts such outputs, else ""."""
        if not (self.fresh_bytes and self.fresh_write_gbs):
            return ""
        return (
            f"; its {self.fresh_bytes / 1e6:.2f} MB of output (tensors of 32 MiB or more) are mapped fresh by the "
            "allocator on every call, in a user's loop as here, so each page is faulted in and zeroed on its "
            f"first write: this machine writes a fresh mapping at {self.fresh_write_gbs:.1f} GB/s (measured), "
            "and the bound is at least those bytes' time at that rate (an output kept and reused across calls "
            "fails the fresh-outputs check)"
        )

    @property
    def holds(self) -> bool:
        """False when eager or the candidate runs faster than the bound allows: the estimate is
        then wrong for this op (data that stays in cache, the bytes or FLOPs it counts, or the
        measured peak), and no fraction of it is a fact."""
        return all(f is None or f <= 1.0 for f in (self.fraction_eager, self.fraction_candidate, self.fraction_compile))

    @property
    def second_read_note(self) -> str:
        """ "; its math reads 16.78 MB of it a second time (...)" where the judged bound counts a
        second read, else ""."""
        cache = self.level == "cache"
        again = self.cache_reread_bytes if cache else self.reread_bytes
        if not again:
            return ""
        keeps = "the fastest cache level measured keeps" if cache else "the last-level cache keeps"
        groups = f" of {self.reread_group_bytes / 1e6:.2f} MB" if self.reread_group_bytes and not cache else ""
        return (
            f"; its math reads {again / 1e6:.2f} MB of it a second time (it uses a reduction's result beside "
            f"the data reduced, in groups{groups} larger than {keeps} between the two reads; what it keeps is "
            "not counted again): the bound counts that second read"
        )

    @property
    def transcendental_note(self) -> str:
        """ ", 8.4 M transcendental evaluations (not in the bound)" where the op makes any, else ""."""
        if not self.transcendentals:
            return ""
        return (
            f", {self.transcendentals / 1e6:.2f} M transcendental evaluations (exp, log, tanh, ...: not in the bound)"
        )

    @property
    def unneeded_note(self) -> str:
        """ " (and 0.27 GFLOP no output needs, left out: ...)" where the reference does such work."""
        if not self.unneeded_flops:
            return ""
        return (
            f" (its reference does {self.unneeded_flops / 1e9:.3f} GFLOP more that no output needs, left out: "
            "scores a mask removes, products with weights that are zero on every draw)"
        )

    @property
    def cache_measured(self) -> str:
        """Where the in-cache bandwidths were measured, in words."""
        if not self.cache_working_set:
            return "a copy that stays in the last-level cache"
        mib = f"{self.cache_working_set / 2**20:.0f} MiB"
        if self.bytes is not None and self.cache_working_set > self.bytes:
            return f"a copy of {mib} kept in cache (the smallest measured; this op moves {self.bytes / 1e6:.2f} MB)"
        return (
            f"a copy of {mib} kept in cache (the largest measured not above this op's {(self.bytes or 0) / 1e6:.2f} MB)"
        )

    def beside_eager(self, eager_ms: float | None) -> Roofline:
        """This estimate with its matmul peak raised to eager's own rate where eager's whole call
        does the op's FLOPs faster than the measured peak allows (a GEMM benchmark that missed the
        library's best kernel for the shape: eager's matmul ran at 336 GFLOP/s where the peak read
        326), both bounds computed again at that rate; ``measured_peak_gflops`` keeps the measured
        figure. Called before ``level`` is set: ``bound_ms`` is DRAM's then."""
        if not (self.flops and eager_ms and self.peak_gflops) or self.flops / (eager_ms * 1e6) <= self.peak_gflops:
            return self
        rate = self.flops / (eager_ms * 1e6)
        compute_s = self.flops / (rate * 1e9)

        def bound(cache: bool, copy_gbs: float | None, read_gbs: float | None) -> float | None:
            if not copy_gbs:
                return None
            return round(max(self.memory_s(cache, copy_gbs, read_gbs), compute_s) * 1e3, 6)

        return self.model_copy(
            update={
                "peak_gflops": round(rate, 3),
                "measured_peak_gflops": self.measured_peak_gflops or self.peak_gflops,
                "bound_ms": bound(False, self.bandwidth_gbs, self.read_bandwidth_gbs) or round(compute_s * 1e3, 6),
                "cache_bound_ms": bound(True, self.cache_bandwidth_gbs, self.cache_read_bandwidth_gbs),
            }
        )

    @property
    def bound_by(self) -> str:
        """What limits the op on this machine: the larger of its bytes over the measured bandwidth
        (or its outputs mapped fresh over the rate of writing them) and its FLOPs over the measured
        matmul peak (the terms of ``bound_ms``)."""
        bandwidth = self.cache_bandwidth_gbs if self.level == "cache" else self.bandwidth_gbs
        read = self.cache_read_bandwidth_gbs if self.level == "cache" else self.read_bandwidth_gbs
        memory = self.memory_s(self.level == "cache", bandwidth, read) if self.bytes and bandwidth else 0.0
        compute = self.flops / (self.peak_gflops * 1e9) if self.flops and self.peak_gflops else 0.0
        fresh = (self.fresh_bytes or 0) / (self.fresh_write_gbs * 1e9) if self.fresh_write_gbs else 0.0
        if memory < compute:
            return (
                "eager's own matmul rate, above the measured peak"
                if self.measured_peak_gflops
                else "measured matmul peak"
            )
        if fresh and fresh >= memory:
            return "the measured rate of writing memory mapped fresh"
        return "measured in-cache bandwidth" if self.level == "cache" else "measured memory bandwidth"

    @model_serializer(mode="wrap")
    def _present_only(self, handler: Any) -> dict[str, Any]:
        return without_none(handler(self))
