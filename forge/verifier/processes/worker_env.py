"""The environment every worker process starts with: the timing conditions both sides share."""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

from forge.core.sandbox import scrubbed
from forge.verifier.machine import memory

REFERENCE = "reference"  # the reference worker's folder: no candidate writes there
BRIEF = "brief"  # the op brief's process (the op's own code, confined)
# Set on a worker that will compile with Inductor for the CPU: the template finds the CPU's vector
# instruction sets once, into this folder of forge's own, before it forks the worker (``template_process``).
CPU_ISA = "FORGE_WORKER_CPU_ISA"


def workers_cache(cache: Path) -> Path:
    """The compile caches and scratch space of processes that run candidate code: apart from the
    cache a user's program loads kernels from, so that nothing a candidate writes reaches it."""
    return cache / "workers"


def candidate_folder(source: str) -> str:
    """A candidate's own folder under ``workers_cache``, named by its source: it writes there and
    nowhere else, so no candidate plants a compiled module, a counter or a file that another
    candidate's verification (or the reference's compile) would load; the same source verified
    again (its confirmation, its user loop) finds what it compiled before."""
    return "candidates/" + hashlib.sha256(source.encode()).hexdigest()[:20]


def worker_env(device: str, threads: int, cache: Path, gpu: str | None = None, own: str = REFERENCE) -> dict[str, str]:
    """The environment of a worker: the allowlist of ``sandbox.scrubbed`` (no keys, tokens, bank or
    cluster addresses), its compilers' caches, home and temporary files in its ``own`` folder of
    ``workers_cache`` (``REFERENCE``, ``BRIEF``, or ``candidate_folder``)."""
    env = scrubbed(os.environ)
    root = str(Path(__file__).resolve().parents[3])
    env["PYTHONPATH"] = os.pathsep.join([root] + ([env["PYTHONPATH"]] if env.get("PYTHONPATH") else []))
    own_dir = workers_cache(cache) / own
    for sub in ("home", "tmp"):
        (own_dir / sub).mkdir(parents=True, exist_ok=True)
    env.update(
        {
            "HOME": str(own_dir / "home"),
            "TMPDIR": str(own_dir / "tmp"),
            "XDG_CACHE_HOME": str(own_dir),
            "TRITON_CACHE_DIR": str(own_dir / "triton"),
            "TORCHINDUCTOR_CACHE_DIR": str(own_dir / "inductor"),
            "TORCH_EXTENSIONS_DIR": str(own_dir / "torch_extensions"),
            "FORGE_WORKER_DEVICE": device,
            "FORGE_WORKER_THREADS": str(threads),
            "FORGE_CACHE_DIR": str(own_dir),
            "OMP_NUM_THREADS": str(threads),
            "MKL_NUM_THREADS": str(threads),
            "PYTHONUNBUFFERED": "1",
            # no user site-packages: the home above is a folder the candidate writes (a .pth there
            # would run in the next process of the same candidate before it is confined)
            "PYTHONNOUSERSITE": "1",
            "PYTHONDONTWRITEBYTECODE": "1",
        }
    )
    if device == "cpu":
        env["CUDA_VISIBLE_DEVICES"] = ""
    elif gpu is not None:  # one GPU per parallel verification (forge optimize --workers)
        env["CUDA_VISIBLE_DEVICES"] = gpu
    # Both sides keep freed memory in the process, as a warmed-up program does, so the page
    # faults of a freshly mapped output buffer do not swamp the timing of either.
    env.setdefault("MALLOC_MMAP_THRESHOLD_", str(memory.MMAP_THRESHOLD_BYTES))
    env.setdefault("MALLOC_TRIM_THRESHOLD_", str(memory.TRIM_THRESHOLD_BYTES))
    # The two workers share the cores and often compute at once (a case on each side); libgomp's
    # threads spin after each parallel region, and a spinning thread of one worker takes a core from
    # the other's barrier. Measured on 2 cores (rmsnorm, two verifications, interleaved): 300k spins
    # 34-42 s, libgomp's default 15 s, 10k spins 13.4 s. 10k spins (~0.2 ms) still keep a worker's
    # threads awake across the back-to-back regions inside one call, as in a program running op
    # after op. libgomp reads it when it loads, so the template gets it in its environment too.
    env.setdefault("GOMP_SPINCOUNT", "10000")
    # Threads float on the cores: a binding asked for in the environment would pin the reference's
    # OpenMP threads, which the scheduling guard must read as a candidate's doing (``sched_guard``).
    for binding in ("OMP_PROC_BIND", "OMP_PLACES", "GOMP_CPU_AFFINITY", "KMP_AFFINITY"):
        env.pop(binding, None)
    return env


def compiles_for_cpu(env: dict[str, str], cache: Path) -> dict[str, str]:
    """``env`` for a worker that will compile with Inductor on the CPU. Inductor finds the CPU's
    vector instruction sets by compiling a probe for each and loading it in a fresh interpreter:
    measured on a 2-core VM, 9.8 s in a cache folder that has not compiled them yet and 1.4 s in one
    that has, paid by each worker (each candidate has a folder of its own). The template does it
    once, in a folder no candidate writes, and every worker it forks inherits the answer."""
    return {**env, CPU_ISA: str(workers_cache(cache) / "cpu_isa")}
