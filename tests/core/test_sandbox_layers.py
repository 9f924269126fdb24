"""The sandbox's layers one at a time, each in a forked child: the socket filter alone, the network
namespace alone (no filter), and what a project folder grants a worker to read."""

from __future__ import annotations

import ctypes
import errno
import os
import platform
import socket
from collections.abc import Callable
from pathlib import Path

import pytest

from forge.core.sandbox import namespaces, policy_for, syscall_filter
from forge.core.sandbox.project_reads import ProjectReads, looks_secret


def _in_child(body: Callable[[], int]) -> int:
    """``body``'s result (a small int) from a forked child; 99 where it raised."""
    pid = os.fork()
    if pid == 0:
        code = 99
        try:
            code = body()
        finally:
            os._exit(code)
    _, status = os.waitpid(pid, 0)
    return os.waitstatus_to_exitcode(status)


def _socket_errno(family: int, kind: int) -> int:
    try:
        socket.socket(family, kind).close()
    except OSError as exc:
        return exc.errno or 1
    return 0


@pytest.mark.skipif(not syscall_filter.filter_available(), reason="needs seccomp")
def test_the_filter_refuses_every_new_socket_and_keeps_inherited_ones_and_pairs():
    ours, theirs = socket.socketpair()

    def body() -> int:
        syscall_filter.refuse_sockets()
        for family, kind in ((socket.AF_INET, socket.SOCK_DGRAM), (socket.AF_INET6, socket.SOCK_STREAM)):
            if _socket_errno(family, kind) != errno.EACCES:
                return 1
        if _socket_errno(socket.AF_UNIX, socket.SOCK_STREAM) != errno.EACCES:
            return 2
        a, b = socket.socketpair()  # joined to each other: reaches nothing outside
        a.send(b"x")
        if b.recv(1) != b"x":
            return 3
        try:  # a datagram pair could sendto() any Unix datagram socket by its path
            socket.socketpair(socket.AF_UNIX, socket.SOCK_DGRAM)
            return 4
        except PermissionError:
            pass
        theirs.send(b"channel")  # the worker's channel: made before, inherited
        return 0

    assert _in_child(body) == 0
    assert ours.recv(16) == b"channel"


class _RecordingLibc:
    """The process's libc, each ``syscall`` call's arguments and result noted."""

    def __init__(self) -> None:
        self.real = ctypes.CDLL(None, use_errno=True)
        self.syscalls: list[tuple[list[int], int]] = []

    def syscall(self, *args: object) -> int:
        found = int(self.real.syscall(*args))
        self.syscalls.append(([a.value for a in args if isinstance(a, ctypes.c_long)], found))
        return found

    def prctl(self, *args: object) -> int:
        return int(self.real.prctl(*args))


@pytest.mark.skipif(not syscall_filter.filter_available(), reason="needs seccomp")
def test_the_filter_leaves_the_store_bypass_mitigation_as_the_process_had_it():
    """Installed through seccomp(2) with SECCOMP_FILTER_FLAG_SPEC_ALLOW (4): a kernel whose
    mitigation follows seccomp (before 5.16) would otherwise slow the candidate's worker alone."""
    recording = _RecordingLibc()
    arch = syscall_filter._ARCHES[platform.machine()]

    def body() -> int:
        recording.real.prctl(38, 1, 0, 0, 0)  # PR_SET_NO_NEW_PRIVS, as refuse_sockets sets it first
        syscall_filter.install(recording, arch, syscall_filter.program_for(arch))
        asked = [args for args, _found in recording.syscalls]
        if asked != [[arch.seccomp, 1, 4]]:  # a kernel before 4.17 refuses the flag: prctl then installs it
            return 1
        return 0 if _socket_errno(socket.AF_INET, socket.SOCK_STREAM) == errno.EACCES else 2

    assert _in_child(body) == 0


@pytest.mark.skipif(not namespaces.namespaces_available().network, reason="needs unprivileged network namespaces")
def test_the_network_namespace_alone_lets_no_datagram_out():
    listener = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    listener.bind(("127.0.0.1", 0))
    listener.settimeout(0.5)
    port = listener.getsockname()[1]

    def body() -> int:
        made = namespaces.born_contained()  # returns in the worker, two relays above it
        if not made.network:
            return 1
        try:
            socket.socket(socket.AF_INET, socket.SOCK_DGRAM).sendto(b"leak", ("127.0.0.1", port))
        except OSError as exc:
            return 0 if exc.errno == errno.ENETUNREACH else 2
        return 3

    assert _in_child(body) == 0
    with pytest.raises(TimeoutError):
        listener.recv(16)
    listener.close()


