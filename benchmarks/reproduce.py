"""Check a bank's claims the way a user would: a plain loop in one process, their own clock.

For every active kernel in BANK: the op's reference, the kernel as ``bank.load`` returns it, and
``torch.compile`` of the reference are built from the bank's own sources and timed with
``time.perf_counter`` around single calls, the three sides interleaved call by call (so load that
comes and goes lands on all three), in two regimes:

* warm: back-to-back calls on the same inputs, as in a model whose activations are still in
  cache;
* cold: the last-level cache flushed (a buffer twice its size written) before each call, on
  inputs drawn for that call, as forge's verifier times.

It prints forge's claim (the banked speedups vs eager and vs torch.compile, with the 95% interval
the verifier measured in the regime the claim was judged in) beside the median of this loop's
per-round ratios in each regime and their 95% interval. A claim is reproduced when the two
intervals, each widened by this machine's run-to-run noise (``NOISE``), overlap: two honest
measurements of one quantity taken minutes apart on a shared machine differ by more than either
run's own interval says (on this VM, eager softmax over 8 MB drew 0.96 ms in one run and 1.25 ms
in the next, both cold). The judged regime is bracketed, and the last line counts the claims
reproduced in it.

The process's allocator is a condition too. glibc hands freed blocks over its (dynamic) mmap
threshold back to the OS, so in a default process every large temporary is faulted in afresh on
each call: eager, which allocates more temporaries than a fused kernel, pays more of it, and the
cost depends on the heap's history. forge's verifier workers keep freed memory (the heap it
prefaults stays theirs), so ``--heap kept`` (the default) runs this loop the same way and
``--heap returned`` in glibc's default behaviour; the README shows both.

Usage: python benchmarks/reproduce.py BANK [--rounds N] [--kernel ID ...] [--no-compile] [--heap kept|returned]
                                     [--threads N] [--compile-mode MODE]
Run it from the directory the ops were verified in when their Model comes from user code.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

import forge.kernelbank as kb
from forge.core.importing import import_file
from forge.core.verdict import PairedRatio
from forge.db.engine import open_for_writing
from forge.db.kernels import kernel_detail, list_kernels
from forge.verifier.machine import cpu_flush_bytes
from forge.verifier.pairing import paired_ratio

NOISE = 0.10  # this VM's measured run-to-run noise (README, "How much is noise")
KEPT_HEAP = {"MALLOC_MMAP_THRESHOLD_": str(32 << 20), "MALLOC_TRIM_THRESHOLD_": str(1 << 30)}  # the workers'


@dataclass
class Ratio:
    median: float  # median per-round ratio: the baseline's time / the kernel's
    low: float
    high: float

    def agrees(self, claim: PairedRatio | None) -> bool | None:
        """Whether ``claim``'s interval and this one overlap once each is widened by the noise."""
        if claim is None:
            return None
        return claim.low * (1 - NOISE) <= self.high * (1 + NOISE) and self.low * (1 - NOISE) <= claim.high * (1 + NOISE)

    def __str__(self) -> str:
        return f"{self.median:.2f}x ({self.low:.2f}-{self.high:.2f})"


@dataclass
class Regime:
    eager: Ratio
    compiled: Ratio | None


def _ratio(base: list[int], kernel: list[int]) -> Ratio:
    r = paired_ratio(base, kernel)
    assert r is not None
    return Ratio(r.median, r.low, r.high)


