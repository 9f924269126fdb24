"""The driver's side of a session on a cluster: ``RemoteVerifier`` stands in for a local
``VerifierService`` and runs each verification on the session's node actor.

- Placement: the actor asks Ray for the session's resources (cores, or a GPU) and the session
  waits, honouring Ctrl-C, until Ray places it; every verification of the session then runs there.
- A node lost mid-verification: the actor is started again on another node (of the same device
  kind and model: speedups are only compared between verdicts timed on like devices) and the
  verification runs again there. The session records its attempt only when a verdict comes back,
  so a retried verification is recorded once.
- A verification past its time limit: the actor is killed (its workers die with it), the session's
  candidates get ``timeout`` verdicts, and the next verification starts a fresh actor.
- Ctrl-C (``stop``): the actor's workers are ended, the actor is killed, KeyboardInterrupt.
- Replies are JSON text of bounded size, validated into ``Verdict`` here.
"""

from __future__ import annotations

import contextlib
import json
import math
import threading
import time
from pathlib import Path
from typing import Any

import ray
from ray.exceptions import RayActorError, RayError, WorkerCrashedError

from forge.cluster.node_actor import VerifierNode
from forge.cluster.plan import ClusterPlan
from forge.core.errors import ForgeError
from forge.core.round_match import RoundMatch
from forge.core.settings import ForgeSettings
from forge.core.statuses import VerdictStatus
from forge.core.verdict import NodeSpec, Verdict
from forge.verifier import Job, time_allowance

_NodeActor: Any = ray.remote(VerifierNode)  # Ray's handles are untyped here
_MAX_REPLY_CHARS = 16 * 2**20  # a verdict's JSON is kilobytes: more than this is not a verdict
_NODE_LOSSES = 3  # a verification lost with its node this many times ends the session
_MARGIN_S = 120.0  # beyond the verifier's own worker time limits: start-up, the template, the transfer
_NODE_DEATH_S = 30.0
_POLL_S = 0.02  # how often a waiting call looks at Ctrl-C and its deadline; ray.wait returns at once on a reply
_LOST = (RayActorError, WorkerCrashedError)


class _Overdue(Exception):
    """A call ran past its time limit."""


class _ActorDied(Exception):
    """The session's actor died on a node that is still up: the verification's own failure."""


def _node_gone(node_id: str) -> bool:
    """Whether the node is dead, or dies within ``_NODE_DEATH_S``: Ray reports an actor's death
    at once, and its node's a health check later."""
    deadline = time.monotonic() + _NODE_DEATH_S
    while any(n.get("NodeID") == node_id and n.get("Alive") for n in ray.nodes()):
        if time.monotonic() > deadline:
            return False
        time.sleep(0.5)
    return True


