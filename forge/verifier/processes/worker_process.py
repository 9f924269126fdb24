"""Spawning and policing one worker process (parent side).

Each worker is a fresh interpreter (``python -m forge.verifier.worker.main ROLE FD``) in its own session,
with stdout/stderr captured to a file, a memory limit (RLIMIT_DATA plus RSS polling) and a
deadline. Whatever way it ends is turned into an ``Ending`` the verdict can name.
"""

from __future__ import annotations

import contextlib
import contextvars
import os
import re
import signal
import socket
import subprocess
import tempfile
import threading
import time
import weakref
from dataclasses import dataclass
from pathlib import Path
from subprocess import Popen
from typing import Protocol, TypeVar

from forge.core.sandbox import python_argv
from forge.verifier.machine import memory
from forge.verifier.processes.template import ForkedProcess, TemplateUnavailable, template_for, worker_limits
from forge.verifier.protocol import (
    ErrorReply,
    ExitRequest,
    HelloReply,
    MalformedMessage,
    Message,
    Reply,
    TickReply,
    parse_reply,
)
from forge.verifier.protocol.channel import Channel, ChannelClosed, ChannelTimeout

_OUTPUT_KEEP = 8000
# What torch's profiler prints itself when forge profiles a candidate in its worker (Kineto's
# "USDT:<date> <time> <pid>:<tid> <file>.cpp:<line>] profiler_start", and, in the sandbox where it
# cannot read /proc for the process's name, "Failed to read process name for pid <pid>"): forge's
# doing, not the candidate's output, and shown as the candidate's it misled a model reading the
# verdict (a relayed model took it for noise in every verdict of a session).
_PROFILER_LINE = re.compile(
    r"^(USDT:\S+ \S+ \d+:\d+ \w+\.cpp:\d+\] profiler_(?:start|stop)|Failed to read process name for pid \d+)\n?",
    re.MULTILINE,
)
R = TypeVar("R", bound=Message)


def without_profiler_lines(text: str) -> str:
    """``text`` without the lines torch's profiler printed itself (``_PROFILER_LINE``)."""
    return _PROFILER_LINE.sub("", text)


@dataclass
class Ending:
    """Why a worker stopped answering: 'timeout', 'memory', 'signal', 'exit' or 'protocol'."""

    kind: str
    detail: str


class WorkerGone(Exception):
    def __init__(self, ending: Ending) -> None:
        super().__init__(ending.detail)
        self.ending = ending


def _signal_name(num: int) -> str:
    try:
        return signal.Signals(num).name
    except ValueError:
        return f"signal {num}"


class Killable(Protocol):
    """A process a verification started and a stop ends: a worker, or a user loop's process."""

    def kill(self) -> None: ...


_LIVE: weakref.WeakSet[Killable] = weakref.WeakSet()
# The group the workers started by this thread (and context) belong to: a front end running
# several runs in one process ends one run's workers, not the others'.
worker_group: contextvars.ContextVar[weakref.WeakSet[Killable] | None] = contextvars.ContextVar(
    "forge_worker_group", default=None
)


def track(process: Killable) -> None:
    """``process`` ends with a stop of everything (``kill_all``) and of its thread's group."""
    _LIVE.add(process)
    group = worker_group.get()
    if group is not None:
        group.add(process)


def kill_all() -> int:
    """Kill every worker still running (a Ctrl-C while verifications run in pool threads)."""
    workers = list(_LIVE)
    for w in workers:
        w.kill()
    return len(workers)


