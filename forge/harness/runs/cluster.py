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

from sqlalchemy import Engine

from forge.core.errors import UsageError
from forge.core.statuses import SessionStatus
from forge.harness import events as ev
from forge.harness.runs.limits import Limits
from forge.harness.runs.options import session_settings
from forge.harness.sessions.leases import give_back_crashed
from forge.harness.sessions.opening import Placement, RunScope, SessionWork, open_session, run_session
from forge.harness.sessions.session import Session, SessionResult

# Sessions in flight at once, placed or waiting for a place; more wait for a thread. It bounds how
# many sessions one driver runs side by side (and the bank's connections: forge.db.engine).
_MAX_THREADS = 256


class _Openings:
    """How many ops have not opened their session yet, and their weights together (an op's share
    is taken as it opens)."""

    def __init__(self, works: list[SessionWork]) -> None:
        self.left = len(works)
        self.weight = sum(w.weight for w in works)
        self._lock = threading.Lock()

    def take(self, weight: float) -> tuple[int, float]:
        with self._lock:
            left, self.left = self.left, self.left - 1
            weight_left, self.weight = self.weight, self.weight - weight
            return left, weight_left


def run_on_cluster(works: list[SessionWork], scope: RunScope) -> tuple[list[SessionResult], bool]:
    """Every op's session, in op order, and whether the run was interrupted."""
    settings, limits, engine, emit = scope.settings, scope.limits, scope.engine, scope.emit
    # Ray is an optional extra (forge-kernels[ray]): loaded only by a run that asks for it, never at import.
    try:
        import forge.cluster as cluster
    except ModuleNotFoundError as exc:
        raise UsageError(
            f"--executor ray needs Ray, which is not installed ({exc}): pip install 'forge-kernels[ray]'"
        ) from exc

    plan = cluster.connect(settings.ray_address, settings)
    emit(
        ev.ClusterJoined(
            "",
            0,
            plan.address,
            plan.nodes,
            plan.device,
            plan.cpus_per_session,
            plan.gpus_per_session,
            plan.sessions_at_once,
        )
    )
    # a node's verifications time on the cores the session was given, not on all of the node's
    # and a GPU chosen on the driver (FORGE_GPU) means nothing on a node: Ray gives the session its GPU
    node_settings = settings.model_copy(update={"gpu": None})
    if plan.device == "cpu":
        node_settings = node_settings.model_copy(update={"threads": plan.cpus_per_session})
    openings = _Openings(works)

    def one(work: SessionWork) -> SessionResult | None:
        if limits.stop_requested.is_set():
            return None
        op, options = work.op_path, work.options
        verifier = cluster.RemoteVerifier(
            op, session_settings(node_settings, options), plan, options.workers, limits.stop_requested
        )
        session = None
        try:
            placement = Placement(verifier, plan.device, plan.sessions_at_once)
            ops_left, weight_left = openings.take(work.weight)
            session = open_session(work, scope, ops_left, placement, weight_left)
            return run_session(session, work.stored_status)
        except Exception as exc:
            if session is None:  # it never opened (a bad op file, say): the run reports it as a local one does
                raise
            return _crashed(session, exc, engine, emit)
        finally:
            verifier.close()

    pool = ThreadPoolExecutor(max_workers=min(len(works), _MAX_THREADS), thread_name_prefix="forge-session")
    try:
        futures = [pool.submit(one, work) for work in works]
        interrupted = _wait_all(futures, limits)
    except BaseException:  # a second Ctrl-C, say: the sessions still end (and record so) before the run does
        limits.stop_requested.set()
        pool.shutdown(wait=True)
        raise
    pool.shutdown(wait=True)
    results = [r for f in futures if (r := _result(f)) is not None]
    return results, interrupted or any(r.status is SessionStatus.INTERRUPTED for r in results)


def _crashed(session: Session, exc: Exception, engine: Engine, emit: ev.Emit) -> SessionResult:
    """A session that failed on its own (its node kept failing, say): recorded ``crashed``, which
    ``--resume`` continues, while the sessions beside it go on and the run still reports them."""
    give_back_crashed(engine, session.io.recorder.lease)
    reason = f"{type(exc).__name__}: {exc}; `forge optimize --resume {session.id}` continues it"
    name = session.plan.spec.name
    emit(
        ev.SessionFinished(
            name, session.id, SessionStatus.CRASHED, False, None, None, None, len(session.state.history), reason
        )
    )
    return SessionResult(name, session.id, SessionStatus.CRASHED, attempts=len(session.state.history), reason=reason)


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
