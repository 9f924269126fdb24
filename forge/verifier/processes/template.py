"""Worker templates, parent side: pre-imported interpreters that fork verification workers.

Starting a worker by exec costs about a second on a small machine (the interpreter, then torch's
import), twice per verification. A template (``template_process``) pays that once per environment
and forks each worker from a state that has never run an op or a candidate; the child is set up as
an exec'd worker would be. ``FORGE_WORKER_TEMPLATE=0`` turns templates off (every worker exec'd),
and a template that cannot start or answer falls back to exec, never to an error.
"""

from __future__ import annotations

import atexit
import contextlib
import json
import os
import queue
import resource
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

# Read by the child after the fork (it sets the verification's whole environment), so a change
# in them needs no template of its own; anything else in the environment may matter at start-up
# (glibc's malloc settings, OpenMP's thread count, the import path) and keys the template.
_PER_WORKER = {
    "PYTEST_CURRENT_TEST",
    "FORGE_CACHE_DIR",  # and the folders in it, each worker's own (``worker_env.candidate_folder``)
    "HOME",
    "TMPDIR",
    "XDG_CACHE_HOME",
    "TRITON_CACHE_DIR",
    "TORCHINDUCTOR_CACHE_DIR",
    "TORCH_EXTENSIONS_DIR",
    "FORGE_WORKER_DEVICE",
    "FORGE_WORKER_MEMORY_MB",
    "CUDA_VISIBLE_DEVICES",
    "FORGE_WORKER_SANDBOX",
    "FORGE_WORKER_CPU_ISA",  # read by the template before it forks the worker (``worker_env.CPU_ISA``)
    "COLUMNS",
    "LINES",
}
_MAX_TEMPLATES = 2
_START_S = 120.0  # the first spawn waits for the template's imports
_REPLY_S = 90.0  # a fork, after the CPU's instruction sets are found for the first compiling worker (~10 s)


_MAX_FILE = 4 << 30


def worker_limits(memory_limit_mb: int) -> None:
    """In a new worker, before it runs anything: no core dumps, the memory limit (RLIMIT_DATA),
    no filling the disk, and death with its parent (forge, or the template that forked it)."""
    limit = memory_limit_mb << 20
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    with contextlib.suppress(ValueError, OSError):
        resource.setrlimit(resource.RLIMIT_DATA, (limit, limit))
    with contextlib.suppress(ValueError, OSError):
        resource.setrlimit(resource.RLIMIT_FSIZE, (_MAX_FILE, _MAX_FILE))
    die_with_parent()


def die_with_parent() -> None:
    """Linux: SIGKILL the worker if forge dies, so a looping candidate is never left behind."""
    try:
        import ctypes

        libc = ctypes.CDLL(None)
        libc.prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        pass


class TemplateUnavailable(Exception):
    """The template could not fork a worker; the caller starts one by exec instead."""


class ForkedProcess:
    """A worker forked by a template: the part of ``subprocess.Popen`` a ``WorkerProcess`` uses."""

    def __init__(self, pid: int, template: WorkerTemplate) -> None:
        self.pid = pid
        self._template = template
        self.returncode: int | None = None

    def poll(self) -> int | None:
        if self.returncode is None:
            self.returncode = self._template.exit_status(self.pid)
        return self.returncode

    def wait(self, timeout: float | None = None) -> int:
        code = self._template.wait_exit(self.pid, timeout)
        if code is None:
            raise subprocess.TimeoutExpired(["forge-worker", str(self.pid)], timeout or 0.0)
        self.returncode = code
        return code


