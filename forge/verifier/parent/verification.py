"""``verify(op, candidate)``: the trusted parent that runs both workers and builds the verdict."""

from __future__ import annotations

import os
import secrets
import time
from collections.abc import Sequence
from pathlib import Path
from typing import TypeVar

from forge.core.errors import CandidateFileError, ProblemError, UsageError, WorkerError
from forge.core.figures import AttemptFigures
from forge.core.findings import Findings
from forge.core.problem import read_problem_source
from forge.core.redaction import REDACTED_NOTE, redacted
from forge.core.round_match import RoundMatch
from forge.core.settings import ForgeSettings
from forge.core.statuses import BindMode, ModuleMode, TimingRegime, VerdictStatus
from forge.core.verdict import Binding, InputVariant, TensorSpec, Verdict
from forge.verifier.machine import memory
from forge.verifier.machine.facts import available_cores, resolve_device
from forge.verifier.parent import checks
from forge.verifier.parent.bound_check import check_binding
from forge.verifier.parent.candidate_build import build_candidate
from forge.verifier.parent.case_stream import CaseStream
from forge.verifier.parent.case_verdicts import (
    CaseTally,
    record_case_checks,
    record_case_notes,
    record_first_failing,
    record_raised,
    versions,
)
from forge.verifier.parent.gradient_checks import gradient_cases
from forge.verifier.parent.reference_pool import KeptReference, ReferencePool
from forge.verifier.parent.rivals import Rivals
from forge.verifier.parent.steps import (
    Bound,
    CasesRun,
    Closed,
    Planned,
    Profiled,
    Started,
    TimingFigures,
    TrainingTimed,
    VerdictHead,
    build_verdict,
    first_failure,
    last_of,
)
from forge.verifier.parent.timing.candidate_times import CandidateTimes, record_timing_checks
from forge.verifier.parent.timing.paired import (
    BatchTimes,
    PairedTimer,
    PairedTimes,
    ProgressNote,
    ReferenceTampered,
)
from forge.verifier.parent.timing.sched_guard import SchedGuard, record_reference_sched
from forge.verifier.parent.timing.statistics import (
    record_launch_cost,
    record_pairs,
    record_regimes,
    record_roofline,
    record_speedups,
)
from forge.verifier.parent.timing.timed_replies import CandidateFailed
from forge.verifier.parent.timing.training import record_training_step
from forge.verifier.processes.preload import PRELOAD, preload_spec
from forge.verifier.processes.sandboxing import op_reads, sandboxed
from forge.verifier.processes.worker_env import candidate_folder, compiles_for_cpu, worker_env
from forge.verifier.processes.worker_process import WorkerGone, WorkerProcess, expect_reply
from forge.verifier.protocol import (
    CaseRequest,
    CaseResultReply,
    ErrorReply,
    GradDataRequest,
    GradRunReply,
    GradRunRequest,
    HelloReply,
    LoadRequest,
    Message,
    ProblemErrorReply,
    ProblemReply,
    ProfileReply,
    ProfileRequest,
    Reply,
    Request,
    RooflineReply,
    RooflineRequest,
    SetupRequest,
    TimingBatchReply,
)

R = TypeVar("R", bound=Message)
F = TypeVar("F", bound=Findings)
PROFILED_CALLS = 5  # a passing candidate's calls under torch.profiler (``profile_candidate``)


