"""The reference worker: loads the op, draws cases, computes expected outputs, times baselines.

The candidate never runs in this process; what leaves it (inputs, weights, expected outputs) goes
to the trusted parent only.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch

from forge.core import shapes
from forge.core.carved_ops import INSTANCE
from forge.core.errors import ProblemError
from forge.core.instance_binding import config_difference
from forge.core.module_call import output_layout, output_tensors
from forge.core.problem import Problem, load_problem, read_problem_source, reference_hash
from forge.core.statuses import ModuleMode
from forge.verifier.machine import facts as machine
from forge.verifier.machine import memory
from forge.verifier.protocol import (
    TRAIN_KEY,
    BaselineCallReply,
    BaselineCallRequest,
    BaselinesBeginRequest,
    BaselinesEndReply,
    BaselinesEndRequest,
    BaselinesReadyReply,
    BoundPlan,
    CaseDataReply,
    CaseDataRequest,
    ErrorReply,
    GradDataReply,
    GradDataRequest,
    Message,
    ModelBuild,
    ProblemReply,
    RooflineReply,
    RooflineRequest,
    SetupRequest,
    TimingBatchReply,
    TimingBatchRequest,
    TimingPlan,
)
from forge.verifier.worker import cases, gradients
from forge.verifier.worker.call_form import invoke, use_op
from forge.verifier.worker.op_work import roofline
from forge.verifier.worker.reference_cases import CaseBook, training_cases
from forge.verifier.worker.timing.worker_loop import Clocks, TimedCalls

_MIN_TRIALS, _MAX_TRIALS = 5, 30
# Eager and the candidate are timed in turns, batch by batch, so that a slow spell of the machine
# lands on both sides. A batch holds at most _CALLS_PER_BATCH calls, whatever fits in memory: with
# every call of a side in one stretch, timing the op's own reference against itself (60 calls a
# side of linear_gelu, benchmarks.claims.timing_stability --null) measured 0.90x-1.22x, and "faster
# beyond the noise" in 3 of 12 runs (0 of 12 with the cap). There are at least _MIN_BATCHES turns.
# Each batch costs a fresh draw and two transfers of its inputs (~1 s for 160 MB on a small VM).
# Large inputs fit few sets in a batch (two 64 MB sets of a 4096x1024 residual add + norm), and
# with six trials one outlier moves the upper quartile the acceptance rule reads; such problems get
# more batches, up to _STEADY_TRIALS trials where the budget allows that many.
_MIN_BATCHES, _CALLS_PER_BATCH = 3, 10
_STEADY_TRIALS, _MAX_STEADY_BATCHES = 12, 6


def plan_batches(total: int, per_batch: int, exact: bool = False) -> tuple[int, int]:
    """(batches, trials) for ``total`` wanted trials when a batch's memory holds ``per_batch``
    input sets. ``exact``: the caller asked for this many trials (``timing_trials``): as many
    batches as they take, not capped. The batches are of (almost) equal size: the caller draws
    ceil(trials / batches) sets for each."""
    per_batch = max(1, min(per_batch, _CALLS_PER_BATCH))
    if exact:
        batches = -(-total // per_batch)
    else:
        enough = max(_MIN_BATCHES, min(_MAX_STEADY_BATCHES, -(-min(total, _STEADY_TRIALS) // per_batch)))
        batches = min(enough, -(-total // per_batch))
        total = min(total, batches * per_batch)
    return max(batches, min(_MIN_BATCHES, total)), total


class ReferenceSide:
    def __init__(self, device: str, clocks: Clocks, flush: Any) -> None:
        self.device = device
        self.clocks = clocks
        self.flush = flush
        self.models: dict[str, torch.nn.Module] = {}
        # The current timing batch's input sets, and the warm-up inputs (drawn with the first).
        self.timing_sets: list[list[torch.Tensor]] | None = None
        self.timing_warmup: list[list[torch.Tensor]] = []
        self.timing_seed, self.per_batch = 0, 1
        self.budget: int | None = None  # bytes this worker may hold (memory.budget_bytes), set with the timing plan
        self.compiled: Any = None
        self.compile_error: str | None = None
        self.output_layout = "tensor"  # the structure around the reference's outputs (``module_call``)
        # The bank's kernels run where users call them, in eval mode (``model.eval()``) above all;
        # training mode is verified on a model of its own, except for a reference that is random
        # there (dropout), which cannot be compared (see ``_detect_modes``).
        self.modes: list[str] = [ModuleMode.EVAL.value]
        self.eager_calls: TimedCalls = TimedCalls.idle(flush, clocks)
        self.trim_before_timing = False  # set when a verification's timing starts (``timing_batch``)
        self.compiled_calls: TimedCalls | None = None
        self.compiled_training = False  # torch.compile's graphs for training steps were made
        self.book = CaseBook(self._draw, self._run)

    # -- helpers -----------------------------------------------------------------------------
    def _build(
        self, problem: Problem, seed: int, perturbed: bool, train: bool = False
    ) -> tuple[list[Any], torch.nn.Module]:
        init_args = problem.init_inputs()
        torch.manual_seed(seed)
        model = problem.build_model(init_args).to(self.device)
        if perturbed:
            cases.perturb_parameters(model, seed + 1)
        model.train(train)
        return init_args, model

    def _draw(self, problem: Problem, seed: int) -> list[torch.Tensor]:
        torch.manual_seed(seed)
        return [x.to(self.device) for x in problem.inputs()]

    def _run(self, problem: Problem, model: torch.nn.Module, inputs: list[torch.Tensor]) -> list[torch.Tensor]:
        try:
            with torch.no_grad():
                out = invoke(model, [x.clone() for x in inputs])
        except Exception as exc:
            raise problem.forward_failed(exc) from exc
        self.output_layout = output_layout(out)
        problem.check_outputs(out)
        outs = output_tensors(out)
        return [o.detach() for o in outs]

    def _variant(self, spec: Any, overrides: dict[str, Any], seed: int) -> Problem:
        """The op with some constants overridden; raises ProblemError if the reference fails on it."""
        p = load_problem(spec, overrides)
        self._run(p, self._build(p, seed, False)[1], self._draw(p, seed))
        return p

    def _variants(self, base: Problem, seed: int) -> tuple[list[tuple[str, Problem]], list[str]]:
        notes: list[str] = []
        spec = base.spec
        if base.declared_shapes is not None:
            found = []
            for i, ov in enumerate(base.declared_shapes):
                try:
                    found.append((f"shape{i}", self._variant(spec, {**base.overrides, **ov}, seed)))
                except ProblemError as exc:
                    raise ProblemError(f"FORGE_SHAPES[{i}] ({shapes.describe(ov)}): {exc}") from exc
            return found, notes

        def runs(ov: dict[str, Any]) -> Problem | None:
            try:
                return self._variant(spec, {**base.overrides, **ov}, seed)
            except ProblemError:
                return None

        accepted: list[tuple[str, Problem]] = []
        for family, ov in shapes.family_overrides(base.size_constants()).items():
            found_p = runs(ov)
            if found_p is None:
                # Coupled sizes: keep the constants that can change on their own, then retry them together.
                alone = {k: v for k, v in ov.items() if runs({k: v}) is not None}
                found_p = runs(alone) if alone else None
            if found_p is not None:
                accepted.append((family, found_p))
        if not accepted:
            notes.append("no shape variants: no integer size constant could change while the reference still runs")
        return accepted, notes

    # -- handlers ----------------------------------------------------------------------------
    def answer(self, request: Message, tick: Callable[[], None]) -> Message:
        """This side's reply to ``request``, by the request's type (one it does not answer is
        forge's bug, said as such)."""
        match request:
            case SetupRequest():
                return self.setup(request)
            case CaseDataRequest():
                return self.case_data(request)
            case GradDataRequest():
                return self.grad_data(request)
            case TimingBatchRequest():
                return self.timing_batch(request)
            case RooflineRequest():
                return self.roofline(request)
            case BaselinesBeginRequest():
                return self.baselines_begin(request)
            case BaselineCallRequest():
                return self.baseline_call(request)
            case BaselinesEndRequest():
                return self.baselines_end(request)
        return ErrorReply(stage="internal", message=f"the reference side answers no {type(request).__name__}")

    def _detect_modes(self, base: Problem, seed: int) -> tuple[list[str], list[str]]:
        """The training-mode model's case kinds (none: eval mode only) and a note for the verdict
        (``reference_cases.training_cases``); sets ``self.modes``."""
        _, model = self._build(base, seed, False, train=True)
        inputs = self._draw(base, seed)
        kinds, notes = training_cases(model, lambda m: self._run(base, m, inputs))
        self.modes = [ModuleMode.EVAL.value, ModuleMode.TRAIN.value] if kinds else [ModuleMode.EVAL.value]
        return kinds, notes

    def setup(self, request: SetupRequest) -> ProblemReply:
        """Plan a verification: models, case descriptors, the bound instance and the timing plan
        (its batches are drawn when timing starts). A worker kept for the next verification of the
        same op is set up again with that verification's seed (new weights, new cases); its
        compiled baseline is kept."""
        seed = request.seed
        spec = read_problem_source(Path(request.op_path))
        # another instance of a carved op than the one it builds: its constant overridden throughout
        base = self.base = load_problem(spec, {INSTANCE: request.instance} if request.instance else None)
        use_op(base.module)
        self._reset()
        train_kinds, mode_notes = self._detect_modes(base, seed)
        variants, notes = self._variants(base, seed)
        notes = mode_notes + notes
        plan: list[tuple[str, Problem, bool]] = [("base/0", base, False), ("base/1", base, True)]
        plan += [(f"{name}/1", p, True) for name, p in variants]
        if train_kinds:
            plan.append((TRAIN_KEY, base, True))
        previous, self.models = self.models, {}
        models: list[ModelBuild] = []
        case_list = []
        for idx, (key, problem, perturbed) in enumerate(plan):
            train = key == TRAIN_KEY
            init_args, model = self._build(problem, seed + 1000 * idx, perturbed, train=train)
            model = self._keep_compiled(key, model, previous.get(key))
            self.models[key] = model
            models.append(_model_build(key, problem, init_args, model, train))
            kinds = ["normal", "normal"] if key.startswith("base") else ["normal"]
            kinds = train_kinds if key == TRAIN_KEY else kinds
            if key == "base/1":
                kinds += list(cases.STRESS_KINDS)
            case_list += self.book.plan(key, problem, model, seed + 1000 * idx, kinds)
        bound = self._bound_cases(base, seed + 5_555_555)
        timing = self._timing_plan(base, seed + 7_777_777, request)
        tol = base.tolerance.model_dump() if base.tolerance else None
        return ProblemReply(
            name=spec.name,
            op_hash=reference_hash(base),
            target=base.target_class_path,
            tolerance=tol,
            models=models,
            cases=case_list,
            timing=timing,
            bound=bound,
            notes=notes,
            modes=self.modes,
        )

    def _reset(self) -> None:
        """Forget the previous verification (a worker kept for the next one): its cases, timing
        batches and any timed calls it left open; the heap it freed goes back to the system."""
        self.modes = [ModuleMode.EVAL.value]
        self.book = CaseBook(self._draw, self._run)
        self._drop_timing()

    def _drop_timing(self) -> None:
        """Let go of the timing batches, the warm-up inputs and any timed calls left open."""
        self.eager_calls.end()
        if self.compiled_calls is not None:
            self.compiled_calls.end()
        self.eager_calls, self.compiled_calls = TimedCalls.idle(self.flush, self.clocks), None
        self.timing_sets, self.timing_warmup = None, []
        memory.release_free_memory()

    def _keep_compiled(self, key: str, model: torch.nn.Module, old: torch.nn.Module | None) -> torch.nn.Module:
        """The base model of a worker set up again: the instance its torch.compile baseline was
        built on, given the new model's weights and buffers (compiling again costs seconds)."""
        if key != "base/0" or self.compiled is None or old is None or type(old) is not type(model):
            return model
        if config_difference(old, model) is not None:  # built otherwise (another of a carved op's instances)
            self.compiled, self.compiled_training = None, False
            return model
        try:
            old.load_state_dict(model.state_dict())
        except (RuntimeError, KeyError):
            self.compiled, self.compiled_training = None, False
            return model
        old.train(model.training)
        return old

    def case_data(self, request: CaseDataRequest) -> CaseDataReply:
        """One correctness case, drawn now (see ``CaseBook``)."""
        plan = self.book.plans.get(request.id)
        if plan is not None and plan.key == "bound" and self.timing_sets is not None:
            self._drop_timing()  # the bound cases come after timing: its batches are not needed
        return self.book.data(request.id, request.partner, lambda: self.output_layout)

    def grad_data(self, request: GradDataRequest) -> GradDataReply:
        """One gradient case on a planned model (``gradients.reference_case``)."""
        problem = next(p.problem for p in self.book.plans.values() if p.key == request.model)
        inputs = self._draw(problem, request.seed)
        if request.inputs != "normal":
            inputs = cases.stress_inputs(inputs, request.inputs, request.seed, problem.fixed_inputs)
        try:
            return gradients.reference_case(request, self.book.models[request.model], inputs)
        except ProblemError as exc:
            raise ProblemError(f"{problem.spec.path}: {exc.message}") from exc

    def _bound_cases(self, base: Problem, seed: int) -> BoundPlan:
        """An instance of the user's class with weights of its own (unlike any the candidate was
        built with) and two cases on it: the candidate is bound to such an instance the way
        ``bank.kernelize`` binds it and must give its outputs."""
        init_args, model = self._build(base, seed, True)
        found = self.book.plan("bound", base, model, seed, ["normal", "normal"])
        return BoundPlan(model=_model_build("bound", base, init_args, model, False), cases=found)

    def _timing_plan(self, base: Problem, seed: int, request: SetupRequest) -> TimingPlan:
        """Plan the timed trials (their batches are drawn when timing starts, ``timing_batch``).

        Every timed call gets an input set never used before, so the trials come in batches that fit
        in memory; the parent alternates eager and candidate batch by batch, so a slow spell on the
        machine lands on both sides rather than on whichever was timed during it.
        """
        model = self.models["base/0"]
        probe = self._draw(base, seed)
        per_set = sum(x.numel() * x.element_size() for x in probe)
        per_set += sum(o.numel() * o.element_size() for o in self._run(base, model, probe))
        asked = request.timing_trials
        if asked:
            total = max(_MIN_TRIALS, asked)
        else:  # as many as the budget allows at the speed of three untimed calls
            est = []
            for _ in range(3):
                t0 = self.clocks.host_ns()
                self._run(base, model, probe)
                self.clocks.sync()
                est.append(self.clocks.host_ns() - t0)
            est_s = sorted(est)[1] / 1e9 + 0.002  # plus a cache flush
            total = max(_MIN_TRIALS, min(_MAX_TRIALS, int(request.timing_budget_s / est_s)))
        # A batch's inputs and outputs are held by both workers and the parent, next to what
        # each already holds: an eighth of the op's memory bound at most (memory.budget_bytes).
        self.budget = memory.budget_bytes(per_set)
        batch_bytes = min(request.timing_batch_mb << 20, self.budget // 8)
        per_batch = max(1, min(total, batch_bytes // max(per_set, 1)))
        batches, total = plan_batches(total, per_batch, exact=bool(asked))
        self.timing_seed, self.per_batch = seed, -(-total // batches)  # batches of (almost) equal size
        cache = machine.last_level_cache_bytes(self.device)
        # No tensors here: the batches (the first with the warm-up inputs) are drawn when timing
        # starts, so the parent holds none of them through the correctness cases.
        return TimingPlan(
            model="base/0", batches=batches, working_set_bytes=per_set, cache_bytes=cache, memory_budget=self.budget
        )

    def timing_batch(self, request: TimingBatchRequest) -> TimingBatchReply:
        """The next batch of fresh timing inputs and their expected outputs (the previous batch is
        dropped); the first also carries the warm-up inputs."""
        index = request.index
        model = self.models["base/0"]
        self.timing_sets = None
        if index == 0:
            self.timing_warmup = [self._draw(self.base, self.timing_seed)]  # called twice
            self.trim_before_timing = True  # once, before the first batch (see ``baselines_begin``)
        sets, expected = [], []
        step = gradients.training_step(model) if request.train_step else None
        for i in range(self.per_batch):
            inputs = self._draw(self.base, self.timing_seed + 2 + index * self.per_batch + i)
            sets.append(inputs)
            expected.append(self._run(self.base, model, inputs) if step is None else list(step(inputs)))
        self.timing_sets = sets
        behind = self.book.lengths("base/0", sets[0]) if step is None and sets else []
        warmup = self.timing_warmup if index == 0 else None
        return TimingBatchReply(sets=sets, expected=expected, warmup=warmup, behind=behind)

    def roofline(self, request: RooflineRequest) -> RooflineReply:
        """Asked for while the candidate runs its correctness cases (nothing is timed then)."""
        base = self.base
        model = self.models["base/0"]
        inputs = self._draw(base, self.timing_seed)
        other = self._draw(base, self.timing_seed + 1)  # where work no output needs is, on a second draw
        call = roofline.estimate(model, inputs, self._run(base, model, inputs), other)
        f = machine.measured_figures(self.device, torch.get_num_threads(), Path(request.cache_dir))
        return RooflineReply(estimate=roofline.record(call, f, machine.last_level_cache_bytes(self.device)))

    def baselines_begin(self, request: BaselinesBeginRequest) -> BaselinesReadyReply:
        """Prepare to time eager (and torch.compile, compiled once per run) on the current batch,
        one call at a time (``baseline_call``), paired by the parent with the candidate's calls,
        cold or ``warm`` (``TimedCalls``)."""
        model = self.models["base/0"]

        def call_with(m: Any) -> Any:
            if request.train_step:
                return gradients.training_step(m)

            def call(inputs: Any) -> Any:
                with torch.no_grad():
                    return invoke(m, inputs)

            return call

        sets, warm, regime = self.timing_sets or [], self.timing_warmup, request.warm
        self.eager_calls = TimedCalls(call_with(model), self.flush, self.clocks, warm=regime)
        if self.trim_before_timing:
            self.trim_before_timing = False
            # Once, as the candidate does: trimmed before every batch, the heap's holes were
            # untouched again each time and a timed output landing in one faulted in.
            memory.release_free_memory()
        self.eager_calls.begin(sets, warm, budget=self.budget)
        self.compiled_calls = None
        if request.compile and self.compile_error is None:
            try:
                if self.compiled is None:
                    self.compiled = torch.compile(model)
                    warm = warm + warm  # the first calls compile
                if request.train_step and not self.compiled_training:
                    self.compiled_training = True
                    warm = warm + warm  # the first training steps compile the forward and backward again
                compiled = TimedCalls(call_with(self.compiled), self.flush, self.clocks, warm=regime)
                compiled.begin(sets, warm, prefault=False)
                self.compiled_calls = compiled
            except Exception as exc:  # the baseline is informative; its failure is not the candidate's
                self.compile_error = f"{type(exc).__name__}: {str(exc)[:500]}"
        return BaselinesReadyReply()

    def baseline_call(self, request: BaselineCallRequest) -> BaselineCallReply:
        inputs = (self.timing_sets or [])[request.index]
        reply = BaselineCallReply(
            eager_ns=self.eager_calls.one(inputs), eager_launch_ns=self.eager_calls.run.launch[-1]
        )
        if self.compiled_calls is not None:
            try:
                reply.compile_ns = self.compiled_calls.one(inputs)
            except Exception as exc:
                self.compile_error = f"{type(exc).__name__}: {str(exc)[:500]}"
                self.compiled_calls = None
        return reply

    def baselines_end(self, request: BaselinesEndRequest) -> BaselinesEndReply:
        self.eager_calls.end()
        if self.compiled_calls is not None:
            self.compiled_calls.end()
        return BaselinesEndReply(compile_error=self.compile_error)


def _plain_data(value: Any) -> bool:
    """What the channel carries as it is: plain values and tensors, in lists, tuples and dicts."""
    if value is None or isinstance(value, bool | int | float | str | torch.Tensor):
        return True
    if isinstance(value, list | tuple):
        return all(_plain_data(v) for v in value)
    return isinstance(value, dict) and all(isinstance(k, str) and _plain_data(v) for k, v in value.items())


def _model_build(key: str, problem: Problem, init_args: list[Any], model: torch.nn.Module, train: bool) -> ModelBuild:
    """What the candidate needs to build ``model`` again: its arguments (None: objects the channel
    cannot carry, a config object or a layer class, which the candidate's worker gets from the op
    file's ``get_init_inputs()`` itself), weights and mode."""
    state = {k: v.detach().cpu().clone() for k, v in model.state_dict().items()}
    args = init_args if _plain_data(init_args) else None
    return ModelBuild(key=key, init_args=args, state_dict=state, overrides=problem.overrides, train=train)
