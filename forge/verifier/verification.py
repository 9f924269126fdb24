"""``verify(op, candidate)``: the trusted parent that runs both workers and builds the verdict."""

from __future__ import annotations

import secrets
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from forge.core.errors import CandidateFileError, ProblemError, UsageError, WorkerError
from forge.core.problem import read_problem_source
from forge.core.settings import ForgeSettings
from forge.core.statuses import BindMode, ModuleMode, VerdictStatus
from forge.core.verdict import Binding, FailingCase, InputVariant, TensorSpec, Verdict, Versions
from forge.verifier import checks, memory
from forge.verifier.bound_check import check_binding
from forge.verifier.case_stream import CaseStream
from forge.verifier.machine import available_cores
from forge.verifier.process import Ending, WorkerGone, WorkerProcess, check_reply
from forge.verifier.reference_pool import KeptReference, ReferencePool
from forge.verifier.timing.paired import CandidateFailed, PairedTimer, ReferenceTampered
from forge.verifier.timing.replies import MALFORMED, CandidateTimes, record_timing_checks
from forge.verifier.timing.sched_guard import SchedGuard, record_reference_sched
from forge.verifier.timing.statistics import record_launch_cost, record_pairs, record_regimes, record_speedups
from forge.verifier.worker_env import worker_env

if TYPE_CHECKING:  # compare loads torch, which the parent imports only once its workers have started
    from forge.verifier.compare import Mismatch

