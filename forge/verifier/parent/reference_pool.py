"""Reference workers kept between the verifications of one op.

The reference worker runs only the user's op, never a candidate, so a session may keep it from
one verification to the next: the next one sets it up again with its own seed (new weights, new
cases, new timing inputs) and skips starting an interpreter and compiling the torch.compile
baseline again. A worker goes back to the pool only when it is alive and every reply it owed was
read; otherwise it is closed. Workers are kept per environment (threads, memory limit, GPU), as
the parallel verifications of a batch and a finalist's confirmation run with different ones.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass

from forge.verifier.processes.worker_process import WorkerGone, WorkerProcess
from forge.verifier.protocol import HelloReply

_DRAIN_S = 60.0  # the longest a reply still owed (a case being drawn, the roofline) may take
EnvKey = tuple[tuple[str, str], ...]


@dataclass
class KeptReference:
    """A reference worker between verifications, with the hello it sent when it started."""

    worker: WorkerProcess
    hello: HelloReply


def _key(env: dict[str, str]) -> EnvKey:
    return tuple(sorted((k, v) for k, v in env.items() if k != "PYTEST_CURRENT_TEST"))


class ReferencePool:
    """Idle reference workers of one op, by environment. Close it to end them."""

    def __init__(self) -> None:
        self._idle: dict[EnvKey, list[KeptReference]] = {}
        self._lock = threading.Lock()
        self._closed = False

    def take(self, env: dict[str, str]) -> KeptReference | None:
        with self._lock:
            idle = self._idle.get(_key(env)) or []
            while idle:
                kept = idle.pop()
                if kept.worker.proc.poll() is None:
                    return kept
                kept.worker.close()
        return None

    def give(self, env: dict[str, str], kept: KeptReference) -> None:
        """Keep the worker for the next verification if it is healthy, else close it."""
        if not self._settle(kept.worker):
            kept.worker.close()
            return
        with self._lock:
            if self._closed:
                kept.worker.close()
                return
            self._idle.setdefault(_key(env), []).append(kept)

    @staticmethod
    def _settle(worker: WorkerProcess) -> bool:
        """Read the replies still owed (a verification that ended early leaves one or two)."""
        deadline = time.monotonic() + _DRAIN_S
        try:
            while worker.pending > 0:
                worker.recv(deadline)
        except WorkerGone:
            return False
        return worker.proc.poll() is None

    def pids(self) -> list[int]:
        """The process ids of the idle workers (for diagnostics and tests)."""
        with self._lock:
            return sorted(k.worker.proc.pid for idle in self._idle.values() for k in idle)

    def close(self) -> None:
        with self._lock:
            self._closed = True
            kept = [k for idle in self._idle.values() for k in idle]
            self._idle.clear()
        for k in kept:
            k.worker.close()
