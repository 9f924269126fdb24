"""The C++ lowering's tuner knobs: which ones an op's schedules offer (defaults first) and their
defaults. Each knob changes the kernel only where its step kind is present; the tuner resets the
others (``canonical``)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from forge.agents.builtin.lowering.cpp_fuse import RowGroup, row_groups
from forge.agents.builtin.lowering.cpp_kept import vector_scan_fits
from forge.agents.builtin.lowering.cpp_pool import by_rows_fits, separable_fits
from forge.agents.builtin.lowering.cpp_reduce import float_acc_first
from forge.agents.builtin.lowering.cpp_winograd import favours_winograd, winograd_conv
from forge.agents.builtin.lowering.layout import conv2d_parts
from forge.agents.builtin.lowering.py_side import onednn_linear
from forge.agents.builtin.lowering.schedule import Schedule, StepKind
from forge.agents.builtin.ops import ERF


def cpu_knobs(schedules: Sequence[Schedule], *, uses_erf: bool, wide_simd: bool) -> dict[str, list[Any]]:
    """The knobs the kernels written from ``schedules`` offer; ``uses_erf``: an exact GELU's erf
    (``ops.ERF``); ``wide_simd``: the SIMD width knob applies (``WIDE_SIMD``)."""
    steps = [s for sched in schedules for s in sched.steps]
    kinds = {s.kind for s in steps}
    space: dict[str, list[Any]] = {"threads": [0, 1]}
    if kinds & {StepKind.REDUCE, StepKind.SCAN}:
        reduced = [s.node for s in steps if s.kind is StepKind.REDUCE]
        short = StepKind.SCAN not in kinds and float_acc_first(reduced)
        space["acc"] = ["float", "double"] if short else ["double", "float"]
    if StepKind.SCAN in kinds:
        space["rows"] = [8, 1]  # neighbouring scans advanced together, or one at a time
    if any(s.kind is StepKind.SCAN and vector_scan_fits(s.node) for s in steps):
        space["scan"] = ["vector", "rows"]  # a float32 row cumsum 8 elements at a time, or by rows
    if any(s.kind is StepKind.POOL and separable_fits(s.node) for s in steps):
        # a 2-D average pooling's input rows summed once for the output rows they serve, by rows, or point by point
        space["pool"] = ["separable", "rows", "points"]
    elif any(s.kind is StepKind.POOL and by_rows_fits(s.node) for s in steps):
        space["pool"] = ["rows", "points"]  # an average pooling by rows of outputs, or point by point
    if StepKind.REDUCE in kinds:
        space["tile"] = [256, 64, 1024]
    if any(isinstance(u, RowGroup) for sched in schedules for u in row_groups(sched.steps)):
        space["fuse"] = [True, False]
    if kinds & {StepKind.POINTWISE, StepKind.REDUCE}:
        space["chunk"] = [4096, 16384]
    if uses_erf:
        space["erf"] = list(ERF)
    if wide_simd:
        space["simd_width"] = [512, 256]
    convs = [c for sched in schedules for s in sched.steps if (c := winograd_conv(s, sched))]
    if convs:
        favoured = all(favours_winograd(c) for c in convs)
        space["conv_algo"] = ["winograd", "library"] if favoured else ["library", "winograd"]
    if any(s.kind is StepKind.LIBRARY and conv2d_parts(s.node) for s in steps):
        space["conv_layout"] = ["row_major", "channels_last"]
    if any(s.kind is StepKind.LIBRARY and onednn_linear(s, sched) for sched in schedules for s in sched.steps):
        # first, so the search's first move measures the other library: in a linear layer's
        # op the products are most of the time
        space = {"matmul": ["onednn", "aten"], **space}
    return space


DEFAULT: dict[str, Any] = {
    "threads": 0,
    "acc": "double",
    "tile": 256,
    "rows": 8,
    "scan": "vector",
    "pool": "rows",
    "chunk": 4096,
    "erf": "torch",
    "fuse": True,
    "conv_algo": "winograd",
    "conv_layout": "row_major",
    "matmul": "onednn",
    "simd_width": 512,
}

# GCC's -march=native keeps loops to 256-bit vectors on AVX-512 CPUs (prefer-vector-width=256, for
# the clock older ones drop to under 512-bit work): a loop of exps, logs and tanhs is compute bound,
# and 512-bit vectors ran a mish 1.46x faster on a Sapphire Rapids guest (4.0 -> 2.9 ms a call). Set
# before any function, so the math helpers inline into loops of the same target; inert on a CPU
# without AVX-512, which the guard leaves alone.
WIDE_SIMD = '#if defined(__AVX512F__)\n#pragma GCC target("prefer-vector-width=512")\n#endif\n'
