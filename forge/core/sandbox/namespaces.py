"""Namespaces of the worker's own: a PID namespace, so none of the candidate's processes outlives
its worker; a network namespace, so it has no network at all; a mount namespace, so its
``/dev/shm`` is its own.

A process the candidate starts can leave the worker's session (``setsid``, a double fork), and
then no kill of the worker's process group reaches it. In a PID namespace the kernel ends every
process in it when the namespace's first process ends. So the process forge started, still
single-threaded and before anything of the candidate's, makes a user and PID namespace and forks
twice: its child is the namespace's first process, whose child returns and becomes the worker.
The two left behind are *relays*: they wait, and the outer one ends the way the worker ended (the
same exit status or signal), so forge sees the worker's ending. The worker is not the first
process itself because that one is deaf to the signals it sends itself (an ``abort()`` would read
as a segmentation fault). A kill of the process group ends the outer relay and the worker; each
process also dies with its parent; and once the first process is gone the kernel ends the rest.

The namespace must be made before the worker's first thread: the kernel refuses a thread to a
process that made a PID namespace for its children, so the worker is a child, never the maker.
Inside, the worker sees no process outside by number; the user namespace maps its own user and
group to themselves (files keep their owners) and the worker drops the capabilities the new
namespace gave it. The relays stay outside the Landlock domain the worker enters, out of its reach.

The same step makes a network namespace: the worker has no interface but a loopback of its own,
down, so no datagram, raw or packet socket and no connection reaches any address (the socket
filter, ``syscall_filter``, refuses the sockets themselves as well). And a mount namespace, in
which a fresh tmpfs covers ``/dev/shm``: POSIX shared memory a candidate leaves there is gone with
its worker, and nothing another verification left is in sight. Mounts made here never reach the
machine's own (a namespace made with a user namespace receives mount events, never sends them).

Where the machine refuses unprivileged user namespaces, nothing is made and the worker runs as it
would without; where it refuses the network and mount namespaces alone, the PID namespace is made
without them (``namespaces_available`` says which for ``forge doctor``).
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import signal
from dataclasses import dataclass
from pathlib import Path

_CLONE_NEWNS = 0x00020000
_CLONE_NEWUSER = 0x10000000
_CLONE_NEWPID = 0x20000000
_CLONE_NEWNET = 0x40000000
_MS_NOSUID, _MS_NODEV, _MS_NOEXEC = 0x2, 0x4, 0x8
_SHM = "/dev/shm"
_PR_SET_PDEATHSIG = 1
_CAPABILITY_VERSION_3 = 0x20080522


class _CapHeader(ctypes.Structure):
    _fields_ = [("version", ctypes.c_uint32), ("pid", ctypes.c_int)]


class _CapData(ctypes.Structure):
    _fields_ = [("effective", ctypes.c_uint32), ("permitted", ctypes.c_uint32), ("inheritable", ctypes.c_uint32)]


@dataclass(frozen=True)
class Namespaces:
    """Which of the worker's own namespaces were made."""

    pid: bool = False  # and the user namespace it needs
    network: bool = False
    private_shm: bool = False  # a mount namespace, with a tmpfs of its own on /dev/shm


def _libc() -> ctypes.CDLL:
    return ctypes.CDLL(None, use_errno=True)


def _unshare(libc: ctypes.CDLL) -> Namespaces:
    """A new user, network and mount namespace for this process and a PID namespace for its
    children, its ids mapped to themselves; the user and PID namespaces alone where the machine
    refuses the others; none (all False) where it refuses those too."""
    uid, gid = os.getuid(), os.getgid()
    if libc.unshare(_CLONE_NEWUSER | _CLONE_NEWPID | _CLONE_NEWNET | _CLONE_NEWNS) == 0:
        made = Namespaces(pid=True, network=True, private_shm=True)
    elif libc.unshare(_CLONE_NEWUSER | _CLONE_NEWPID) == 0:
        made = Namespaces(pid=True)
    else:
        return Namespaces()
    try:
        Path("/proc/self/setgroups").write_text("deny")
        Path("/proc/self/uid_map").write_text(f"{uid} {uid} 1")
        Path("/proc/self/gid_map").write_text(f"{gid} {gid} 1")
    except OSError as exc:  # the namespace exists: this process cannot go back to what it was
        raise OSError(exc.errno, f"the user namespace's id maps were refused ({exc.strerror})") from exc
    if made.private_shm and not _private_shm(libc):
        made = Namespaces(pid=True, network=True)
    return made