class _Run:
    """State of one verification; methods are its phases, in order."""

    def __init__(
        self,
        op_path: Path,
        cand_path: Path,
        settings: ForgeSettings,
        progress: ProgressNote,
        references: ReferencePool | None = None,
        is_reference: bool = False,
        instance: str | None = None,
        timed: bool = True,
        rivals: Sequence[Path] = (),
    ) -> None:
        self.settings = settings
        self.rivals = Rivals(rivals, lambda: self.tol)  # a round's other candidates, timed beside this one
        self.timed_sides: tuple[CandidateTimes, PairedTimes] | None = None
        self.instance = instance  # a carved op's other instance, built instead of the one it names
        self.timed = timed  # False: correctness, gradients and the bound form only (an instance check)
        self.references = references
        self.is_reference = is_reference  # the null control: the reference verified as its own candidate
        self.env: dict[str, str] = {}
        self.hello: HelloReply | None = None
        self.progress = progress
        self.spec = read_problem_source(op_path)
        self.cand_path = cand_path
        self.source = cand_path.read_text(errors="replace")
        if settings.device not in ("auto", "cpu", "cuda"):
            raise UsageError(f"--device {settings.device!r}: choose cpu, cuda or auto")
        self.device: str = settings.device  # "auto" until the workers report what they found
        self.threads = settings.threads or available_cores()
        self.cache = settings.cache_path()
        self.head = VerdictHead(
            problem=self.spec.name,
            candidate=str(cand_path),
            device=self.device,
            threads=self.threads,
            backend=checks.detect_backend(self.source),
            seed=secrets.randbits(62),
            instance=instance,
        )
        self.steps: list[Findings] = []  # what each step found, in the order they ran (``steps``)
        self.tol: dict[str, float] | None = None
        self.problem: ProblemReply | None = None  # the reference's plan, once it sent it
        self.t0 = time.monotonic()
        self.deadline = self.t0 + settings.timeout
        self.ref_deadline = self.t0 + max(4 * settings.timeout, 900.0)

    def _step(self, step: F) -> F:
        """``step``'s record, kept in the order the steps run: the verdict is built from them."""
        self.steps.append(step)
        return step

    @property
    def passed(self) -> bool:
        """No step has failed the verification so far."""
        return first_failure(self.steps) is None

    @property
    def timing_meaningful(self) -> bool:
        started = last_of(self.steps, Started)
        return started is None or started.timing_meaningful

    def verdict(self) -> Verdict:
        """The verdict of the steps that ran so far (``steps.build_verdict``)."""
        return build_verdict(self.head, self.steps)

    def _ask_candidate(self, request: Request, expect: type[R]) -> R | ErrorReply:
        """Send a request and take the reply, which must be an ``expect`` (or an error) and, for a
        case, about that case: anything else means the worker's protocol was tampered with."""
        self.cand.send(request)
        reply, _ = self.cand.recv(self.deadline)
        return expect_reply(reply, expect, request.id if isinstance(request, CaseRequest) else None)

    def _ref_reply(self, doing: str) -> Reply:
        """The reference worker's next reply; its death is a problem with the op, not the candidate."""
        try:
            reply, _ = self.ref.recv(self.ref_deadline)
        except WorkerGone as exc:
            raise ProblemError(
                f"{self.spec.path}: the reference worker {doing} ({exc.ending.detail}):\n{self.ref.output()[-2000:]}"
            ) from None
        return reply

    def start(self) -> None:
        # Workers start first and get their first request at once: they import torch while the
        # parent does, and the candidate imports (and compiles) while the reference draws cases.
        env = self.env = worker_env(self.device, self.threads, self.cache, self.settings.gpu)
        env[PRELOAD] = preload_spec(self.spec.path)  # the op's libraries, imported once in the template
        env["FORGE_WORKER_MEMORY_MB"] = str(self.settings.memory_limit_mb)
        cwd = Path.cwd()
        kept = self.references.take(env) if self.references is not None else None
        if kept is not None:  # a reference worker of this op kept from an earlier verification
            self.ref, self.hello = kept.worker, kept.hello
        else:
            ref_env = (
                compiles_for_cpu(env, self.cache) if self._compiles_for_cpu(self.settings.compile_baseline) else env
            )
            self.ref = WorkerProcess("reference", ref_env, self.settings.memory_limit_mb, cwd)
        self.ref_guard = SchedGuard(self.ref.pid)  # before any candidate code can run
        self.cand = self._candidate_worker(self.cand_path, self.source)
        self.ref.send(
            SetupRequest(
                op_path=str(self.spec.path),
                seed=self.head.seed,
                timing_budget_s=self.settings.timing_budget_s,
                timing_trials=self.settings.timing_trials,
                timing_batch_mb=self.settings.timing_batch_mb,
                cache_dir=str(self.cache),
                instance=self.instance,
            )
        )
        self.cand.send(LoadRequest(op_path=str(self.spec.path), candidate_path=str(self.cand_path)))
        self.rivals.start(self._rival_worker)
        hello = self.hello = self.hello or self._ref_hello()
        if hello.error or hello.device is None:
            raise UsageError(hello.error or "the reference worker named no device")
        self.device = hello.device
        meaningful = not (self.device == "cpu" and self.head.backend == "triton")
        self._step(Started(device=hello.device, capability=hello.capability, timing_meaningful=meaningful))

    def _compiles_for_cpu(self, compiles: bool) -> bool:
        """Whether a worker that ``compiles`` with Inductor does so for the CPU (only a hint: the
        template finds the CPU's instruction sets for it, ``worker_env.compiles_for_cpu``)."""
        try:
            return compiles and resolve_device(self.device) == "cpu"
        except UsageError:  # no such device here: the reference worker says so
            return False

    def _candidate_worker(self, path: Path, source: str) -> WorkerProcess:
        """A sandboxed worker for the candidate file at ``path``: it reads the op's and the
        candidate's folders, and writes only its own compile folder."""
        cwd = Path.cwd()
        reads = [*op_reads(self.spec.path), path, path.parent, cwd]
        env = worker_env(self.device, self.threads, self.cache, self.settings.gpu, candidate_folder(source))
        env.update({k: self.env[k] for k in (PRELOAD, "FORGE_WORKER_MEMORY_MB")})
        if self._compiles_for_cpu("torch._inductor" in source or "torch.compile" in source):
            env = compiles_for_cpu(env, self.cache)
        env = sandboxed(env, self.settings.sandbox, reads, self.device)
        return WorkerProcess("candidate", env, self.settings.memory_limit_mb, cwd)

    def _rival_worker(self, path: Path) -> WorkerProcess:
        worker = self._candidate_worker(path, path.read_text(errors="replace"))
        worker.send(LoadRequest(op_path=str(self.spec.path), candidate_path=str(path)))
        return worker

    def _ref_hello(self) -> HelloReply:
        hello = self._ref_reply("did not start")
        if not isinstance(hello, HelloReply):
            raise WorkerError(f"reference worker: sent {hello.kind!r} before its hello")
        return hello

    def reference(self) -> None:
        self.progress("reference: drawing cases and expected outputs")
        info = self._ref_reply("failed while drawing cases")
        if isinstance(info, ProblemErrorReply):
            raise ProblemError(info.message)
        if not isinstance(info, ProblemReply):
            raise WorkerError(f"reference worker: {getattr(info, 'message', info)}")
        self.problem = info
        self.tol = info.tolerance
        seen: dict[str, InputVariant] = {}
        for c in info.cases:
            sig = [TensorSpec(shape=list(x.shape), dtype=x.dtype) for x in c.specs]
            seen.setdefault(c.shape, InputVariant(variant=c.shape, inputs=sig))
        self.planned = self._step(
            Planned(
                warnings=list(info.notes),
                op_hash=info.op_hash,
                target_class=info.target,
                inputs=list(seen.values()),
                cases=len(info.cases),
                shapes=sorted({c.shape for c in info.cases}),
                modes=[ModuleMode(m) for m in info.modes or [ModuleMode.EVAL]],
            )
        )

    @property
    def plan(self) -> ProblemReply:
        """The reference's plan (``reference`` ran before any phase that reads it)."""
        if self.problem is None:
            raise WorkerError("the verification's phases ran out of order: no plan from the reference yet")
        return self.problem

    def load(self) -> bool:
        self.progress("candidate: loading")
        models = self.plan.models
        found = self._step(CasesRun())
        failure = build_candidate(self.cand, self.deadline, models)
        if failure is None or failure.check == "interface":
            found.add("load", True, "candidate imported")
        if failure is not None:
            found.add(failure.check, False, failure.message)
            found.fail(VerdictStatus.COMPILE_ERROR, f"{failure.check}: {checks.first_line(failure.message)}")
            return False
        found.add("interface", True, f"ModelNew built and loaded the reference weights ({len(models)} inits/shapes)")
        self.rivals.load(self.deadline, models)
        return True

    def correctness(self) -> bool:
        # The roofline is asked for with the last case: it is estimated while the candidate runs it.
        roofline = RooflineRequest(cache_dir=str(self.cache))
        cases = self.plan.cases
        # with gradient cases to come, the roofline is asked for after them (``gradients``)
        then = None if self.settings.verify_gradients or not self.timed else roofline
        stream = CaseStream(self.ref, self._ref_reply, cases, self.tol, then=then)
        self.progress(f"candidate: {len(cases)} correctness cases")
        step = self._step(CasesRun())
        tally = CaseTally()
        for case in stream:
            data = case.data
            refill = data.partner.inputs if data.partner is not None else None
            request = CaseRequest(
                id=case.plan.id,
                model=case.plan.model,
                inputs=data.inputs,
                refill=refill,
                state_before=data.state_before,
            )
            reply = self._ask_candidate(request, CaseResultReply)
            if isinstance(reply, ErrorReply):
                record_raised(step, case, reply.message, self.settings.memory_limit_mb)
                return False
            found = checks.check_case(case, reply, self.device, self.tol)
            group = "correctness" if case.plan.kind == "normal" else "stress"
            checked = ((group, found.correctness), ("determinism", found.determinism), ("module_state", found.state))
            for name, mismatch in checked:
                if mismatch is not None and tally.failed(name, case.plan.id, mismatch.detail):
                    record_first_failing(step, case, mismatch)
            if self.is_reference:  # the reference's forward is what the null control runs
                found.integrity.pop("runs_kernel", None)
            for name, detail in found.integrity.items():
                tally.first.setdefault(name, (case.plan.id, detail))
            tally.stateful = tally.stateful or data.expected_state is not None
        step.add("run", True, "every call returned")
        record_case_notes(step, stream)
        record_case_checks(step, tally, len(cases) - stream.skipped, self.planned)
        return self.passed

    def gradients(self) -> bool:
        """With ``settings.verify_gradients``: every model's gradient cases (``gradient_checks``),
        then the roofline request that correctness left for them."""
        if not self.settings.verify_gradients:
            return True

        def ask_reference(request: GradDataRequest) -> Reply:
            self.ref.send(request)
            return self._ref_reply("failed while drawing a gradient case")

        keys = [m.key for m in self.plan.models]

        def ask_candidate(request: GradRunRequest) -> GradRunReply | ErrorReply:
            return self._ask_candidate(request, GradRunReply)

        found = gradient_cases(keys, self.head.seed, ask_reference, ask_candidate, self.tol, self.is_reference)
        step = self._step(CasesRun())
        step.add("gradients", found.passed, found.detail)
        if not found.passed:
            status = VerdictStatus.FAILED_INTEGRITY if found.integrity else VerdictStatus.FAILED_CORRECTNESS
            step.fail(status, f"gradients: {found.detail}")
            return False
        if self.timed:
            self.ref.send(RooflineRequest(cache_dir=str(self.cache)))
        return True

    def _timer(self, train_step: bool = False) -> PairedTimer:
        return PairedTimer(
            self.ref,
            self.cand,
            self.deadline,
            self._ref_reply,
            self.settings.compile_baseline,
            self.settings.load_check,
            self.threads,
            str(self.spec.path),
            self.ref_guard.check,
            train_step,
            rivals=() if train_step else self.rivals.workers,  # a training step is timed alone
            rivals_out=self.rivals.failed,
        )

    def training_timing(self) -> None:
        """With ``settings.verify_gradients``, for a candidate that passed: its training steps timed
        against eager's and torch.compile's (``timing.training``)."""
        if not self.settings.verify_gradients or not self.passed or not self.timing_meaningful:
            return
        step = self._step(TrainingTimed())
        timed = self._timed(step, True, "training_step", "a timed training step")
        if timed is not None:
            figures = last_of(self.steps, TimingFigures)
            record_training_step(step, *timed, figures.timing_stats.regime if figures is not None else None)

    def _timed(
        self, step: Findings, train_step: bool, check: str, what: str
    ) -> tuple[CandidateTimes, PairedTimes] | None:
        """Every timing batch (forward calls, or training steps), or None when the verification
        failed on the way: a candidate call that raised (named ``check``, in ``step``), a tampered
        reference."""
        kept = CandidateTimes(self.tol)

        def take(inputs: TimingBatchReply, batch: BatchTimes, regime: TimingRegime) -> None:
            kept.take(inputs, batch, regime)
            self.rivals.take(inputs, batch, regime)

        timer = self._timer(train_step)
        try:
            paired = timer.run(self.plan.timing, self.progress, take)
            self.rivals.dropped(timer.rivals.failed)
            return kept, paired
        except ReferenceTampered:  # failed by ``finish`` (the guard keeps what changed)
            return None
        except CandidateFailed as exc:
            step.add(check, False, exc.reply.message)
            step.fail(VerdictStatus.RUNTIME_ERROR, f"{what} raised: {checks.first_line(str(exc))}")
            return None

    def timing(self) -> None:
        roof = self._ref_reply("failed while estimating the roofline")
        roofline = roof.estimate if isinstance(roof, RooflineReply) else None
        figures = self._step(TimingFigures(timing_meaningful=self.timing_meaningful))
        timed = self._timed(figures, False, "timed_outputs", "a timed call")
        if timed is None:
            return
        kept, paired = self.timed_sides = timed
        record_timing_checks(figures, kept, self.device)
        cold, warm = paired.cold, paired.warm
        record_speedups(figures, kept.times, cold.eager, cold.compiled, paired.compile_error)
        record_pairs(figures, kept.times, cold.eager, cold.compiled, paired.contention)
        timing = self.plan.timing
        record_regimes(figures, kept.warm, warm.eager, warm.compiled, timing.working_set_bytes, timing.cache_bytes)
        record_roofline(figures, roofline)
        if self.device == "cuda":
            record_launch_cost(figures, kept.launch, cold.eager_launch + warm.eager_launch)

    def profile(self) -> None:
        """With ``settings.profile_candidate``, for a candidate that passed and was timed: where its
        time goes (never fails the verdict: a profile that cannot be taken is a warning)."""
        if not self.settings.profile_candidate or not self.passed or not self.timing_meaningful:
            return
        self.progress("candidate: profiled")
        step = self._step(Profiled())
        request = ProfileRequest(calls=PROFILED_CALLS, call_ms=AttemptFigures.of(self.verdict()).candidate_ms)
        try:
            reply = self._ask_candidate(request, ProfileReply)
        except WorkerGone as exc:
            step.warnings.append(f"no profile: the candidate's worker ended while profiled ({exc.ending.detail})")
            return
        if isinstance(reply, ErrorReply):
            step.warnings.append(f"no profile: {checks.first_line(reply.message)}")
            return
        step.profile = reply.profile

    def bind(self) -> None:
        """How a passing candidate binds to existing instances of the user's class (it never fails
        the verdict: ``bank.load`` uses the kernel either way)."""
        if not self.passed:
            return
        self.progress("candidate: bound to an instance of the reference class")
        try:
            bound = self.plan.bound
            stream = CaseStream(self.ref, self._ref_reply, bound.cases, self.tol)
            found = check_binding(self._ask_candidate, bound.model, stream, self.device, self.tol)
        except WorkerGone as exc:
            found = Binding(mode=BindMode.NONE, reason=f"bound to an instance, the worker ended: {exc.ending.detail}")
        step = self._step(Bound(binding=found))
        binds = found.mode is not BindMode.NONE
        step.add("binds", binds, f"{found.mode}: {found.reason}" if binds else f"no: {found.reason}", fatal=False)

    def _record_memory(self, closed: Closed, ref: WorkerProcess | None, cand: WorkerProcess | None) -> None:
        working = self.problem.timing.working_set_bytes if self.problem is not None else 0
        peaks = (cand.peak_mib() if cand is not None else None, ref.peak_mib() if ref is not None else None)
        closed.memory = memory.record_peaks(closed, *peaks, working)

    def _keep_or_close(self, ref: WorkerProcess, untouched: bool) -> None:
        """The reference worker goes back to the pool for the next verification, unless it never
        started the op or a candidate changed its scheduling."""
        hello = self.hello
        if self.references is not None and untouched and hello is not None and not hello.error:
            self.references.give(self.env, KeptReference(ref, hello))
        else:
            ref.close()

    def project_folders(self) -> list[Path]:
        """Where the op, the candidate and the user's project are: their ``.env`` files name
        secrets that no string leaving the verification may carry (``redacted``)."""
        return [self.spec.path.resolve().parent, self.cand_path.resolve().parent, Path.cwd()]

    def finish(self) -> Verdict:
        ref: WorkerProcess | None = getattr(self, "ref", None)
        cand: WorkerProcess | None = getattr(self, "cand", None)
        figures = last_of(self.steps, TimingFigures)
        closed = Closed()
        self._record_memory(closed, ref, cand)
        guard: SchedGuard | None = getattr(self, "ref_guard", None)
        tampered = guard.check() if guard is not None else None
        if tampered is not None or (
            guard is not None and figures is not None and figures.timings_ms.candidate is not None
        ):
            record_reference_sched(closed, tampered)  # a pass is worth saying once it was timed
        if cand is not None:
            closed.candidate_output = cand.output()
            cand.close()
        self.rivals.close()
        if ref is not None:
            self._keep_or_close(ref, tampered is None)
        closed.versions = versions()
        closed.elapsed_s = round(time.monotonic() - self.t0, 3)
        self._step(closed)
        verdict, n = redacted(self.verdict(), os.environ, self.project_folders())
        if n:
            verdict.warnings.append(REDACTED_NOTE.format(n=n))
        return verdict


