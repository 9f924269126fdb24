"""What runs on a cluster node: one actor per session, holding a ``VerifierService`` there.

The actor is Ray's transport, never the sandbox: it only writes candidate sources to files and
asks the service, which starts forge's isolated worker processes on this node exactly as a local
run does (forked from the template, memory-bounded, killed at the end). Candidate code never runs
in the actor's own process, and what comes back from a candidate's worker has already passed the
verifier's framed, size-bounded codec. The actor returns each verdict as JSON text, which the
driver validates into a ``Verdict`` again (``forge.cluster.remote``): it is not handed pickled
objects by a node.
"""

from __future__ import annotations

import json
import socket
import tempfile
from pathlib import Path

import ray

from forge.core.settings import ForgeSettings
from forge.core.verdict import NodeSpec, Verdict
from forge.verifier import Job, VerifierService
from forge.verifier.machine.facts import cpu_model


def _device_name(device: str) -> str:
    if device == "cuda":
        import torch

        return str(torch.cuda.get_device_name(0))
    return cpu_model()


def _op_file(op_path: str, op_source: str) -> Path:
    """The op file as the driver has it: in place when this node sees the same file (a shared
    file system, or the same machine; its sibling modules stay importable), else a copy."""
    path = Path(op_path)
    if path.is_file() and path.read_text() == op_source:
        return path
    copy = Path(tempfile.mkdtemp(prefix="forge-op-")) / path.name
    copy.write_text(op_source)
    return copy


class VerifierNode:
    """A session's verifier on one node. Two calls may run at once (``max_concurrency=2``), so
    ``end_workers`` reaches a verification that is running."""

    def __init__(self, op_path: str, op_source: str, settings_json: str, device: str, workers: int) -> None:
        settings = ForgeSettings.model_validate_json(settings_json)
        self.service = VerifierService(_op_file(op_path, op_source), settings, device, workers)
        context = ray.get_runtime_context()
        self.node = NodeSpec(
            host=socket.gethostname(),
            node_id=context.get_node_id(),
            device_name=_device_name(device),
            cpus=int(settings.threads or 0),
        )

    def spec(self) -> str:
        return self.node.model_dump_json()

    def _out(self, verdict: Verdict) -> str:
        verdict.node = self.node
        return json.dumps(verdict.to_json())

    def verify(self, jobs: list[tuple[str, str]]) -> list[str]:
        return [self._out(v) for v in self.service.verify([Job(name, source) for name, source in jobs])]

    def verify_alone(self, name: str, source: str, trials: int, timeout: float) -> str:
        return self._out(self.service.verify_alone(Job(name, source), trials, timeout))

    def verify_null(self, trials: int, timeout: float) -> str:
        return self._out(self.service.verify_null(trials, timeout))

    def time_together(self, jobs: list[tuple[str, str]]) -> str:
        return self.service.time_together([Job(name, source) for name, source in jobs]).model_dump_json()

    def end_workers(self) -> int:
        return self.service.end_workers()

    def close(self) -> None:
        self.service.close()
