"""What a process that runs candidate code may touch, and entering that confinement.

The parent builds a ``SandboxPolicy`` (it knows the op, the candidate, the scratch and cache
directories, the GPU's device files) and hands it to the worker in its environment; the worker
enters it before it imports the candidate. Read-only: the system's programs, libraries and
headers, the Python installation, and of the user's projects (the op's and candidate's folders,
the working directory, the import path's folders outside the installation, never the home
directory or above it) their Python alone (``project_reads``). Writable: the scratch and cache
directories forge gives it, and its own ``/dev/shm``. Devices: the null and random devices, the
GPU's files. Nothing else on the filesystem, no TCP, no signal or ptrace outside the sandbox
(``landlock``), no new socket of any kind (``syscall_filter``)."""

from __future__ import annotations

import glob
import json
import os
import shutil
import site
import subprocess
import sys
from dataclasses import asdict, dataclass, field
from pathlib import Path

from forge.core.sandbox import landlock, namespaces, syscall_filter
from forge.core.sandbox.project_reads import ProjectReads

POLICY_ENV = "FORGE_WORKER_SANDBOX"
_SYSTEM_READ = ("/usr", "/lib", "/lib64", "/lib32", "/bin", "/sbin", "/sys", "/opt")
# /proc of this process alone (another's environment and memory stay out of reach), and the
# machine's figures torch, OpenMP and the GPU driver read
_PROC_READ = (
    "/proc/self",
    "/proc/cpuinfo",
    "/proc/meminfo",
    "/proc/stat",
    "/proc/filesystems",
    "/proc/sys",
    "/proc/driver",
)
# /etc holds secrets of its own (shadow, ssh host keys): only what the loader, the compilers'
# alternatives and the C library's name lookups read
_ETC_READ = (
    "/etc/ld.so.cache",
    "/etc/ld.so.conf",
    "/etc/ld.so.conf.d",
    "/etc/alternatives",
    "/etc/localtime",
    "/etc/passwd",
    "/etc/group",
    "/etc/nsswitch.conf",
    "/etc/os-release",
    "/etc/debian_version",
)
_DEVICES = ("/dev/null", "/dev/zero", "/dev/full", "/dev/random", "/dev/urandom")
_GPU_DEVICES = ("/dev/nvidia*", "/dev/dri")


class SandboxError(RuntimeError):
    """The sandbox could not be entered."""


@dataclass(frozen=True)
class SandboxPolicy:
    read: list[str] = field(default_factory=list)  # trees (or files) readable whole
    write: list[str] = field(default_factory=list)
    devices: list[str] = field(default_factory=list)
    listable: list[str] = field(default_factory=list)  # folders whose names alone may be read

    def to_env(self) -> str:
        return json.dumps(asdict(self))

    @classmethod
    def from_env(cls, text: str) -> SandboxPolicy:
        data = json.loads(text)
        return cls(
            read=list(data["read"]),
            write=list(data["write"]),
            devices=list(data["devices"]),
            listable=list(data["listable"]),
        )


def _outside_home(path: Path) -> bool:
    """Not the home directory, nor a directory holding it (whose reading would open it all)."""
    home = Path.home().resolve()
    return path != home and path not in home.parents


def _gpu_devices() -> list[str]:
    """The GPU driver's device files. CUDA's unified-memory node is made by the first process that
    initialises CUDA, and a confined worker may not make it: made here first where it is missing."""
    if Path("/dev/nvidiactl").exists() and not Path("/dev/nvidia-uvm").exists():
        helper = shutil.which("nvidia-modprobe")
        if helper is not None:
            subprocess.run([helper, "-u", "-c=0"], check=False, capture_output=True, timeout=30)
    return sorted(d for pattern in _GPU_DEVICES for d in glob.glob(pattern))


def policy_for(reads: list[Path], writes: list[Path], gpu: bool) -> SandboxPolicy:
    """The confinement of a worker that reads ``reads`` besides the system and Python (files: the op,
    the candidate; folders: projects, of which their Python alone, ``project_reads``), and writes
    ``writes`` alone."""
    python = {sys.prefix, sys.base_prefix, sys.exec_prefix, *site.getsitepackages()}
    installed = [Path(p).resolve() for p in python]
    projects = ProjectReads()
    imports = [Path(p).resolve() for p in sys.path if p and Path(p).is_dir()]
    forge_root = Path(__file__).resolve().parents[3]  # a source checkout, or site-packages
    for path in [*(p.resolve() for p in reads), forge_root, *imports]:
        if not _outside_home(path) or any(path == i or i in path.parents for i in installed):
            continue
        projects.add_folder(path) if path.is_dir() else projects.add_file(path)
    granted = projects.files | projects.trees
    read = sorted(set(_SYSTEM_READ) | set(_PROC_READ) | set(_ETC_READ) | python)
    read = [r for r in read if _outside_home(Path(r).resolve()) or r in python] + sorted(granted)
    devices = list(_DEVICES) + (_gpu_devices() if gpu else [])
    write = sorted({str(p.resolve()) for p in writes} | {"/dev/shm"})
    return SandboxPolicy(read=read, write=write, devices=devices, listable=sorted(projects.listable))


def enter(policy: SandboxPolicy, abi: int) -> None:
    """Confine this process to ``policy`` for good. Landlock confines the calling thread and what
    it starts, so a thread already running (an OpenMP pool) would stay free: refused."""
    threads = len(os.listdir("/proc/self/task"))
    if threads != 1:
        raise SandboxError(f"the sandbox must be entered before any thread starts ({threads} running)")
    rules = [(Path(p), landlock.READ_DIR) for p in policy.listable]
    rules += [(Path(p), landlock.READ) for p in policy.read]
    rules += [(Path(p), landlock.WRITE) for p in policy.write]
    rules += [(Path(p), landlock.READ_FILE | landlock.WRITE_FILE | landlock.IOCTL_DEV) for p in policy.devices]
    try:
        landlock.restrict_self(rules, abi)
    except landlock.LandlockError as exc:
        raise SandboxError(f"could not enter the sandbox (Landlock ABI {abi}): {exc}") from exc
    try:
        syscall_filter.refuse_sockets()
    except syscall_filter.SyscallFilterError as exc:
        raise SandboxError(f"could not enter the sandbox (the socket filter): {exc}") from exc


def enter_from_env() -> bool:
    """Enter the policy the parent put in this process's environment; False where it put none.
    Taken out of the environment once entered: the confinement is for good, and inherited.
    Where the machine allows, this process becomes a relay and returns in its child, the first of
    a PID namespace (``namespaces``), which is what gets confined: the relay, outside the
    confinement, is out of the candidate's reach."""
    text = os.environ.pop(POLICY_ENV, None)
    if not text:
        return False
    abi = landlock.abi_version()
    if abi == 0:
        raise SandboxError("this kernel offers no Landlock, and the parent asked for a sandbox")
    policy = SandboxPolicy.from_env(text)
    try:
        namespaces.born_contained()
    except OSError as exc:
        raise SandboxError(f"could not make the worker's namespaces: {exc}") from exc
    enter(policy, abi)
    return True
