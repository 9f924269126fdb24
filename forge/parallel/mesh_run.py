"""A real run of a plan: ``world_size`` processes on this machine (gloo on CPU), each one
``forge.parallel.rank_worker``, on free loopback ports, with a memory limit and one time limit for
the run. A rank that fails or hangs fails the plan with its reason, and every other rank is
killed (they would wait in a collective forever): the caller never hangs."""

from __future__ import annotations

import contextlib
import json
import os
import resource
import signal
import socket
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

from forge.core.parallel_plan import ParallelPlan
from forge.core.statuses import AttemptStatus
from forge.parallel.rank_worker import RankJob


@dataclass(frozen=True)
class RankResult:
    rank: int
    mismatches: list[str]
    median_ms: float
    peak_rss_mb: float


@dataclass(frozen=True)
class MeshRun:
    """What the real run found: ``ok`` when every rank matched the unsharded model."""

    ok: bool
    reason: str
    ranks: list[RankResult] = field(default_factory=list)
    # passed; failed_correctness (differs, or the sharded model raised); runtime_error (a rank died); timeout
    status: AttemptStatus = AttemptStatus.PASSED

    @property
    def step_ms(self) -> float | None:
        """The slowest rank's median step: a step ends when every rank's does."""
        return max((r.median_ms for r in self.ranks), default=None)

    @property
    def peak_rss_mb(self) -> float | None:
        return max((r.peak_rss_mb for r in self.ranks), default=None)


RANK_MEMORY_MB = 600  # what one rank costs before the model: Python, torch, gloo


