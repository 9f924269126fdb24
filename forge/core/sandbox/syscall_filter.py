"""A seccomp filter that refuses every new socket, whatever the network namespace allows.

Landlock's network rights cover TCP alone, and a pathname Unix socket (a database server's, a
container engine's, an agent's) is reached through ``connect``, which Landlock's file rights do
not cover. A candidate needs no socket of its own: the worker's channel to forge is a socket pair
made before the fork and inherited, and the compilers it runs talk over pipes. So this filter
refuses the ``socket`` system call for every family (inet, inet6, packet, netlink, Unix) with
``EACCES`` ("Permission denied"), and ``io_uring_setup``, whose requests make sockets and connect
them without the ``socket`` call. ``socketpair`` stays for stream and packet pairs, which are
connected to each other for good (``connect`` says already connected, an address given to
``sendto`` is refused or ignored); a datagram pair is refused, since ``sendto`` a path on it
reaches any Unix datagram socket (``/dev/log``, the journal's). A system call made through
another architecture's entry (a 32-bit ``int 0x80`` from a 64-bit process, whose ``socketcall``
would slip past) is refused whole, as is the x32 ABI.

The filter is a classic BPF program over ``struct seccomp_data`` (``nr`` at offset 0, ``arch`` at
4, the low half of ``args[1]`` at 24), installed after ``PR_SET_NO_NEW_PRIVS``; it holds for the
calling thread and every process it starts, for good. It is installed with the ``seccomp`` system
call and ``SECCOMP_FILTER_FLAG_SPEC_ALLOW``: without it, a kernel whose store-bypass mitigation
is in its ``seccomp`` mode (the default before Linux 5.16, as on many GPU clusters' distributions)
turns Speculative Store Bypass Disable on for every filtered process, and the candidate's worker
alone would run its loads and stores under it, slower than the reference's worker on the same
code. A kernel too old for the flag (before 4.17) gets ``prctl(PR_SET_SECCOMP)``.
"""

from __future__ import annotations

import ctypes
import errno
import os
import platform
from dataclasses import dataclass
from typing import Any

_PR_SET_NO_NEW_PRIVS = 38
_PR_SET_SECCOMP = 22
_SECCOMP_MODE_FILTER = 2
_SECCOMP_RET_ALLOW = 0x7FFF0000
_SECCOMP_RET_ERRNO = 0x00050000
_X32_SYSCALL_BIT = 0x40000000
_SECCOMP_SET_MODE_FILTER = 1  # the seccomp system call's operation
_SECCOMP_FILTER_FLAG_SPEC_ALLOW = 1 << 2

# classic BPF opcodes
_LD_W_ABS = 0x20  # BPF_LD | BPF_W | BPF_ABS
_JEQ_K = 0x15  # BPF_JMP | BPF_JEQ | BPF_K
_JGE_K = 0x35  # BPF_JMP | BPF_JGE | BPF_K
_RET_K = 0x06  # BPF_RET | BPF_K


@dataclass(frozen=True)
class _Arch:
    audit: int  # AUDIT_ARCH_* as seccomp_data.arch reads it
    socket: int
    socketpair: int
    io_uring_setup: int
    seccomp: int  # the seccomp system call's own number


_ARCHES = {
    "x86_64": _Arch(audit=0xC000003E, socket=41, socketpair=53, io_uring_setup=425, seccomp=317),
    "aarch64": _Arch(audit=0xC00000B7, socket=198, socketpair=199, io_uring_setup=425, seccomp=277),
}
_SOCK_STREAM, _SOCK_SEQPACKET = 1, 5
_SOCK_TYPE_MASK = 0xF  # the type's bits of socketpair's second argument (the rest: SOCK_CLOEXEC, ...)
_ARG1_LOW = 24  # seccomp_data.args[1], its low 32 bits (little-endian)
_ALU_AND_K = 0x54  # BPF_ALU | BPF_AND | BPF_K


class SyscallFilterError(OSError):
    """The kernel refused the filter (no seccomp, or a step of installing it failed)."""


class _Instruction(ctypes.Structure):
    _fields_ = [("code", ctypes.c_uint16), ("jt", ctypes.c_uint8), ("jf", ctypes.c_uint8), ("k", ctypes.c_uint32)]


