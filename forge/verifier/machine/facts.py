"""Facts about the machine a worker runs on: cache sizes, thread count, bandwidth and peak.

Measured figures (memory bandwidth, matmul throughput) are cached on disk per machine so that a
verification does not pay for them every time, with the conditions they were measured under
(``machine_figures``).
"""

from __future__ import annotations

import contextlib
import os
import platform
from functools import partial
from pathlib import Path

from forge.core.choices import Device
from forge.core.errors import UsageError
from forge.verifier.machine.figures import (
    QUIET_WAIT_S,
    FiguresCache,
    FiguresCheck,
    Instruments,
    MachineFigures,
    Recheck,
    check_entry,
    measure_entry,
)
from forge.verifier.machine.readings import full_measurement


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


def cpu_topology(cpus: list[int] | None = None, root: Path = Path("/sys/devices/system/cpu")) -> str | None:
    """How the CPUs this process may run on (``cpus``) sit on physical cores, as the OS shows them
    (a guest's view: a hypervisor may still place two vCPUs on one host core); None where /sys
    says nothing."""
    if cpus is None:
        try:
            cpus = sorted(os.sched_getaffinity(0))
        except AttributeError:
            return None
    cores: set[tuple[str, str]] = set()
    for cpu in cpus:
        topo = root / f"cpu{cpu}" / "topology"
        try:
            cores.add(((topo / "physical_package_id").read_text().strip(), (topo / "core_id").read_text().strip()))
        except OSError:
            return None
    n, physical = len(cpus), len(cores)
    if physical == n:
        return f"{n} CPUs on {physical} physical cores: no two are SMT siblings (as the OS sees them)"
    return (
        f"{n} CPUs on {physical} physical cores: {n - physical} are SMT siblings of another, sharing its core's "
        "execution units and L1/L2 (threads on siblings do not scale like cores)"
    )


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
                # every AVX-512 subset a kernel may target (a model that is not told VL or DQ avoids
                # their masked 256-bit and 64-bit-integer instructions), and the matrix and dot-product units
                wanted = (
                    "sse4_2", "avx", "avx2", "fma", "f16c", "avx_vnni",
                    "avx512f", "avx512vl", "avx512bw", "avx512dq", "avx512cd", "avx512_vnni", "avx512_bf16",
                    "avx512_fp16", "avx512vbmi", "amx_tile", "amx_bf16", "amx_int8",
                )  # fmt: skip
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


def _identity(device: str, threads: int) -> tuple[str, str]:
    """The figures' cache key and the device's name: CUDA's device name, or the CPU's model with
    the thread count. Figures measured before the best-GEMM peak and the cache's bandwidth (other
    keys) are not reused."""
    import torch

    name = torch.cuda.get_device_name(0) if device == "cuda" else f"{cpu_model()}|{threads}"
    return f"{device}|{name}|{torch.__version__}|gemm-best+llc+reads+working-sets+fresh-writes", name


def _instruments(device: str) -> Instruments:
    """The machine's own instruments, the full measurement reading its last-level cache too."""
    return Instruments(measure=partial(full_measurement, cache_bytes=last_level_cache_bytes(device)))


def measured_figures(device: str, threads: int, cache_dir: Path) -> MachineFigures:
    """Measured bandwidth and fp32 matmul peak for this device, as cached by machine identity
    (provisional ones included). Measured now when none are cached, without waiting for a quiet
    machine (a worker asks while other work runs): under load they are kept as provisional, and
    the next ``checked_figures`` on a quiet machine measures them again."""
    key, name = _identity(device, threads)
    cache = FiguresCache(cache_dir / "machine.json")
    entry = cache.get(key)
    if entry is None:
        entry = measure_entry(device, name, _instruments(device), wait_s=0.0)
        cache.put(key, entry)
    return entry.figures


def figures_wait_s(load_check: bool) -> float:
    """How long a check waits for a quiet machine before it measures: none where the load is
    recorded and not enforced (``ForgeSettings.load_check`` off), as a timed batch does not wait either."""
    return QUIET_WAIT_S if load_check else 0.0


def checked_figures(
    device: str, threads: int, cache_dir: Path, tools: Instruments | None = None, wait_s: float = QUIET_WAIT_S
) -> FiguresCheck:
    """The cached figures checked against a quick probe (``check_entry``), measured again (after
    waiting up to ``wait_s`` for a quiet machine) when they are missing, provisional on a quiet
    machine, or off from a quiet probe; what was measured is cached."""
    key, name = _identity(device, threads)
    cache = FiguresCache(cache_dir / "machine.json")
    check = check_entry(cache.get(key), device, name, tools or _instruments(device), wait_s)
    if check.recheck in (Recheck.MEASURED, Recheck.REMEASURED):
        cache.put(key, check.entry)
    return check
