"""The reference worker's correctness cases, planned at set-up and drawn one at a time on request.

A case is a seed, a model, and an input distribution: its inputs and expected outputs are made
again from those whenever the parent asks, so neither this worker nor the parent ever holds more
than a couple of cases at once (an op with 1 GB inputs has a dozen cases: 24 GB held at once
before). ``CaseBook.plan`` writes the descriptors the parent iterates over; ``CaseBook.data``
draws one case, with the case whose inputs are refilled into the same buffers (its partner).
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from dataclasses import dataclass

import torch

from forge.core import shapes
from forge.core.carved_ops import INSTANCE
from forge.core.errors import ProblemError
from forge.core.module_call import output_tensors
from forge.core.problem import Problem
from forge.verifier.protocol import TRAIN_KEY, CaseDataReply, CaseDescriptor, InputShape, PartnerCase
from forge.verifier.worker import cases
from forge.verifier.worker.call_form import invoke
from forge.verifier.worker.op_work.reduction_lengths import reduction_lengths

# The reference's draw and run, as ReferenceSide does them (seeded draw; no_grad run on clones).
Draw = Callable[[Problem, int], list[torch.Tensor]]
Run = Callable[[Problem, torch.nn.Module, list[torch.Tensor]], list[torch.Tensor]]
# The same run in float64 on a copy of the model (None where the reference cannot run so).
Exact = Callable[[torch.nn.Module, list[torch.Tensor]], list[torch.Tensor] | None]
# Cases kept after they were drawn: the one asked for and its partner, which is usually asked next.
_KEPT = 2


@dataclass(frozen=True)
class CasePlan:
    """How to make one case again: its model, its problem (shape variant), its kind and seed."""

    key: str
    problem: Problem
    kind: str
    seed: int


def buffers_of(model: torch.nn.Module) -> dict[str, torch.Tensor]:
    return {name: b.detach().clone() for name, b in model.named_buffers()}


def restore_buffers(model: torch.nn.Module, state: dict[str, torch.Tensor]) -> None:
    with torch.no_grad():
        for name, value in state.items():
            model.get_buffer(name).copy_(value)


def same_values(a: torch.Tensor, b: torch.Tensor) -> bool:
    """Equal, NaN positions included."""
    if a.shape != b.shape or a.dtype != b.dtype:
        return False
    if a.is_floating_point() or a.is_complex():
        return bool(torch.equal(a.isnan(), b.isnan()) and torch.equal(a.nan_to_num(0.0), b.nan_to_num(0.0)))
    return bool(torch.equal(a, b))


def training_cases(
    model: torch.nn.Module, call: Callable[[torch.nn.Module], list[torch.Tensor]]
) -> tuple[list[str], list[str]]:
    """How to verify training mode, for ``model`` built in it (``call`` runs a model on fixed
    inputs): the case kinds of its own model (none: eval mode only) and a note for the verdict.
    Two calls from the same state that differ are random (dropout): eval mode only. A call whose
    outputs or buffers differ from eval mode's is another op (BatchNorm): as many cases as eval
    mode's. Otherwise one case shows the kernel is the same op in training mode, as the reference is."""
    state = buffers_of(model)
    first = call(model)
    changed = any(not same_values(state[name], b) for name, b in buffers_of(model).items())
    restore_buffers(model, state)
    second = call(model)
    restore_buffers(model, state)
    if not all(same_values(a, b) for a, b in zip(first, second, strict=True)):
        return [], [
            "the reference's output is random in training mode (two calls on the same inputs differ, e.g. "
            "dropout): verified in eval mode only, where it is deterministic; in training mode the bank runs "
            "the reference"
        ]
    evaluated = call(model.eval())
    if not changed and all(same_values(a, b) for a, b in zip(first, evaluated, strict=True)):
        return ["normal"], []
    return ["normal", "normal"], [
        "the reference computes another op in training mode (its outputs or buffers differ from eval "
        "mode's, e.g. BatchNorm): verified in both modes alike"
    ]


@dataclass
class _Drawn:
    """A case's tensors; the module states only for a case whose call changed the module's
    buffers (BatchNorm's running statistics in training mode): the state to start from and the
    state the call must leave (state is output)."""

    inputs: list[torch.Tensor]
    expected: list[torch.Tensor]
    state_before: dict[str, torch.Tensor] | None = None
    expected_state: dict[str, torch.Tensor] | None = None
    exact: list[torch.Tensor] | None = None


def _drawn(
    inputs: list[torch.Tensor],
    expected: list[torch.Tensor],
    before: dict[str, torch.Tensor],
    after: dict[str, torch.Tensor],
    exact: list[torch.Tensor] | None,
) -> _Drawn:
    if all(same_values(before[name], after[name]) for name in before):
        return _Drawn(inputs, expected, exact=exact)
    cpu = {name: v.cpu() for name, v in before.items()}
    return _Drawn(inputs, expected, cpu, {name: v.cpu() for name, v in after.items()}, exact)


def widened(model: torch.nn.Module, tensors: list[torch.Tensor]) -> tuple[torch.nn.Module, list[torch.Tensor]]:
    """A float64 copy of ``model`` and float64 copies of the floating ``tensors`` (the others
    cloned). Always copies (``double`` of a float64 tensor is the tensor): an in-place op in the
    model keeps off the originals."""
    wide = [x.to(torch.float64, copy=True) if x.is_floating_point() else x.clone() for x in tensors]
    return copy.deepcopy(model).double(), wide


