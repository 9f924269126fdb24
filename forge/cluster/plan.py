"""Joining a Ray cluster and deciding what one session asks of it.

A session's verifications time kernels, and two timings on the same cores disturb each other, so
on CPUs a session asks for a whole node's cores by default (the smallest node's, so it fits on
any) or ``threads`` cores when that is set; on GPUs one GPU. How many sessions run at once follows
from that and the cluster's nodes.
"""

from __future__ import annotations

import socket
from dataclasses import dataclass, replace
from typing import Any

import ray

from forge.core.choices import Device
from forge.core.errors import UsageError
from forge.core.settings import ForgeSettings

_PROBE_S = 5.0


@dataclass(frozen=True)
class ClusterPlan:
    address: str  # what was joined: "local" (a Ray started for this run), "auto" or ray://host:port
    device: Device  # cpu or cuda: where every session's verifications run
    nodes: int
    cpus_per_session: int
    gpus_per_session: int
    sessions_at_once: int


def _alive(nodes: list[dict[str, Any]]) -> list[dict[str, float]]:
    return [n.get("Resources", {}) for n in nodes if n.get("Alive")]


def plan_sessions(nodes: list[dict[str, Any]], settings: ForgeSettings) -> ClusterPlan:
    """What each session asks for on these nodes (``ray.nodes()``), and how many fit at once."""
    alive = _alive(nodes)
    gpus = [int(r.get("GPU", 0)) for r in alive]
    cpus = [int(r.get("CPU", 0)) for r in alive if r.get("CPU", 0) >= 1]
    device = settings.device if settings.device is not Device.AUTO else (Device.CUDA if sum(gpus) else Device.CPU)
    if device is Device.CUDA:
        if not sum(gpus):
            raise UsageError("--device cuda: the Ray cluster has no GPUs; leave out --device or add GPU nodes")
        return ClusterPlan("", Device.CUDA, len(alive), 1, 1, sum(gpus))
    if not cpus:
        raise UsageError("the Ray cluster has no node with a free CPU; add nodes (`ray start --address ...`)")
    per = settings.threads or min(cpus)
    if per > max(cpus):
        raise UsageError(f"--threads {per}: no Ray node has that many CPUs (the largest has {max(cpus)})")
    return ClusterPlan("", Device.CPU, len(alive), per, 0, sum(c // per for c in cpus))


def _no_cluster(address: str, why: object) -> UsageError:
    return UsageError(
        f"--ray-address {address}: no Ray cluster answers there ({why}); start one with `ray start --head`, "
        "or leave out --ray-address for a Ray of this run's own"
    )


def _check_reachable(address: str) -> None:
    """A host:port that nothing listens on fails here, in seconds (Ray itself retries for minutes)."""
    host, sep, port = address.rpartition(":")
    if not sep or not port.isdigit() or "://" in address:
        return  # "auto", or ray://: Ray answers those itself
    try:
        socket.create_connection((host or "127.0.0.1", int(port)), timeout=_PROBE_S).close()
    except OSError as exc:
        raise _no_cluster(address, exc) from exc


def _ray_messages_to_stderr() -> None:
    """Ray prints its cluster's messages (a raylet that died, say) on the driver's stdout, which is
    forge's data channel (``--json`` prints exactly one object there); they are diagnostics, and go
    to stderr. Ray has no setting for this, so its printer is wrapped (left alone if it moved)."""
    worker = getattr(ray._private, "worker", None)
    printer = getattr(worker, "print_to_stdstream", None)
    if printer is None or getattr(printer, "forge_to_stderr", False):
        return

    def to_stderr(data: dict[str, Any], ignore_prefix: bool) -> None:
        printer({**data, "is_err": True}, ignore_prefix)

    to_stderr.forge_to_stderr = True  # type: ignore[attr-defined]
    worker.print_to_stdstream = to_stderr  # type: ignore[union-attr]


def connect(address: str | None, settings: ForgeSettings) -> ClusterPlan:
    """Join the cluster at ``address`` (None: start a local Ray for this run) and plan its sessions;
    UsageError naming the address when there is no cluster there."""
    _ray_messages_to_stderr()
    if not ray.is_initialized():
        if address:
            _check_reachable(address)
        try:
            ray.init(address=address or None, include_dashboard=False, log_to_driver=False, configure_logging=False)
        except ConnectionError as exc:
            raise _no_cluster(str(address), exc) from exc
    return replace(plan_sessions(ray.nodes(), settings), address=address or "local")


def disconnect() -> None:
    if ray.is_initialized():
        ray.shutdown()