class _Program(ctypes.Structure):
    _fields_ = [("len", ctypes.c_uint16), ("filter", ctypes.POINTER(_Instruction))]


def _program(arch: _Arch) -> list[tuple[int, int, int, int]]:
    """(code, jump if true, jump if false, k), jumps counted from the next instruction."""
    refuse = _SECCOMP_RET_ERRNO | errno.EACCES
    return [
        (_LD_W_ABS, 0, 0, 4),  # 0: arch
        (_JEQ_K, 0, 10, arch.audit),  # 1: another architecture's entry -> 12 (refused)
        (_LD_W_ABS, 0, 0, 0),  # 2: the system call's number
        (_JGE_K, 8, 0, _X32_SYSCALL_BIT),  # 3: the x32 ABI -> 12
        (_JEQ_K, 7, 0, arch.socket),  # 4: socket -> 12
        (_JEQ_K, 6, 0, arch.io_uring_setup),  # 5: io_uring_setup -> 12
        (_JEQ_K, 0, 4, arch.socketpair),  # 6: anything else -> 11 (allowed)
        (_LD_W_ABS, 0, 0, _ARG1_LOW),  # 7: socketpair's type
        (_ALU_AND_K, 0, 0, _SOCK_TYPE_MASK),  # 8
        (_JEQ_K, 1, 0, _SOCK_STREAM),  # 9: a stream pair -> 11
        (_JEQ_K, 0, 1, _SOCK_SEQPACKET),  # 10: a packet pair -> 11, a datagram pair -> 12
        (_RET_K, 0, 0, _SECCOMP_RET_ALLOW),  # 11
        (_RET_K, 0, 0, refuse),  # 12
    ]


def supported() -> bool:
    """Whether this machine's architecture has a filter here (the kernel may still refuse it)."""
    return platform.system() == "Linux" and platform.machine() in _ARCHES


def refuse_sockets() -> None:
    """Install the filter on this process (its calling thread and what it starts), for good."""
    arch = _ARCHES.get(platform.machine())
    if platform.system() != "Linux" or arch is None:
        raise SyscallFilterError(errno.ENOSYS, f"no socket filter for {platform.machine()}")
    program = program_for(arch)
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(_PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0:
        err = ctypes.get_errno()
        raise SyscallFilterError(err, f"prctl(PR_SET_NO_NEW_PRIVS): {os.strerror(err)}")
    install(libc, arch, program)


def program_for(arch: _Arch) -> _Program:
    """The filter's program for ``arch``, as the kernel takes it (the instructions kept alive by it)."""
    steps = _program(arch)
    code = (_Instruction * len(steps))(*(_Instruction(*s) for s in steps))
    return _Program(len(steps), code)


def install(libc: Any, arch: _Arch, program: _Program) -> None:
    """The filter installed with the store-bypass mitigation left as the process had it (see the
    module's doc); with ``prctl`` where the kernel does not know the flag (EINVAL)."""
    operation, flags = ctypes.c_long(_SECCOMP_SET_MODE_FILTER), ctypes.c_long(_SECCOMP_FILTER_FLAG_SPEC_ALLOW)
    if libc.syscall(ctypes.c_long(arch.seccomp), operation, flags, ctypes.byref(program)) == 0:
        return
    err = ctypes.get_errno()
    if err not in (errno.EINVAL, errno.ENOSYS, errno.EPERM):  # too old a kernel, or an outer sandbox's rule
        raise SyscallFilterError(err, f"seccomp(SECCOMP_SET_MODE_FILTER): {os.strerror(err)}")
    if libc.prctl(_PR_SET_SECCOMP, _SECCOMP_MODE_FILTER, ctypes.byref(program), 0, 0) != 0:
        err = ctypes.get_errno()
        raise SyscallFilterError(err, f"prctl(PR_SET_SECCOMP): {os.strerror(err)}")


def filter_available() -> bool:
    """Whether the filter installs here, tried in a child that exits at once (for ``forge doctor``)."""
    if not supported():
        return False
    pid = os.fork()
    if pid == 0:
        try:
            refuse_sockets()
            os._exit(0)
        finally:
            os._exit(1)
    _, status = os.waitpid(pid, 0)
    return os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0
