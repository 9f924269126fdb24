"""A verification's rivals: a round's other candidates, timed in the candidate's own batches.

A session whose round produced several passing candidates verifies the fastest again with the
others beside it (``verification.time_together``). Each rival runs in a sandboxed worker of its
own, like the candidate's; it is loaded and built on the reference's weights, then timed call by
call next to eager and the candidate (``PairedTimer``'s ``rivals``). Its correctness was decided
by its own verification; here its timed outputs, its clock and the threads it leaves are checked
as the candidate's are, and a rival that fails them, or fails in any way once timing began,
voids the match (it could have slowed the others, or been slowed to lose). One that fails to load
or build is only dropped.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from pathlib import Path

from forge.core.pairing import paired_ratio
from forge.core.round_match import MatchedPair, MatchedSide, RoundMatch
from forge.core.statuses import TimingRegime
from forge.core.verdict import Verdict
from forge.verifier.parent import checks
from forge.verifier.parent.candidate_build import build_candidate
from forge.verifier.parent.timing.candidate_times import CandidateTimes, clock_failure
from forge.verifier.parent.timing.paired import BatchTimes, PairedTimes
from forge.verifier.processes.worker_process import WorkerGone, WorkerProcess
from forge.verifier.protocol import (
    ModelBuild,
    TimingBatchReply,
)

_LOAD_S = 120.0  # the longest a rival may take to import and build (its compile is cached by its own verification)
StartWorker = Callable[[Path], WorkerProcess]  # a sandboxed candidate worker for a file, sent its LoadRequest


class Rivals:
    """The rivals of one verification, by the name their file gives them."""

    def __init__(self, paths: Sequence[Path], tol: Callable[[], dict[str, float] | None]) -> None:
        self.paths = list(paths)
        self.names = [p.stem for p in self.paths]
        self.workers: list[WorkerProcess] = []
        self.failed: dict[int, str] = {}
        self.voiding: set[int] = set()  # failed once timing began: the match decides nothing
        self._tol = tol
        self.times: list[CandidateTimes] = []

    def start(self, start_worker: StartWorker) -> None:
        for path in self.paths:  # one at a time: a failed start leaves the ones before it to close
            self.workers.append(start_worker(path))

    def load(self, deadline: float, models: list[ModelBuild]) -> None:
        """Each rival's hello, import and build (on the reference's weights); one that fails is dropped."""
        for j, worker in enumerate(self.workers):
            try:
                failure = build_candidate(worker, min(deadline, time.monotonic() + _LOAD_S), models)
                said = None if failure is None else f"{failure.check}: {checks.first_line(failure.message)}"[:300]
            except WorkerGone as exc:
                said = f"its worker ended while loading: {exc.ending.detail}"
            if said is not None:
                self.failed[j] = said
                worker.kill()
        self.times = [CandidateTimes(self._tol()) for _ in self.workers]

    def take(self, inputs: TimingBatchReply, batch: BatchTimes, regime: TimingRegime) -> None:
        """Each live rival's side of a kept batch."""
        for j in batch.rivals:
            if j not in self.failed:
                try:
                    self.times[j].take(inputs, batch.rival(j), regime)
                except WorkerGone as exc:  # a malformed reply: the rival's, not the candidate's
                    self.failed[j] = f"timing: {exc.ending.detail}"[:300]
                    self.voiding.add(j)
                    self.workers[j].kill()

    def dropped(self, timer_failed: dict[int, str]) -> None:
        """The rivals the timer dropped while timing (not those that never loaded, which it was
        told of): each voids the match."""
        for j, why in timer_failed.items():
            if j not in self.failed:
                self.failed[j] = why
                self.voiding.add(j)

    def close(self) -> None:
        for w in self.workers:
            w.close()

    def match(self, leader: str, v: Verdict, kept: CandidateTimes | None, paired: PairedTimes | None) -> RoundMatch:
        """What the batches read: each side's speedup over eager in the verdict's judged regime,
        and each pair's head-to-head ratio."""
        if kept is None or paired is None or not v.passed or not v.timing_meaningful:
            said = f"the leader's verification {v.status}: {v.reason or 'not timed'}"[:400]
            return RoundMatch(failed=said, leader_failed=not v.passed)
        warm = v.timing_stats.regime is TimingRegime.WARM
        eager = paired.warm.eager if warm else paired.cold.eager
        series = {leader: kept.warm if warm else kept.times}
        sides = [MatchedSide(name=leader, vs_eager=paired_ratio(eager, series[leader]))]
        integrity: list[str] = []
        for j, name in enumerate(self.names):
            times = self.times[j] if j < len(self.times) else None
            why = self.failed.get(j) or (_integrity(times, v.device) if times is not None else "not loaded")
            ns = (times.warm if warm else times.times) if times is not None else []
            if why is None and len(ns) != len(eager):
                why = "not timed in every batch"
            if why is not None:
                sides.append(MatchedSide(name=name, failed=why))
                if j not in self.failed or j in self.voiding:
                    integrity.append(f"{name}: {why}")
                continue
            series[name] = ns
            sides.append(MatchedSide(name=name, vs_eager=paired_ratio(eager, ns)))
        failed = f"a rival failed once timed ({'; '.join(integrity)})"[:600] if integrity else None
        regime = "warm" if warm else "cold"
        return RoundMatch(sides=sides, pairs=_head_to_head(series), regime=regime, failed=failed)


def _integrity(t: CandidateTimes, device: str) -> str | None:
    """What a rival's timed replies showed that would fail a candidate's verdict (the same checks
    ``record_timing_checks`` makes of the candidate's)."""
    if t.bad_outputs is not None:
        return f"timed outputs: {t.bad_outputs}"
    clock = clock_failure(t, device)
    if clock is not None:
        return f"clock: {clock}"
    if t.threads:
        return f"{t.threads} native thread(s) left running"
    return None


def _head_to_head(series: dict[str, list[int]]) -> list[MatchedPair]:
    """Every pair of timed sides: the slower's time over the faster's, call by call."""
    names = list(series)
    out: list[MatchedPair] = []
    for a_i, a in enumerate(names):
        for b in names[a_i + 1 :]:
            a_over_b = paired_ratio(series[a], series[b])  # > 1: b ran faster
            if a_over_b is None:
                continue
            if a_over_b.median >= 1.0:
                out.append(MatchedPair(faster=b, slower=a, ratio=a_over_b))
            else:
                b_over_a = paired_ratio(series[b], series[a])
                if b_over_a is not None:
                    out.append(MatchedPair(faster=a, slower=b, ratio=b_over_a))
    return out