# Told what the verification is doing now ("timing: 8 pairs of calls, eager and candidate (batch 1/3)"), for a
# front end to show.
ProgressNote = Callable[[str], None]
_MEMORY_WORDS = ("can't allocate memory", "out of memory", "MemoryError", "Cannot allocate memory")
_INTEGRITY_CHECKS = (
    "no_stale_results",
    "inputs_unchanged",
    "no_aliasing",
    "plain_tensor_outputs",
    "no_lazy_outputs",
    "no_background_threads",
    "clock_integrity",
    "runs_kernel",
)


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
    ) -> None:
        self.settings = settings
        self.references = references
        self.is_reference = is_reference  # the null control: the reference verified as its own candidate
        self.env: dict[str, str] = {}
        self.hello: dict[str, Any] | None = None
        self.progress = progress
        self.spec = read_problem_source(op_path)
        self.cand_path = cand_path
        self.source = cand_path.read_text(errors="replace")
        if settings.device not in ("auto", "cpu", "cuda"):
            raise UsageError(f"--device {settings.device!r}: choose cpu, cuda or auto")
        self.device: str = settings.device  # "auto" until the workers report what they found
        self.threads = settings.threads or available_cores()
        self.cache = settings.cache_path()
        self.v = Verdict(problem=self.spec.name, candidate=str(cand_path), device=self.device, threads=self.threads)
        self.v.backend = checks.detect_backend(self.source)
        self.v.seed = secrets.randbits(62)
        self.tol: dict[str, float] | None = None
        self.info: dict[str, Any] = {}
        self.t0 = time.monotonic()
        self.deadline = self.t0 + settings.timeout
        self.ref_deadline = self.t0 + max(4 * settings.timeout, 900.0)

    def _ask_candidate(self, msg: dict[str, Any], expect: str) -> dict[str, Any]:
        """Send a job and take the reply, which must be of the expected type (or an error) and,
        for a case, about that case: anything else means the worker's protocol was tampered with."""
        self.cand.send(msg)
        reply, _ = self.cand.recv(self.deadline)
        check_reply(reply, expect, msg.get("id"))
        return reply

    def _ref_reply(self, doing: str) -> dict[str, Any]:
        """The reference worker's next reply; its death is a problem with the op, not the candidate."""
        try:
            reply, _ = self.ref.recv(self.ref_deadline)
        except WorkerGone as exc:
            raise ProblemError(
                f"{self.spec.path}: the reference worker {doing} ({exc.ending.detail}):\n{self.ref.output()[-2000:]}"
            ) from None
        return dict(reply)

    def start(self) -> None:
        # Workers start first and get their first job at once: they import torch while the
        # parent does, and the candidate imports (and compiles) while the reference draws cases.
        env = self.env = worker_env(self.device, self.threads, self.cache, self.settings.gpu)
        env["FORGE_WORKER_MEMORY_MB"] = str(self.settings.memory_limit_mb)
        cwd = Path.cwd()
        kept = self.references.take(env) if self.references is not None else None
        if kept is not None:  # a reference worker of this op kept from an earlier verification
            self.ref, self.hello = kept.worker, kept.hello
        else:
            self.ref = WorkerProcess("reference", env, self.settings.memory_limit_mb, cwd)
        self.ref_guard = SchedGuard(self.ref.proc.pid)  # before any candidate code can run
        self.cand = WorkerProcess("candidate", env, self.settings.memory_limit_mb, cwd)
        self.ref.send(
            {
                "op": "setup",
                "op_path": str(self.spec.path),
                "seed": self.v.seed,
                "timing_budget_s": self.settings.timing_budget_s,
                "timing_trials": self.settings.timing_trials,
                "timing_batch_mb": self.settings.timing_batch_mb,
                "cache_dir": str(self.cache),
            }
        )
        self.cand.send({"op": "load", "op_path": str(self.spec.path), "candidate_path": str(self.cand_path)})
        hello = self.hello = self.hello or self._ref_reply("did not start")
        if hello.get("error"):
            raise UsageError(str(hello["error"]))
        self.device = self.v.device = str(hello["device"])
        self.v.capability = hello.get("capability")
        self.v.timing_meaningful = not (self.device == "cpu" and self.v.backend == "triton")

    def reference(self) -> None:
        self.progress("reference: drawing cases and expected outputs")
        info = self._ref_reply("failed while drawing cases")
        if info.get("type") == "problem_error":
            raise ProblemError(str(info["message"]))
        if info.get("type") != "problem":
            raise WorkerError(f"reference worker: {info.get('message', info)}")
        self.info = info
        self.tol = info.get("tolerance")
        self.v.op_hash = info["op_hash"]
        self.v.target_class = info.get("target")
        seen: dict[str, InputVariant] = {}
        for c in info["cases"]:
            sig = [TensorSpec(shape=list(x["shape"]), dtype=str(x["dtype"])) for x in c["specs"]]
            seen.setdefault(c["shape"], InputVariant(variant=c["shape"], inputs=sig))
        self.v.inputs = list(seen.values())
        self.v.cases = len(info["cases"])
        self.v.shapes = sorted({c["shape"] for c in info["cases"]})
        self.v.warnings.extend(info.get("notes", []))
        self.v.modes = [ModuleMode(m) for m in info.get("modes") or [ModuleMode.EVAL]]

    def load(self) -> bool:
        self.progress("candidate: loading")
        self.cand.recv(self.deadline)  # hello
        reply, _ = self.cand.recv(self.deadline)
        if reply.get("type") == "error":
            self.v.add(reply["stage"], False, reply["message"])
            self.v.fail(VerdictStatus.COMPILE_ERROR, f"{reply['stage']}: {checks.first_line(reply['message'])}")
            return False
        self.v.add("load", True, "candidate imported")
        models = [
            {k: m[k] for k in ("key", "init_args", "state_dict", "overrides", "train")} for m in self.info["models"]
        ]
        reply = self._ask_candidate({"op": "instantiate", "models": models}, "ready")
        if reply.get("type") == "error":
            self.v.add("interface", False, reply["message"])
            self.v.fail(VerdictStatus.COMPILE_ERROR, f"interface: {checks.first_line(reply['message'])}")
            return False
        self.v.add("interface", True, f"ModelNew built and loaded the reference weights ({len(models)} inits/shapes)")
        return True

    def correctness(self) -> bool:
        # The roofline is asked for with the last case: it is estimated while the candidate runs it.
        roofline = {"op": "roofline", "cache_dir": str(self.cache)}
        stream = CaseStream(self.ref, self._ref_reply, self.info["cases"], self.tol, then=roofline)
        self.progress(f"candidate: {len(self.info['cases'])} correctness cases")
        first: dict[str, tuple[str, str]] = {}
        failing = {"correctness": 0, "stress": 0, "determinism": 0, "module_state": 0}
        stateful: list[str] = []
        for case in stream:
            refill = case["partner"]["inputs"] if case.get("partner") else None
            msg = {"op": "case", "id": case["id"], "model": case["model"], "inputs": case["inputs"], "refill": refill}
            if case.get("state_before") is not None:
                msg["state_before"] = case["state_before"]
            reply = self._ask_candidate(msg, "case_result")
            if reply.get("type") == "error":
                self._raised(case, str(reply["message"]))
                return False
            try:
                found = checks.check_case(case, reply, self.device, self.tol)
            except MALFORMED as exc:
                raise WorkerGone(Ending("protocol", f"malformed case result from the worker: {exc!r}")) from None
            group = "correctness" if case["kind"] == "normal" else "stress"
            checked = ((group, found.correctness), ("determinism", found.determinism), ("module_state", found.state))
            for name, mismatch in checked:
                if mismatch is not None:
                    failing[name] += 1
                    if name not in first:
                        first[name] = (case["id"], mismatch.detail)
                        self._first_failing(case, mismatch)
            if self.is_reference:  # the reference's forward is what the null control runs
                found.integrity.pop("runs_kernel", None)
            for name, detail in found.integrity.items():
                first.setdefault(name, (case["id"], detail))
            if case.get("expected_state") is not None:
                stateful = ["module_state"]
        self.v.add("run", True, "every call returned")
        self._case_notes(stream)
        ran = len(self.info["cases"]) - stream.skipped
        for name in ("correctness", "stress", "determinism", *stateful, *_INTEGRITY_CHECKS):
            if name in first:
                cid, detail = first[name]
                count = f" ({failing[name]} of {ran} cases)" if name in failing else ""
                self.v.add(name, False, f"case {cid}{count}: {detail}")
            else:
                modes = ", ".join(str(m) for m in self.v.modes or [])
                passed = checks.PASS_TEXT.get(name, "ok").format(n=ran, shapes=", ".join(self.v.shapes), modes=modes)
                self.v.add(name, True, passed)
        integrity = [n for n in _INTEGRITY_CHECKS if n in first]
        if integrity:
            self.v.fail(VerdictStatus.FAILED_INTEGRITY, f"{integrity[0]}: {first[integrity[0]][1]}")
        for name in ("correctness", "stress", "determinism", "module_state"):
            if name in first:
                self.v.fail(VerdictStatus.FAILED_CORRECTNESS, f"{name}: case {first[name][0]}: {first[name][1]}")
        return self.v.passed

    def _raised(self, case: dict[str, Any], message: str) -> None:
        """The candidate raised on ``case``: the verdict fails (a crash when memory ran out)."""
        self.v.failing_case = FailingCase(id=case["id"], shape=case["shape"], inputs=case["kind"])
        self.v.add("run", False, f"case {case['id']}: {message}")
        if any(w in message for w in _MEMORY_WORDS):
            limit = self.settings.memory_limit_mb
            self.v.fail(VerdictStatus.CRASHED, f"memory limit ({limit} MiB) reached: {checks.first_line(message)}")
        else:
            said = checks.first_line(message)
            self.v.fail(VerdictStatus.RUNTIME_ERROR, f"the candidate raised on case {case['id']}: {said}")

    def _first_failing(self, case: dict[str, Any], mismatch: Mismatch) -> None:
        if self.v.failing_case is None:
            self.v.failing_case = FailingCase(
                id=case["id"],
                shape=case["shape"],
                inputs=case["kind"],
                output=mismatch.output,
                mismatch=mismatch.kind,
                detail=mismatch.detail,
                max_abs=mismatch.max_abs,
                max_rel=mismatch.max_rel,
            )

    def _case_notes(self, stream: CaseStream) -> None:
        self.v.cases -= stream.skipped
        self.v.warnings.extend(stream.notes)
        degenerate = stream.degenerate()
        if degenerate:
            self.v.warnings.append(degenerate)

    def timing(self) -> None:
        roof = self._ref_reply("failed while estimating the roofline")
        self.info["roofline"] = (
            {k: v for k, v in roof.items() if k != "type"} if roof.get("type") == "roofline" else None
        )
        kept = CandidateTimes(self.tol)
        timer = PairedTimer(
            self.ref,
            self.cand,
            self.deadline,
            self._ref_reply,
            self.settings.compile_baseline,
            self.settings.load_check,
            self.threads,
            str(self.spec.path),
            self.ref_guard.check,
        )
        try:
            paired = timer.run(self.info["timing"], self.progress, kept.take)
        except ReferenceTampered:  # failed by ``finish`` (the guard keeps what changed)
            return
        except CandidateFailed as exc:
            self.v.add("timed_outputs", False, str(exc.reply["message"]))
            self.v.fail(VerdictStatus.RUNTIME_ERROR, f"a timed call raised: {checks.first_line(str(exc))}")
            return
        record_timing_checks(self.v, kept, self.device)
        cold, warm = paired.cold, paired.warm
        record_speedups(self.v, self.info.get("roofline"), kept.times, cold.eager, cold.compiled, paired.compile_error)
        record_pairs(self.v, kept.times, cold.eager, cold.compiled, paired.contention)
        timing = self.info["timing"]
        record_regimes(
            self.v, kept.warm, warm.eager, warm.compiled, timing.get("working_set_bytes"), timing.get("cache_bytes")
        )
        if self.device == "cuda":
            record_launch_cost(self.v, kept.launch, cold.eager_launch + warm.eager_launch)

    def bind(self) -> None:
        """How a passing candidate binds to existing instances of the user's class (it never fails
        the verdict: ``bank.load`` uses the kernel either way)."""
        if not self.v.passed or "bound" not in self.info:
            return
        self.progress("candidate: bound to an instance of the reference class")
        try:
            bound = self.info["bound"]
            stream = CaseStream(self.ref, self._ref_reply, bound["cases"], self.tol)
            found = check_binding(self._ask_candidate, bound["model"], stream, self.device, self.tol)
        except WorkerGone as exc:
            found = Binding(mode=BindMode.NONE, reason=f"bound to an instance, the worker ended: {exc.ending.detail}")
        except MALFORMED as exc:
            found = Binding(mode=BindMode.NONE, reason=f"malformed reply while bound: {exc!r}")
        self.v.binding = found
        binds = found.mode is not BindMode.NONE
        self.v.add("binds", binds, f"{found.mode}: {found.reason}" if binds else f"no: {found.reason}", fatal=False)

    def _record_memory(self, ref: WorkerProcess | None, cand: WorkerProcess | None) -> None:
        working = int((self.info.get("timing") or {}).get("working_set_bytes") or 0)
        peaks = (cand.peak_mib() if cand is not None else None, ref.peak_mib() if ref is not None else None)
        memory.record_peaks(self.v, *peaks, working)

    def _keep_or_close(self, ref: WorkerProcess, untouched: bool) -> None:
        """The reference worker goes back to the pool for the next verification, unless it never
        started the op or a candidate changed its scheduling."""
        hello = self.hello
        if self.references is not None and untouched and hello is not None and not hello.get("error"):
            self.references.give(self.env, KeptReference(ref, hello))
        else:
            ref.close()

    def finish(self) -> Verdict:
        ref: WorkerProcess | None = getattr(self, "ref", None)
        cand: WorkerProcess | None = getattr(self, "cand", None)
        self._record_memory(ref, cand)
        guard: SchedGuard | None = getattr(self, "ref_guard", None)
        tampered = guard.check() if guard is not None else None
        if tampered is not None or (guard is not None and self.v.timings_ms.candidate is not None):
            record_reference_sched(self.v, tampered)  # a pass is worth saying once it was timed
        if cand is not None:
            self.v.candidate_output = cand.output()
            cand.close()
        if ref is not None:
            self._keep_or_close(ref, tampered is None)
        import torch

        try:
            import triton

            triton_version: str | None = triton.__version__
        except ImportError:
            triton_version = None
        self.v.versions = Versions(torch=torch.__version__, python=sys.version.split()[0], triton=triton_version or "")
        self.v.elapsed_s = round(time.monotonic() - self.t0, 3)
        return self.v


