"""The candidate worker: imports the candidate, runs it on what the parent sends, reports facts.

Everything here runs in the process the candidate controls, so nothing here decides anything:
it returns outputs and observations (types, aliasing, threads, clocks) and the parent judges.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

import torch

from forge.core.forward_tap import ForwardTap
from forge.core.importing import import_file, register_reference, registered_reference
from forge.core.instance_binding import BindRefused, bound_forward, plan_binding
from forge.core.module_call import output_layout, output_tensors
from forge.core.problem import load_problem, read_problem_source
from forge.verifier.machine.memory import release_free_memory
from forge.verifier.protocol import (
    BindRequest,
    BoundReply,
    CaseFacts,
    CaseRequest,
    CaseResultReply,
    ErrorReply,
    GradRunReply,
    GradRunRequest,
    InstantiateRequest,
    LoadedReply,
    LoadRequest,
    Message,
    ModelBuild,
    ProfileReply,
    ProfileRequest,
    ReadyReply,
    TimeBeginRequest,
    TimeCallRequest,
    TimedCallReply,
    TimeEndRequest,
    TimeReadyReply,
    TimingFacts,
    TimingReply,
)
from forge.verifier.worker import gradients
from forge.verifier.worker.call_form import invoke, use_op
from forge.verifier.worker.call_profile import candidate_profile
from forge.verifier.worker.candidate_watch import busy_python_threads, candidate_trace, native_threads, thread_names
from forge.verifier.worker.output_copies import (
    OutputPool,
    bitwise_equal,
    plain_copy,
    ranges_overlap,
    same_now,
    storage_ok,
)
from forge.verifier.worker.timing.worker_loop import Clocks, TimedCalls


class StageError(Exception):
    def __init__(self, stage: str, message: str) -> None:
        super().__init__(message)
        self.stage = stage
        self.message = message


def _poison(device: str, nbytes: int) -> None:
    """Fill soon-to-be-reused memory with NaN, so uninitialised outputs show as NaN, not as stale results."""
    buf = torch.full((max(nbytes, 4096) // 4,), float("nan"), device=device)
    del buf


def _fresh(x: torch.Tensor, device: str) -> torch.Tensor:
    """A torch-allocated (aligned, private) copy on the device: wire buffers are neither."""
    return x.to(device, copy=True)


@contextlib.contextmanager
def _constants(module: Any, overrides: dict[str, Any]) -> Iterator[None]:
    """A shape variant's constants on the reference module while a model is built, as the
    reference worker had them (for a Model that reads module-level sizes in __init__)."""
    saved = {k: getattr(module, k) for k in overrides if module is not None and hasattr(module, k)}
    try:
        for k, v in overrides.items():
            if module is not None:
                setattr(module, k, v)
        yield
    finally:
        for k, v in saved.items():
            setattr(module, k, v)


def _init_args(spec: ModelBuild) -> list[Any]:
    """The constructor arguments the reference's worker sent, or (objects no message carries) the
    op file's own ``get_init_inputs()``, called here under the variant's constants."""
    if spec.init_args is not None:
        return list(spec.init_args)
    return list(registered_reference().get_init_inputs())


class _BoundCall:
    """A kernel bound to an instance of the user's class, called like a module."""

    def __init__(self, forward: Callable[..., Any], instance: torch.nn.Module) -> None:
        self.forward = forward
        self.instance = instance

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return self.forward(self.instance, *args, **kwargs)


