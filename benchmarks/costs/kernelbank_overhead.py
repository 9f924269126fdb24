"""Runtime costs of forge.kernelbank on this machine.

Prints:
  * dispatch overhead per call on the eager path: a kernelized module called as usual, against
    the same kernel module called directly (targets: <= 5 us on CPU), for a kernel in each form:
    a subclass of the user's class and KernelBench's standalone ModelNew (both bind "direct"), and
    a standalone ModelNew with a helper method and a constant of its own (binds through a "view");
  * `open()` + first `load()` of a kernel whose build is already cached, in a fresh process
    (target: <= 200 ms), and the import of forge.kernelbank itself, for reference.

Usage: python -m benchmarks.costs.kernelbank_overhead   (builds a temporary bank with one verified kernel)
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from benchmarks.support.page import add_page_option, run_with_page
from benchmarks.support.paths import ROOT
from benchmarks.support.user_code import import_from

USERPKG = ROOT / "examples" / "kernelbank"

FRESH = """
import time
t0 = time.perf_counter()
import torch
t1 = time.perf_counter()
import forge.kernelbank as kb
t2 = time.perf_counter()
bank = kb.open({bank!r})
layer = bank.load("user_rmsnorm", 256)
t3 = time.perf_counter()
assert type(layer).__name__ == "ModelNew", type(layer)
print({{"torch_import_ms": (t1 - t0) * 1e3, "kernelbank_import_ms": (t2 - t1) * 1e3, "open_load_ms": (t3 - t2) * 1e3}})
"""


def per_call_us(fn, x, n: int = 20000) -> float:
    for _ in range(200):
        fn(x)
    samples = []
    for _ in range(7):
        t0 = time.perf_counter_ns()
        for _ in range(n // 7):
            fn(x)
        samples.append((time.perf_counter_ns() - t0) / (n // 7) / 1e3)
    return statistics.median(samples)


def build_bank(kernel: Path, bank: Path, env: dict[str, str]) -> None:
    cmd = [sys.executable, "-m", "forge", "verify", "rmsnorm_op.py", str(kernel), "--no-compile-baseline", "--save"]
    r = subprocess.run([*cmd, "--bank", str(bank), "--json"], cwd=USERPKG, env=env, capture_output=True, text=True)
    if r.returncode != 0:
        raise SystemExit(f"could not build the bank: {r.stdout[-800:]} {r.stderr[-800:]}")


FORMS = {
    "subclass (direct)": USERPKG / "rmsnorm_kernel.py",
    "KernelBench (direct)": USERPKG / "rmsnorm_kernelbench.py",
    "KernelBench (view)": ROOT / "tests" / "candidates" / "user_rmsnorm" / "view_helpers.py",
}


def dispatch_overheads(tmp: Path, env: dict[str, str]) -> Path:
    """Per-call figures for each form; returns the first form's bank (for the fresh-process figures)."""
    import torch

    import forge.kernelbank as kb

    RMSNorm = import_from(USERPKG, "mylayers.norm").RMSNorm  # the user's layer, as their program imports it

    torch.set_num_threads(1)
    x = torch.randn(1, 256)
    first = None
    for form, kernel in FORMS.items():
        bank = tmp / f"bank_{len(form)}_{kernel.stem}.db"
        build_bank(kernel, bank, env)
        first = first or bank
        kb_bank = kb.open(bank)
        kernel_module = kb_bank.load("user_rmsnorm", 256)  # dispatching instance
        direct = type(kernel_module)(256)  # the same kernel class, called as a plain module
        patched = RMSNorm(256)
        assert kb_bank.kernelize(patched) == 1, form
        with torch.no_grad():
            t_direct = per_call_us(direct, x)
            t_loaded = per_call_us(kernel_module, x)
            t_patched = per_call_us(patched, x)
            t_ref = per_call_us(RMSNorm(256), x)
        print(
            f"{form:21s} per call (1x256 rmsnorm, 1 thread): kernel directly {t_direct:.2f} us, bank.load "
            f"{t_loaded:.2f} us, kernelize {t_patched:.2f} us, reference {t_ref:.2f} us; dispatch overhead: "
            f"load {t_loaded - t_direct:.2f} us, kernelize {t_patched - t_direct:.2f} us (target <= 5 us)"
        )
    assert first is not None
    return first


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    add_page_option(parser)
    parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        env = {**os.environ, "FORGE_CACHE_DIR": str(Path(tmp) / "cache"), "FORGE_TIMING_BUDGET_S": "0.2"}
        os.environ["FORGE_CACHE_DIR"] = env["FORGE_CACHE_DIR"]
        bank = dispatch_overheads(Path(tmp), env)
        runs = []
        for _ in range(5):
            out = subprocess.run(
                [sys.executable, "-c", FRESH.format(bank=str(bank))],
                cwd=USERPKG,
                env=env,
                capture_output=True,
                text=True,
            )
            if out.returncode != 0:
                raise SystemExit(out.stderr[-1500:])
            runs.append(json.loads(out.stdout.strip().splitlines()[-1].replace("'", '"')))
        med = {k: statistics.median(r[k] for r in runs) for k in runs[0]}
        print(
            f"fresh process (cached build): open()+first load() {med['open_load_ms']:.1f} ms (target <= 200 ms); "
            f"import forge.kernelbank {med['kernelbank_import_ms']:.1f} ms; "
            f"import torch {med['torch_import_ms']:.1f} ms"
        )


if __name__ == "__main__":
    raise SystemExit(run_with_page(main, "The kernel bank's runtime: dispatch overhead and load time"))