def verify(
    op_path: str | Path,
    candidate_path: str | Path,
    settings: ForgeSettings | None = None,
    progress: ProgressNote | None = None,
    references: ReferencePool | None = None,
    is_reference: bool = False,
) -> Verdict:
    """Verify one candidate against one op file. Raises ForgeError for bad input (exit 2).
    ``references``: where a caller verifying many candidates of this op keeps its reference
    worker between verifications (``VerifierService`` does). ``is_reference``: the candidate is
    the op's reference itself (the null control), which runs the reference's forward by design."""
    cand = Path(candidate_path).expanduser()
    if not cand.is_file():
        raise CandidateFileError(
            f"{str(cand)!r}: no such candidate file; pass the path of a .py file defining ModelNew"
        )
    progress = progress or (lambda _m: None)
    run = _Run(Path(op_path), cand, settings or ForgeSettings(), progress, references, is_reference)
    try:
        run.start()
        run.reference()
        if run.load() and run.correctness():
            run.timing()
            run.bind()
    except WorkerGone as exc:
        timed_out = exc.ending.kind == "timeout"
        status = VerdictStatus.TIMEOUT if timed_out else VerdictStatus.CRASHED
        detail = exc.ending.detail + (f" after {run.settings.timeout:g} s" if timed_out else "")
        run.v.add("worker", False, detail)
        run.v.fail(status, detail)
    finally:
        verdict = run.finish()
    return verdict
