"""Runs the built-in coder's Triton kernels and prints one JSON line: case id -> "ok" or the
error. On CPU, run it with TRITON_INTERPRET=1 in a fresh process: Triton reads that variable when
it is imported, so the interpreter cannot be switched on inside a test process that already has it.
With ``--device cuda`` (or ``run_cases("cuda")`` from a GPU test) the same cases compile and run
on the GPU, where the tf32x3 dot's accuracy is real rather than the interpreter's float32.

Each case renders a kernel, loads it as a candidate module (the reference importable as
``forge_reference``) and compares it with the reference on shapes that exercise the tile loop
(rows longer than one tile, a ragged last tile), under several configs.
"""

from __future__ import annotations

import atexit
import json
import os
import shutil
import subprocess
import sys
import tempfile
import textwrap
import traceback
import types
from collections.abc import Callable
from pathlib import Path

import torch

from forge.agents.builtin.pointwise import analyze as pointwise_analyze
from forge.agents.builtin.residual_norm import analyze as residual_analyze
from forge.agents.builtin.rowwise import analyze as row_analyze
from forge.agents.builtin.triton_pointwise import render_triton as render_pointwise
from forge.agents.builtin.triton_residual_norm import render_triton as render_residual
from forge.agents.builtin.triton_rowwise import render_triton as render_row
from forge.core.importing import import_file

EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "ops"
TMP = Path(tempfile.mkdtemp(prefix="forge-triton-check-"))
atexit.register(shutil.rmtree, TMP, True)
DEVICE = "cpu"  # where the cases put models and inputs; set by run_cases
ROW_OPS = {
    "softmax": ("torch.softmax(x, dim=-1)", ""),
    "log_softmax": ("torch.log_softmax(x, dim=1)", ""),
    "logsumexp": ("torch.logsumexp(x, dim=-1)", ""),
    "sum": ("torch.sum(x, dim=-1, keepdim=True)", ""),
    "mean": ("torch.mean(x, dim=-1)", ""),
    "amax": ("torch.amax(x, dim=-1)", ""),
    "layernorm": ("self.norm(x)", "self.norm = torch.nn.LayerNorm(cols)"),
    "layernorm_plain": ("self.norm(x)", "self.norm = torch.nn.LayerNorm(cols, elementwise_affine=False)"),
    "rmsnorm": (
        "x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-6) * self.weight",
        "self.weight = torch.nn.Parameter(torch.randn(cols))",
    ),
}


def _module(name: str, source: str) -> types.ModuleType:
    path = TMP / f"{name}.py"  # Triton reads a kernel's source from its file
    path.write_text(source)
    return import_file(name, path)


def _load(ref_source: str, candidates: list[str]) -> tuple[types.ModuleType, list[type]]:
    ref = _module("ref_op", textwrap.dedent(ref_source))
    sys.modules["forge_reference"] = ref
    return ref, [_module(f"cand_{i}", src).ModelNew for i, src in enumerate(candidates)]


def _row_source(forward: str, init: str) -> str:
    return f"""
        import torch
        class Model(torch.nn.Module):
            def __init__(self, cols=300):
                super().__init__()
                {init or "pass"}
            def forward(self, x):
                return {forward}
        def get_inputs():
            return [torch.randn(5, 300)]
        def get_init_inputs():
            return []
        """


def _row_case(kind: str) -> None:
    source = _row_source(*ROW_OPS[kind])
    ref, _ = _load(source, [])
    model = ref.Model()
    for p in model.parameters():  # LayerNorm starts at weight 1, bias 0: move them
        torch.nn.init.normal_(p)
    recipe = row_analyze(model, ref.get_inputs())
    assert not isinstance(recipe, str), recipe
    model.to(DEVICE)
    x = (torch.randn(7, 300) * 3 + 0.5).to(DEVICE)
    # A row far from zero: the softmaxes' max shift matters. (Norms lose ~|offset| * 2^-24 / std
    # to float32 in any summation order, so theirs is smaller.)
    x[2, :] -= 1e2 if "norm" in kind else 1e4
    configs = [{"block": 128, "num_warps": 4}, {"block": 4096, "num_warps": 8}]  # three tiles / one tile
    _, classes = _load(source, [render_row(recipe, c) for c in configs])
    for cls in classes:
        cand = cls().to(DEVICE)
        cand.load_state_dict(model.state_dict())
        torch.testing.assert_close(cand(x), model(x), rtol=1e-5, atol=1e-4)


