"""A candidate worker's replies while it is timed (the candidate's, or a rival's): the reply asked
for, or ``CandidateFailed`` with the worker's error; and one timed call, with the ticks the
worker sends while it runs (the parent's clock checks the worker's against them)."""

from __future__ import annotations

from typing import TypeVar

from forge.verifier.processes.worker_process import WorkerProcess, expect_reply
from forge.verifier.protocol import ErrorReply, Message, Reply, TickReply, TimeCallRequest, TimedCallReply

R = TypeVar("R", bound=Message)


class CandidateFailed(Exception):
    """A timed candidate call raised (the worker's error reply is attached)."""

    def __init__(self, reply: ErrorReply) -> None:
        super().__init__(reply.message)
        self.reply = reply


def candidate_said(reply: Reply, expect: type[R]) -> R:
    """``reply`` as an ``expect`` (a worker that sent anything else broke the protocol: its
    ``WorkerGone``), or ``CandidateFailed`` when it is the worker's error."""
    said = expect_reply(reply, expect)
    if isinstance(said, ErrorReply):
        raise CandidateFailed(said)
    return said


def timed_call(worker: WorkerProcess, index: int, deadline: float, ticks: list[float]) -> TimedCallReply:
    """The worker's timed call ``index`` of its batch; the parent's clock at each tick it sent
    meanwhile goes into ``ticks``."""
    worker.send(TimeCallRequest(index=index))
    while True:
        reply, t = worker.recv(deadline)
        if not isinstance(reply, TickReply):
            return candidate_said(reply, TimedCallReply)
        ticks.append(t)
