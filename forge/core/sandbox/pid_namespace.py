"""A PID namespace for the candidate's processes, so none of them outlives its worker.

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

Where the machine refuses unprivileged user namespaces, nothing is made and the worker runs as it
would without (``pid_namespace_available`` says so for ``forge doctor``).
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import signal
from pathlib import Path

_CLONE_NEWUSER = 0x10000000
_CLONE_NEWPID = 0x20000000
_PR_SET_PDEATHSIG = 1
_CAPABILITY_VERSION_3 = 0x20080522


class _CapHeader(ctypes.Structure):
    _fields_ = [("version", ctypes.c_uint32), ("pid", ctypes.c_int)]


class _CapData(ctypes.Structure):
    _fields_ = [("effective", ctypes.c_uint32), ("permitted", ctypes.c_uint32), ("inheritable", ctypes.c_uint32)]


def _libc() -> ctypes.CDLL:
    return ctypes.CDLL(None, use_errno=True)


def _unshare(libc: ctypes.CDLL) -> bool:
    """A new user and PID namespace for this process's children, its ids mapped to themselves."""
    uid, gid = os.getuid(), os.getgid()
    if libc.unshare(_CLONE_NEWUSER | _CLONE_NEWPID) != 0:
        return False
    try:
        Path("/proc/self/setgroups").write_text("deny")
        Path("/proc/self/uid_map").write_text(f"{uid} {uid} 1")
        Path("/proc/self/gid_map").write_text(f"{gid} {gid} 1")
    except OSError as exc:  # the namespace exists: this process cannot go back to what it was
        raise OSError(exc.errno, f"the user namespace's id maps were refused ({exc.strerror})") from exc
    return True


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


def born_contained() -> bool:
    """Make this process's children a PID namespace and fork its first process, which forks the
    worker: returns in the worker (True), while this process and the namespace's first process
    relay its ending and never return. False, with nothing changed, where the machine refuses the
    namespaces. Call it with one thread running."""
    libc = _libc()
    if not _unshare(libc):
        return False
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
    return True


def pid_namespace_available() -> bool:
    """Whether this machine lets an unprivileged process make a user and PID namespace and map its
    ids in it (some refuse the maps alone), tried in a child that exits at once."""
    libc = _libc()
    pid = os.fork()
    if pid == 0:
        try:
            os._exit(0 if _unshare(libc) else 1)
        finally:
            os._exit(1)
    _, status = os.waitpid(pid, 0)
    return os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0