def _row_kernel_64(kind: str) -> type:
    """The built-in Triton row kernel for ``kind`` in tiles of 64 columns (several per row)."""
    source = _row_source(*ROW_OPS[kind])
    ref, _ = _load(source, [])
    recipe = row_analyze(ref.Model(), ref.get_inputs())
    _, (cls,) = _load(source, [render_row(recipe, {"block": 64})])
    return cls


def _amax_nan() -> None:
    cls = _row_kernel_64("amax")
    x = torch.randn(3, 300, device=DEVICE)
    x[1, 200] = float("nan")
    got = cls().to(DEVICE)(x)
    assert torch.isnan(got[1]) and not torch.isnan(got[0]) and got[0] == x[0].max(), got


def _logsumexp_inf() -> None:
    """torch's logsumexp: +inf in a row gives +inf, unless the row also holds a NaN; all -inf rows
    give -inf."""
    cls = _row_kernel_64("logsumexp")
    x = torch.randn(4, 300, device=DEVICE)
    x[0, 10] = float("inf")
    x[1, 10], x[1, 250] = float("inf"), float("nan")
    x[2, :] = float("-inf")
    torch.testing.assert_close(cls().to(DEVICE)(x), torch.logsumexp(x, dim=-1), equal_nan=True)


def _scale_bias_gelu() -> None:
    source = (EXAMPLES / "scale_bias_gelu.py").read_text()
    ref, _ = _load(source, [])
    model = ref.Model(8)
    recipe = pointwise_analyze(model, [torch.randn(2, 8, 5, 7)])
    assert not isinstance(recipe, str), recipe
    model.to(DEVICE)
    x = (torch.randn(2, 8, 5, 7) * 3).to(DEVICE)
    configs = [{"block": 64}, {"block": 1024, "num_warps": 8}]
    _, classes = _load(source, [render_pointwise(recipe, c) for c in configs])
    for cls in classes:
        cand = cls(8).to(DEVICE)
        cand.load_state_dict(model.state_dict())
        torch.testing.assert_close(cand(x), model(x), rtol=1e-5, atol=1e-5)


def _linear_gelu() -> None:
    """The shipped linear + gelu: the fused Triton matmul (ragged M, N; both precision settings
    render and run, though the interpreter computes every dot in float32, so the 3xTF32 accuracy is
    for the verifier on a GPU to judge) and the library matmul with the chain after it."""
    source = (EXAMPLES / "linear_gelu.py").read_text()
    ref, _ = _load(source, [])
    model = ref.Model(64, 48)
    recipe = pointwise_analyze(model, [torch.randn(4, 64)])
    assert not isinstance(recipe, str) and recipe.linear, recipe
    configs = [
        {"tile": "32x64x32", "precision": "ieee"},
        {"tile": "64x64x32", "precision": "tf32x3", "num_stages": 2},
        {"matmul": "library", "block": 256},
    ]
    sources = [render_pointwise(recipe, c) for c in configs]
    assert "_linear_kernel[grid]" in sources[0] and "_linear_kernel" not in sources[2]
    _, classes = _load(source, sources)
    model.to(DEVICE)
    x = torch.randn(9, 64, device=DEVICE)
    for cls in classes:
        cand = cls(64, 48).to(DEVICE)
        cand.load_state_dict(model.state_dict())
        torch.testing.assert_close(cand(x), model(x), rtol=1e-4, atol=1e-4)