def max_local_ranks() -> tuple[int, str]:
    """How many ranks this machine can spawn for a real run, and what bounds it: memory (each rank
    is a full torch process) and cores (more than four ranks a core only measures the scheduler)."""
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    available_mb = _available_memory_mb()
    by_memory = max(1, available_mb // RANK_MEMORY_MB)
    n = min(by_memory, 4 * cores)
    return n, f"{cores} cores (4 ranks a core at most) and {available_mb} MiB free ({RANK_MEMORY_MB} MiB a rank)"


def _available_memory_mb() -> int:
    with contextlib.suppress(OSError, ValueError, StopIteration):
        with open("/proc/meminfo") as f:
            line = next(x for x in f if x.startswith("MemAvailable:"))
        return int(line.split()[1]) // 1024
    return 4096


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _spawn(
    rank: int,
    world_size: int,
    port: int,
    job_path: Path,
    memory_limit_mb: int,
    log: Path,
    module: str = "forge.parallel.rank_worker",
) -> subprocess.Popen[bytes]:
    limit = memory_limit_mb << 20

    def limits() -> None:  # in the child, before exec
        resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
        with contextlib.suppress(ValueError, OSError):
            resource.setrlimit(resource.RLIMIT_DATA, (limit, limit))

    path = os.pathsep.join(filter(None, [str(Path(__file__).parents[2]), os.environ.get("PYTHONPATH")]))
    env = {
        **os.environ,
        "RANK": str(rank),
        "WORLD_SIZE": str(world_size),
        "LOCAL_RANK": str(rank),
        "MASTER_ADDR": "127.0.0.1",
        "MASTER_PORT": str(port),
        "CUDA_VISIBLE_DEVICES": "",
        "OMP_NUM_THREADS": "1",
        "PYTHONPATH": path,
    }
    with log.open("wb") as out:
        return subprocess.Popen(
            [sys.executable, "-m", module, str(job_path)],
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            start_new_session=True,
            preexec_fn=limits,
        )


def _kill(procs: list[subprocess.Popen[bytes]]) -> None:
    for p in procs:
        if p.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(p.pid, signal.SIGKILL)
    for p in procs:
        p.wait()


def _tail(log: Path, lines: int = 6) -> str:
    text = log.read_text(errors="replace").strip().splitlines() if log.exists() else []
    return " | ".join(text[-lines:]) or "no output"


def run_plan(
    model_path: Path,
    plan: ParallelPlan,
    world_size: int,
    *,
    train: bool = True,
    steps: int = 5,
    timeout_s: float = 120.0,
    memory_limit_mb: int = 4096,
) -> MeshRun:
    """Run ``plan`` for real on ``world_size`` local processes and compare with the unsharded model."""
    with tempfile.TemporaryDirectory(prefix="forge-mesh-") as tmp:
        job = RankJob(
            model_path=str(model_path),
            plan=plan.to_json(),
            train=train,
            steps=steps,
            timeout_s=timeout_s,
            result_dir=tmp,
        )
        job_path = Path(tmp) / "job.json"
        job_path.write_text(job.model_dump_json())
        port, logs = free_port(), [Path(tmp) / f"rank{r}.log" for r in range(world_size)]
        procs = [_spawn(r, world_size, port, job_path, memory_limit_mb, logs[r]) for r in range(world_size)]
        deadline, failed = time.monotonic() + timeout_s, None
        try:
            while any(p.poll() is None for p in procs) and failed is None:
                failed = next((r for r, p in enumerate(procs) if p.returncode not in (None, 0)), None)
                if time.monotonic() > deadline:
                    hung = [str(r) for r, p in enumerate(procs) if p.poll() is None]
                    why = f"rank {', '.join(hung)} did not finish within {timeout_s:g} s (killed)"
                    return MeshRun(False, why, status=AttemptStatus.TIMEOUT)
                time.sleep(0.05)
            failed = next((r for r, p in enumerate(procs) if p.returncode != 0), failed)
        finally:
            _kill(procs)
        if failed is not None:
            code = procs[failed].returncode
            why = f"rank {failed} failed (exit {code}): {_tail(logs[failed])}"
            return MeshRun(False, why, status=AttemptStatus.RUNTIME_ERROR)
        ranks = [
            RankResult(
                **{k: v for k, v in json.loads((Path(tmp) / f"rank{r}.json").read_text()).items() if k != "step_ms"}
            )
            for r in range(world_size)
        ]
    wrong = sorted({m for r in ranks for m in r.mismatches})
    if wrong:
        why = f"differs from the unsharded model: {'; '.join(wrong[:5])}"
        return MeshRun(False, why, ranks, AttemptStatus.FAILED_CORRECTNESS)
    return MeshRun(True, "outputs, gradients and the parameters after a step match the unsharded model", ranks)


@dataclass(frozen=True)
class LinkFigures:
    bytes_per_s: float  # ring all-reduce bus bandwidth
    latency_s: float  # one collective of one element


def measure_link(cache: Path | None = None, world_size: int = 2, timeout_s: float = 60.0) -> LinkFigures:
    """The bus bandwidth and per-collective latency of gloo all-reduces between ``world_size``
    local ranks, measured once and cached in ``cache`` (a JSON file) when given."""
    key = f"gloo-cpu-{world_size}"
    known: dict[str, dict[str, float]] = {}
    if cache is not None and cache.is_file():
        with contextlib.suppress(ValueError, OSError):
            known = json.loads(cache.read_text())
    if key not in known:
        known[key] = _probe(world_size, timeout_s)
        if cache is not None:
            with contextlib.suppress(OSError):
                cache.parent.mkdir(parents=True, exist_ok=True)
                cache.write_text(json.dumps(known))
    return LinkFigures(float(known[key]["bytes_per_s"]), float(known[key]["latency_s"]))


def _probe(world_size: int, timeout_s: float) -> dict[str, float]:
    with tempfile.TemporaryDirectory(prefix="forge-link-") as tmp:
        out, port = Path(tmp) / "link.json", free_port()
        logs = [Path(tmp) / f"rank{r}.log" for r in range(world_size)]
        procs = [
            _spawn(r, world_size, port, out, 2048, logs[r], "forge.parallel.link_probe") for r in range(world_size)
        ]
        deadline = time.monotonic() + timeout_s
        try:
            while any(p.poll() is None for p in procs) and time.monotonic() < deadline:
                time.sleep(0.05)
        finally:
            _kill(procs)
        if not out.is_file():
            raise RuntimeError(f"the link probe did not finish: {_tail(logs[0])}")
        figures = json.loads(out.read_text())
    return {"bytes_per_s": float(figures["bytes_per_s"]), "latency_s": float(figures["latency_s"])}
