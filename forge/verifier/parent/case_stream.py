"""Correctness cases as the parent receives them: one at a time from the reference worker.

The reference draws a case when asked (``ReferenceSide.case_data``); the parent asks for the next
one while the candidate runs the current one, so at most two cases are in the parent at once and
drawing them overlaps the candidate's calls. What the cases say about the problem itself (a
constant output would pass them all) is gathered as they pass.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator

from forge.core.errors import ProblemError, WorkerError
from forge.verifier.parent import checks
from forge.verifier.parent.checks import DrawnCase
from forge.verifier.parent.compare import ConstantProbe
from forge.verifier.processes.worker_process import WorkerProcess
from forge.verifier.protocol import CaseDataReply, CaseDataRequest, CaseDescriptor, ProblemErrorReply, Reply, Request

# The reference's next reply, with what it was doing for the error message when it died.
RefReply = Callable[[str], Reply]
_AHEAD_MAX_BYTES = 64 << 20


class CaseStream:
    """The cases of ``descriptors`` in order, as ``checks.check_case`` reads them. ``then``: a
    request for the reference sent with the last case's (it runs while the candidate runs that
    case)."""

    def __init__(
        self,
        ref: WorkerProcess,
        reply: RefReply,
        descriptors: list[CaseDescriptor],
        tol: dict[str, float] | None,
        then: Request | None = None,
    ) -> None:
        self.ref, self.reply, self.descriptors, self.then = ref, reply, descriptors, then
        self.partners = [checks.refill_partner(descriptors, i) for i in range(len(descriptors))]
        self.probe = ConstantProbe(tol)
        self.notes: list[str] = []
        self.skipped = 0
        # The next case is drawn while the candidate runs this one, unless two cases (and a
        # candidate's outputs) of this op would weigh on memory: then one at a time.
        self.ahead = max((d.input_bytes for d in descriptors), default=0) <= _AHEAD_MAX_BYTES

    def _ask(self, i: int) -> None:
        partner = self.partners[i]
        self.ref.send(CaseDataRequest(id=self.descriptors[i].id, partner=partner.id if partner else None))
        if i + 1 == len(self.descriptors) and self.then is not None:
            self.ref.send(self.then)

    def __iter__(self) -> Iterator[DrawnCase]:
        if not self.descriptors:
            if self.then is not None:
                self.ref.send(self.then)
            return
        self._ask(0)
        for i, desc in enumerate(self.descriptors):
            if i and not self.ahead:
                self._ask(i)
            data = self.reply("failed while drawing a correctness case")
            if isinstance(data, ProblemErrorReply):
                raise ProblemError(data.message)
            if not isinstance(data, CaseDataReply) or data.id != desc.id:
                raise WorkerError(f"reference worker: expected case {desc.id}, got {str(data)[:300]}")
            if self.ahead and i + 1 < len(self.descriptors):
                self._ask(i + 1)
            if data.skipped:
                self.notes.append(data.skipped)
                self.skipped += 1
                continue
            if desc.kind == "normal":
                self.probe.add(data.expected)
            yield DrawnCase(desc, data)

    def degenerate(self) -> str | None:
        """The warning when a constant output passes every ordinary case (all of them seen)."""
        normal = sum(1 for d in self.descriptors if d.kind == "normal")
        return checks.degenerate_warning(self.probe.passes()) if self.probe.seen == normal else None
