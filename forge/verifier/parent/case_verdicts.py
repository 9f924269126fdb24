"""What the correctness phase found, written into its step's record (``steps.CasesRun``; trusted
parent, pure logic): the named checks with their first failing case, a candidate that raised, the
notes of a case stream; and the versions a verdict was reached with."""

from __future__ import annotations

import sys
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from forge.core.statuses import VerdictStatus
from forge.core.verdict import FailingCase, Versions
from forge.verifier.parent import checks
from forge.verifier.parent.case_stream import CaseStream
from forge.verifier.parent.checks import DrawnCase
from forge.verifier.parent.steps import CasesRun, Planned

if TYPE_CHECKING:  # compare loads torch, which the parent imports only once its workers have started
    from forge.verifier.parent.compare import Mismatch

MEMORY_WORDS = ("can't allocate memory", "out of memory", "MemoryError", "Cannot allocate memory")
INTEGRITY_CHECKS = (
    "no_stale_results",
    "inputs_unchanged",
    "no_aliasing",
    "plain_tensor_outputs",
    "no_lazy_outputs",
    "fresh_outputs",
    "no_background_threads",
    "clock_integrity",
    "runs_kernel",
)
_COUNTED = ("correctness", "stress", "determinism", "module_state")


@dataclass
class CaseTally:
    """Over the cases run: each check's first failure (case id, detail) and how many cases failed
    the counted checks."""

    first: dict[str, tuple[str, str]] = field(default_factory=dict)
    failing: dict[str, int] = field(default_factory=lambda: dict.fromkeys(_COUNTED, 0))
    stateful: bool = False  # the reference changes the module's state: module_state is a check

    def failed(self, name: str, case_id: str, detail: str) -> bool:
        """A counted check failed on a case; True when it is the check's first failure."""
        self.failing[name] += 1
        if name in self.first:
            return False
        self.first[name] = (case_id, detail)
        return True


def record_case_checks(v: CasesRun, tally: CaseTally, ran: int, plan: Planned) -> None:
    """Every check the cases decide, passed or failed with its first failing case; the verdict
    fails on the first integrity check, then on the first correctness one."""
    stateful = ["module_state"] if tally.stateful else []
    for name in ("correctness", "stress", "determinism", *stateful, *INTEGRITY_CHECKS):
        if name in tally.first:
            cid, detail = tally.first[name]
            count = f" ({tally.failing[name]} of {ran} cases)" if name in tally.failing else ""
            v.add(name, False, f"case {cid}{count}: {detail}")
        else:
            modes = ", ".join(str(m) for m in plan.modes)
            passed = checks.PASS_TEXT.get(name, "ok").format(n=ran, shapes=", ".join(plan.shapes), modes=modes)
            v.add(name, True, passed)
    integrity = [n for n in INTEGRITY_CHECKS if n in tally.first]
    if integrity:
        v.fail(VerdictStatus.FAILED_INTEGRITY, f"{integrity[0]}: {tally.first[integrity[0]][1]}")
    for name in _COUNTED:
        if name in tally.first:
            v.fail(VerdictStatus.FAILED_CORRECTNESS, f"{name}: case {tally.first[name][0]}: {tally.first[name][1]}")


def record_raised(v: CasesRun, case: DrawnCase, message: str, memory_limit_mb: int) -> None:
    """The candidate raised on ``case``: the verdict fails (a crash when memory ran out)."""
    cid = case.plan.id
    v.failing_case = FailingCase(id=cid, shape=case.plan.shape, inputs=case.plan.kind)
    v.add("run", False, f"case {cid}: {message}")
    if any(w in message for w in MEMORY_WORDS):
        v.fail(VerdictStatus.CRASHED, f"memory limit ({memory_limit_mb} MiB) reached: {checks.first_line(message)}")
    else:
        v.fail(VerdictStatus.RUNTIME_ERROR, f"the candidate raised on case {cid}: {checks.first_line(message)}")


def record_first_failing(v: CasesRun, case: DrawnCase, mismatch: Mismatch) -> None:
    """The first case that failed a check, with how its output differed (kept once)."""
    if v.failing_case is None:
        v.failing_case = FailingCase(
            id=case.plan.id,
            shape=case.plan.shape,
            inputs=case.plan.kind,
            output=mismatch.output,
            mismatch=mismatch.kind,
            detail=mismatch.detail,
            max_abs=mismatch.max_abs,
            max_rel=mismatch.max_rel,
        )


def record_case_notes(v: CasesRun, stream: CaseStream) -> None:
    """The cases the stream skipped (not counted), its notes, and a warning when they were degenerate."""
    v.skipped += stream.skipped
    v.warnings.extend(stream.notes)
    degenerate = stream.degenerate()
    if degenerate:
        v.warnings.append(degenerate)


def versions() -> Versions:
    """torch's, Python's and Triton's versions (Triton's empty where it is not installed)."""
    import torch  # here, not above: the parent starts its workers before it loads torch

    try:
        import triton

        triton_version: str | None = triton.__version__
    except ImportError:
        triton_version = None
    return Versions(torch=torch.__version__, python=sys.version.split()[0], triton=triton_version or "")
