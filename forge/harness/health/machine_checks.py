"""``forge doctor``: what this machine gives forge, each finding with what to do when it is missing.

A finding is ``needed`` when forge's main job (``forge optimize`` on an example with the built-in
agent) cannot run without it; the report says whether all of those are there. Keys are reported
by name only, never by value.
"""

from __future__ import annotations

import ctypes
import json
import os
import platform
import urllib.error
import urllib.request

from forge.core import sandbox
from forge.core.errors import CompileError, ForgeError
from forge.core.paths import BankLocation
from forge.core.settings import ForgeSettings
from forge.db import bank_facts
from forge.harness.health.findings import DoctorReport, Finding
from forge.verifier.machine import facts as machine

_OPENMP_PROBE = """
extern "C" int forge_doctor_threads() {
    int n = 0;
    #pragma omp parallel reduction(+ : n)
    n += 1;
    return n;
}
"""


def _torch() -> tuple[list[Finding], bool]:
    try:
        import torch
    except ImportError as exc:
        fix = "pip install torch (CPU: pip install torch==2.13.0; GPU: the CUDA build for your driver)"
        return [Finding("torch", False, f"not importable ({exc})", fix, needed=True)], False
    build = f"CUDA {torch.version.cuda}" if torch.version.cuda else "CPU only"
    found = [Finding("torch", True, f"{torch.__version__} ({build}), {torch.get_num_threads()} threads", needed=True)]
    cuda = bool(torch.version.cuda) and torch.cuda.is_available()
    if cuda:
        gpus = [torch.cuda.get_device_properties(i) for i in range(torch.cuda.device_count())]
        names = "; ".join(f"{g.name} (sm_{g.major}{g.minor}, {g.total_memory / 2**30:.0f} GiB)" for g in gpus)
        found.append(Finding("GPUs", True, names))
    else:
        why = "this torch is a CPU build" if not torch.version.cuda else "torch sees no CUDA device"
        fix = "for Triton/CUDA kernels: a machine with an NVIDIA GPU and torch's CUDA build"
        found.append(Finding("GPUs", None, f"none ({why}): kernels are C++ on the CPU", fix))
    return found, cuda


def _triton(cuda: bool) -> Finding:
    try:
        import triton
    except ImportError:
        return Finding("Triton", False if cuda else None, "not installed", "pip install triton", needed=cuda)
    where = "on the GPU" if cuda else "in its CPU interpreter only (TRITON_INTERPRET=1: correct, not timed)"
    return Finding("Triton", True, f"{triton.__version__}, {where}", needed=cuda)


def _cpp(cuda: bool) -> Finding:
    from forge import cpp

    try:
        lib = cpp.load(_OPENMP_PROBE)
        threads = lib.function("forge_doctor_threads", ctypes.c_int)()
    except CompileError as exc:
        fix = "install g++ with OpenMP (apt-get install g++), or set CXX to a compiler that has it"
        return Finding("C++ compiler + OpenMP", False, exc.message.splitlines()[0], fix, needed=not cuda)
    return Finding(
        "C++ compiler + OpenMP", True, f"{cpp.compiler_name()}; OpenMP ran {threads} threads", needed=not cuda
    )


def _cpu(settings: ForgeSettings) -> list[Finding]:
    caches = ", ".join(
        f"{k} {v / 2**20:.1f} MiB" if v >= 2**20 else f"{k} {v // 1024} KiB" for k, v in machine.cache_sizes().items()
    )
    flags = ", ".join(machine.cpu_flags()) or "none of avx/avx2/avx512/fma found"
    return [
        Finding("CPU", None, f"{machine.cpu_model()}, {machine.available_cores()} cores; {caches}"),
        Finding("ISA flags", None, flags),
    ]


def _figures(device: str, settings: ForgeSettings) -> Finding:
    threads = settings.threads or machine.available_cores()
    try:
        wait_s = machine.figures_wait_s(settings.load_check)
        check = machine.checked_figures(device, threads, settings.cache_path(), wait_s=wait_s)
    except Exception as exc:  # a broken device is a finding, not a crash
        return Finding("measured figures", False, f"could not measure on {device}: {exc}")
    f, entry = check.entry.figures, check.entry
    cache = f", {f.cache_bandwidth_gbs:.1f} GB/s in the last-level cache" if f.cache_bandwidth_gbs else ""
    in_cache = f", {f.cache_read_bandwidth_gbs:.1f} in the cache" if f.cache_read_bandwidth_gbs else ""
    reads = f" (reading alone: {f.read_bandwidth_gbs:.1f} GB/s{in_cache})" if f.read_bandwidth_gbs else ""
    sets = ", ".join(f"{w.bytes >> 20} MiB {w.copy_gbs:.0f} ({w.read_gbs:.0f})" for w in f.working_sets)
    by_size = f"; kept in cache, a copy (a read) in GB/s by working set: {sets}" if sets else ""
    fresh = (
        f"; writing a tensor mapped fresh (32 MiB or more): {f.fresh_write_gbs:.1f} GB/s" if f.fresh_write_gbs else ""
    )
    detail = (
        f"{f.bandwidth_gbs:.1f} GB/s memory bandwidth{cache} for a copy{reads}, {f.peak_gflops:.0f} GFLOP/s fp32 "
        f"matmul ({device}){by_size}{fresh}; "
        f"{entry.conditions()}; {check.said()}"
    )
    fix = "" if entry.quiet else "run `forge doctor` again on a quiet machine: it measures them again"
    return Finding("measured figures", True, detail, fix)


