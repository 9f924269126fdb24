"""The parent's side of timing: eager (and torch.compile) and the candidate, call by call.

Inputs come in batches that fit in memory (the reference worker draws them). For each batch both
workers prepare (warm-up, heap room, collector paused), then the parent asks for one timed call at
a time, alternating which side goes first (``pairing.call_order``), so every candidate call has
an adjacent eager call. Only one side runs at a time: the workers never compete with each other.

Each batch is timed in two regimes. Cold: the last-level cache flushed before each call, each call
on its own inputs, never used before (an op whose data comes from DRAM). Warm: no flush, every call
on the same buffers, its inputs' values written into them just before the call (an op whose input
was just produced by the layer before it and is still in cache). A kernel can beat eager cold and
lose to torch.compile warm; which regime a verdict is judged in depends on whether the op's data
fits in the cache (``record_regimes``).

Around each batch the parent reads the machine's load (``LoadMonitor``). A batch timed while other
processes used the cores is timed again, on the same inputs, once the load has gone (at most
``_RETRIES`` times in a verification, waiting up to ``_QUIET_WAIT_S`` each); a batch still busy
after that is kept and the verdict says the machine was busy.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TypeVar

from forge.core.errors import ProblemError
from forge.core.pairing import side_orders
from forge.core.statuses import TimingRegime
from forge.core.timing_records import Contention
from forge.verifier.machine.contention import LoadMonitor, combined
from forge.verifier.parent.timing.rival_sides import RivalSides
from forge.verifier.parent.timing.timed_replies import candidate_said, timed_call
from forge.verifier.processes.worker_process import WorkerProcess
from forge.verifier.protocol import (
    BaselineCallReply,
    BaselineCallRequest,
    BaselinesBeginRequest,
    BaselinesEndReply,
    BaselinesEndRequest,
    BaselinesReadyReply,
    Message,
    Reply,
    TimeBeginRequest,
    TimeEndRequest,
    TimeReadyReply,
    TimingBatchReply,
    TimingBatchRequest,
    TimingPlan,
    TimingReply,
)

_RETRIES, _QUIET_WAIT_S = 3, 10.0

# Told what the verification is doing now ("timing: 8 pairs of calls, eager and candidate (batch 1/3)"), for a
# front end to show.
ProgressNote = Callable[[str], None]
R = TypeVar("R", bound=Message)


class ReferenceTampered(Exception):
    """The reference worker's threads were rescheduled while the candidate lived (``sched_guard``):
    eager's timings from then on are not eager's."""


@dataclass
class BatchTimes:
    """One batch's timed calls, in pair order."""

    eager: list[int] = field(default_factory=list)
    compiled: list[int] = field(default_factory=list)
    eager_launch: list[int] = field(default_factory=list)
    cand: TimingReply | None = None  # the candidate's end-of-batch reply
    ticks: list[float] = field(default_factory=list)
    compile_error: str | None = None
    rivals: dict[int, TimingReply] = field(default_factory=dict)  # each live rival's end-of-batch reply
    rival_ticks: dict[int, list[float]] = field(default_factory=dict)

    def rival(self, index: int) -> BatchTimes:
        """Rival ``index``'s side of this batch, in the form a candidate's side has."""
        return BatchTimes(cand=self.rivals.get(index), ticks=self.rival_ticks.get(index, []))


@dataclass
class SideTimes:
    """The baselines' calls of every kept batch of one regime, concatenated."""

    eager: list[int] = field(default_factory=list)
    compiled: list[int] = field(default_factory=list)
    eager_launch: list[int] = field(default_factory=list)

    def add(self, batch: BatchTimes) -> None:
        self.eager += batch.eager
        self.compiled += batch.compiled
        self.eager_launch += batch.eager_launch


@dataclass
class PairedTimes:
    """Both regimes' baselines, and the machine's load over every kept batch."""

    cold: SideTimes = field(default_factory=SideTimes)
    warm: SideTimes = field(default_factory=SideTimes)
    compile_error: str | None = None
    contention: Contention | None = None


TakeBatch = Callable[[TimingBatchReply, BatchTimes, TimingRegime], None]