class CandidateSide:
    def __init__(
        self, device: str, clocks: Clocks, flush: Callable[[], None], clock_check: Callable[[], list[str]]
    ) -> None:
        self.device = device
        self.clocks = clocks
        self.flush = flush
        self.clock_check = clock_check
        self.module: Any = None
        self.path = ""
        self.models: dict[str, torch.nn.Module] = {}
        self.calls = 0
        self.reference_calls: ForwardTap | None = None
        self.tids_before: set[int] = set()
        self.timed_model = ""  # the model the last timing batch called
        self._drop_timing()

    def answer(self, request: Message, tick: Callable[[], None]) -> Message:
        """This side's reply to ``request``, by the request's type (one it does not answer is
        forge's bug, said as such); ``tick`` tells the parent a timed call is under way."""
        match request:
            case LoadRequest():
                return self.load(request)
            case InstantiateRequest():
                return self.instantiate(request)
            case BindRequest():
                return self.bind(request)
            case CaseRequest():
                return self.case(request)
            case GradRunRequest():
                return self.grad_run(request)
            case TimeBeginRequest():
                return self.time_begin(request)
            case TimeCallRequest():
                return self.time_call(request, tick)
            case TimeEndRequest():
                return self.time_end(request)
            case ProfileRequest():
                return self.profile(request)
        return ErrorReply(stage="internal", message=f"the candidate side answers no {type(request).__name__}")

    def _drop_timing(self) -> None:
        """Hold no timing inputs (before the first batch, and once timing is over)."""
        self.warmup: list[list[Any]] = []
        self.timing_sets: list[list[Any]] = []
        self.timed = TimedCalls.idle(self.flush, self.clocks)

    def load(self, request: LoadRequest) -> LoadedReply:
        # The reference module is importable as ``forge_reference`` so candidates may subclass Model.
        problem = load_problem(read_problem_source(request.op_path))
        register_reference(problem.module)
        use_op(problem.module)  # before the candidate is imported: the call is the op file's
        if isinstance(getattr(problem.module, "Model", None), type):
            self.reference_calls = ForwardTap(problem.module.Model)
        self.path = str(Path(request.candidate_path).resolve())
        try:
            module = import_file("forge_candidate", self.path)
        except SyntaxError as exc:
            raise StageError("load", f"{Path(self.path).name}:{exc.lineno}: SyntaxError: {exc.msg}") from exc
        except Exception as exc:
            raise StageError("load", candidate_trace(exc, self.path)) from exc
        cls = getattr(module, "ModelNew", None)
        if not (isinstance(cls, type) and issubclass(cls, torch.nn.Module)):
            raise StageError("interface", "the candidate does not define class ModelNew(nn.Module)")
        self.module = module
        return LoadedReply()

    def instantiate(self, request: InstantiateRequest) -> ReadyReply:
        cls = self.module.ModelNew
        for spec in request.models:
            try:
                with _constants(registered_reference(), spec.overrides):
                    model = cls(*_init_args(spec))
            except Exception as exc:
                raise StageError(
                    "interface", f"ModelNew(*get_init_inputs()) raised:\n{candidate_trace(exc, self.path)}"
                ) from exc
            try:
                model = model.to(self.device)
                state = {k: v.to(self.device) for k, v in spec.state_dict.items()}
                model.load_state_dict(state, strict=True)
                model.train(spec.train)  # eval mode unless this model is the training-mode one
            except Exception as exc:
                raise StageError(
                    "interface",
                    "ModelNew does not accept the reference's state_dict (same parameter and buffer "
                    f"names and shapes are required):\n{str(exc)[:1500]}",
                ) from exc
            self.models[spec.key] = model
        return ReadyReply()

    def bind(self, request: BindRequest) -> BoundReply:
        """Bind ModelNew to an instance of the reference's own class, as ``bank.kernelize`` does:
        later cases on model "bound" call the kernel through that binding."""
        self._drop_timing()  # timing is over: what it held does not add to the bound cases' peak
        release_free_memory()
        spec = request.model
        ref_cls = registered_reference().Model
        try:
            with _constants(registered_reference(), spec.overrides):
                instance = ref_cls(*_init_args(spec))
                sample = self.module.ModelNew(*_init_args(spec))
            instance = instance.to(self.device)
            instance.load_state_dict({k: v.to(self.device) for k, v in spec.state_dict.items()}, strict=True)
            instance.train(spec.train)
            sample.train(spec.train)
            plan = plan_binding(self.module.ModelNew, ref_cls, sample, instance)
            forward = bound_forward(self.module.ModelNew, plan, instance, instance)
        except BindRefused as exc:
            return BoundReply(mode="none", reason=str(exc))
        except Exception as exc:
            raise StageError("bind", candidate_trace(exc, self.path)) from exc
        self.models[spec.key] = _BoundCall(forward, instance)  # type: ignore[assignment]
        return BoundReply(mode=str(plan.mode), reason=plan.reason)

    def _call(self, model: torch.nn.Module, inputs: Sequence[torch.Tensor], sync: bool = True) -> Any:
        """One call under no_grad. Untimed calls synchronize inside, so an asynchronous device error
        is raised by the call that caused it; timed calls leave that to the timed loop, after its
        end event, as eager's calls do (a synchronize inside the events would charge the candidate
        the host's wake-up and the end event's launch, some 10-30 us a call on a GPU)."""
        with torch.no_grad():
            out = invoke(model, inputs)
        if sync:
            self.clocks.sync()
        return out

    def _call_copied(self, model: torch.nn.Module, inputs: Sequence[torch.Tensor], what: str) -> list[Any]:
        """Call again and copy the outputs at once; an exception names which extra call it was."""
        try:
            outs = [plain_copy(o) for o in output_tensors(self._call(model, inputs))]
        except Exception as exc:
            raise StageError("run", f"{what} raised:\n" + candidate_trace(exc, self.path)) from exc
        self.calls += 1
        return outs

    def case(self, request: CaseRequest) -> CaseResultReply:
        model = self.models[request.model]
        inputs = [_fresh(x, self.device) for x in request.inputs]
        pristine = [x.clone() for x in inputs]
        state_names = list(request.state_before or {})
        if request.state_before:
            _set_buffers(model, request.state_before, self.device)
        _poison(self.device, sum(x.numel() * x.element_size() for x in inputs))
        py_before = set(threading.enumerate())
        tids_before = native_threads()
        counted = self.reference_calls
        ran_before = counted.count if counted is not None else 0
        try:
            out = self._call(model, inputs)
        except Exception as exc:
            raise StageError("run", candidate_trace(exc, self.path)) from exc
        reference_ran = (counted.count - ran_before) if counted is not None else 0
        outs = output_tensors(out)
        first = [plain_copy(o) for o in outs]  # taken at once: later changes mean lazy work
        state_after = _get_buffers(model, state_names) if state_names else None
        busy = busy_python_threads(py_before)
        new_tids = sorted(native_threads() - tids_before)
        call_index = self.calls
        self.calls += 1
        modified = [j for j, (x, p) in enumerate(zip(inputs, pristine, strict=True)) if not bitwise_equal(x, p)]
        second = self._call_copied(model, inputs, "second call on the same inputs")
        changed = _changed(outs, first)
        refilled, overwritten = None, []
        if request.refill is not None:
            # Same buffers, new values: a result cached on pointers or shapes shows up here, and
            # so does one buffer of the candidate's returned by every call (the first call's
            # outputs are still alive, as a caller keeping a residual keeps them).
            for x, new in zip(inputs, request.refill, strict=True):
                x.copy_(new)
            refilled = self._call_copied(model, inputs, "a call on refilled inputs")
            overwritten = [i for i in _changed(outs, first) if i not in changed]
        facts = CaseFacts(
            layout=output_layout(out),
            types=[type(o).__module__ + "." + type(o).__qualname__ for o in outs],
            plain=[type(o) is torch.Tensor for o in outs],
            storage_ok=[isinstance(o, torch.Tensor) and storage_ok(o) for o in outs],
            devices=[str(o.device.type) if isinstance(o, torch.Tensor) else None for o in outs],
            aliases=[
                [j for j, x in enumerate(inputs) if isinstance(o, torch.Tensor) and ranges_overlap(o, x)] for o in outs
            ],
            busy_python_threads=busy,
            new_native_threads=len(new_tids),
            new_thread_names=thread_names(new_tids),
            call_index=call_index,
            reference_calls=reference_ran,
            inputs_modified=modified,
            changed_after_return=changed,
            clock_tampering=self.clock_check(),
            overwritten_by_later_call=overwritten,
        )
        return CaseResultReply(
            id=request.id,
            outputs=first,
            outputs2=second,
            outputs_refill=refilled,
            state_after=state_after,
            facts=facts,
        )

    def grad_run(self, request: GradRunRequest) -> GradRunReply:
        """A gradient case: ModelNew's forward and the backward it provides (see ``gradients``)."""
        model = self.models[request.model]
        inputs = [_fresh(x, self.device) for x in request.inputs]
        counted = self.reference_calls
        ran_before = counted.count if counted is not None else 0
        try:
            given = [g.to(self.device) for g in request.grad_outputs]
            reply = gradients.candidate_case(self.module, model, inputs, given, request.second_order)
        except Exception as exc:
            raise StageError("run", candidate_trace(exc, self.path)) from exc
        reply.reference_calls = (counted.count - ran_before) if counted is not None else 0
        return reply

    def time_begin(self, request: TimeBeginRequest) -> TimeReadyReply:
        """Prepare a batch of timed calls; the parent then asks for them one by one (``time_call``)."""
        model = self.models[request.model]
        self.timed_model = request.model
        if request.sets is not None or not self.timing_sets:  # None: the batch held from before
            self.timing_sets = [[_fresh(x, self.device) for x in s] for s in request.sets or []]
        if request.warmup is not None:  # sent with the first batch, kept for the later ones
            self.warmup = [[_fresh(x, self.device) for x in s] for s in request.warmup]
        self.tids_before = native_threads()
        pool = OutputPool()
        self.first_output = _FirstOutput(pool)
        call = (
            gradients.training_step(model) if request.train_step else (lambda inp: self._call(model, inp, sync=False))
        )
        self.timed = TimedCalls(
            call,
            self.flush,
            self.clocks,
            keep=self.first_output.keep,
            warm=request.warm,
        )
        if request.warmup is not None:
            # Once, before the first batch (the correctness phase's memory goes back). Trimmed
            # before every batch, the holes it leaves in the heap were untouched again each time,
            # and a timed output landing in one took its page faults (see ``prefault_heap``).
            release_free_memory()
        try:
            self.timed.begin(self.timing_sets, self.warmup, budget=request.memory_budget or None)
        except Exception as exc:
            raise StageError("run", "a warm-up call raised:\n" + candidate_trace(exc, self.path)) from exc
        return TimeReadyReply()

    def time_call(self, request: TimeCallRequest, tick: Callable[[], None]) -> TimedCallReply:
        self.timed.tick = tick
        try:
            took = self.timed.one(self.timing_sets[request.index])
        except Exception as exc:
            raise StageError("run", "a timed call raised:\n" + candidate_trace(exc, self.path)) from exc
        return TimedCallReply(ns=took)

    def time_end(self, request: TimeEndRequest) -> TimingReply:
        run = self.timed.end()
        new_tids = native_threads() - self.tids_before
        facts = TimingFacts(
            new_native_threads=len(new_tids),
            new_thread_names=thread_names(new_tids),
            clock_tampering=self.clock_check(),
            first_output_overwritten=self.first_output.overwritten(),
        )
        return TimingReply(
            times_ns=run.times,
            host_ns=run.host,
            window_ns=run.window,
            launch_ns=run.launch,
            outputs=run.outputs,
            facts=facts,
        )

    def profile(self, request: ProfileRequest) -> ProfileReply:
        """Its calls on the first timing set (the forward's, before any training step) under
        torch.profiler: where its time goes."""
        model, inputs = self.models[self.timed_model], self.timing_sets[0]
        try:
            found = candidate_profile(
                lambda: self._call(model, inputs, sync=False), self.device, request.calls, request.call_ms
            )
        except Exception as exc:
            raise StageError("profile", "a profiled call raised:\n" + candidate_trace(exc, self.path)) from exc
        return ProfileReply(profile=found)