def _linear_broadcast_epilogue() -> None:
    """A bias-free linear on a 3-d input, then per-feature scale and per-position shift: the
    epilogue gathers parameters at the 2-d tile's flat offsets."""
    source = """
        import torch
        class Model(torch.nn.Module):
            def __init__(self):
                super().__init__()
                self.linear = torch.nn.Linear(40, 24, bias=False)
                self.scale = torch.nn.Parameter(torch.randn(24))
                self.shift = torch.nn.Parameter(torch.randn(5, 1))
            def forward(self, x):
                return torch.relu(self.linear(x) * self.scale + self.shift)
        def get_inputs():
            return [torch.randn(3, 5, 40)]
        def get_init_inputs():
            return []
        """
    ref, _ = _load(source, [])
    model = ref.Model()
    recipe = pointwise_analyze(model, ref.get_inputs())
    assert not isinstance(recipe, str) and recipe.linear and len(recipe.params) == 2, recipe
    _, (cls,) = _load(source, [render_pointwise(recipe, {"tile": "32x64x32"})])
    model.to(DEVICE)
    cand = cls().to(DEVICE)
    cand.load_state_dict(model.state_dict())
    x = torch.randn(3, 5, 40, device=DEVICE)
    torch.testing.assert_close(cand(x), model(x), rtol=1e-4, atol=1e-4)


RESIDUAL_OPS = {
    "layernorm": ("self.norm = torch.nn.LayerNorm(cols)", "h = x + r\n                return h, self.norm(h)"),
    "rmsnorm_norm_only": ("self.norm = torch.nn.RMSNorm(cols, eps=1e-6)", "return self.norm(x + r)"),
}


def _residual_case(kind: str) -> None:
    init, body = RESIDUAL_OPS[kind]
    source = f"""
        import torch
        class Model(torch.nn.Module):
            def __init__(self, cols=300):
                super().__init__()
                {init}
            def forward(self, x, r):
                {body}
        def get_inputs():
            return [torch.randn(5, 300), torch.randn(5, 300)]
        def get_init_inputs():
            return []
        """
    ref, _ = _load(source, [])
    model = ref.Model()
    for p in model.parameters():
        torch.nn.init.normal_(p)
    recipe = residual_analyze(model, ref.get_inputs())
    assert not isinstance(recipe, str), recipe
    model.to(DEVICE)
    x, r = (torch.randn(7, 300) * 3 + 0.5).to(DEVICE), torch.randn(7, 300, device=DEVICE)
    configs = [{"block": 128, "num_warps": 4}, {"block": 4096, "num_warps": 8}]  # three tiles / one tile
    _, classes = _load(source, [render_residual(recipe, c) for c in configs])
    for cls in classes:
        cand = cls().to(DEVICE)
        cand.load_state_dict(model.state_dict())
        torch.testing.assert_close(cand(x, r), model(x, r), rtol=1e-5, atol=1e-4)


CASES: dict[str, Callable[[], None]] = {
    **{f"row_{k}": (lambda k=k: _row_case(k)) for k in ROW_OPS},
    **{f"residual_{k}": (lambda k=k: _residual_case(k)) for k in RESIDUAL_OPS},
    "amax_nan": _amax_nan,
    "logsumexp_inf": _logsumexp_inf,
    "pointwise_broadcast": _scale_bias_gelu,
    "linear_epilogue": _linear_gelu,
    "linear_broadcast_epilogue": _linear_broadcast_epilogue,
}


def run_cases(device: str = "cpu") -> dict[str, str]:
    global DEVICE
    DEVICE = device
    results = {}
    for name, case in CASES.items():
        try:
            case()
            results[name] = "ok"
        except Exception:
            results[name] = traceback.format_exc()[-1500:]
    return results


def run_interpreted(module: str) -> dict[str, str]:
    """Run a checker module (this one, or another with the same output) on CPU under
    TRITON_INTERPRET=1 in a fresh process; its case id -> "ok" or the error."""
    env = {**os.environ, "TRITON_INTERPRET": "1", "CUDA_VISIBLE_DEVICES": ""}
    root = Path(__file__).resolve().parents[2]
    r = subprocess.run([sys.executable, "-m", module], capture_output=True, text=True, cwd=root, env=env, timeout=600)
    assert r.returncode == 0, r.stderr[-3000:]
    return dict(json.loads(r.stdout.strip().splitlines()[-1]))


def main() -> None:
    device = sys.argv[sys.argv.index("--device") + 1] if "--device" in sys.argv else "cpu"
    print(json.dumps(run_cases(device)))


if __name__ == "__main__":
    main()
