"""The reference worker: loads the op, draws cases, computes expected outputs, times baselines.

The candidate never runs in this process; what leaves it (inputs, weights, expected outputs) goes
to the trusted parent only.
"""

from __future__ import annotations

import traceback
from pathlib import Path
from typing import Any

import torch

from forge.core import shapes
from forge.core.errors import ProblemError
from forge.core.problem import Problem, load_problem, read_problem_source, reference_hash
from forge.verifier import cases, machine, roofline
from forge.verifier.timing import Clocks, TimedCalls

_MIN_TRIALS, _MAX_TRIALS = 5, 30
# Eager and the candidate are timed in turns, batch by batch, so that a slow spell of the machine
# lands on both sides. A batch holds at most _CALLS_PER_BATCH calls, whatever fits in memory: with
# every call of a side in one stretch, timing the op's own reference against itself (60 calls a
# side of linear_gelu, benchmarks/timing_stability.py --null) measured 0.90x-1.22x, and "faster
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


def as_output_list(out: Any) -> list[Any]:
    return list(out) if isinstance(out, tuple | list) else [out]


class ReferenceSide:
    def __init__(self, device: str, clocks: Clocks, flush: Any) -> None:
        self.device = device
        self.clocks = clocks
        self.flush = flush
        self.models: dict[str, torch.nn.Module] = {}
        self.timing: dict[str, Any] = {}
        self.timing_seed, self.per_batch = 0, 1
        self.compiled: Any = None
        self.compile_error: str | None = None
        self.single_output = True
        # A reference whose output is random (dropout in training mode) is verified in eval mode:
        # random outputs cannot be compared, and a kernel that dropped the randomness must not pass
        # as the training-mode op (see ``_detect_random``).
        self.eval_mode = False
        self.eager_calls: TimedCalls = TimedCalls(lambda _inputs: None, flush, clocks)
        self.compiled_calls: TimedCalls | None = None

    # -- helpers -----------------------------------------------------------------------------
    def _build(self, problem: Problem, seed: int, perturbed: bool) -> tuple[list[Any], torch.nn.Module]:
        init_args = problem.init_inputs()
        torch.manual_seed(seed)
        try:
            model = problem.model_cls(*init_args).to(self.device)
        except Exception as exc:
            raise ProblemError(f"{problem.spec.path}: Model(*get_init_inputs()) raised:\n{_trace(exc)}") from exc
        if perturbed:
            cases.perturb_parameters(model, seed + 1)
        if self.eval_mode:
            model.eval()
        return init_args, model

    def _draw(self, problem: Problem, seed: int) -> list[torch.Tensor]:
        torch.manual_seed(seed)
        return [x.to(self.device) for x in problem.inputs()]

    def _run(self, problem: Problem, model: torch.nn.Module, inputs: list[torch.Tensor]) -> list[torch.Tensor]:
        try:
            with torch.no_grad():
                out = model(*[x.clone() for x in inputs])
        except Exception as exc:
            where = f" with {shapes.describe(problem.overrides)}" if problem.overrides else ""
            raise ProblemError(
                f"{problem.spec.path}: the reference Model fails on its own inputs{where}:\n{_trace(exc)}"
            ) from exc
        self.single_output = not isinstance(out, tuple | list)
        outs = as_output_list(out)
        if not outs or not all(isinstance(o, torch.Tensor) for o in outs):
            raise ProblemError(
                f"{problem.spec.path}: Model.forward must return a tensor or a tuple of tensors, "
                f"got {type(out).__name__}"
            )
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
                    found.append((f"shape{i}", self._variant(spec, ov, seed)))
                except ProblemError as exc:
                    raise ProblemError(f"FORGE_SHAPES[{i}] ({shapes.describe(ov)}): {exc}") from exc
            return found, notes

        def runs(ov: dict[str, Any]) -> Problem | None:
            try:
                return self._variant(spec, ov, seed)
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
    def _detect_random(self, base: Problem, seed: int) -> list[str]:
        """Two calls on the same inputs from the same state: outputs that differ are random."""
        _, model = self._build(base, seed, False)
        inputs = self._draw(base, seed)
        state = _buffers(model)
        first = self._run(base, model, inputs)
        _restore(model, state)
        second = self._run(base, model, inputs)
        if all(_same(a, b) for a, b in zip(first, second, strict=True)):
            return []
        self.eval_mode = True
        return [
            "the reference's output is random (two calls on the same inputs differ, e.g. dropout in training "
            "mode): verified in eval mode, where it is deterministic; the kernel is not verified for training"
        ]

    def setup(self, msg: dict[str, Any]) -> dict[str, Any]:
        seed = int(msg["seed"])
        spec = read_problem_source(Path(msg["op_path"]))
        base = self.base = load_problem(spec)
        random_notes = self._detect_random(base, seed)
        variants, notes = self._variants(base, seed)
        notes = random_notes + notes
        plan: list[tuple[str, Problem, int, bool]] = [("base/0", base, 0, False), ("base/1", base, 1, True)]
        plan += [(f"{name}/1", p, 1, True) for name, p in variants]
        models, case_list = [], []
        for idx, (key, problem, init, perturbed) in enumerate(plan):
            init_args, model = self._build(problem, seed + 1000 * idx, perturbed)
            self.models[key] = model
            models.append(
                {
                    "key": key,
                    "variant": key.split("/")[0],
                    "overrides": problem.overrides,
                    "init": init,
                    "init_args": init_args,
                    "state_dict": {k: v.detach().cpu().clone() for k, v in model.state_dict().items()},
                    "eval": self.eval_mode,
                }
            )
            case_list += self._model_cases(key, problem, model, seed + 1000 * idx, notes)
        bound = self._bound_cases(base, seed + 5_555_555)
        timing = self._timing_sets(base, seed + 7_777_777, msg)
        tol = base.tolerance.model_dump() if base.tolerance else None
        return {
            "type": "problem",
            "name": spec.name,
            "op_hash": reference_hash(base),
            "target": base.target_class_path,
            "tolerance": tol,
            "models": models,
            "cases": case_list,
            "timing": timing,
            "bound": bound,
            "notes": notes,
        }

    def _model_cases(
        self, key: str, problem: Problem, model: torch.nn.Module, seed: int, notes: list[str]
    ) -> list[dict[str, Any]]:
        """The correctness cases of one model (weights and shape), each from the same module state."""
        found: list[dict[str, Any]] = []
        initial = _buffers(model)
        kinds = ["normal", "normal"] if key.startswith("base") else ["normal"]
        if key == "base/1":
            kinds += list(cases.STRESS_KINDS)
        for t, kind in enumerate(kinds):
            cseed = seed + 17 * (t + 1)
            inputs = self._draw(problem, cseed)
            if kind != "normal":
                inputs = cases.stress_inputs(inputs, kind, cseed)
            try:
                _restore(model, initial)  # every case starts from the same module state
                expected = self._run(problem, model, inputs)
            except ProblemError:
                if kind != "specials":
                    raise
                # A reference that refuses NaN/inf (a solver that checks its input) defines no
                # behaviour there for a candidate to match.
                notes.append(f"{key}: the reference raises on inputs holding NaN/inf; that stress case is skipped")
                continue
            found.append(
                {
                    "id": f"{key}:{kind}:{t}",
                    "model": key,
                    "kind": kind,
                    "shape": shapes.describe(problem.overrides),
                    "inputs": inputs,
                    "expected": expected,
                    "single": self.single_output,
                    **_state_case(initial, _buffers(model)),
                }
            )
        _restore(model, initial)
        return found

    def _bound_cases(self, base: Problem, seed: int) -> dict[str, Any]:
        """An instance of the user's class with weights of its own (unlike any the candidate was
        built with) and two cases on it: the candidate is bound to such an instance the way
        ``bank.kernelize`` binds it and must give its outputs."""
        init_args, model = self._build(base, seed, True)
        found = []
        for t in range(2):
            inputs = self._draw(base, seed + 17 * (t + 1))
            found.append(
                {
                    "id": f"bound:normal:{t}",
                    "model": "bound",
                    "kind": "normal",
                    "shape": shapes.describe(base.overrides),
                    "inputs": inputs,
                    "expected": self._run(base, model, inputs),
                    "single": self.single_output,
                }
            )
        state = {k: v.detach().cpu().clone() for k, v in model.state_dict().items()}
        spec = {"key": "bound", "init_args": init_args, "state_dict": state, "overrides": base.overrides}
        return {"model": spec, "cases": found}

    def _timing_sets(self, base: Problem, seed: int, msg: dict[str, Any]) -> dict[str, Any]:
        """Plan the timed trials and draw the first batch of them.

        Every timed call gets an input set never used before, so the trials come in batches that fit
        in memory; the parent alternates eager and candidate batch by batch, so a slow spell on the
        machine lands on both sides rather than on whichever was timed during it.
        """
        model = self.models["base/0"]
        probe = self._draw(base, seed)
        per_set = sum(x.numel() * x.element_size() for x in probe)
        per_set += sum(o.numel() * o.element_size() for o in self._run(base, model, probe))
        asked = msg.get("timing_trials")
        if asked:
            total = max(_MIN_TRIALS, int(asked))
        else:  # as many as the budget allows at the speed of three untimed calls
            est = []
            for _ in range(3):
                t0 = self.clocks.host_ns()
                self._run(base, model, probe)
                self.clocks.sync()
                est.append(self.clocks.host_ns() - t0)
            est_s = sorted(est)[1] / 1e9 + 0.002  # plus a cache flush
            total = max(_MIN_TRIALS, min(_MAX_TRIALS, int(float(msg.get("timing_budget_s", 1.0)) / est_s)))
        per_batch = max(1, min(total, (int(msg.get("timing_batch_mb", 160)) << 20) // max(per_set, 1)))
        batches, total = plan_batches(total, per_batch, exact=bool(asked))
        self.timing_seed, self.per_batch = seed, -(-total // batches)  # batches of (almost) equal size
        warmup = [self._draw(base, seed + i) for i in range(2)]
        first = self.timing_batch({"index": 0})
        self.timing["warmup"] = warmup
        cache = machine.last_level_cache_bytes(self.device)
        return {
            "model": "base/0", "warmup": warmup, "batches": batches, "working_set_bytes": per_set,
            "cache_bytes": cache, **first,
        }  # fmt: skip

    def timing_batch(self, msg: dict[str, Any]) -> dict[str, Any]:
        """The next batch of fresh timing inputs and their expected outputs (the previous batch is dropped)."""
        index = int(msg["index"])
        model = self.models["base/0"]
        self.timing.pop("sets", None)
        sets, expected = [], []
        for i in range(self.per_batch):
            inputs = self._draw(self.base, self.timing_seed + 2 + index * self.per_batch + i)
            sets.append(inputs)
            expected.append(self._run(self.base, model, inputs))
        self.timing["sets"] = sets
        return {"type": "timing_batch", "sets": sets, "expected": expected}

    def roofline(self, msg: dict[str, Any]) -> dict[str, Any]:
        """Asked for while the candidate runs its correctness cases (nothing is timed then)."""
        base = self.base
        model = self.models["base/0"]
        inputs = self.timing["sets"][0]
        nbytes, flops = roofline.estimate(model, inputs, self._run(base, model, inputs))
        figures = machine.machine_figures(self.device, torch.get_num_threads(), Path(msg["cache_dir"]))
        bound = roofline.bound_ms(nbytes, flops, figures["bandwidth_gbs"], figures["peak_gflops"])
        return {"type": "roofline", "bytes": nbytes, "flops": flops, **figures, "bound_ms": bound}

    def baselines_begin(self, msg: dict[str, Any]) -> dict[str, Any]:
        """Prepare to time eager (and torch.compile, compiled once per run) on the current batch,
        one call at a time (``baseline_call``), paired by the parent with the candidate's calls,
        cold or ``warm`` (``TimedCalls``)."""
        model = self.models["base/0"]

        def call_with(m: Any) -> Any:
            def call(inputs: Any) -> Any:
                with torch.no_grad():
                    return m(*inputs)

            return call

        sets, warm, regime = self.timing["sets"], self.timing["warmup"], bool(msg.get("warm"))
        self.eager_calls = TimedCalls(call_with(model), self.flush, self.clocks, warm=regime)
        self.eager_calls.begin(sets, warm)
        self.compiled_calls = None
        if msg.get("compile") and self.compile_error is None:
            try:
                if self.compiled is None:
                    self.compiled = torch.compile(model)
                    warm = warm + warm  # the first calls compile
                compiled = TimedCalls(call_with(self.compiled), self.flush, self.clocks, warm=regime)
                compiled.begin(sets, warm, prefault=False)
                self.compiled_calls = compiled
            except Exception as exc:  # the baseline is informative; its failure is not the candidate's
                self.compile_error = f"{type(exc).__name__}: {str(exc)[:500]}"
        return {"type": "baselines_ready"}

    def baseline_call(self, msg: dict[str, Any]) -> dict[str, Any]:
        inputs = self.timing["sets"][int(msg["index"])]
        reply: dict[str, Any] = {"type": "baseline_call", "eager_ns": self.eager_calls.one(inputs)}
        reply["eager_launch_ns"] = self.eager_calls.run.launch[-1]
        if self.compiled_calls is not None:
            try:
                reply["compile_ns"] = self.compiled_calls.one(inputs)
            except Exception as exc:
                self.compile_error = f"{type(exc).__name__}: {str(exc)[:500]}"
                self.compiled_calls = None
        return reply

    def baselines_end(self, msg: dict[str, Any]) -> dict[str, Any]:
        self.eager_calls.end()
        if self.compiled_calls is not None:
            self.compiled_calls.end()
        reply: dict[str, Any] = {"type": "baselines"}
        if self.compile_error is not None:
            reply["compile_error"] = self.compile_error
        return reply


def _trace(exc: BaseException) -> str:
    frames = [f for f in traceback.extract_tb(exc.__traceback__) if "/forge/" not in f.filename]
    return ("".join(traceback.format_list(frames[-5:])) + f"{type(exc).__name__}: {exc}").strip()


def _buffers(model: torch.nn.Module) -> dict[str, torch.Tensor]:
    return {name: b.detach().clone() for name, b in model.named_buffers()}


def _restore(model: torch.nn.Module, state: dict[str, torch.Tensor]) -> None:
    with torch.no_grad():
        for name, value in state.items():
            model.get_buffer(name).copy_(value)


def _same(a: torch.Tensor, b: torch.Tensor) -> bool:
    if a.shape != b.shape or a.dtype != b.dtype:
        return False
    if a.is_floating_point() or a.is_complex():
        return bool(torch.equal(a.isnan(), b.isnan()) and torch.equal(a.nan_to_num(0.0), b.nan_to_num(0.0)))
    return bool(torch.equal(a, b))


def _state_case(before: dict[str, torch.Tensor], after: dict[str, torch.Tensor]) -> dict[str, Any]:
    """For a case whose call changed the module's buffers (BatchNorm's running statistics in
    training mode): the state to start from and the state the call must leave (state is output)."""
    if all(_same(before[name], after[name]) for name in before):
        return {}
    cpu = {name: v.cpu() for name, v in before.items()}
    return {"state_before": cpu, "expected_state": {name: v.cpu() for name, v in after.items()}}