def _changed(outs: Sequence[Any], copies: Sequence[Any]) -> list[int]:
    """The outputs whose values now differ from the copies taken when they were returned."""
    return [
        i
        for i, (o, f) in enumerate(zip(outs, copies, strict=True))
        if isinstance(o, torch.Tensor) and f is not None and not same_now(o, f)
    ]


class _FirstOutput:
    """Copies each timed call's outputs (``keep``); the batch's first outputs themselves are kept
    alive to its end, when ``overwritten`` says whether a later call wrote into them."""

    def __init__(self, pool: OutputPool) -> None:
        self.pool = pool
        self.live: list[Any] | None = None
        self.copies: list[Any] = []

    def keep(self, out: Any) -> list[Any]:
        tensors = output_tensors(out)
        copies = [self.pool.copy(o) for o in tensors]
        if self.live is None:
            self.live, self.copies = list(tensors), copies
        return copies

    def overwritten(self) -> bool:
        found = self.live is not None and bool(_changed(self.live, self.copies))
        self.live, self.copies = None, []
        return found


def _set_buffers(model: torch.nn.Module, state: dict[str, torch.Tensor], device: str) -> None:
    """Put the module's buffers in the state a case starts from (the reference's, before its call)."""
    with torch.no_grad():
        for name, value in state.items():
            try:
                model.get_buffer(name).copy_(value.to(device))
            except (AttributeError, RuntimeError) as exc:
                raise StageError("run", f"ModelNew has no buffer {name!r} like the reference's: {exc}") from exc


def _get_buffers(model: torch.nn.Module, names: list[str]) -> dict[str, torch.Tensor | None]:
    out = {}
    for name in names:
        try:
            out[name] = plain_copy(model.get_buffer(name))
        except AttributeError:
            continue  # reported missing: the parent names it
    return out