def run_in_float64(model: torch.nn.Module, inputs: list[torch.Tensor]) -> list[torch.Tensor] | None:
    """``model`` (a copy) on ``inputs`` with every floating tensor in float64: what the op's
    float32 outputs approximate. None where the reference does not run so (a dtype it checks, an
    extension that takes float32 only), returns something else than tensors, or has nothing in a
    reduced precision to widen."""
    if not any(t.is_floating_point() and t.dtype != torch.float64 for t in [*inputs, *model.parameters()]):
        return None
    try:
        wide, args = widened(model, inputs)
        with torch.no_grad():
            out = invoke(wide, args)
    except Exception:
        return None  # any failure only means there is no exact reference
    outs = output_tensors(out)
    if not all(isinstance(o, torch.Tensor) for o in outs):
        return None
    return [o.detach() for o in outs]


def _specs(inputs: list[torch.Tensor]) -> list[InputShape]:
    return [InputShape(shape=list(x.shape), dtype=str(x.dtype).removeprefix("torch.")) for x in inputs]


class CaseBook:
    """Every case of one verification, as plans; a case's tensors exist only while it is served."""

    def __init__(self, draw: Draw, run: Run, exact: Exact | None = run_in_float64) -> None:
        self._draw, self._run, self._exact = draw, run, exact
        self.plans: dict[str, CasePlan] = {}
        self.models: dict[str, torch.nn.Module] = {}
        self.initial: dict[str, dict[str, torch.Tensor]] = {}
        self._kept: dict[str, _Drawn] = {}
        self._lengths: dict[str, list[int]] = {}

    def plan(
        self, key: str, problem: Problem, model: torch.nn.Module, seed: int, kinds: list[str]
    ) -> list[CaseDescriptor]:
        """Plan the cases of one model (weights and shape); returns their descriptors."""
        self.models[key] = model
        self.initial[key] = buffers_of(model)
        drawn = self._draw(problem, seed)  # every case of a model has the same input shapes
        specs, nbytes = _specs(drawn), sum(x.numel() * x.element_size() for x in drawn)
        del drawn
        found = []
        for t, kind in enumerate(kinds):
            case_id = f"{key}:{kind}:{t}"
            self.plans[case_id] = CasePlan(key, problem, kind, seed + 17 * (t + 1))
            sizes = {k: v for k, v in problem.overrides.items() if k != INSTANCE}  # the instance is the verdict's
            shape = shapes.describe(sizes)
            found.append(CaseDescriptor(id=case_id, model=key, kind=kind, shape=shape, specs=specs, input_bytes=nbytes))
        return found

    def lengths(self, key: str, inputs: list[torch.Tensor]) -> list[int]:
        """``reduction_lengths`` of the model ``key``, its buffers as they were before. Found once
        for the models of one shape (the op's own ``base/*`` and ``bound``, each variant's
        ``name/*``; training mode apart): they depend on the shapes and the mode, not on the
        weights or values."""
        shape = {"bound": "base", TRAIN_KEY: TRAIN_KEY}.get(key, key.split("/")[0])
        if shape not in self._lengths:
            model = self.models[key]
            try:
                self._lengths[shape] = reduction_lengths(model, inputs)
            finally:
                restore_buffers(model, self.initial[key])
        return self._lengths[shape]

    def _make(self, case_id: str) -> _Drawn:
        kept = self._kept.pop(case_id, None)
        if kept is not None:
            self._kept[case_id] = kept
            return kept
        plan = self.plans[case_id]
        model = self.models[plan.key]
        inputs = self._draw(plan.problem, plan.seed)
        if plan.kind != "normal":
            inputs = cases.stress_inputs(inputs, plan.kind, plan.seed, plan.problem.fixed_inputs)
        initial = self.initial[plan.key]
        restore_buffers(model, initial)  # every case starts from the same module state
        # a stress case's exact outputs: an ill-conditioned op (attention's softmax over logits in
        # the thousands) is computed far from them by the float32 reference itself
        exact = self._exact(model, inputs) if self._exact is not None and plan.kind != "normal" else None
        try:
            expected = self._run(plan.problem, model, inputs)
            made = _drawn(inputs, expected, initial, buffers_of(model), exact)
        finally:
            restore_buffers(model, initial)
        self._kept[case_id] = made
        while len(self._kept) > _KEPT:
            self._kept.pop(next(iter(self._kept)))
        return made

    def data(self, case_id: str, partner_id: str | None, layout: Callable[[], str]) -> CaseDataReply:
        """One case's inputs and expected outputs (and module state), with its refill partner's."""
        plan = self.plans.get(case_id)
        if plan is None:
            raise ProblemError(f"the parent asked for a case the reference never planned: {case_id!r}")
        try:
            made = self._make(case_id)
        except ProblemError as exc:
            if plan.kind != "specials":
                raise
            # A reference that refuses NaN/inf (a solver that checks its input) defines no
            # behaviour there for a candidate to match.
            note = f"{plan.key}: the reference raises on inputs holding NaN/inf; that stress case is skipped"
            return CaseDataReply(id=case_id, skipped=note, detail=exc.message[:300])
        partner = None
        if partner_id is not None and partner_id in self.plans:
            other = self._make(partner_id)
            kind = self.plans[partner_id].kind
            partner = PartnerCase(
                id=partner_id, kind=kind, inputs=other.inputs, expected=other.expected, exact=other.exact
            )
        return CaseDataReply(
            id=case_id,
            layout=layout(),
            inputs=made.inputs,
            expected=made.expected,
            exact=made.exact,
            behind=self.lengths(plan.key, made.inputs),
            state_before=made.state_before,
            expected_state=made.expected_state,
            partner=partner,
        )
