"""The gradient check, in the trusted parent: a candidate's outputs and gradients on a gradient
case (``gradients``) against the reference's, tensor by tensor, each named in the failure."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from forge.core.errors import ProblemError, WorkerError
from forge.verifier.parent.checks import compare, input_elements
from forge.verifier.protocol import (
    ErrorReply,
    GradDataReply,
    GradDataRequest,
    GradRunReply,
    GradRunRequest,
    ProblemErrorReply,
    Reply,
)

# How many gradient cases each model gets: two, with different inputs and output gradients (a
# backward that caches its result, or ignores the output gradient, passes one). The model with
# perturbed weights on the op's own shapes gets stress inputs besides, as its correctness cases do
# (not NaN/inf: where a gradient meets them is the backward's own convention).
GRAD_CASES = 2
GRAD_STRESS = ("large", "heavy_tail", "mixed_sign")
STRESSED_MODEL = "base/1"


def grad_mismatch(
    data: GradDataReply, run: GradRunReply, tol: dict[str, float] | None, stress: bool = False
) -> str | None:
    """What is wrong with the candidate's reply ``run`` to the gradient case ``data``, or None.
    ``stress``: the inputs are a stress kind (atol scaled by magnitude, the float64 run beside)."""
    reduced = input_elements(data.inputs) + input_elements(data.grad_outputs)
    exact_grads = data.exact_grads or {}

    def mismatch(want: list[Any], got: list[Any], exact: list[Any] | None) -> Any:
        return compare(want, got, None, "cpu", tol, scale_atol=stress, reduced=reduced, exact=exact)

    m = mismatch(data.expected, run.outputs, data.exact)
    if m is not None:
        return f"forward with gradients enabled: {m.detail}"
    if not run.differentiable:
        return (
            "the candidate's outputs carry no autograd graph: it provides no backward (write a "
            "torch.autograd.Function, or a torch.library custom op with register_autograd)"
        )
    for name, want in data.grads.items():
        got = run.grads.get(name)
        if want is None:
            if _nonzero(got):
                return f"gradient of {name}: the reference's autograd gives none, the candidate's backward one"
            continue
        if got is None:
            return (
                f"gradient of {name}: the candidate's backward gives none where the reference's autograd gives "
                "one (detached, or missing from the backward)"
            )
        wide = exact_grads.get(name)
        m = mismatch([want], [got], [wide] if wide is not None else None)
        if m is not None:
            return f"gradient of {name}: {m.detail.removeprefix('output 0: ')}"
    return None


def second_order_mismatch(data: GradDataReply, run: GradRunReply) -> str | None:
    """A create_graph=True backward whose gradients carry no graph where the reference's do: a
    gradient penalty or a Hessian-vector product through it would silently drop those terms. A
    backward that raises instead refuses it loudly, and passes."""
    if data.second_order is None or not isinstance(run.second_order, dict):
        return None
    dropped = [name for name, has in data.second_order.items() if has and not run.second_order.get(name, False)]
    if not dropped:
        return None
    return (
        f"with create_graph=True (a double backward) the gradient of {dropped[0]} carries no autograd graph where "
        "the reference's does, so second-order terms would be silently dropped: raise in the backward when "
        "torch.is_grad_enabled() (once_differentiable alone does not: given gradients without a graph, it returns "
        "gradients without one), or make it differentiable"
    )


def _case_notes(runs: list[GradRunReply]) -> str:
    ops = sorted({op for r in runs for op in r.custom_ops})
    checked = f"; torch.library.opcheck passed on {', '.join(ops)}" if ops else ""
    said = [r.second_order for r in runs if r.second_order is not None]
    if not said:
        return checked
    if any(isinstance(s, str) for s in said):
        return f"; double backward (create_graph=True) raises: not provided{checked}"
    return f"; double backward (create_graph=True) gives gradients with their graph{checked}"


def _nonzero(t: Any) -> bool:
    return t is not None and bool(t.ne(0).any())


@dataclass(frozen=True)
class GradientOutcome:
    """The gradient check's result: passed, its detail (the first failing case and tensor), and
    whether the failure is one of integrity (the reference's autograd presented as a kernel's)."""

    passed: bool
    detail: str
    integrity: bool = False


REFERENCE_INSIDE = (
    "ModelNew ran the reference's forward while computing its gradients on the op's own shapes: "
    "its gradients are the reference's autograd, not a kernel's backward"
)


def gradient_cases(
    keys: list[str],
    seed: int,
    ask_reference: Callable[[GradDataRequest], Reply],
    ask_candidate: Callable[[GradRunRequest], GradRunReply | ErrorReply],
    tol: dict[str, float] | None,
    reference_allowed: bool = False,
) -> GradientOutcome:
    """Every model's gradient cases, the reference's then the candidate's. ``reference_allowed``:
    the candidate is the reference itself (the null control)."""
    ran: list[GradRunReply] = []
    for k, key in enumerate(keys):
        kinds = ["normal"] * GRAD_CASES + (list(GRAD_STRESS) if key == STRESSED_MODEL else [])
        for t, kind in enumerate(kinds):
            case = f"{key}:grad-{kind}:{t}"
            twice = t == 0  # each model's first case also runs a create_graph=True backward
            data = ask_reference(
                GradDataRequest(model=key, seed=seed + 7919 * (k * 8 + t), inputs=kind, second_order=twice)
            )
            if isinstance(data, ProblemErrorReply):
                raise ProblemError(data.message)
            if not isinstance(data, GradDataReply):
                raise WorkerError(f"reference worker: expected gradient case {case}, got {str(data)[:300]}")
            run = ask_candidate(
                GradRunRequest(model=key, inputs=data.inputs, grad_outputs=data.grad_outputs, second_order=twice)
            )
            if isinstance(run, ErrorReply):
                raised = f"the candidate raised in its forward or backward: {run.message[:1500]}"
                return GradientOutcome(False, f"case {case}: {raised}")
            if run.reference_calls and key.startswith("base") and not reference_allowed:
                return GradientOutcome(False, f"case {case}: {REFERENCE_INSIDE}", integrity=True)
            wrong = (
                grad_mismatch(data, run, tol, stress=kind != "normal")
                or second_order_mismatch(data, run)
                or run.custom_op_failure
            )
            if wrong is not None:
                return GradientOutcome(False, f"case {case}: {wrong}")
            ran.append(run)
    said = "outputs and the gradients of every floating input and parameter match the reference's autograd"
    return GradientOutcome(True, f"{len(ran)} cases: {said}{_case_notes(ran)}")