class RemoteVerifier:
    """A session's verifications on one cluster node at a time (see the module)."""

    def __init__(
        self, op_path: Path, settings: ForgeSettings, plan: ClusterPlan, workers: int, stop: threading.Event
    ) -> None:
        self.op_path, self.settings, self.plan, self.workers = op_path, settings, plan, max(1, workers)
        self.stop = stop
        self._source = op_path.read_text()
        self._actor: Any = None
        self._actor_node: NodeSpec | None = None  # where the current actor runs
        self._calls = 0  # calls the current actor has had
        self.node: NodeSpec | None = None  # where the session's first verification ran
        self._place()

    # -- the actor ---------------------------------------------------------------------------
    def _place(self) -> None:
        """An actor for this session on a node of the session's device kind (waits for room)."""
        for _ in range(_NODE_LOSSES + 1):
            actor = _NodeActor.options(
                num_cpus=self.plan.cpus_per_session,
                num_gpus=self.plan.gpus_per_session,
                max_concurrency=2,
                max_restarts=0,
            ).remote(str(self.op_path), self._source, self.settings.model_dump_json(), self.plan.device, self.workers)
            try:
                spec = NodeSpec.model_validate_json(self._wait(actor.spec.remote(), None, actor))
            except _LOST as exc:
                if getattr(exc, "actor_init_failed", False):  # it could not start there: no node will do better
                    raise ForgeError(
                        f"{self.op_path.name}: the session's verifier could not start on a node: {exc}"
                    ) from exc
                continue
            if self.node is not None and spec.device_name != self.node.device_name:
                ray.kill(actor)  # unlike the session's first node: its timings would not compare
                continue
            self.node = self.node or spec
            self._actor, self._actor_node, self._calls = actor, spec, 0
            return
        raise ForgeError(
            f"{self.op_path.name}: no cluster node like {self.node.device_name if self.node else 'it'!r} "
            "could take the session"
        )

    def _wait(self, ref: Any, deadline: float | None, actor: Any = None) -> Any:
        while True:
            ready, _ = ray.wait([ref], timeout=_POLL_S)
            if self.stop.is_set():  # a reply too means nothing: the stop ended its workers
                self._abandon(actor or self._actor)
                raise KeyboardInterrupt
            if ready:
                return ray.get(ref)
            if deadline is not None and time.monotonic() > deadline:
                raise _Overdue

    def _abandon(self, actor: Any) -> None:
        """End the actor's workers and the actor (Ctrl-C, a time limit, the session's end)."""
        if actor is None:
            return
        # its workers, then its files on the node; if it cannot answer, the kill below ends the
        # workers too (they die with the actor's template)
        with contextlib.suppress(RayError):  # GetTimeoutError is one
            ray.get([actor.end_workers.remote(), actor.close.remote()], timeout=5)
        ray.kill(actor)
        if actor is self._actor:
            self._actor = None

    def _call(self, method: str, *args: Any, limit_s: float) -> tuple[Any, list[str]]:
        """The actor's reply, and the hosts of the nodes this call was lost with first."""
        lost: list[str] = []
        for _ in range(_NODE_LOSSES):
            if self._actor is None:
                self._place()
            fresh = self._calls == 0  # a fresh actor's first call also starts the template and the reference
            self._calls += 1
            deadline = time.monotonic() + limit_s + (_MARGIN_S if fresh else 0.0)
            try:
                return self._wait(getattr(self._actor, method).remote(*args), deadline), lost
            except _LOST as exc:
                node = self._actor_node
                self._abandon(self._actor)
                if node is not None and not _node_gone(node.node_id):
                    # its node is up: the actor itself died (out of memory, say), not the node
                    raise _ActorDied(f"{type(exc).__name__} on {node.label}") from exc
                lost.append(node.label if node else "its node")  # gone: the same verification runs on another
        raise ForgeError(f"{self.op_path.name}: a verification was lost with its node {_NODE_LOSSES} times")

    @property
    def _host(self) -> str:
        return self._actor_node.label if self._actor_node else "its node"

    # -- what a session asks for ---------------------------------------------------------------
    def verify(self, jobs: list[Job]) -> list[Verdict]:
        limit = self.settings.timeout * math.ceil(len(jobs) / self.workers) + _MARGIN_S
        try:
            replies, lost = self._call("verify", [(j.name, j.source) for j in jobs], limit_s=limit)
        except _Overdue:
            return [self._overdue(j, limit) for j in jobs]
        except _ActorDied as exc:
            return [self._died(j, exc) for j in jobs]
        if not isinstance(replies, list) or len(replies) != len(jobs):
            raise ForgeError(f"{self.op_path.name}: a cluster node answered {len(jobs)} candidates with something else")
        return [self._verdict(r, lost) for r in replies]

    def verify_alone(self, job: Job, trials: int, timeout: float) -> Verdict:
        # The node times a passing finalist in a user's loop too: fresh processes after the verification.
        limit = timeout + time_allowance(self.settings, timeout)
        return self._one(job, limit, "verify_alone", job.name, job.source, trials, timeout)

    def verify_null(self, trials: int, timeout: float) -> Verdict:
        return self._one(Job("null_control", ""), timeout, "verify_null", trials, timeout)

    def time_together(self, jobs: list[Job]) -> RoundMatch:
        limit = self.settings.timeout + _MARGIN_S
        try:
            reply, _ = self._call("time_together", [(j.name, j.source) for j in jobs], limit_s=limit)
        except _Overdue:
            host = self._host
            self._abandon(self._actor)  # the next verification starts a fresh actor, not one still timing
            return RoundMatch(failed=f"no answer from {host} within {limit:g} s")
        except _ActorDied as exc:
            return RoundMatch(failed=f"the verifier on {self._host} died: {exc}")
        if not isinstance(reply, str) or len(reply) > _MAX_REPLY_CHARS:
            raise ForgeError(f"{self.op_path.name}: a cluster node sent something that is not a round's match")
        return RoundMatch.model_validate_json(reply)

    def _one(self, job: Job, timeout: float, method: str, *args: Any) -> Verdict:
        """One verdict from the actor's ``method``, within ``timeout`` and the margin."""
        try:
            return self._verdict(*self._call(method, *args, limit_s=timeout + _MARGIN_S))
        except _Overdue:
            return self._overdue(job, timeout + _MARGIN_S)
        except _ActorDied as exc:
            return self._died(job, exc)

    def end_workers(self) -> int:
        if self._actor is None:
            return 0
        try:
            return int(ray.get(self._actor.end_workers.remote(), timeout=5))
        except RayError:
            return 0

    def close(self) -> None:
        self._abandon(self._actor)

    # -- replies -------------------------------------------------------------------------------
    def _verdict(self, reply: Any, lost: list[str]) -> Verdict:
        if not isinstance(reply, str) or len(reply) > _MAX_REPLY_CHARS:
            raise ForgeError(f"{self.op_path.name}: a cluster node sent something that is not a verdict")
        verdict = Verdict.from_json(json.loads(reply))
        for host in lost:  # said on the verdict: the attempt is recorded once, from the run that finished
            verdict.warnings.append(f"verified again on {self._host}: its node {host} was lost mid-verification")
        return verdict

    def _overdue(self, job: Job, limit_s: float) -> Verdict:
        node = self._actor_node
        self._abandon(self._actor)  # the next verification starts a fresh actor
        verdict = Verdict(problem=self.op_path.stem, candidate=job.name, device=self.plan.device, node=node)
        verdict.fail(
            VerdictStatus.TIMEOUT,
            f"the verification on {node.label if node else 'its node'} did not "
            f"answer within {limit_s:.0f} s; its task was cancelled",
        )
        return verdict

    def _died(self, job: Job, exc: _ActorDied) -> Verdict:
        """The verifier's process died on a node that is up (the candidate's doing, until shown
        otherwise): a crash verdict, and the next verification starts a fresh actor."""
        verdict = Verdict(problem=self.op_path.stem, candidate=job.name, device=self.plan.device, node=self.node)
        verdict.fail(VerdictStatus.CRASHED, f"the session's verifier process died while it verified ({exc})")
        return verdict
