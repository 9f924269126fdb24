"""KernelBench problems, scaled to this machine, as ops forge has never seen.

forge's claims are checked on ops nobody here chose: KernelBench's (github.com/ScalingIntelligence/
KernelBench, a checkout of your own; nothing of it is kept in this repository). This script copies
the problems you name from a checkout into a folder, each as a forge op file, with its module-level
integer sizes scaled down until one call's inputs and parameters fit in ``--max-mib``, every other
problem in ``--small-mib`` instead, so that both of forge's timing regimes get ops (warm: one
call's data fits in half the last-level cache; KernelBench sizes are for GPUs: some inputs are
several GiB). The largest size constant (at least 32) is halved
until the op fits, so a problem keeps its shape's proportions as far as it can; nothing else of the
problem changes. Each copy starts with a comment naming its source and the sizes changed.

Usage: python -m benchmarks.kernels.kernelbench_ops KERNELBENCH_CHECKOUT --out DIR [--max-mib N] [--small-mib N]
                                           [PROBLEM ...]
PROBLEM: a path under KernelBench/ such as level1/23_Softmax.py (default: ``DEFAULT_PROBLEMS``).
Then: ``python -m benchmarks.claims DIR examples/ops --out PAGE.md``.
"""

from __future__ import annotations

import argparse
import ast
import re
from pathlib import Path
from typing import Any

import torch

# One or more of each kind of op the claims are checked on: row-wise softmax and norms, reductions
# over a dim, a GELU, elementwise chains, a loss over rows, pooling, and matmul epilogues (two of
# them with a mode-dependent op: dropout, batch norm). Chosen by kind, before any was optimized.
DEFAULT_PROBLEMS = (
    "level1/23_Softmax.py",
    "level1/24_LogSoftmax.py",
    "level1/36_RMSNorm_.py",
    "level1/38_L1Norm_.py",
    "level1/39_L2Norm_.py",
    "level1/40_LayerNorm.py",
    "level1/48_Mean_reduction_over_a_dimension.py",
    "level1/88_MinGPTNewGelu.py",
    "level1/20_LeakyReLU.py",
    "level1/25_Swish.py",
    "level1/32_HardTanh.py",
    "level1/95_CrossEntropyLoss.py",
    "level1/96_HuberLoss.py",
    "level1/42_Max_Pooling_2D.py",
    "level2/76_Gemm_Add_ReLU.py",
    "level2/86_Matmul_Divide_GELU.py",
    "level2/99_Matmul_GELU_Softmax.py",
    "level2/33_Gemm_Scale_BatchNorm.py",
    "level2/66_Matmul_Dropout_Softmax.py",
)
_SMALLEST_HALVED = 32  # sizes below this (kernel sizes, dims, strides) are left alone


def _sizes(tree: ast.Module) -> dict[str, list[int]]:
    """Module-level size constants: ``name = int`` or ``name = (int, ...)``, by name."""
    found: dict[str, list[int]] = {}
    for node in tree.body:
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
            value = node.value
            items = value.elts if isinstance(value, ast.Tuple) else [value]
            ints = [e.value for e in items if isinstance(e, ast.Constant) and type(e.value) is int]
            if ints and len(ints) == len(items):
                found[node.targets[0].id] = ints
    return found


def _with_sizes(source: str, sizes: dict[str, list[int]]) -> str:
    """``source`` with each named constant's line rewritten to the given values."""
    lines = source.splitlines()
    for node in ast.parse(source).body:
        if isinstance(node, ast.Assign) and isinstance(node.targets[0], ast.Name) and node.targets[0].id in sizes:
            values = sizes[node.targets[0].id]
            shown = str(values[0]) if not isinstance(node.value, ast.Tuple) else f"({', '.join(map(str, values))},)"
            lines[node.lineno - 1] = f"{node.targets[0].id} = {shown}"
    return "\n".join(lines) + "\n"


def footprint(source: str) -> int:
    """Bytes of one call's inputs and the model's parameters and buffers (built on the meta device)."""
    scope: dict[str, Any] = {"__name__": "kernelbench_problem"}
    exec(compile(source, "<problem>", "exec"), scope)
    with torch.device("meta"):
        inputs = scope["get_inputs"]()
        model = scope["Model"](*scope["get_init_inputs"]())
    tensors = [x for x in inputs if isinstance(x, torch.Tensor)] + list(model.parameters()) + list(model.buffers())
    return sum(t.numel() * t.element_size() for t in tensors)


def scaled(source: str, max_bytes: int) -> tuple[str, dict[str, tuple[list[int], list[int]]]]:
    """``source`` with its largest sizes halved until ``footprint`` is within ``max_bytes``, and
    what changed (name: (before, after))."""
    original = _sizes(ast.parse(source))
    sizes = {name: list(v) for name, v in original.items()}
    out = source
    while footprint(out) > max_bytes:
        name, i = max(((n, j) for n, v in sizes.items() for j in range(len(v))), key=lambda ni: sizes[ni[0]][ni[1]])
        if sizes[name][i] < _SMALLEST_HALVED:
            raise ValueError(f"cannot scale it under {max_bytes} bytes by halving sizes of {_SMALLEST_HALVED} or more")
        sizes[name][i] //= 2
        out = _with_sizes(source, sizes)
    return out, {n: (original[n], v) for n, v in sizes.items() if v != original[n]}


def op_name(problem: str) -> str:
    """``level1/23_Softmax.py`` -> ``kb1_23_softmax``."""
    level, stem = problem.removesuffix(".py").split("/")
    return f"kb{level.removeprefix('level')}_" + re.sub(r"[^0-9a-z]+", "_", stem.lower()).strip("_")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("checkout", type=Path, help="a KernelBench checkout (holds KernelBench/level1, ...)")
    ap.add_argument("problems", nargs="*", default=list(DEFAULT_PROBLEMS))
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--max-mib", type=int, default=32, help="one call's inputs and parameters at most (MiB)")
    ap.add_argument("--small-mib", type=int, default=4, help="the same, for every other problem (MiB)")
    a = ap.parse_args()
    a.out.mkdir(parents=True, exist_ok=True)
    for i, problem in enumerate(a.problems):
        source = (a.checkout / "KernelBench" / problem).read_text()
        text, changed = scaled(source, (a.small_mib if i % 2 else a.max_mib) << 20)
        said = ", ".join(f"{n} {b} -> {v}" for n, (b, v) in changed.items()) or "none"
        header = f"# KernelBench {problem}, sizes scaled by benchmarks.kernels.kernelbench_ops: {said}\n"
        path = a.out / f"{op_name(problem)}.py"
        path.write_text(header + text)
        print(f"{path}: {footprint(text) / 2**20:.1f} MiB ({said})")


if __name__ == "__main__":
    main()