def time_sides(sides: dict[str, Callable[[list[torch.Tensor]], Any]], draw: Callable[[], list[torch.Tensor]],
               rounds: int, cold: bool) -> dict[str, list[int]]:  # fmt: skip
    """Per-call nanoseconds of each side, interleaved call by call; the order rotates per round."""
    flush = torch.empty(cpu_flush_bytes() // 4) if cold else None
    fixed = draw()
    names = list(sides)
    out: dict[str, list[int]] = {n: [] for n in names}
    with torch.no_grad():
        for name in names:  # warm-up (compiles torch.compile's graph)
            for _ in range(3):
                sides[name](fixed)
        for r in range(rounds):
            for name in names[r % len(names) :] + names[: r % len(names)]:
                inputs = draw() if cold else fixed
                if flush is not None:
                    flush.fill_(r)
                t0 = time.perf_counter_ns()
                sides[name](inputs)
                out[name].append(time.perf_counter_ns() - t0)
    return out


def measure(
    op_module: Any, bank: kb.KernelBank, op: str, rounds: int, compile_mode: str | None, compile_too: bool
) -> dict[str, Regime]:
    init = op_module.get_init_inputs()
    torch.manual_seed(0)
    reference = op_module.Model(*init).eval()
    kernel = bank.load(op, *init).eval()
    kernel.load_state_dict(reference.state_dict())
    sides: dict[str, Callable[[list[torch.Tensor]], Any]] = {
        "eager": lambda x: reference(*x),
        "kernel": lambda x: kernel(*x),
    }
    if compile_too:
        compiled = torch.compile(reference, mode=compile_mode)
        sides["compile"] = lambda x: compiled(*x)
    regimes = {}
    for name, cold in (("warm", False), ("cold", True)):
        t = time_sides(sides, op_module.get_inputs, rounds, cold)
        regimes[name] = Regime(
            _ratio(t["eager"], t["kernel"]), _ratio(t["compile"], t["kernel"]) if "compile" in t else None
        )
    return regimes


def _mark(held: bool | None) -> str:
    return "-" if held is None else "yes" if held else "NO"


def _with_heap(heap: str) -> None:
    """Re-run this script under the asked allocator behaviour (glibc reads it once, at start)."""
    env = dict(os.environ)
    if heap == "kept":
        env.update(KEPT_HEAP)
    else:
        for name in KEPT_HEAP:
            env.pop(name, None)
    if any(os.environ.get(name) != env.get(name) for name in KEPT_HEAP):
        os.execve(sys.executable, [sys.executable, *sys.argv], env)


def _rows(kernel_id: int, op: str, claim: str, claimed_compile: str, judged: str, regimes: dict[str, Regime],
          claims: tuple[PairedRatio | None, PairedRatio | None]) -> tuple[list[str], list[bool | None]]:  # fmt: skip
    """Two lines per kernel (its judged regime first, bracketed) and the judged regime's verdicts."""
    lines, held_in_judged = [], []
    for i, name in enumerate(sorted(regimes, key=lambda n: n != judged)):
        r = regimes[name]
        held = [r.eager.agrees(claims[0]), r.compiled.agrees(claims[1]) if r.compiled else None]
        if name == judged:
            held_in_judged = held
        head = f"{kernel_id:>6d} {op:18s} {claim:>20s} {claimed_compile:>20s}" if i == 0 else " " * 67
        shown = f"[{name}]" if name == judged else f" {name} "
        lines.append(f"{head} | {shown:6s} {r.eager!s:>20s} {r.compiled or '-'!s:>20s} | "
                     f"{_mark(held[0]):>5s} {_mark(held[1]):>7s}")  # fmt: skip
    return lines, held_in_judged


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("bank", type=Path)
    ap.add_argument("--rounds", type=int, default=31, help="calls a side in each regime")
    ap.add_argument("--kernel", type=int, action="append", help="only these kernel ids")
    ap.add_argument("--no-compile", action="store_true", help="leave torch.compile out")
    ap.add_argument("--threads", type=int, help="torch's intra-op threads (default: torch's own, one per core)")
    ap.add_argument("--compile-mode", default=None, help="torch.compile's mode (default: its default, as forge's)")
    ap.add_argument("--heap", choices=("kept", "returned"), default="kept",
                    help="kept: freed memory stays with the process, as in forge's workers; "
                    "returned: glibc's default")  # fmt: skip
    a = ap.parse_args()
    _with_heap(a.heap)
    if a.threads:
        torch.set_num_threads(a.threads)
    sys.path.insert(0, str(Path.cwd()))
    engine = open_for_writing(a.bank)
    bank = kb.open(a.bank)
    mode = f", torch.compile mode {a.compile_mode}" if a.compile_mode else ""
    print(f"{torch.get_num_threads()} threads, heap {a.heap}{mode}; warm = back-to-back calls on the same inputs, "
          "cold = LLC flushed, fresh inputs;\n"
          "ratios are eager's (torch.compile's) time over the kernel's, per round")  # fmt: skip
    print(f"{'kernel':>6s} {'op':18s} {'claim x eager (CI)':>20s} {'x compile (CI)':>20s} | {'regime':6s} "
          f"{'x eager (CI)':>20s} {'x compile (CI)':>20s} | agrees: eager compile")  # fmt: skip
    held_all: list[bool] = []
    with tempfile.TemporaryDirectory() as tmp:
        for summary in list_kernels(engine):
            if (a.kernel and summary.id not in a.kernel) or str(summary.status) != "active":
                continue
            k = kernel_detail(engine, summary.id)
            op_path = Path(tmp) / f"op_{k.summary.id}.py"
            op_path.write_text(k.op_source)
            op_module = import_file(f"reproduce_op_{k.summary.id}", op_path)
            regimes = measure(op_module, bank, k.op_name, a.rounds, a.compile_mode, not a.no_compile)
            v = k.evidence
            claims = v.timing_stats.headline_pairs()
            claim = f"{v.speedup_vs_eager or 0:.2f}x" + (
                f" ({claims[0].low:.2f}-{claims[0].high:.2f})" if claims[0] else ""
            )
            compile_claim = claims[1] if v.speedup_vs_compile else None
            claimed_compile = f"{v.speedup_vs_compile:.2f}x" if v.speedup_vs_compile else "-"
            if compile_claim is not None:
                claimed_compile += f" ({compile_claim.low:.2f}-{compile_claim.high:.2f})"
            judged = str(v.timing_stats.regime or "cold")  # verdicts from before the regimes were timed cold
            claims = (claims[0], compile_claim)
            lines, held = _rows(k.summary.id, k.op_name, claim, claimed_compile, judged, regimes, claims)
            print("\n".join(lines), flush=True)
            held_all += [h for h in held if h is not None]
    print(f"in the judged regime, {sum(held_all)} of {len(held_all)} claims agree with this loop within the noise")


if __name__ == "__main__":
    main()
