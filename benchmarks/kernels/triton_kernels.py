"""The built-in coder's Triton kernels on a GPU, kernel by kernel, outside the search.

For each shipped example: the reference in eager and under torch.compile, and the built-in Triton
kernel at its default config and at every config of a sample of its knob space. Each is checked
against eager on the GPU first, then timed three ways (medians, microseconds):

- ``bench``: triton.testing.do_bench (L2 cleared before each call, calls queued back to back, so
  the host's launch cost hides behind the device's work): the device time a model in flight sees.
- ``cold``: device synchronised, then events around one call: the launch cost counts, as it does
  for a lone call from Python.
- ``GB/s``: the fewest bytes the op must move (inputs and parameters read once, outputs written
  once) over the ``bench`` time.

Usage (on a machine with a CUDA GPU): python -m benchmarks.kernels.triton_kernels [--configs N] [--no-compile] [OPS ...]
"""

from __future__ import annotations

import argparse
import itertools
import random
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch

from benchmarks.support.page import add_page_option, run_with_page
from benchmarks.support.paths import ROOT
from forge.agents.builtin import BuiltinCoder
from forge.agents.builtin.tuner import default_config
from forge.core.importing import import_file
from forge.core.problem import load_problem

FLUSH = None


def _flush() -> None:
    global FLUSH
    if FLUSH is None:
        FLUSH = torch.empty(256 << 20, dtype=torch.uint8, device="cuda")
    FLUSH.zero_()


def cold_us(fn: Callable[[], Any], trials: int = 60) -> float:
    times = []
    for _ in range(trials):
        _flush()
        torch.cuda.synchronize()
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        fn()
        b.record()
        torch.cuda.synchronize()
        times.append(a.elapsed_time(b) * 1e3)
    return sorted(times)[len(times) // 2]


def bench_us(fn: Callable[[], Any]) -> float:
    import triton.testing

    return float(triton.testing.do_bench(fn, warmup=25, rep=200, return_mode="median")) * 1e3


def _nbytes(xs: Any) -> int:
    if isinstance(xs, torch.Tensor):
        return xs.numel() * xs.element_size()
    if isinstance(xs, (list, tuple)):
        return sum(_nbytes(x) for x in xs)
    return 0


def _load_candidate(source: str, name: str, tmp: Path) -> type:
    path = tmp / f"{name}.py"  # Triton reads a kernel's source from its file
    path.write_text(source)
    return import_file(name, path).ModelNew


def _configs(space: dict[str, list[Any]], n: int) -> list[dict[str, Any]]:
    first = default_config(space)
    keys = list(space)
    every = [dict(zip(keys, vals, strict=True)) for vals in itertools.product(*(space[k] for k in keys))]
    random.Random(0).shuffle(every)
    return [first, *[c for c in every if c != first][: max(0, n - 1)]]


def _caller(module: torch.nn.Module, inputs: list[Any]) -> Callable[[], Any]:
    return lambda: module(*inputs)


def run_op(path: Path, n_configs: int, compile_baseline: bool, tmp: Path) -> list[str]:
    problem = load_problem(path)
    sys.modules["forge_reference"] = problem.module
    model = problem.model_cls(*problem.init_inputs()).cuda()
    inputs = [x.cuda() if isinstance(x, torch.Tensor) else x for x in problem.inputs()]
    with torch.no_grad():
        expected = model(*inputs)
    moved = _nbytes(inputs) + _nbytes(expected) + sum(_nbytes(p) for p in model.parameters())
    rows = []

    def row(label: str, fn: Callable[[], Any]) -> float:
        b = bench_us(fn)
        rows.append(f"{path.stem:16s} {label:44s} {b:9.1f} {cold_us(fn):9.1f} {moved / b / 1e3:8.0f}")
        return b

    with torch.no_grad():
        eager = row("eager", lambda: model(*inputs))
        if compile_baseline:
            compiled = torch.compile(model)
            compiled(*inputs)
            row("torch.compile", lambda: compiled(*inputs))
        coder = BuiltinCoder(path, "triton")
        space = coder.space()
        if space is None:
            return [*rows, f"{path.stem:16s} (the built-in coder does not handle it)"]
        family, recipe = coder._family, coder._recipe
        assert family is not None
        best = (float("inf"), "")
        for i, cfg in enumerate(_configs(space, n_configs)):
            cls = _load_candidate(family.render(recipe, cfg), f"{path.stem}_{i}", tmp)
            cand = cls(*problem.init_inputs()).cuda()
            cand.load_state_dict(model.state_dict())
            got = cand(*inputs)
            try:
                torch.testing.assert_close(got, expected, rtol=1e-4, atol=1e-4)
            except AssertionError as exc:
                rows.append(f"{path.stem:16s} {str(cfg)[:44]:44s} WRONG: {str(exc).splitlines()[0]}")
                continue
            label = ("default " if i == 0 else "") + ",".join(f"{k}={v}" for k, v in cfg.items())
            t = row(label[:44], _caller(cand, inputs))
            best = min(best, (t, label))
        rows.append(f"{path.stem:16s} best triton {eager / best[0]:.2f}x eager (bench): {best[1]}")
    return rows


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("ops", nargs="*", type=Path)
    ap.add_argument("--configs", type=int, default=8, help="configs per op, the default first")
    ap.add_argument("--no-compile", action="store_true")
    add_page_option(ap)
    a = ap.parse_args()
    if not torch.cuda.is_available():
        sys.exit("triton_kernels.py needs a CUDA GPU")
    ops = a.ops or sorted((ROOT / "examples" / "ops").glob("*.py"))
    print(f"{torch.cuda.get_device_name(0)}, torch {torch.__version__}")
    print(f"{'op':16s} {'variant':44s} {'bench us':>9s} {'cold us':>9s} {'GB/s':>8s}", flush=True)
    with tempfile.TemporaryDirectory() as tmp:
        for path in ops:
            for line in run_op(path, a.configs, not a.no_compile, Path(tmp)):
                print(line, flush=True)


if __name__ == "__main__":
    raise SystemExit(run_with_page(main, "The built-in Triton kernels on a GPU"))
