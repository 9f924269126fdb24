"""Facts about the machine a worker runs on: cache sizes, thread count, bandwidth and peak.

Measured figures (memory bandwidth, matmul throughput) are cached on disk per machine so that a
verification does not pay for them every time.
"""

from __future__ import annotations

import contextlib
import json
import os
import platform
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from forge.core.choices import Device
from forge.core.errors import UsageError


def resolve_device(choice: str) -> Device:
    """cpu or cuda for a device choice (auto, cpu, cuda); UsageError if it cannot be had here."""
    import torch

    if choice not in tuple(Device):
        raise UsageError(f"--device {choice!r}: choose cpu, cuda or auto")
    if choice == Device.AUTO:
        return Device.CUDA if torch.cuda.is_available() else Device.CPU
    if choice == Device.CUDA and not torch.cuda.is_available():
        raise UsageError("--device cuda: no CUDA device is available here; use --device cpu")
    return Device(choice)


def visible_gpus() -> list[str]:
    """CUDA devices this process may use, as CUDA_VISIBLE_DEVICES entries."""
    listed = os.environ.get("CUDA_VISIBLE_DEVICES")
    if listed is not None:
        return [g.strip() for g in listed.split(",") if g.strip()]
    import torch

    return [str(i) for i in range(torch.cuda.device_count())]


def gpu_slots(workers: int, gpus: list[str]) -> list[str]:
    """The GPU each of ``workers`` parallel verifications takes: one each while there are enough,
    then shared round-robin (timings of two workers on one GPU disturb each other)."""
    return [gpus[k % len(gpus)] for k in range(workers)] if gpus else []


def available_cores() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:
        return os.cpu_count() or 1


def cpu_model() -> str:
    with contextlib.suppress(OSError):
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    return platform.processor() or platform.machine()


def cpu_flags() -> list[str]:
    with contextlib.suppress(OSError):
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("flags"):
                wanted = ("avx", "avx2", "avx512f", "avx512bw", "avx512_bf16", "fma", "f16c", "amx_tile", "sse4_2")
                have = set(line.split(":", 1)[1].split())
                return [f for f in wanted if f in have]
    return []


def cache_sizes() -> dict[str, int]:
    """Bytes per cache level of CPU 0 (L1d, L2, L3 when present)."""
    sizes: dict[str, int] = {}
    base = Path("/sys/devices/system/cpu/cpu0/cache")
    for idx in sorted(base.glob("index*")):
        try:
            level = (idx / "level").read_text().strip()
            kind = (idx / "type").read_text().strip()
            raw = (idx / "size").read_text().strip().upper()
        except OSError:
            continue
        if kind == "Instruction":
            continue
        mult = 1024 * 1024 if raw.endswith("M") else 1024 if raw.endswith("K") else 1
        sizes[f"L{level}"] = int(raw.rstrip("KMB")) * mult
    return sizes


def last_level_cache_bytes(device: str) -> int | None:
    """The GPU's L2 on CUDA, else the CPU's largest cache (None when unknown)."""
    if device == "cuda":
        import torch

        return int(getattr(torch.cuda.get_device_properties(0), "L2_cache_size", 0)) or None
    return max(cache_sizes().values(), default=None)


def flush_bytes(device: str) -> int:
    """Bytes a cold call's cache flush goes through on ``device``: on CUDA twice the L2 and at least
    256 MiB (what the verifier's workers write), else ``cpu_flush_bytes``."""
    if device == "cuda":
        return max(2 * (last_level_cache_bytes("cuda") or 0), 256 << 20)
    return cpu_flush_bytes()


def cpu_flush_bytes() -> int:
    """Enough bytes to evict the last-level cache: twice its size, within [16 MiB, 256 MiB]."""
    llc = max(cache_sizes().values(), default=32 * 1024 * 1024)
    return int(min(256 << 20, max(16 << 20, 2 * llc)))


def _measure(device: str) -> dict[str, float]:
    import torch

    def best(fn: Any, reps: int = 5) -> float:
        fn()
        times = []
        for _ in range(reps):
            if device == "cuda":
                torch.cuda.synchronize()
            t0 = time.perf_counter()
            fn()
            if device == "cuda":
                torch.cuda.synchronize()
            times.append(time.perf_counter() - t0)
        return min(times)

    n = (256 << 20) // 4 if device == "cuda" else (128 << 20) // 4
    src = torch.ones(n, device=device)
    dst = torch.empty_like(src)
    t_copy = best(lambda: dst.copy_(src))
    # The library's best path, all of the worker's threads: large square GEMMs (oneDNN/MKL on
    # CPU, cuBLAS on CUDA), the fastest size counted. One 1024 matmul on the CPU read 2-3x under
    # what an op's own GEMMs or convolutions reached, and eager then "ran at 237% of the peak".
    peak = 0.0
    for m in (4096, 8192) if device == "cuda" else (1024, 2048):
        x = torch.randn(m, m, device=device)
        peak = max(peak, 2 * m**3 / best(lambda x=x: x @ x) / 1e9)
    return {"bandwidth_gbs": 2 * (n * 4) / t_copy / 1e9, "peak_gflops": peak}


@dataclass(frozen=True)
class MachineFigures:
    """This device's measured memory bandwidth and fp32 matmul peak."""

    device_name: str
    bandwidth_gbs: float
    peak_gflops: float


def measured_figures(device: str, threads: int, cache_dir: Path) -> MachineFigures:
    """Measured bandwidth and fp32 matmul peak for this device, cached by machine identity."""
    f = _cached_figures(device, threads, cache_dir)
    return MachineFigures(str(f["device_name"]), float(f["bandwidth_gbs"]), float(f["peak_gflops"]))


def _cached_figures(device: str, threads: int, cache_dir: Path) -> dict[str, Any]:
    """The figures as ``machine.json`` keeps them (JSON), measured the first time."""
    import torch

    if device == "cuda":
        ident = torch.cuda.get_device_name(0)
    else:
        ident = f"{cpu_model()}|{threads}"
    key = f"{device}|{ident}|{torch.__version__}|gemm-best"  # figures measured before the best-GEMM peak are not reused
    path = cache_dir / "machine.json"
    cached: dict[str, Any] = {}
    with contextlib.suppress(OSError, ValueError):
        cached = json.loads(path.read_text())
    if key in cached:
        return dict(cached[key])
    figures: dict[str, Any] = {"device_name": ident, **_measure(device)}
    cached[key] = figures
    with contextlib.suppress(OSError):
        cache_dir.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(f".{os.getpid()}.tmp")
        tmp.write_text(json.dumps(cached, indent=1))
        tmp.replace(path)
    return figures
