"""The machine's measured figures: measured when the machine is quiet, kept with the conditions
they were measured under, and checked against a quick probe. The load, the measurements and the
clock are stand-ins (``Instruments``): nothing here loads the machine or times anything."""

from __future__ import annotations

import json
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path

import pytest

from forge.core.timing_records import Contention
from forge.verifier.machine import facts as machine
from forge.verifier.machine.figures import QUIET_WAIT_S, FiguresEntry, Instruments, Recheck
from forge.verifier.machine.readings import Readings

QUIET = Contention(cores=2, other_cores=0.0, busy=False, detail="other processes used 0.00 of 2 cores")
LOADED = Contention(cores=2, other_cores=1.9, busy=True, detail="other processes used 1.90 of 2 cores")
WHEN = datetime(2025, 6, 1, 14, 2, tzinfo=UTC)


class FakeMachine:
    """A machine whose load and speed the test sets: under load it reads ``loaded_share`` of its
    quiet figures. Counts the full measurements and the bounded waits it was asked for."""

    def __init__(self, bandwidth: float = 40.0, peak: float = 100.0, loaded_share: float = 0.2) -> None:
        self.bandwidth, self.peak, self.loaded_share = bandwidth, peak, loaded_share
        self.loaded = False
        self.measured = 0
        self.waits: list[float] = []

    def _readings(self, scale: float) -> Readings:
        share = self.loaded_share if self.loaded else 1.0
        return Readings(self.bandwidth * share * scale, self.peak * share * scale)

    def measure(self, device: str) -> Readings:
        self.measured += 1
        return self._readings(1.0)

    def probe(self, device: str) -> Readings:
        return self._readings(0.5)  # the probe's small matmul reads below the full one: compared like with like

    def under_load(self, fn: Callable[[], Readings]) -> tuple[Readings, Contention | None]:
        return fn(), LOADED if self.loaded else QUIET

    def wait_for_quiet(self, limit_s: float) -> Contention | None:
        self.waits.append(limit_s)
        return LOADED if self.loaded else QUIET

    def tools(self) -> Instruments:
        return Instruments(self.measure, self.probe, self.under_load, self.wait_for_quiet, lambda: WHEN)


def _check(box: FakeMachine, cache: Path) -> machine.FiguresCheck:
    return machine.checked_figures("cpu", 2, cache, box.tools(), wait_s=20.0)


def test_figures_measured_under_load_are_provisional_and_replaced_by_a_quiet_measurement(tmp_path):
    box = FakeMachine()
    box.loaded = True
    first = _check(box, tmp_path)
    assert first.recheck is Recheck.MEASURED and box.waits == [20.0]  # it waited for quiet, in vain
    assert not first.entry.quiet and first.entry.figures.bandwidth_gbs == 8.0
    assert "under load (other processes used 1.90 of 2 cores): provisional" in first.entry.conditions()

    still = _check(box, tmp_path)  # loaded still: not measured again, and still marked provisional
    assert still.recheck is Recheck.PROVISIONAL and box.measured == 1 and still.entry == first.entry

    box.loaded = False
    quiet = _check(box, tmp_path)
    assert quiet.recheck is Recheck.REMEASURED and quiet.replaced == first.entry
    assert quiet.entry.quiet and quiet.entry.figures.bandwidth_gbs == 40.0 and quiet.entry.measured_at == WHEN
    assert "measured again on a quiet machine (were 8.0 GB/s)" in quiet.said()
    # kept, and what a worker's roofline reads from now on
    assert machine.measured_figures("cpu", 2, tmp_path).bandwidth_gbs == 40.0
    again = _check(box, tmp_path)
    assert again.recheck is Recheck.AGREES and box.measured == 2


def test_a_probe_under_load_does_not_overwrite_quiet_figures(tmp_path):
    box = FakeMachine()
    assert _check(box, tmp_path).entry.quiet
    box.loaded = True  # the probe reads a fifth of the stored reading: the load's doing
    kept = _check(box, tmp_path)
    assert kept.recheck is Recheck.KEPT and box.measured == 1
    assert kept.entry.figures.bandwidth_gbs == 40.0 and kept.probe is not None and kept.probe.bandwidth_gbs == 4.0
    assert "under load (other processes used 1.90 of 2 cores): the quiet figures are kept" in kept.said()
    stored = FiguresEntry.from_json(next(iter(json.loads((tmp_path / "machine.json").read_text()).values())))
    assert stored is not None and stored.quiet and stored.figures.bandwidth_gbs == 40.0


def test_a_quiet_probe_that_disagrees_measures_again_and_a_close_one_does_not(tmp_path):
    box = FakeMachine()
    _check(box, tmp_path)
    box.bandwidth = 44.0  # 10% off: within the tolerance
    assert _check(box, tmp_path).recheck is Recheck.AGREES and box.measured == 1
    box.bandwidth = 20.0  # the memory got slower (another DIMM layout, a new VM): half the stored reading
    moved = _check(box, tmp_path)
    assert moved.recheck is Recheck.REMEASURED and moved.entry.figures.bandwidth_gbs == 20.0 and box.measured == 2


