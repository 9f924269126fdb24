"""The steps of one verification, each with its typed result, and the one function that builds
the verdict from them (``build_verdict``). A step fills its own record as it runs (its checks,
its first failure, its warnings: ``core.findings.Findings``, and the fields it decides); nothing
writes into a ``Verdict`` before the end. The verdict's checks and warnings are the steps' in
the order they ran, and its status the first failure any step recorded."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TypeVar

from forge.core.findings import Findings
from forge.core.op_brief import CandidateProfile
from forge.core.roofline_record import Roofline
from forge.core.statuses import ModuleMode, VerdictStatus
from forge.core.timing_records import Timings, TimingSides, TrainingStepTimes
from forge.core.verdict import Binding, FailingCase, InputVariant, MemoryPeak, Verdict, Versions


@dataclass(frozen=True)
class VerdictHead:
    """What a verification knows before its workers start."""

    problem: str
    candidate: str
    device: str  # as asked ("auto" until the workers report what they found)
    threads: int
    backend: str
    seed: int
    instance: str | None


@dataclass
class Started(Findings):
    """The workers started: the device they found, and whether timings mean anything there."""

    device: str = ""
    capability: str | None = None
    timing_meaningful: bool = True


@dataclass
class Planned(Findings):
    """The reference's plan: the op's identity, its inputs and cases, the modes it is verified in
    (its notes are the step's warnings)."""

    op_hash: str = ""
    target_class: str | None = None
    inputs: list[InputVariant] = field(default_factory=list)
    cases: int = 0
    shapes: list[str] = field(default_factory=list)
    modes: list[ModuleMode] = field(default_factory=list)


@dataclass
class CasesRun(Findings):
    """Loading and the correctness cases: the first case that failed, and the cases the stream
    skipped (not counted)."""

    failing_case: FailingCase | None = None
    skipped: int = 0


@dataclass
class TimingFigures(Findings):
    """The timing step: each side's statistics, the paired ratios, the speedups the verdict
    reports, the roofline (``timing.statistics``). ``timing_meaningful`` False: not timed, or
    Triton interpreted on the CPU."""

    timing_meaningful: bool = True
    timings_ms: Timings = field(default_factory=Timings)
    timing_stats: TimingSides = field(default_factory=TimingSides)
    speedup_vs_eager: float | None = None
    speedup_vs_compile: float | None = None
    roofline: Roofline | None = None


@dataclass
class Profiled(Findings):
    profile: CandidateProfile | None = None


@dataclass
class TrainingTimed(Findings):
    training_step: TrainingStepTimes | None = None


@dataclass
class Bound(Findings):
    binding: Binding | None = None


@dataclass
class Closed(Findings):
    """What the end of the verification found: the processes' memory, the candidate's output,
    the versions, the time it took."""

    memory: MemoryPeak | None = None
    candidate_output: str = ""
    versions: Versions = field(default_factory=Versions)
    elapsed_s: float = 0.0


S = TypeVar("S", bound=Findings)


def last_of(steps: Sequence[Findings], kind: type[S]) -> S | None:
    """The last step of ``kind`` among ``steps`` (None when none ran)."""
    return next((s for s in reversed(steps) if isinstance(s, kind)), None)


def first_failure(steps: Sequence[Findings]) -> tuple[VerdictStatus, str] | None:
    return next((s.failure for s in steps if s.failure is not None), None)


def build_verdict(head: VerdictHead, steps: Sequence[Findings]) -> Verdict:
    """The verdict of a verification whose steps, in the order they ran, are ``steps``."""
    started, planned, timing = last_of(steps, Started), last_of(steps, Planned), last_of(steps, TimingFigures)
    closed, failure = last_of(steps, Closed), first_failure(steps)
    run = [s for s in steps if isinstance(s, CasesRun)]
    training, profiled, bound = last_of(steps, TrainingTimed), last_of(steps, Profiled), last_of(steps, Bound)
    plan = planned or Planned()
    meaningful = timing.timing_meaningful if timing is not None else (started is None or started.timing_meaningful)
    return Verdict(
        problem=head.problem,
        candidate=head.candidate,
        device=started.device if started is not None else head.device,
        status=failure[0] if failure is not None else VerdictStatus.PASSED,
        reason=failure[1] if failure is not None else None,
        checks=[c for s in steps for c in s.checks],
        warnings=[w for s in steps for w in s.warnings],
        timings_ms=timing.timings_ms if timing is not None else Timings(),
        timing_stats=timing.timing_stats if timing is not None else TimingSides(),
        speedup_vs_eager=timing.speedup_vs_eager if timing is not None else None,
        speedup_vs_compile=timing.speedup_vs_compile if timing is not None else None,
        timing_meaningful=meaningful,
        roofline=timing.roofline if timing is not None else None,
        memory=closed.memory if closed is not None else None,
        failing_case=next((s.failing_case for s in run if s.failing_case is not None), None),
        candidate_output=closed.candidate_output if closed is not None else "",
        backend=head.backend,
        op_hash=plan.op_hash,
        target_class=plan.target_class,
        capability=started.capability if started is not None else None,
        inputs=plan.inputs,
        cases=plan.cases - sum(s.skipped for s in run),
        shapes=plan.shapes,
        seed=head.seed,
        threads=head.threads,
        elapsed_s=closed.elapsed_s if closed is not None else 0.0,
        versions=closed.versions if closed is not None else Versions(),
        binding=bound.binding if bound is not None else None,
        modes=plan.modes if planned is not None else None,
        training_step=training.training_step if training is not None else None,
        profile=profiled.profile if profiled is not None else None,
        instance=head.instance,
    )
