"""The bound form: a passing candidate run the way ``bank.kernelize`` will run it.

The candidate worker binds ModelNew to an instance of the user's own class that holds weights of
its own (drawn by the reference worker, never seen by the candidate before) and runs two cases
through that binding; the parent compares the outputs with the reference's for that instance. A
kernel that only works when forge constructs it (it reads state only its own constructor made,
or caches weights across instances) is caught here, and its bank entry says it does not bind.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Protocol, TypeVar

from forge.core.statuses import BindMode
from forge.core.verdict import Binding
from forge.verifier.parent import checks
from forge.verifier.parent.checks import DrawnCase
from forge.verifier.protocol import (
    BindRequest,
    BoundReply,
    CaseRequest,
    CaseResultReply,
    ErrorReply,
    Message,
    ModelBuild,
    Request,
)

R = TypeVar("R", bound=Message)


class AskCandidate(Protocol):
    """Send the candidate's worker a request and take its reply: one of ``expect``, or an error."""

    def __call__(self, request: Request, expect: type[R]) -> R | ErrorReply: ...


def check_binding(
    ask: AskCandidate, model: ModelBuild, cases: Iterable[DrawnCase], device: str, tol: dict[str, float] | None
) -> Binding:
    """Bind to the instance ``model`` describes, run ``cases`` (drawn by the reference as they are
    needed), and say how the candidate binds (or why it does not)."""
    reply = ask(BindRequest(model=model), BoundReply)
    if isinstance(reply, ErrorReply):
        return Binding(mode=BindMode.NONE, reason=f"binding it raised: {checks.first_line(reply.message)}")
    try:
        mode = BindMode(reply.mode)
    except ValueError:
        return Binding(mode=BindMode.NONE, reason=f"the worker reported an unknown binding {reply.mode!r}")
    reason = reply.reason[:500]
    if mode is BindMode.NONE:
        return Binding(mode=mode, reason=reason)
    for case in cases:
        request = CaseRequest(id=case.plan.id, model="bound", inputs=case.data.inputs)
        result = ask(request, CaseResultReply)
        if isinstance(result, ErrorReply):
            said = checks.first_line(result.message)
            return Binding(mode=BindMode.NONE, reason=f"bound to an instance of the user's class, it raised: {said}")
        found = checks.check_case(case, result, device, tol)
        wrong = found.correctness or found.determinism
        if wrong is not None or found.integrity:
            detail = wrong.detail if wrong is not None else next(iter(found.integrity.values()))
            return Binding(
                mode=BindMode.NONE,
                reason="bound to an instance of the user's class holding weights of its own, "
                f"it gave wrong outputs ({detail})",
            )
    return Binding(mode=mode, reason=reason)