def verify(
    op_path: str | Path,
    candidate_path: str | Path,
    settings: ForgeSettings | None = None,
    progress: ProgressNote | None = None,
    references: ReferencePool | None = None,
    is_reference: bool = False,
    *,
    instance: str | None = None,
    timed: bool = True,
) -> Verdict:
    """Verify one candidate against one op file. Raises ForgeError for bad input (exit 2).
    ``references``: where a caller verifying many candidates of this op keeps its reference
    worker between verifications (``VerifierService`` does). ``is_reference``: the candidate is
    the op's reference itself (the null control), which runs the reference's forward by design.
    ``instance``: for an op carved from a model, another of its ``FORGE_INSTANCES`` to build
    (its own arguments and recorded calls); ``timed=False``: no timing, no profile (an instance
    check of a kernel already timed on the op's own instance)."""
    cand = Path(candidate_path).expanduser()
    if not cand.is_file():
        raise CandidateFileError(
            f"{str(cand)!r}: no such candidate file; pass the path of a .py file defining ModelNew"
        )
    progress = progress or (lambda _m: None)
    run = _Run(Path(op_path), cand, settings or ForgeSettings(), progress, references, is_reference, instance, timed)
    return _executed(run)


def time_together(
    op_path: Path,
    leader: Path,
    rivals: Sequence[Path],
    settings: ForgeSettings,
    progress: ProgressNote | None = None,
    references: ReferencePool | None = None,
) -> tuple[Verdict, RoundMatch]:
    """A round's candidates timed in one verification: ``leader`` verified as the candidate
    (correctness again, then timing), each of ``rivals`` (files whose own verification passed)
    timed call by call in the same batches; the leader's verdict and what the batches read
    (``rivals.Rivals.match``). Forward calls only: no profile, no training step, no binding."""
    quick = settings.model_copy(update={"profile_candidate": False, "verify_gradients": False})
    run = _Run(op_path, leader, quick, progress or (lambda _m: None), references, rivals=rivals)
    verdict = _executed(run, bind=False)
    kept, paired = run.timed_sides or (None, None)
    match, _ = redacted(run.rivals.match(leader.stem, verdict, kept, paired), os.environ, run.project_folders())
    return verdict, match


def _executed(run: _Run, bind: bool = True) -> Verdict:
    """The verification's phases in order, and its verdict (a worker's death fails it)."""
    try:
        run.start()
        run.reference()
        if run.load() and run.correctness() and run.gradients():
            if run.timed:
                run.timing()
                run.profile()
                run.training_timing()
            else:
                untimed = run._step(TimingFigures(timing_meaningful=False))
                untimed.add("timing", True, "not timed: correctness, gradients and the bound form only", fatal=False)
            if bind:
                run.bind()
    except WorkerGone as exc:
        timed_out = exc.ending.kind == "timeout"
        status = VerdictStatus.TIMEOUT if timed_out else VerdictStatus.CRASHED
        detail = exc.ending.detail + (f" after {run.settings.timeout:g} s" if timed_out else "")
        gone = run._step(Findings())
        gone.add("worker", False, detail)
        gone.fail(status, detail)
    finally:
        verdict = run.finish()
    return verdict