def test_a_load_that_comes_back_while_measuring_again_keeps_the_quiet_figures(tmp_path):
    box = FakeMachine()
    _check(box, tmp_path)
    box.bandwidth = 20.0
    real_measure = box.measure

    def loaded_meanwhile(device: str) -> Readings:
        box.loaded = True
        return real_measure(device)

    box.measure = loaded_meanwhile  # type: ignore[method-assign]
    kept = _check(box, tmp_path)
    assert kept.recheck is Recheck.KEPT and kept.entry.figures.bandwidth_gbs == 40.0
    assert machine.measured_figures("cpu", 2, tmp_path).bandwidth_gbs == 40.0


def test_an_old_machine_json_is_read_and_measured_again_when_quiet(tmp_path):
    key, _name = machine._identity("cpu", 2)
    old = {key: {"device_name": "AMD EPYC|2", "bandwidth_gbs": 7.46, "peak_gflops": 43.6}, "cpu|other|1|x": 5}
    (tmp_path / "machine.json").write_text(json.dumps(old))
    # a worker reads it as it is
    assert machine.measured_figures("cpu", 2, tmp_path) == machine.MachineFigures("AMD EPYC|2", 7.46, 43.6)
    box = FakeMachine()
    box.loaded = True
    kept = _check(box, tmp_path)
    assert kept.recheck is Recheck.PROVISIONAL and kept.entry.figures.bandwidth_gbs == 7.46
    assert "did not record when or under what load: provisional" in kept.entry.conditions()
    box.loaded = False
    fresh = _check(box, tmp_path)
    assert fresh.recheck is Recheck.REMEASURED and fresh.entry.quiet and fresh.entry.figures.bandwidth_gbs == 40.0
    kept_file = json.loads((tmp_path / "machine.json").read_text())
    assert kept_file["cpu|other|1|x"] == 5  # another machine's entry is left as it was


def test_an_unreadable_machine_json_is_measured_again(tmp_path):
    (tmp_path / "machine.json").write_text("{not json")
    box = FakeMachine()
    assert _check(box, tmp_path).recheck is Recheck.MEASURED
    key, _name = machine._identity("cpu", 2)
    (tmp_path / "machine.json").write_text(json.dumps({key: {"device_name": "x", "bandwidth_gbs": "fast"}}))
    assert _check(box, tmp_path).recheck is Recheck.MEASURED and box.measured == 2


def test_an_entry_round_trips_through_json():
    entry = FiguresEntry(machine.MachineFigures("gpu", 4000.0, 50000.0), True, WHEN, QUIET, Readings(3900.0, 40000.0))
    assert FiguresEntry.from_json(json.loads(json.dumps(entry.to_json()))) == entry
    reads = machine.MachineFigures(
        "cpu", 25.0, 300.0, 27.0, read_bandwidth_gbs=45.0, cache_read_bandwidth_gbs=60.0, fresh_write_gbs=4.5
    )
    with_reads = FiguresEntry(reads, True, WHEN, QUIET, Readings(24.0, 280.0))
    assert FiguresEntry.from_json(json.loads(json.dumps(with_reads.to_json()))) == with_reads
    said = "measured 2025-06-01 14:02 UTC on a quiet machine (other processes used 0.00 of 2 cores)"
    assert entry.conditions() == said


def test_the_cpu_topology_tells_smt_siblings_from_cores(tmp_path):
    def cpu(n: int, core: int) -> None:
        topo = tmp_path / f"cpu{n}" / "topology"
        topo.mkdir(parents=True)
        (topo / "physical_package_id").write_text("0\n")
        (topo / "core_id").write_text(f"{core}\n")

    for n, core in enumerate((0, 1, 0, 1)):  # four CPUs, two physical cores: siblings 0/2, 1/3
        cpu(n, core)
    said = machine.cpu_topology([0, 1, 2, 3], tmp_path)
    assert said is not None and said.startswith("4 CPUs on 2 physical cores: 2 are SMT siblings of another"), said
    assert machine.cpu_topology([0, 1], tmp_path) == (
        "2 CPUs on 2 physical cores: no two are SMT siblings (as the OS sees them)"
    )
    assert machine.cpu_topology([0, 7], tmp_path) is None  # /sys says nothing of CPU 7


def test_the_last_level_caches_bandwidth_is_kept_with_the_figures(tmp_path):
    """A full measurement reads the last-level cache's copy bandwidth too; it is cached beside the
    DRAM figures, and an entry from before it was measured reads back without it (None)."""

    class CachedMachine(FakeMachine):
        def measure(self, device: str) -> Readings:
            self.measured += 1
            return Readings(self.bandwidth, self.peak, cache_gbs=150.0)

    box = CachedMachine()
    first = _check(box, tmp_path)
    assert first.entry.figures.cache_bandwidth_gbs == 150.0
    again = _check(box, tmp_path)  # read back from machine.json, the probe agreeing
    assert again.recheck is Recheck.AGREES and again.entry.figures.cache_bandwidth_gbs == 150.0 and box.measured == 1
    raw = first.entry.to_json()
    del raw["cache_bandwidth_gbs"]  # what an older forge wrote
    old = FiguresEntry.from_json(raw)
    assert old is not None and old.figures.cache_bandwidth_gbs is None and old.figures.bandwidth_gbs == 40.0


