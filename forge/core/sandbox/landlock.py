"""Linux Landlock through its three system calls (ctypes; no binding maintained for Python fits).

Landlock lets an unprivileged process restrict itself, and every process it starts, for good:
which files it may read, write or execute (rules on directory trees and files), which TCP ports it
may bind or connect to (ABI 4), and whether it may signal or reach the abstract Unix sockets of
processes outside its domain (ABI 6). ptrace of a process outside the domain is refused at every
ABI. A right is refused only where the ruleset *handles* it, so the rights handled are those the
running kernel's ABI knows.
"""

from __future__ import annotations

import ctypes
import os
import platform
from dataclasses import dataclass
from pathlib import Path

# The same numbers on x86-64 and arm64 (the generic syscall table).
_SYS_CREATE_RULESET = 444
_SYS_ADD_RULE = 445
_SYS_RESTRICT_SELF = 446
_CREATE_RULESET_VERSION = 1
_RULE_PATH_BENEATH = 1
_PR_SET_NO_NEW_PRIVS = 38

EXECUTE = 1 << 0
WRITE_FILE = 1 << 1
READ_FILE = 1 << 2
READ_DIR = 1 << 3
REMOVE_DIR = 1 << 4
REMOVE_FILE = 1 << 5
MAKE_CHAR = 1 << 6
MAKE_DIR = 1 << 7
MAKE_REG = 1 << 8
MAKE_SOCK = 1 << 9
MAKE_FIFO = 1 << 10
MAKE_BLOCK = 1 << 11
MAKE_SYM = 1 << 12
REFER = 1 << 13  # ABI 2
TRUNCATE = 1 << 14  # ABI 3
IOCTL_DEV = 1 << 15  # ABI 5
NET_BIND_TCP = 1 << 0  # ABI 4
NET_CONNECT_TCP = 1 << 1
SCOPE_ABSTRACT_UNIX_SOCKET = 1 << 0  # ABI 6
SCOPE_SIGNAL = 1 << 1

READ = EXECUTE | READ_FILE | READ_DIR
_FILE_RIGHTS = EXECUTE | WRITE_FILE | READ_FILE | TRUNCATE | IOCTL_DEV  # what a rule on a file may grant
_WRITE_ONLY = WRITE_FILE | REMOVE_DIR | REMOVE_FILE | MAKE_CHAR | MAKE_DIR | MAKE_REG | MAKE_SOCK | MAKE_FIFO
WRITE = READ | _WRITE_ONLY | MAKE_BLOCK | MAKE_SYM | REFER | TRUNCATE


class LandlockError(OSError):
    """Landlock is missing, disabled, or refused a step."""


class _RulesetAttr(ctypes.Structure):
    _fields_ = [
        ("handled_access_fs", ctypes.c_uint64),
        ("handled_access_net", ctypes.c_uint64),
        ("scoped", ctypes.c_uint64),
    ]


class _PathBeneathAttr(ctypes.Structure):
    _pack_ = 1
    _fields_ = [("allowed_access", ctypes.c_uint64), ("parent_fd", ctypes.c_int32)]


_libc = ctypes.CDLL(None, use_errno=True)
_libc.syscall.restype = ctypes.c_long


def _syscall(number: int, *args: object) -> int:
    result = int(_libc.syscall(ctypes.c_long(number), *args))
    if result < 0:
        err = ctypes.get_errno()
        raise LandlockError(err, os.strerror(err))
    return result


def abi_version() -> int:
    """The Landlock ABI this kernel offers (0: none, or disabled at boot)."""
    if platform.system() != "Linux" or platform.machine() not in ("x86_64", "aarch64"):
        return 0
    try:
        return _syscall(_SYS_CREATE_RULESET, None, ctypes.c_size_t(0), ctypes.c_uint32(_CREATE_RULESET_VERSION))
    except LandlockError:
        return 0


@dataclass(frozen=True)
class Handled:
    """The rights a ruleset handles (refuses unless a rule allows) on this ABI."""

    fs: int
    net: int
    scoped: int


def handled_on(abi: int) -> Handled:
    fs = READ | _WRITE_ONLY | MAKE_BLOCK | MAKE_SYM
    if abi >= 2:
        fs |= REFER
    if abi >= 3:
        fs |= TRUNCATE
    if abi >= 5:
        fs |= IOCTL_DEV
    net = NET_BIND_TCP | NET_CONNECT_TCP if abi >= 4 else 0
    scoped = SCOPE_ABSTRACT_UNIX_SOCKET | SCOPE_SIGNAL if abi >= 6 else 0
    return Handled(fs, net, scoped)


def restrict_self(rules: list[tuple[Path, int]], abi: int) -> None:
    """Confine this process (its calling thread, and every process it starts) to ``rules``: each
    a path and the rights granted beneath it (on a file, its file rights alone). Nothing else on
    the filesystem, no TCP bind or connect, and (ABI 6) no signal or abstract socket outside.
    Call it while the process has one thread: other threads stay unconfined."""
    handled = handled_on(abi)
    attr = _RulesetAttr(handled.fs, handled.net, handled.scoped)
    size = 24 if abi >= 6 else (16 if abi >= 4 else 8)
    ruleset = _syscall(_SYS_CREATE_RULESET, ctypes.byref(attr), ctypes.c_size_t(size), ctypes.c_uint32(0))
    try:
        for path, rights in rules:
            _add_rule(ruleset, path, rights & handled.fs)
        if _libc.prctl(_PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0:
            err = ctypes.get_errno()
            raise LandlockError(err, f"prctl(PR_SET_NO_NEW_PRIVS): {os.strerror(err)}")
        _syscall(_SYS_RESTRICT_SELF, ctypes.c_int(ruleset), ctypes.c_uint32(0))
    finally:
        os.close(ruleset)


def _add_rule(ruleset: int, path: Path, rights: int) -> None:
    try:
        fd = os.open(path, os.O_PATH | os.O_CLOEXEC)
    except OSError:
        return  # a path this machine lacks grants nothing
    try:
        if not path.is_dir():
            rights &= _FILE_RIGHTS
        beneath = _PathBeneathAttr(rights, fd)
        _syscall(
            _SYS_ADD_RULE,
            ctypes.c_int(ruleset),
            ctypes.c_int(_RULE_PATH_BENEATH),
            ctypes.byref(beneath),
            ctypes.c_uint32(0),
        )
    finally:
        os.close(fd)
