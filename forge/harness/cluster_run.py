"""``forge optimize --executor ray``: the run's sessions side by side on a Ray cluster.

Each op's session runs in a thread of the driver (its agents, its search, its records in the bank,
its events), and its verifications run on a cluster node (``forge.cluster.RemoteVerifier``). A
session starts once Ray has placed its node actor, so the cluster's size sets how many run at
once; the op's share of the run's limits is taken then. Only the driver writes the bank. Ctrl-C
stops every session (each ends ``interrupted``, resumable) and ends their actors.
"""

from __future__ import annotations

import threading
from concurrent.futures import Future, ThreadPoolExecutor, wait
from pathlib import Path

from sqlalchemy import Engine

from forge.core.errors import UsageError
from forge.core.settings import ForgeSettings
from forge.core.statuses import SessionStatus
from forge.harness import events as ev
from forge.harness.control import RunControl
from forge.harness.limits import Limits
from forge.harness.options import OptimizeOptions
from forge.harness.session import SessionResult
from forge.harness.session_open import Placement, open_session, run_session

_MAX_THREADS = 64  # sessions waiting for a place beyond this wait for a thread instead


class _Openings:
    """How many ops have not opened their session yet (an op's share is taken as it opens)."""

    def __init__(self, ops: int) -> None:
        self.left = ops
        self._lock = threading.Lock()

    def take(self) -> int:
        with self._lock:
            left, self.left = self.left, self.left - 1
            return left


def run_on_cluster(
    ops: list[Path],
    options: OptimizeOptions,
    settings: ForgeSettings,
    limits: Limits,
    engine: Engine,
    emit: ev.Emit,
    control: RunControl | None,
    stored_status: SessionStatus | None,
) -> tuple[list[SessionResult], bool]:
    """Every op's session, in op order, and whether the run was interrupted."""
    # Ray is an optional extra (forge[ray]): loaded only by a run that asks for it, never at import.
    try:
        import forge.cluster as cluster
    except ModuleNotFoundError as exc:
        raise UsageError(f"--executor ray needs Ray, which is not installed ({exc}): pip install 'forge[ray]'") from exc

    plan = cluster.connect(settings.ray_address, settings)
    emit(ev.ClusterJoined("", 0, plan.address, plan.nodes, plan.device, plan.cpus_per_session,
                          plan.gpus_per_session, plan.sessions_at_once))  # fmt: skip
    # a node's verifications time on the cores the session was given, not on all of the node's
    node_settings = settings.model_copy(update={"threads": plan.cpus_per_session}) if plan.device == "cpu" else settings
    openings = _Openings(len(ops))

    def one(op: Path) -> SessionResult | None:
        if limits.stop_requested.is_set():
            return None
        verifier = cluster.RemoteVerifier(op, node_settings, plan, options.workers, limits.stop_requested)
        try:
            placement = Placement(verifier, plan.device, plan.sessions_at_once)
            session = open_session(op, options, settings, limits, engine, emit, control, openings.take(), placement)
            return run_session(session, stored_status)
        finally:
            verifier.close()

    pool = ThreadPoolExecutor(max_workers=min(len(ops), _MAX_THREADS), thread_name_prefix="forge-session")
    futures = [pool.submit(one, op) for op in ops]
    interrupted = _wait_all(futures, limits)
    pool.shutdown(wait=True)
    results = [r for f in futures if (r := _result(f)) is not None]
    return results, interrupted or any(r.status is SessionStatus.INTERRUPTED for r in results)


def _wait_all(futures: list[Future[SessionResult | None]], limits: Limits) -> bool:
    """Wait for every session; a Ctrl-C here stops them all, and they are waited for again (each
    ends ``interrupted`` and records so)."""
    try:
        wait(futures)
        return False
    except KeyboardInterrupt:
        limits.stop_requested.set()
        wait(futures)
        return True


def _result(future: Future[SessionResult | None]) -> SessionResult | None:
    exc = future.exception()
    if isinstance(exc, KeyboardInterrupt):  # stopped while it waited for a place: nothing to record
        return None
    if exc is not None:
        raise exc
    return future.result()
