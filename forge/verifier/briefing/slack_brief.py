"""The slack the verifier will give each output, per kind of case, measured on one draw like the
verifier's (run in the brief's process): the same ``compare.slack`` the checks apply, beside the
reference's own error from its float64 run. A coder told only a formula guessed wrong both ways
(an attention's reduction counted as 3 elements long, so a QK^T summed in another order was
thought to fail the stress cases, where it passes by orders of magnitude); the figures decide."""

from __future__ import annotations

from typing import Any

import torch

from forge.core.module_call import output_tensors
from forge.core.op_brief import CaseSlack, NonFinite, OutputTolerance
from forge.core.slack_rules import TINY_OUTPUT_ATOLS
from forge.verifier.parent.checks import input_elements
from forge.verifier.parent.compare import exact_errors, slack, tolerance
from forge.verifier.worker.call_form import invoke
from forge.verifier.worker.cases import STRESS_KINDS, stress_inputs
from forge.verifier.worker.op_work.reduction_lengths import reduction_lengths
from forge.verifier.worker.reference_cases import run_in_float64

# The brief's own draw: any seed does (the verifier draws fresh ones); one fixed seed keeps two
# briefs of one op alike.
_SEED = 0


def _case_slack(
    case: str,
    out: torch.Tensor,
    exact: torch.Tensor | None,
    override: dict[str, float] | None,
    reduced: int,
    behind: int,
) -> CaseSlack:
    """``reduced``: the input elements of the call; ``behind``: those behind each element of ``out``."""
    work = out.to(torch.float64 if out.dtype == torch.float64 else torch.float32)
    given = slack(out.dtype, work, override, case != "normal", reduced, behind)
    widened = given.reduction_atol(out.dtype, work) if given.per_element > 1 else None
    own = exact_errors(out, exact) if exact is not None else None
    finite = work.abs().nan_to_num(0.0, posinf=0.0, neginf=0.0)
    peak = float(finite.max()) if finite.numel() else 0.0
    return CaseSlack(
        case=case,
        atol=given.atol,
        rtol=given.rtol,
        reduction_atol=widened if widened is not None and widened > given.atol else None,
        per_element=given.per_element,
        own_largest=own.largest if own else None,
        own_rms=own.rms if own else None,
        beside_exact=case != "normal" and own is not None and own.trusted,
        tiny=override is None and 0.0 < peak < TINY_OUTPUT_ATOLS * given.atol,
    )


def _nonfinite(inputs: list[Any], out: torch.Tensor) -> NonFinite:
    planted = sum(
        int((~torch.isfinite(x)).sum()) for x in inputs if isinstance(x, torch.Tensor) and x.is_floating_point()
    )
    return NonFinite(
        inputs=planted,
        nan=int(torch.isnan(out).sum()),
        pos_inf=int(torch.isposinf(out).sum()),
        neg_inf=int(torch.isneginf(out).sum()),
        elements=out.numel(),
    )


def _outputs(model: Any, inputs: list[Any]) -> tuple[list[Any], list[Any] | None]:
    with torch.no_grad():
        outs = output_tensors(invoke(model, inputs))
    return outs, run_in_float64(model, inputs)


def output_slacks(
    model: Any, inputs: list[Any], override: dict[str, float] | None, fixed: frozenset[int]
) -> list[OutputTolerance]:
    """Each floating output's tolerance, and its slack in a normal case and in each stress case."""
    drawn = {"normal": inputs}
    drawn.update({kind: stress_inputs(inputs, kind, _SEED, fixed) for kind in STRESS_KINDS})
    found: dict[int, OutputTolerance] = {}
    behind = reduction_lengths(model, inputs)
    for case, case_inputs in drawn.items():
        outs, exact = _outputs(model, case_inputs)
        reduced = input_elements(case_inputs)
        for i, out in enumerate(outs):
            if not (isinstance(out, torch.Tensor) and out.is_floating_point()):
                continue
            if i not in found:
                atol, rtol = tolerance(out.dtype, override)
                dtype = str(out.dtype).removeprefix("torch.")
                found[i] = OutputTolerance(output=i, dtype=dtype, shape=list(out.shape), atol=atol, rtol=rtol)
            wide = exact[i] if exact is not None and i < len(exact) else None
            told = _case_slack(case, out, wide, override, reduced, behind[i] if i < len(behind) else 1)
            if case == "specials":
                told.nonfinite = _nonfinite(case_inputs, out)
            found[i].cases.append(told)
    return list(found.values())