def test_a_project_folder_grants_its_python_and_clean_packages_alone(tmp_path: Path):
    (tmp_path / "op.py").write_text("")
    (tmp_path / "helper.pyi").write_text("")
    (tmp_path / ".env").write_text("KEY=1")
    (tmp_path / "notes.txt").write_text("")
    clean = tmp_path / "clean_pkg"
    (clean / "sub").mkdir(parents=True)
    (clean / "__init__.py").write_text("")
    (clean / "sub" / "table.json").write_text("{}")
    mixed = tmp_path / "mixed_pkg"
    (mixed / "inner").mkdir(parents=True)
    (mixed / "__init__.py").write_text("")
    (mixed / "deploy.pem").write_text("")
    (mixed / "inner" / "mod.py").write_text("")
    (mixed / "inner" / ".secrets").write_text("")
    (tmp_path / "data").mkdir()  # no module in it: not a package
    (tmp_path / "data" / "table.csv").write_text("")
    reads = ProjectReads()
    reads.add_folder(tmp_path)
    assert reads.trees == {str(clean)}
    assert reads.files == {str(tmp_path / n) for n in ("op.py", "helper.pyi")} | {
        str(mixed / "__init__.py"),
        str(mixed / "inner" / "mod.py"),
    }
    assert reads.listable == {str(tmp_path), str(mixed), str(mixed / "inner")}


def test_a_policy_reads_the_op_file_but_no_secret_beside_it(tmp_path: Path):
    (tmp_path / "op.py").write_text("")
    (tmp_path / "op.inputs.pt").write_text("")  # an op carved from a model: its recorded inputs
    (tmp_path / "id_ed25519").write_text("")
    (tmp_path / ".env").write_text("")
    policy = policy_for([tmp_path / "op.py", tmp_path], [tmp_path / "cache"], gpu=False)
    assert str(tmp_path / "op.py") in policy.read and str(tmp_path) in policy.listable
    assert str(tmp_path / "op.inputs.pt") in policy.read
    assert not any(r in (str(tmp_path), str(tmp_path / ".env"), str(tmp_path / "id_ed25519")) for r in policy.read)


@pytest.mark.parametrize(
    ("name", "secret"),
    [("server.pem", True), ("id_rsa", True), ("aws_credentials", True), ("bank.db", True), ("weights.json", False)],
)
def test_secret_looking_names(name: str, secret: bool):
    assert looks_secret(name) is secret


def test_a_namespace_package_is_granted_and_a_secret_named_module_is_not(tmp_path: Path):
    (tmp_path / "utils").mkdir()
    (tmp_path / "utils" / "helpers.py").write_text("")  # no __init__.py: a namespace package
    (tmp_path / "secrets.py").write_text("API_KEY = '...'")
    (tmp_path / "tokenizer.py").write_text("")
    reads = ProjectReads()
    reads.add_folder(tmp_path)
    assert str(tmp_path / "utils") in reads.trees
    assert str(tmp_path / "tokenizer.py") in reads.files and str(tmp_path / "secrets.py") not in reads.files


def test_a_link_at_a_projects_top_is_not_followed(tmp_path: Path):
    outside = tmp_path / "home" / "credentials"
    outside.parent.mkdir()
    outside.write_text("")
    project = tmp_path / "project"
    project.mkdir()
    (project / "innocent.py").symlink_to(outside)
    reads = ProjectReads()
    reads.add_folder(project)
    assert reads.files == set()


def test_no_worker_reads_a_user_site_packages():
    """A worker's home is a folder it writes: a .pth left in its user site would run in the next
    process before the sandbox. Every worker starts with -s and PYTHONNOUSERSITE."""
    from forge.core.sandbox import python_argv
    from forge.verifier.processes.worker_env import worker_env

    assert python_argv("m")[1] == "-s"
    assert worker_env("cpu", 1, Path("/tmp/forge-test-cache"))["PYTHONNOUSERSITE"] == "1"
