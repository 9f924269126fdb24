"""A front end's hold on a run it started in a thread of its own (the TUI): ``stop`` ends the run
cleanly, as Ctrl-C ends ``forge optimize``: the running verifications are killed, the session
is recorded as interrupted, and ``forge optimize --resume ID`` (or the TUI's resume) continues it.
Only this run's worker processes are ended; other runs in the same process go on."""

from __future__ import annotations

import threading
from dataclasses import dataclass, field

from forge.verifier import Verifier


@dataclass
class RunControl:
    stop_requested: threading.Event = field(default_factory=threading.Event)
    _services: list[Verifier] = field(default_factory=list)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def attach(self, service: Verifier) -> None:
        """The run's sessions register their verifier here as they open."""
        with self._lock:
            self._services.append(service)
        if self.stop_requested.is_set():
            service.end_workers()

    def stop(self) -> None:
        """Ask the run to stop and end its running verifications now."""
        self.stop_requested.set()
        with self._lock:
            services = list(self._services)
        for service in services:
            service.end_workers()

    @property
    def stopping(self) -> bool:
        return self.stop_requested.is_set()