class WorkerTemplate:
    """One template process and the thread that started it and reads its answers. The thread
    lives as long as the template: the template dies with the thread that forked it
    (PR_SET_PDEATHSIG), and its workers die with it."""

    def __init__(self, env: dict[str, str]) -> None:
        self._exits: dict[int, int] = {}
        self._replies: queue.SimpleQueue[dict[str, Any]] = queue.SimpleQueue()
        self._cond = threading.Condition()
        self._ask = threading.Lock()
        self._asked = 0  # requests sent: each answer names the one it is for
        self._ready = threading.Event()
        self.alive = True
        self.proc: subprocess.Popen[bytes] | None = None
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        self._sock = ours
        thread = threading.Thread(target=self._run, args=(env, theirs), name="forge-template", daemon=True)
        thread.start()

    def _run(self, env: dict[str, str], theirs: socket.socket) -> None:
        try:
            self.proc = subprocess.Popen(
                [sys.executable, "-s", "-P", "-m", "forge.verifier.processes.template_process", str(theirs.fileno())],
                pass_fds=(theirs.fileno(),),
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
                start_new_session=True,
                env=env,
                preexec_fn=die_with_parent,
            )
        except OSError:
            self._end()
            return
        finally:
            theirs.close()
        while True:
            try:
                data = self._sock.recv(1 << 16)
            except OSError:
                break
            if not data:
                break
            msg = json.loads(data)
            if msg.get("ready"):
                self._ready.set()
            elif "exit" in msg:
                with self._cond:
                    self._exits[int(msg["exit"])] = int(msg["status"])
                    self._cond.notify_all()
            else:
                self._replies.put(msg)
        self._end()

    def _end(self) -> None:
        with self._cond:
            self.alive = False
            self._cond.notify_all()
        self._ready.set()
        self._replies.put({"error": "the worker template ended"})

    def wait_ready(self, timeout: float) -> bool:
        """Whether the template is ready to fork within ``timeout`` seconds (False: it ended)."""
        return self._ready.wait(timeout) and self.alive

    def spawn(
        self, role: str, env: dict[str, str], cwd: Path, memory_limit_mb: int, chan_fd: int, out_fd: int
    ) -> ForkedProcess:
        """Fork a worker for ``role``; raises TemplateUnavailable when the template cannot."""
        if not self.wait_ready(_START_S):
            raise TemplateUnavailable("the worker template did not start")
        with self._ask:
            self._asked += 1
            request = {"role": role, "env": env, "cwd": str(cwd), "memory_limit_mb": memory_limit_mb}
            request["seq"] = self._asked
            try:
                socket.send_fds(self._sock, [json.dumps(request).encode()], [chan_fd, out_fd])
                reply = self._reply_to(self._asked)
            except (OSError, queue.Empty) as exc:
                raise TemplateUnavailable(f"the worker template did not answer: {exc}") from exc
        if "pid" not in reply:
            raise TemplateUnavailable(str(reply.get("error")))
        return ForkedProcess(int(reply["pid"]), self)

    def _reply_to(self, seq: int) -> dict[str, Any]:
        """The template's answer to request ``seq``: a late answer to an earlier request, whose
        wait ran out, is dropped (its worker finds its channel closed and ends)."""
        deadline = time.monotonic() + _REPLY_S
        while True:
            reply = self._replies.get(timeout=max(0.0, deadline - time.monotonic()))
            if reply.get("seq", seq) == seq:
                return reply

    def exit_status(self, pid: int) -> int | None:
        with self._cond:
            if pid in self._exits:
                return self._exits[pid]
            # A dead template's workers were killed with it (PR_SET_PDEATHSIG), unreported.
            return None if self.alive else -signal.SIGKILL

    def wait_exit(self, pid: int, timeout: float | None) -> int | None:
        with self._cond:
            self._cond.wait_for(lambda: pid in self._exits or not self.alive, timeout)
        return self.exit_status(pid)

    def close(self) -> None:
        if self.proc is not None:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(self.proc.pid, signal.SIGKILL)
        with contextlib.suppress(OSError):
            self._sock.close()


_TEMPLATES: dict[tuple[tuple[str, str], ...], WorkerTemplate] = {}
_LOCK = threading.Lock()


def template_for(env: dict[str, str]) -> WorkerTemplate | None:
    """The template for workers of this environment (started on first use), or None when
    templates are off (``FORGE_WORKER_TEMPLATE=0``)."""
    if env.get("FORGE_WORKER_TEMPLATE", "1") == "0":
        return None
    key = tuple(sorted((k, v) for k, v in env.items() if k not in _PER_WORKER))
    with _LOCK:
        found = _TEMPLATES.get(key)
        if found is None or not found.alive:
            while len(_TEMPLATES) >= _MAX_TEMPLATES:
                _TEMPLATES.pop(next(iter(_TEMPLATES))).close()
            found = _TEMPLATES[key] = WorkerTemplate(env)
        return found


@atexit.register
def close_templates() -> None:
    """End every template (they would die with this process anyway; this is tidier)."""
    with _LOCK:
        for t in _TEMPLATES.values():
            t.close()
        _TEMPLATES.clear()