def _private_shm(libc: ctypes.CDLL) -> bool:
    """A tmpfs of this mount namespace's own over /dev/shm (False where it has none or the mount is
    refused: the machine's /dev/shm then stays in sight)."""
    if not Path(_SHM).is_dir():
        return False
    flags = _MS_NOSUID | _MS_NODEV | _MS_NOEXEC
    # its pages are not the process's own (RLIMIT_DATA does not count them): bounded by the
    # worker's memory limit where the parent set one
    limit = os.environ.get("FORGE_WORKER_MEMORY_MB", "")
    options = b"mode=1777" + (f",size={int(limit)}m".encode() if limit.isdigit() else b"")
    return libc.mount(b"tmpfs", _SHM.encode(), b"tmpfs", flags, options) == 0


def _drop_capabilities(libc: ctypes.CDLL) -> None:
    """The capabilities the new user namespace granted (over it alone), given back."""
    header = _CapHeader(_CAPABILITY_VERSION_3, 0)
    data = (_CapData * 2)()
    if libc.capset(ctypes.byref(header), data) != 0:
        err = ctypes.get_errno()
        raise OSError(err, f"capset: {os.strerror(err)}")


def _wait(child: int) -> int:
    while True:
        try:
            return os.waitpid(child, 0)[1]
        except InterruptedError:
            continue


def _end_as(status: int) -> None:
    """End this process as a child that ended with wait ``status`` did."""
    if os.WIFSIGNALED(status):
        sig = os.WTERMSIG(status)
        if sig not in (signal.SIGKILL, signal.SIGSTOP):  # neither has a handler to reset
            signal.signal(sig, signal.SIG_DFL)
        os.kill(os.getpid(), sig)
        os._exit(128 + sig)  # a signal whose default is not to end a process
    os._exit(os.waitstatus_to_exitcode(status) if os.WIFEXITED(status) else 70)


def _outer_relay(child: int, said: int) -> None:
    """Outside the namespace: wait for its first process and end as the worker ended, as that
    process reports it (the first process of a namespace cannot end itself by a signal). Never
    returns, whatever fails: the worker's code must not run twice."""
    try:
        os.closerange(3, said)
        os.closerange(said + 1, os.sysconf("SC_OPEN_MAX"))
        status = _wait(child)
        with os.fdopen(said, "rb") as pipe:
            report = pipe.read(4)
        _end_as(int.from_bytes(report, "little") if len(report) == 4 else status)
    finally:
        os._exit(70)


def _first_process(worker: int, tell: int) -> None:
    """PID 1 of the namespace: wait for the worker and tell the outer relay how it ended; as it
    exits, the kernel ends whatever the worker left in the namespace."""
    try:
        os.closerange(3, tell)
        os.closerange(tell + 1, os.sysconf("SC_OPEN_MAX"))
        os.write(tell, _wait(worker).to_bytes(4, "little"))
    finally:
        os._exit(0)


def _number_after(host_pid: int) -> None:
    """Have the namespace number its next process ``host_pid + 1``: without it every worker is
    PID 2, and names built from a process id and a thread id (compile caches' temporary files, in
    a cache concurrent workers share) would be the same in workers forked from one template. The
    outer relay's host pid is unique while it lives. Best effort (the number is not needed)."""
    with contextlib.suppress(OSError):
        Path("/proc/sys/kernel/ns_last_pid").write_text(str(host_pid))


def born_contained() -> Namespaces:
    """Make this process's namespaces and fork the PID namespace's first process, which forks the
    worker: returns in the worker (what was made), while this process and the namespace's first
    process relay its ending and never return. Nothing made (all False), with nothing changed,
    where the machine refuses the namespaces. Call it with one thread running."""
    libc = _libc()
    made = _unshare(libc)
    if not made.pid:
        return made
    host_pid = os.getpid()
    said, tell = os.pipe()
    first = os.fork()
    if first != 0:
        os.close(tell)
        _outer_relay(first, said)
    libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    os.close(said)
    _number_after(host_pid)
    worker = os.fork()
    if worker != 0:
        _first_process(worker, tell)
    os.close(tell)
    libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    _drop_capabilities(libc)
    return made


def namespaces_available() -> Namespaces:
    """Which namespaces this machine lets an unprivileged process make (and map its ids in: some
    refuse the maps alone), tried in a child that exits at once."""
    libc = _libc()
    said, tell = os.pipe()
    pid = os.fork()
    if pid == 0:
        try:
            os.close(said)
            made = _unshare(libc)
            os.write(tell, bytes([made.pid, made.network, made.private_shm]))
        finally:
            os._exit(0)
    os.close(tell)
    with os.fdopen(said, "rb") as pipe:
        report = pipe.read(3)
    os.waitpid(pid, 0)
    return Namespaces(*(bool(b) for b in report)) if len(report) == 3 else Namespaces()