def _bank(bank: BankLocation | None) -> Finding:
    try:
        facts = bank_facts(bank)
    except ForgeError as exc:
        return Finding("bank", False, exc.message, "point --bank (or FORGE_BANK) at a forge bank, or move this file")
    if not facts.exists:
        return Finding("bank", None, f"{facts.location} (not created yet: the first `forge optimize` creates it)")
    state = "current" if facts.revision == facts.head else f"at {facts.revision}, migrated to {facts.head} when opened"
    detail = (
        f"{facts.location}: schema {state}, {facts.size_bytes / 2**20:.1f} MiB, {facts.kernels} kernels, "
        f"{facts.sessions} sessions, {facts.attempts} attempts"
    )
    return Finding("bank", True, detail)


def _llm_keys() -> Finding:
    names = sorted(k for k, v in os.environ.items() if k.endswith("_API_KEY") and v)
    if names:
        return Finding("LLM keys", True, "set: " + ", ".join(names))
    fix = "the built-in agent needs none; for --model set the provider's key (e.g. OPENAI_API_KEY) or use --api-base"
    return Finding("LLM keys", None, "none set", fix)


def _api_base(url: str) -> Finding:
    """Whether an OpenAI-compatible server answers its model list (3 s, no key sent)."""
    target = url.rstrip("/") + "/models"
    try:
        with urllib.request.urlopen(target, timeout=3) as reply:
            models = [m.get("id", "?") for m in json.loads(reply.read() or b"{}").get("data", [])][:5]
    except (urllib.error.URLError, OSError, ValueError) as exc:
        reason = getattr(exc, "reason", exc)
        return Finding(
            f"--api-base {url}",
            False,
            f"no answer from {target} ({reason})",
            "start the server, or fix the URL (it should end in /v1 for most servers)",
        )
    return Finding(f"--api-base {url}", True, "answers; models: " + (", ".join(models) or "none listed"))


def _sandbox(settings: ForgeSettings) -> Finding:
    abi = sandbox.abi_version()
    if not settings.sandbox:
        said = "off (sandbox = false or --unsandboxed): candidate code runs with your environment, files and network"
        return Finding("sandbox", None, said, "remove sandbox = false")
    if abi == 0:
        said = "no Landlock in this kernel: verifying refuses to run candidates unless --unsandboxed"
        return Finding("sandbox", False, said, "a Linux 5.13+ kernel with Landlock enabled (lsm=...,landlock)")
    made = sandbox.namespaces_available()
    layers = [
        "Landlock ABI " + str(abi) + ": files (read: the system, Python, the Python of the op's and candidate's "
        "projects, never their dotfiles, keys or credentials; write: the workers' own cache), ptrace outside refused",
        "TCP bind and connect refused" if abi >= 4 else "TCP NOT confined by Landlock (ABI < 4)",
        "signals and abstract sockets outside refused" if abi >= 6 else "signals NOT confined (ABI < 6)",
        "sockets: none can be made, of any family (a seccomp filter)"
        if sandbox.filter_available()
        else "sockets NOT filtered (no seccomp here): verifying refuses to start a sandboxed worker",
        "network: a namespace of the worker's own, no interface up"
        if made.network
        else "network namespace refused here (the socket filter alone holds)",
        "shared memory: a /dev/shm of the worker's own" if made.private_shm else "/dev/shm shared between workers",
        "environment: an allowlist (no keys, tokens, bank or cluster address)",
        "processes: a PID namespace of the worker's own (what it starts ends with it)"
        if made.pid
        else "processes NOT contained (no unprivileged user namespaces): a child a candidate leaves in "
        "a session of its own outlives its worker",
    ]
    return Finding("sandbox", True, "; ".join(layers))


def doctor(settings: ForgeSettings, bank: BankLocation | None = None, api_bases: tuple[str, ...] = ()) -> DoctorReport:
    """Every finding, slow ones cached (the measured figures) so a second call is quick."""
    found = [Finding("python", None, f"{platform.python_version()} ({platform.platform(terse=True)})")]
    torch_findings, cuda = _torch()
    found += torch_findings
    if torch_findings[0].ok:
        found += [_triton(cuda), _cpp(cuda), *_cpu(settings), _figures("cuda" if cuda else "cpu", settings)]
    found += [_sandbox(settings), _bank(bank), _llm_keys(), *(_api_base(u) for u in api_bases)]
    return DoctorReport(found)
