"""Where one call's time goes, from torch.profiler: eager's, for the op's brief, and a passing
candidate's, for its verdict (``ForgeSettings.profile_candidate``), read the same way so the agents
can hold one beside the other. On a CPU the rows are host time (each aten op's own, the C functions
a candidate calls through ``forge.cpp``, the ranges it marks with ``record_function``); on a GPU,
each kernel's device time."""

from __future__ import annotations

import json
import re
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from forge.core.op_brief import CandidateProfile, ProfiledOp

# The names of vendor-library routines (BLAS, oneDNN, cuBLAS, cuDNN, SDPA): producers a fused kernel keeps as calls
LIBRARY_OP = re.compile(
    r"mm\b|addmm|bmm|gemm|conv|cudnn|cublas|mkldnn|onednn|mkl|scaled_dot_product|flash|cutlass|xmma"
)
TOP_OPS = 8


@dataclass(frozen=True)
class ProfiledCalls:
    """Rows of (name, own time a call in ms, calls a call), largest first, and the wall time of
    one profiled call in ms (the profiler's overhead included, as in the rows); on a GPU, each
    kernel's launch as the profiler recorded it (``kernel_launches``), by name."""

    rows: list[tuple[str, float, float]]
    wall_ms: float
    launches: dict[str, str] = field(default_factory=dict)


def kernel_launches(trace: Any) -> dict[str, str]:
    """Each kernel's launch in a Chrome trace torch.profiler exported, by name: the grid and block,
    registers a thread, shared memory a block, and the occupancy CUPTI estimates (the first launch,
    and how many shapes where the launches differ). What tells a kernel that cannot fill the GPU (a
    grid under the SM count, registers that cap the warps an SM holds) from one bound by its memory
    traffic; counters of bytes and instructions need Nsight Compute, which forge does not run."""
    seen: dict[str, list[str]] = {}
    events = trace.get("traceEvents") if isinstance(trace, dict) else None
    for event in events if isinstance(events, list) else []:
        # "kernel" (older Kineto: "Kernel")
        if not isinstance(event, dict) or str(event.get("cat")).lower() != "kernel":
            continue
        args = event.get("args")
        said = _launch(args) if isinstance(args, dict) else ""
        if said:
            shapes = seen.setdefault(str(event.get("name")), [])
            if said not in shapes:
                shapes.append(said)
    return {
        name: shapes[0] + (f" (the first of {len(shapes)} launch shapes)" if len(shapes) > 1 else "")
        for name, shapes in seen.items()
    }


def _launch(args: dict[str, Any]) -> str:
    """One kernel event's launch, from Kineto's arguments ("" where it records none)."""
    said = []
    grid, block = args.get("grid"), args.get("block")
    if isinstance(grid, list) and isinstance(block, list):
        said.append(f"grid {'x'.join(map(str, grid))}, block {'x'.join(map(str, block))}")
    if args.get("registers per thread") is not None:
        said.append(f"{args['registers per thread']} registers a thread")
    if isinstance(args.get("shared memory"), int | float):
        said.append(f"{args['shared memory'] / 1024:g} KiB shared a block")
    if args.get("est. achieved occupancy %") is not None:
        said.append(f"est. occupancy {args['est. achieved occupancy %']}%")
    return ", ".join(said)


def _launches(prof: Any) -> dict[str, str]:
    """``kernel_launches`` of a finished profile: what the rows say beside their times, so a trace
    that cannot be had or read leaves them without it, never the profile lost."""
    with tempfile.TemporaryDirectory(prefix="forge-trace-") as tmp:
        path = Path(tmp) / "trace.json"
        try:
            prof.export_chrome_trace(str(path))
            return kernel_launches(json.loads(path.read_text()))
        except Exception:
            return {}


def device_sync(device: str) -> Callable[[], None]:
    """What waits for ``device``'s queued work (nothing on a CPU)."""
    import torch

    return torch.cuda.synchronize if device == "cuda" else (lambda: None)


def call_ms(fn: Callable[[], Any], sync: Callable[[], None]) -> float:
    """One call of ``fn``, in milliseconds, the device's queue drained before and after."""
    sync()
    start = time.perf_counter()
    fn()
    sync()
    return (time.perf_counter() - start) * 1e3


def profiled(fn: Callable[[], Any], device: str, calls: int) -> ProfiledCalls:
    """``fn`` called ``calls`` times under torch.profiler (``forge.cpp`` names its C calls there)."""
    from torch.profiler import ProfilerActivity, profile

    sync = device_sync(device)
    on_device = device == "cuda"
    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if on_device else [])
    with profile(activities=activities) as prof:
        sync()
        start = time.perf_counter()
        for _ in range(calls):
            fn()
        sync()
        wall_ms = (time.perf_counter() - start) * 1e3 / calls
    rows = []
    for event in prof.key_averages():
        own = getattr(event, "self_device_time_total", 0.0) if on_device else event.self_cpu_time_total
        if own > 0 and (not on_device or str(getattr(event, "device_type", "")) != "DeviceType.CPU"):
            rows.append((event.key, own / 1e3 / calls, event.count / calls))
    rows.sort(key=lambda r: -r[1])
    return ProfiledCalls(rows, wall_ms, _launches(prof) if on_device else {})


def profiled_ops(
    rows: list[tuple[str, float, float]], total_ms: float, call_ms: float, launches: dict[str, str] | None = None
) -> list[ProfiledOp]:
    """The top rows, each as its share of ``total_ms`` (a profiled call) and that share of
    ``call_ms`` (one call timed without the profiler, whose overhead inflates every row), with
    its kernel's launch where ``launches`` names it."""
    total_ms = total_ms or 1.0
    return [
        ProfiledOp(
            name=name,
            self_ms=round(call_ms * ms / total_ms, 5),
            share=round(ms / total_ms, 3),
            calls=calls,
            library=bool(LIBRARY_OP.search(name.lower())),
            launch=(launches or {}).get(name),
        )
        for name, ms, calls in rows[:TOP_OPS]
    ]


def candidate_profile(fn: Callable[[], Any], device: str, calls: int, call_ms: float | None) -> CandidateProfile:
    """The candidate's profile: each row a share of a profiled call's wall time (what no row
    names, Python and untraced native code, or on a GPU the time the device idles, is
    ``other_share``), its ms that share of ``call_ms`` (its timed median; None: the profiled call's)."""
    fn()  # once outside the profiler: a first call's lazy set-up is not where its time goes
    got = profiled(fn, device, calls)
    named = min(sum(r[1] for r in got.rows), got.wall_ms)
    return CandidateProfile(
        calls=calls,
        ops=profiled_ops(got.rows, got.wall_ms, call_ms if call_ms is not None else got.wall_ms, got.launches),
        other_share=round(1.0 - named / got.wall_ms, 3) if got.wall_ms > 0 else 0.0,
        clock="cuda" if device == "cuda" else "cpu",
    )


__all__ = [
    "LIBRARY_OP",
    "ProfiledCalls",
    "call_ms",
    "candidate_profile",
    "device_sync",
    "kernel_launches",
    "profiled",
    "profiled_ops",
]