class WorkerProcess:
    """One worker: start, send it requests, receive its replies, and account for how it ended."""

    def __init__(self, role: str, env: dict[str, str], memory_limit_mb: int, cwd: Path | None = None) -> None:
        self.role = role
        self.memory_limit_mb = memory_limit_mb
        # The capture file lives as long as the worker, so no context manager; its name goes at
        # once (the worker writes to the descriptor, the parent reads it with pread): a parent
        # killed before ``close`` leaves no file behind.
        self._out = tempfile.TemporaryFile(prefix=f"forge-{role}-", suffix=".log")  # noqa: SIM115
        parent_sock, child_sock = socket.socketpair()
        limit = memory_limit_mb * 1024 * 1024
        self.proc = self._start(role, env, cwd or Path.cwd(), child_sock)
        child_sock.close()
        # A frame can hold at most what the worker could allocate; a bogus length is refused
        # before the parent allocates anything for it.
        self.channel = Channel(parent_sock, max_frame=2 * limit + (64 << 20))
        self._memory_exceeded: int | None = None
        self._worker_pid: int | None = None  # as its hello gives it
        self.peak_rss_mb = 0
        # Replies owed: the hello, then one per request sent (a timed call's ticks come on top).
        self.pending = 1
        self._stop = threading.Event()
        self._monitor = threading.Thread(target=self._watch_memory, daemon=True)
        self._monitor.start()
        track(self)

    def _start(
        self, role: str, env: dict[str, str], cwd: Path, child_sock: socket.socket
    ) -> Popen[bytes] | ForkedProcess:
        """Fork the worker from a template (``template``), or exec a fresh interpreter where no
        template can: either way in its own session, with the same limits and environment."""
        template = template_for(env)
        if template is not None:
            try:
                fds = (child_sock.fileno(), self._out.fileno())
                return template.spawn(role, env, cwd, self.memory_limit_mb, *fds)
            except TemplateUnavailable:
                pass

        def limits() -> None:  # runs in the child between fork and exec
            worker_limits(self.memory_limit_mb)

        return subprocess.Popen(
            python_argv("forge.verifier.worker.main", role, str(child_sock.fileno())),
            pass_fds=(child_sock.fileno(),),
            stdin=subprocess.DEVNULL,
            stdout=self._out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
            env=env,
            cwd=str(cwd),
            preexec_fn=limits,
        )

    @property
    def pid(self) -> int:
        """The worker's own process, as its hello names it: a sandboxed worker is born behind
        relays (``forge.core.sandbox.pid_namespace``); until the hello, the process started."""
        return self._worker_pid or self.proc.pid

    def _watch_memory(self) -> None:
        while not self._stop.is_set() and self.proc.poll() is None:
            rss_mb = memory.resident_mib(self.pid)
            if rss_mb is None:  # gone
                return
            self.peak_rss_mb = max(self.peak_rss_mb, rss_mb)
            if rss_mb > self.memory_limit_mb:
                self._memory_exceeded = rss_mb
                self.kill()
                return
            self._stop.wait(0.05)

    def peak_mib(self) -> int:
        """The worker's peak resident size: the kernel's high-water mark while it runs, else the
        largest of the samples the memory watch took."""
        exact = memory.peak_mib(self.pid) if self.proc.poll() is None else None
        return max(exact or 0, self.peak_rss_mb)

    def send(self, request: Message) -> None:
        try:
            self.channel.send(request.wire())
            self.pending += 1
        except OSError as exc:
            raise WorkerGone(self._ending()) from exc

    def recv(self, deadline: float) -> tuple[Reply, float]:
        """The next reply and the parent's clock (perf_counter_ns) when it arrived."""
        try:
            frame = self.channel.recv(deadline)
            arrived = time.perf_counter_ns()
        except ChannelTimeout:
            self.kill()
            raise WorkerGone(Ending("timeout", "time limit reached")) from None
        except ChannelClosed as exc:
            ending = self._ending()
            if ending.kind == "protocol":
                ending.detail = f"{exc}"
            raise WorkerGone(ending) from None
        try:
            reply = parse_reply(frame)
        except MalformedMessage as exc:
            self.kill()
            raise WorkerGone(Ending("protocol", f"worker sent a malformed reply: {exc}")) from None
        if not isinstance(reply, TickReply):
            self.pending -= 1
        # The first hello naming a pid is forge's, sent before the candidate is imported (a hello
        # with none ends the worker before that): a later one is the candidate's, and ignored.
        if isinstance(reply, HelloReply) and reply.pid and self._worker_pid is None:
            self._worker_pid = reply.pid
        return reply, arrived

    def _ending(self) -> Ending:
        try:
            code = self.proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            self.kill()
            return Ending("protocol", "worker stopped answering")
        if self._memory_exceeded is not None:
            return Ending("memory", f"memory limit exceeded ({self._memory_exceeded} MiB > {self.memory_limit_mb} MiB)")
        if code < 0:
            name = _signal_name(-code)
            what = "segmentation fault" if name == "SIGSEGV" else f"killed by {name}"
            return Ending("signal", f"worker crashed: {what}")
        return Ending("exit", f"worker exited with status {code} before finishing (sys.exit/os._exit?)")

    def kill(self) -> None:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self.proc.pid, signal.SIGKILL)

    def output(self) -> str:
        """What the worker (the candidate included) printed, trimmed to the last few KB."""
        try:  # pread: the worker's stdout shares this file's offset, which must not move
            fd = self._out.fileno()
            size = os.fstat(fd).st_size
            data = os.pread(fd, _OUTPUT_KEEP, max(0, size - _OUTPUT_KEEP))
        except (OSError, ValueError):
            return ""
        text = without_profiler_lines(data.decode("utf-8", errors="replace"))
        return ("[... earlier output trimmed ...]\n" + text) if size > _OUTPUT_KEEP else text

    def close(self) -> None:
        _LIVE.discard(self)
        self._stop.set()
        if self.proc.poll() is None:
            with contextlib.suppress(OSError):
                self.channel.send(ExitRequest().wire())
            with contextlib.suppress(subprocess.TimeoutExpired):
                self.proc.wait(timeout=2)
        self.kill()
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.proc.wait(timeout=5)
        self.channel.sock.close()
        self._out.close()


def expect_reply(reply: Reply, expect: type[R], case_id: str | None = None) -> R | ErrorReply:
    """``reply`` if it is an ``expect`` (about the case asked, ``case_id``) or an error; anything
    else is a protocol breach that ends the worker (``WorkerGone``)."""
    if isinstance(reply, ErrorReply):
        return reply
    said = getattr(reply, "id", None)
    if not isinstance(reply, expect) or (case_id is not None and said != case_id):
        kind = expect.model_fields["kind"].default
        raise WorkerGone(Ending("protocol", f"worker replied {reply.kind!r} (id {said!r}) to a {kind!r} request"))
    return reply