class PairedTimer:
    """Runs the batches; ``take`` receives each kept batch for the caller's checks."""

    def __init__(
        self,
        ref: WorkerProcess,
        cand: WorkerProcess,
        deadline: float,
        ref_reply: Callable[[str], Reply],
        compile_baseline: bool,
        load_check: bool,
        cores: int,
        op: str,
        guard: Callable[[], str | None] = lambda: None,
        train_step: bool = False,
        rivals: Sequence[WorkerProcess] = (),
        rivals_out: Mapping[int, str] | None = None,
    ) -> None:
        self.train_step = train_step  # time training steps (``gradients.training_step``), not forward calls
        self.what = "training steps" if train_step else "pairs of calls"
        self.op = op  # the op file, for messages
        self.guard = guard  # what changed in the reference worker's scheduling, checked after each eager call
        self.ref, self.cand, self.deadline = ref, cand, deadline
        self.ref_reply = ref_reply
        self.compile_baseline = compile_baseline
        self.load_check = load_check
        # A round's other candidates, timed call by call in the same batches (``side_orders``); one
        # that fails is dropped (``rivals.failed``, which starts from ``rivals_out``: those that
        # never started) and the others go on.
        self.rivals = RivalSides(rivals, deadline, rivals_out)
        self.monitor = LoadMonitor([ref.pid, cand.pid, *(r.pid for r in rivals)], cores)
        self.retries_left = _RETRIES if load_check else 0
        # Batches timed so far in each regime: every other one is mirrored (``baseline_first``).
        self.batches_timed = {TimingRegime.COLD: 0, TimingRegime.WARM: 0}

    def run(self, plan: TimingPlan, progress: ProgressNote, take: TakeBatch) -> PairedTimes:
        """Every batch, timed cold and then warm; ``take`` gets each kept batch for its checks."""
        batches = plan.batches
        out = PairedTimes()
        spans: list[Contention] = []
        for index in range(batches):
            inputs = self._draw(index)  # the first batch's carries the warm-up inputs too
            where = f" (batch {index + 1}/{batches})" if batches > 1 else ""
            for regime in (TimingRegime.COLD, TimingRegime.WARM):
                batch, load = self._measured(plan, inputs, index, regime, where, progress)
                if load is not None:
                    spans.append(load.model_copy(update={"enforced": self.load_check}))
                take(inputs, batch, regime)
                (out.cold if regime is TimingRegime.COLD else out.warm).add(batch)
                out.compile_error = batch.compile_error or out.compile_error
        out.contention = combined(spans)
        return out

    def _measured(
        self,
        plan: TimingPlan,
        inputs: TimingBatchReply,
        index: int,
        regime: TimingRegime,
        where: str,
        progress: ProgressNote,
    ) -> tuple[BatchTimes, Contention | None]:
        """One batch in one regime, timed again (same inputs) while the machine is busy and retries last."""
        retried = 0
        while True:
            rivals = len(self.rivals.live())
            sides = f"candidate and {rivals} rival(s)" if rivals else "candidate"
            progress(f"timing: {len(inputs.sets)} {self.what}, eager and {sides}, {regime}{where}")
            first = index == 0 and retried == 0 and regime is TimingRegime.COLD
            batch, load = self._batch(plan, inputs, first, retried, regime)
            if load is None or not load.busy or self.retries_left == 0:
                return batch, load
            self.retries_left -= 1
            retried += 1
            progress(f"timing: the machine was busy ({load.detail}); waiting for it to quieten{where}")
            self.monitor.wait_for_quiet(_QUIET_WAIT_S)

    def _draw(self, index: int) -> TimingBatchReply:
        self.ref.send(TimingBatchRequest(index=index, train_step=self.train_step))
        reply = self.ref_reply("failed while drawing timing inputs")
        if not isinstance(reply, TimingBatchReply):
            said = getattr(reply, "message", reply)
            raise ProblemError(f"{self.op}: the reference failed while drawing timing inputs: {said}")
        return reply

    def _batch(
        self, plan: TimingPlan, inputs: TimingBatchReply, first: bool, retried: int, regime: TimingRegime
    ) -> tuple[BatchTimes, Contention | None]:
        """One batch, and the machine's load over its timed calls (warm-up and torch.compile's
        compilation, which runs in helper processes, excluded)."""
        sets = inputs.sets
        warm = regime is TimingRegime.WARM
        self.ref.send(BaselinesBeginRequest(compile=self.compile_baseline, warm=warm, train_step=self.train_step))
        # Warm calls reuse the batch the candidate already holds (its values are written into the
        # warm buffers call by call): no second transfer of the inputs.
        request = TimeBeginRequest(
            model=plan.model,
            sets=None if warm else sets,
            warmup=inputs.warmup if first else None,
            warm=warm,
            memory_budget=plan.memory_budget,
            train_step=self.train_step,
        )
        self.cand.send(request)
        self.rivals.ask_all(request, TimeReadyReply)
        self._expect_ref(BaselinesReadyReply)
        self._expect_cand(TimeReadyReply)
        batch = BatchTimes()
        start = self.monitor.sample()
        live = self.rivals.live()
        for i, order in enumerate(side_orders(len(sets), self.batches_timed[regime], 2 + len(live))):
            for side in order:
                if side == 0:
                    self._baseline_call(i, batch)
                elif side == 1:
                    self._candidate_call(i, batch)
                else:
                    j = live[side - 2]
                    self.rivals.call(j, i, batch.rival_ticks.setdefault(j, []))
        self.batches_timed[regime] += 1
        load = self.monitor.between(start, self.monitor.sample(), retried)
        self.ref.send(BaselinesEndRequest())
        batch.compile_error = self._expect_ref(BaselinesEndReply).compile_error
        self.cand.send(TimeEndRequest())
        batch.cand = self._expect_cand(TimingReply)
        batch.rivals = self.rivals.ask_all(TimeEndRequest(), TimingReply)
        return batch, load

    def _baseline_call(self, i: int, batch: BatchTimes) -> None:
        self.ref.send(BaselineCallRequest(index=i))
        reply = self._expect_ref(BaselineCallReply)
        batch.eager.append(reply.eager_ns)
        batch.eager_launch.append(reply.eager_launch_ns)
        if reply.compile_ns is not None:
            batch.compiled.append(reply.compile_ns)
        changed = self.guard()
        if changed is not None:
            raise ReferenceTampered(changed)

    def _candidate_call(self, i: int, batch: BatchTimes) -> None:
        timed_call(self.cand, i, self.deadline, batch.ticks)

    def _expect_ref(self, expect: type[R]) -> R:
        reply = self.ref_reply("failed while being timed")
        if not isinstance(reply, expect):
            said = getattr(reply, "message", reply)
            raise ProblemError(f"{self.op}: the reference failed while being timed: {said}")
        return reply

    def _expect_cand(self, expect: type[R]) -> R:
        reply, _ = self.cand.recv(self.deadline)
        return candidate_said(reply, expect)