def test_a_full_measurement_reads_the_read_bandwidths_beside_the_copies():
    from forge.verifier.machine.readings import _read

    got = _read("cpu", 8, (64,), reps=1, cache_bytes=4 << 20, reads=True)
    # wide bands, as one read of a few MiB on a loaded machine can wait ms for a core (0.38 GB/s seen
    # beside the suite, 160 quiet); a rate off by a unit (MB/s read as GB/s, or TB/s) leaves them
    assert got.read_gbs is not None and 0.01 < got.read_gbs < 2_000, got
    assert got.cache_read_gbs is not None and 0.01 < got.cache_read_gbs < 5_000, got
    assert _read("cpu", 8, (64,), reps=1).read_gbs is None  # the quick probe: copies and a matmul only


def test_a_full_measurement_reads_a_copy_and_a_read_at_each_working_set():
    from forge.verifier.machine.readings import _read, working_set_sizes

    got = _read("cpu", 8, (64,), reps=1, cache_bytes=4 << 20, reads=True)
    assert [w.bytes for w in got.working_sets] == [1 << 20, 2 << 20]  # up to half the cache
    assert all(0.01 < w.copy_gbs < 5_000 and 0.01 < w.read_gbs < 5_000 for w in got.working_sets), got.working_sets
    # a guest told of a 480 MiB cache: measured up to the DRAM copy's size, where DRAM is read anyway
    assert working_set_sizes(480 << 20, 128 << 20) == [1 << k << 20 for k in range(8)]
    assert working_set_sizes(1 << 20, 128 << 20) == []  # half the cache is below the smallest
    # not on a GPU: a few MiB in its L2 is a microsecond of device time, under the host's own launch and sync
    assert _read("cpu", 8, (64,), reps=1, cache_bytes=4 << 20, reads=True).working_sets


def _ladder(*points: tuple[int, float, float]) -> machine.MachineFigures:
    from forge.verifier.machine.readings import WorkingSetBandwidth

    sets = tuple(WorkingSetBandwidth(mib << 20, copy, read) for mib, copy, read in points)
    return machine.MachineFigures("cpu", 20.0, 300.0, 21.0, 25.0, 26.0, working_sets=sets)


def test_a_warm_op_is_bound_by_the_bandwidth_at_its_own_working_set():
    """The bound takes the bandwidths measured at the largest working set not above the op's
    bytes (a cache level is no faster for more data: the bound stays under the op's time), the
    smallest below them all, and the last-level cache's figure where no working set was measured
    (a GPU, or an older forge)."""
    from forge.verifier.worker.op_work import roofline

    f = _ladder((1, 200.0, 300.0), (4, 100.0, 150.0), (16, 30.0, 40.0))
    assert f.at_working_set(5 << 20) == f.working_sets[1]
    assert f.at_working_set(16 << 20) == f.working_sets[2]
    assert f.at_working_set(1000) == f.working_sets[0]
    est = roofline.record(roofline.CallEstimate(6 << 20, 3 << 20, 0, 0), f, None)
    assert (est.cache_bandwidth_gbs, est.cache_read_bandwidth_gbs, est.cache_working_set) == (100.0, 150.0, 4 << 20)
    assert est.cache_bound_ms == pytest.approx(roofline.bound_ms(6 << 20, 0, 100.0, 300.0, 3 << 20, 150.0), abs=1e-6)
    assert est.bound_ms == pytest.approx(roofline.bound_ms(6 << 20, 0, 20.0, 300.0, 3 << 20, 25.0), abs=1e-6)
    assert est.cache_measured == "a copy of 4 MiB kept in cache (the largest measured not above this op's 6.29 MB)"
    older = roofline.record(roofline.CallEstimate(6 << 20, 3 << 20, 0, 0), _ladder(), None)
    assert (older.cache_bandwidth_gbs, older.cache_working_set) == (21.0, None)
    assert older.cache_measured == "a copy that stays in the last-level cache"
    back = machine.MachineFigures.from_json(json.loads(json.dumps(f.to_json())))
    assert back == f


def test_a_check_waits_for_a_quiet_machine_only_where_the_load_is_enforced():
    """With the load check off (recorded, not enforced: the suite's own setting), a session's start
    and forge doctor measure at once; on, they wait up to QUIET_WAIT_S for a quiet machine first."""
    assert machine.figures_wait_s(load_check=False) == 0.0
    assert machine.figures_wait_s(load_check=True) == QUIET_WAIT_S > 0
