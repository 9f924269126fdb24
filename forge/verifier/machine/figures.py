"""This device's measured memory bandwidth and fp32 matmul peak, kept in ``machine.json`` with the
conditions they were measured under, and checked against a quick probe where they matter.

A figure measured while other processes loaded the machine reads low (a copy loop sharing two
cores with a busy neighbour read 7.5 GB/s on a machine that gives several times that), and every
roofline after it is wrong. So a measurement reads the machine's load (``timing.contention``)
before and while it runs: a check waits a bounded time for a quiet machine first, and a figure
still measured under load is provisional: kept (a worker's roofline needs some figure) and
measured again at the first check that finds the machine quiet.

A check (``forge doctor``, a session's start) times a quick probe, a fraction of a second, and
compares it with the probe's reading stored beside the figure, taken the same way at the same time
(like with like: the probe's smaller matmul reads below the full one's). A quiet probe off by more
than ``PROBE_TOLERANCE`` measures the figures again; a probe under load never replaces a quiet
figure, since it reads the load, not the machine.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import os
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from enum import StrEnum
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from forge.core.timing_records import Contention
from forge.verifier.machine.contention import LoadMonitor, combined
from forge.verifier.machine.readings import Readings, WorkingSetBandwidth, full_measurement, quick_probe

PROBE_TOLERANCE = 0.25  # a quiet probe further than this (either figure, relative) from its stored reading
QUIET_WAIT_S = 20.0  # how long a check waits for a quiet machine before it measures under load


@dataclass(frozen=True)
class MachineFigures:
    """This device's measured memory bandwidth and fp32 matmul peak, and the bandwidth of a copy
    that stays in its last-level cache (None: not measured, or the cache's size is unknown). The
    copies count their reads and writes; a stream that only reads runs faster (no writes, no
    write-allocate), so the read bandwidths are measured too (None: kept by an older forge).

    ``working_sets`` (a CPU's): the same measured at working sets from 1 MiB to half the last-level
    cache, doubling (smallest first): the size a cache reports is not always the size that behaves as
    one (a VM's guest may be told of a cache far larger than its share of the host's), so the
    bandwidth a warm op gets is read at its own working set, not at the cache's reported size."""

    device_name: str
    bandwidth_gbs: float
    peak_gflops: float
    cache_bandwidth_gbs: float | None = None
    read_bandwidth_gbs: float | None = None
    cache_read_bandwidth_gbs: float | None = None
    working_sets: tuple[WorkingSetBandwidth, ...] = ()
    # a CPU's: writing a tensor the allocator maps fresh (``machine_readings.fresh_write_gbs``)
    fresh_write_gbs: float | None = None

    def at_working_set(self, nbytes: int) -> WorkingSetBandwidth | None:
        """The bandwidths measured at the largest working set not above ``nbytes``: a cache level
        is no faster for more data, so a bound from the nearest smaller size stays under the op's
        own (past it, the verdict says the machine's model is wrong for the op, never the result).
        Below the smallest measured (1 MiB, where a call's fixed costs weigh on a copy), the
        smallest's. None where none were measured (a GPU, or an older forge)."""
        if not self.working_sets:
            return None
        fitting = [w for w in self.working_sets if w.bytes <= nbytes]
        return fitting[-1] if fitting else self.working_sets[0]

    def to_json(self) -> dict[str, Any]:
        """The figures as JSON: ``machine.json``'s entries, and what a session hands its workers."""
        plain = dataclasses.asdict(self)
        plain["working_sets"] = [[w.bytes, w.copy_gbs, w.read_gbs] for w in self.working_sets]
        return plain

    @classmethod
    def from_json(cls, raw: Any) -> MachineFigures:
        """The figures ``raw`` (``to_json``'s, or an older forge's without the later fields) holds;
        KeyError, TypeError or ValueError where it holds none."""
        optional = {
            key: float(raw[key]) if raw.get(key) is not None else None
            for key in ("cache_bandwidth_gbs", "read_bandwidth_gbs", "cache_read_bandwidth_gbs", "fresh_write_gbs")
        }
        sets = tuple(WorkingSetBandwidth(int(b), float(c), float(r)) for b, c, r in raw.get("working_sets") or ())
        return cls(
            str(raw["device_name"]),
            float(raw["bandwidth_gbs"]),
            float(raw["peak_gflops"]),
            **optional,
            working_sets=sets,
        )


@dataclass(frozen=True)
class FiguresEntry:
    """The figures as ``machine.json`` keeps them, with the conditions they were measured under.

    ``quiet``: no other process loaded the machine while they were measured (or the load could not
    be read: no /proc), so they stand until a quiet probe disagrees; otherwise they are provisional.
    An entry written by a forge that kept no conditions reads as provisional, measured at an unknown
    time under an unknown load."""

    figures: MachineFigures
    quiet: bool = False
    measured_at: datetime | None = None
    load: Contention | None = None  # the busiest of the waits' last step, the measurement and the probe
    probe: Readings | None = None  # the quick probe's reading then: later probes are compared with it

    def conditions(self) -> str:
        """When and under what load the figures were measured, and whether they are provisional."""
        if self.measured_at is None:
            return "kept by an older forge, which did not record when or under what load: provisional"
        when = self.measured_at.astimezone(UTC).strftime("%Y-%m-%d %H:%M UTC")
        load = f" ({self.load.detail})" if self.load is not None and self.load.detail else ""
        if self.quiet:
            return f"measured {when} on a quiet machine{load}"
        return f"measured {when} under load{load}: provisional until measured on a quiet machine"

    def to_json(self) -> dict[str, Any]:
        return {
            **self.figures.to_json(),
            "quiet": self.quiet,
            "measured_at": self.measured_at.isoformat() if self.measured_at else None,
            "load": self.load.model_dump() if self.load else None,
            "probe": {"bandwidth_gbs": self.probe.bandwidth_gbs, "peak_gflops": self.probe.peak_gflops}
            if self.probe
            else None,
        }

    @classmethod
    def from_json(cls, raw: Any) -> FiguresEntry | None:
        """The entry ``raw`` holds; None when it cannot be read (measured again)."""
        try:
            figures = MachineFigures.from_json(raw)
            probe = raw.get("probe")
            measured_at = raw.get("measured_at")
            return cls(
                figures,
                quiet=bool(raw.get("quiet", False)),
                measured_at=datetime.fromisoformat(measured_at) if measured_at else None,
                load=Contention.model_validate(raw["load"]) if raw.get("load") else None,
                probe=Readings(float(probe["bandwidth_gbs"]), float(probe["peak_gflops"])) if probe else None,
            )
        except (KeyError, TypeError, ValueError, AttributeError, ValidationError):
            return None


class FiguresCache:
    """``machine.json``: an entry per machine identity (device, its name, threads, torch)."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def _all(self) -> dict[str, Any]:
        with contextlib.suppress(OSError, ValueError):
            found = json.loads(self.path.read_text())
            if isinstance(found, dict):
                return found
        return {}

    def get(self, key: str) -> FiguresEntry | None:
        raw = self._all().get(key)
        return FiguresEntry.from_json(raw) if raw is not None else None

    def put(self, key: str, entry: FiguresEntry) -> None:
        """Written whole and renamed into place: a reader never sees half a file."""
        kept = self._all()
        kept[key] = entry.to_json()
        with contextlib.suppress(OSError):
            self.path.parent.mkdir(parents=True, exist_ok=True)
            tmp = self.path.with_suffix(f".{os.getpid()}.tmp")
            tmp.write_text(json.dumps(kept, indent=1))
            tmp.replace(self.path)


def _under_load(measure: Callable[[], Readings]) -> tuple[Readings, Contention | None]:
    monitor = LoadMonitor([])  # this process's own threads are not load
    start = monitor.sample()
    got = measure()
    return got, monitor.between(start, monitor.sample())


def _wait_for_quiet(limit_s: float) -> Contention | None:
    return LoadMonitor([]).wait_for_quiet(limit_s)


def _now() -> datetime:
    return datetime.now(UTC)


@dataclass(frozen=True)
class Instruments:
    """What measures: the full measurement and the quick probe, the load over a measurement, the
    bounded wait for a quiet machine (its last step's load), and the clock. The machine's own by
    default; tests give stand-ins."""

    measure: Callable[[str], Readings] = full_measurement
    probe: Callable[[str], Readings] = quick_probe
    under_load: Callable[[Callable[[], Readings]], tuple[Readings, Contention | None]] = _under_load
    wait_for_quiet: Callable[[float], Contention | None] = _wait_for_quiet
    now: Callable[[], datetime] = _now


def _quiet(load: Contention | None) -> bool:
    return load is None or not load.busy  # no /proc: nothing is known, and nothing is claimed


def measure_entry(device: str, device_name: str, tools: Instruments, wait_s: float) -> FiguresEntry:
    """The figures measured now, after waiting up to ``wait_s`` for a quiet machine (0: not at
    all), with the load read before and during the measurement and its probe."""
    before = tools.wait_for_quiet(wait_s) if wait_s > 0 else None
    full, during = tools.under_load(lambda: tools.measure(device))
    probe, probing = tools.under_load(lambda: tools.probe(device))
    load = combined([c for c in (before, during, probing) if c is not None])
    figures = MachineFigures(
        device_name,
        full.bandwidth_gbs,
        full.peak_gflops,
        full.cache_gbs,
        full.read_gbs,
        full.cache_read_gbs,
        full.working_sets,
        full.fresh_write_gbs,
    )
    return FiguresEntry(figures, quiet=_quiet(load), measured_at=tools.now(), load=load, probe=probe)


class Recheck(StrEnum):
    """What a check did with the cached figures."""

    MEASURED = "measured"  # none were cached: measured now
    AGREES = "agrees"  # quiet figures, and the probe agrees with its stored reading
    REMEASURED = "remeasured"  # provisional figures, or a quiet probe disagreed: measured again
    KEPT = "kept"  # quiet figures; the probe disagreed, but under load (or the load came back meanwhile)
    PROVISIONAL = "provisional"  # provisional figures, and the machine is loaded still: not measured again


@dataclass(frozen=True)
class FiguresCheck:
    """A check's outcome: the figures to use (``entry``), what was done, and what the probe read
    now and under which load (None when nothing was cached to compare)."""

    entry: FiguresEntry
    recheck: Recheck
    probe: Readings | None = None
    probe_load: Contention | None = None
    replaced: FiguresEntry | None = None  # the entry a re-measurement replaced

    def said(self) -> str:
        """What the check did, in words."""
        now = f" ({self.probe_load.detail})" if self.probe_load is not None and self.probe_load.detail else ""
        if self.recheck is Recheck.MEASURED:
            return "none were cached: measured now"
        if self.recheck is Recheck.AGREES:
            return f"rechecked now: a quick probe agrees within {PROBE_TOLERANCE:.0%}{now}"
        if self.recheck is Recheck.REMEASURED:
            was = self.replaced.figures.bandwidth_gbs if self.replaced is not None else None
            before = f" (were {was:.1f} GB/s)" if was is not None else ""
            return f"rechecked now: measured again on a quiet machine{before}"
        if self.recheck is Recheck.KEPT:
            return f"rechecked now: a quick probe disagreed, but under load{now}: the quiet figures are kept"
        return f"not measured again: the machine is still loaded{now}"


def check_entry(
    cached: FiguresEntry | None, device: str, device_name: str, tools: Instruments, wait_s: float
) -> FiguresCheck:
    """``cached`` checked against a quick probe, or measured (again) where the rules above say so."""
    if cached is None:
        return FiguresCheck(measure_entry(device, device_name, tools, wait_s), Recheck.MEASURED)
    probe, load = tools.under_load(lambda: tools.probe(device))
    if cached.quiet and cached.probe is not None and probe.off_from(cached.probe) <= PROBE_TOLERANCE:
        return FiguresCheck(cached, Recheck.AGREES, probe, load)
    if not _quiet(load):  # it reads the load, not the machine
        return FiguresCheck(cached, Recheck.KEPT if cached.quiet else Recheck.PROVISIONAL, probe, load)
    fresh = measure_entry(device, device_name, tools, wait_s)
    if cached.quiet and not fresh.quiet:  # the load came back while measuring: the quiet figures stand
        return FiguresCheck(cached, Recheck.KEPT, probe, fresh.load)
    return FiguresCheck(fresh, Recheck.REMEASURED, probe, load, replaced=cached)
