"""A candidate worker's start, as the parent sees it: its hello, its import of the candidate file
(sent with its ``LoadRequest``) and ``ModelNew`` built on the reference's weights. The candidate
of a verification and each of its rivals start this way."""

from __future__ import annotations

from dataclasses import dataclass

from forge.verifier.processes.worker_process import WorkerProcess, expect_reply
from forge.verifier.protocol import ErrorReply, HelloReply, InstantiateRequest, LoadedReply, ModelBuild, ReadyReply


@dataclass(frozen=True)
class BuildFailure:
    """Where a candidate failed to start: ``check`` is its import's stage (``load``, ...) or
    ``interface`` (``ModelNew`` not built), and ``message`` what the worker said."""

    check: str
    message: str


def build_candidate(worker: WorkerProcess, deadline: float, models: list[ModelBuild]) -> BuildFailure | None:
    """None when the candidate imported and ``ModelNew`` was built for every one of ``models``.
    A worker that dies, overruns ``deadline`` or breaks the protocol raises ``WorkerGone``."""
    hello, _ = worker.recv(deadline)
    expect_reply(hello, HelloReply)
    reply, _ = worker.recv(deadline)
    loaded = expect_reply(reply, LoadedReply)
    if isinstance(loaded, ErrorReply):
        return BuildFailure(loaded.stage, loaded.message)
    worker.send(InstantiateRequest(models=models))
    reply, _ = worker.recv(deadline)
    ready = expect_reply(reply, ReadyReply)
    return BuildFailure("interface", ready.message) if isinstance(ready, ErrorReply) else None
