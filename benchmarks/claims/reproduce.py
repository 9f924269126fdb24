"""Check a bank's claims the way a user would: a plain loop in one process, their own clock.

For every active kernel in BANK: the op's reference, the kernel as ``bank.load`` returns it (in
eval mode, as inference runs it), and ``torch.compile`` of the reference are built from the bank's
own sources and timed with ``forge.verifier.worker.timing.plain_loop``, the loop a finalist's confirmation times
it with in a user's process: single calls under ``time.perf_counter_ns``, the three sides
interleaved call by call (so load that comes and goes lands on all three), in two regimes:

* warm: the same buffers every call, the round's values written into them first (a model's
  activations, in cache);
* cold: the last-level cache flushed before each call, on inputs drawn for the round.

Each kernel is timed on the device it was verified on (its verdict's; a CUDA kernel on a machine
without one is listed as not timed here, and not counted). Before it is timed, each
kernel is called once under ``bank.watch()``: a kernel that runs the
reference instead (a fallback) is reported as not running and not timed; timing it would time the
reference against itself.

It prints forge's claim (``Verdict.claim_pairs``: the lower of the isolated verification and the
confirmation's user loop, with its interval: the loop's range across its processes where the loop
is the lower, else the isolated interval reaching up to that range) beside this loop's median per-round ratio and its
interval. The agreement rule is strict: a claim is reproduced when this loop's median lies inside
the claim's interval widened by the claim's own null spread (how far the reference read from
itself when the claim was measured: the null control, else the user loop's null; a factor s >= 1
dividing the low end and multiplying the high end), and by nothing else. The judged regime is
bracketed, and the last line counts the claims reproduced in it.

The process's allocator is a condition too. glibc hands freed blocks over its (dynamic) mmap
threshold back to the OS, so in a default process every large temporary is faulted in afresh on
each call: eager, which allocates more temporaries than a fused kernel, pays more of it, and the
cost depends on the heap's history. forge's verifier workers and its user loop keep freed memory,
so ``--heap kept`` (the default, the regime claims name) runs this loop the same way and
``--heap returned`` in glibc's default behaviour.

Usage: python -m benchmarks.claims.reproduce BANK [--rounds N] [--kernel ID ...] [--no-compile]
                                               [--heap kept|returned] [--threads N] [--compile-mode MODE]
Run it from the directory the ops were verified in when their Model comes from user code (``python -m``
puts that directory on the path; the checkout on ``PYTHONPATH`` finds the script).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

import forge.kernelbank as kb
from benchmarks.support.banked import active_kernels
from benchmarks.support.command import restart_argv
from benchmarks.support.page import add_page_option, run_with_page
from forge.core.importing import import_file
from forge.core.pairing import paired_ratio
from forge.core.timing_records import PairedRatio
from forge.core.verdict import Verdict
from forge.db.engine import open_for_writing
from forge.db.kernels import kernel_detail
from forge.verifier.machine.facts import flush_bytes
from forge.verifier.worker.timing.plain_loop import time_sides

KEPT_HEAP = {"MALLOC_MMAP_THRESHOLD_": str(32 << 20), "MALLOC_TRIM_THRESHOLD_": str(1 << 30)}  # the workers'


@dataclass
class Ratio:
    median: float  # median per-round ratio: the baseline's time / the kernel's
    low: float
    high: float

    def agrees(self, claim: PairedRatio | None, spread: float) -> bool | None:
        """Whether this median lies in ``claim``'s interval widened by the factor ``spread``."""
        if claim is None:
            return None
        return claim.low / spread <= self.median <= claim.high * spread

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


def null_spread(v: Verdict) -> float:
    """How far the reference read from itself when the claim was measured, as a factor >= 1: the
    confirmation's null control (two workers running the reference), else the user loop's null
    (two instances in one loop, usually tighter), else 1."""
    loop_null = v.user_loop.null if v.user_loop is not None else None
    null = v.timing_stats.null_eager or loop_null
    if null is None or null.low <= 0:
        return 1.0
    return max(1.0, 1.0 / null.low, null.high)


def fallback(bank: kb.KernelBank, op: str, kernel: torch.nn.Module, inputs: list[torch.Tensor]) -> str | None:
    """Why the loaded kernel does not run on the op's own inputs in eval mode, or None when it does."""
    with torch.no_grad(), bank.watch() as seen:
        kernel(*inputs)
    used = seen.ops.get(op)
    if used is None or used.fallbacks or not used.calls:
        return str(used) if used is not None else f"{op}: the loaded module never reached the bank's dispatcher"
    return None


def measure(
    op_module: Any, bank: kb.KernelBank, op: str, rounds: int, compile_mode: str | None, compile_too: bool, device: str
) -> dict[str, Regime] | str:
    """Each regime's ratios on ``device`` (where the claim was measured), or why the kernel is not
    timed (it falls back to the reference)."""
    init = op_module.get_init_inputs()
    torch.manual_seed(0)
    reference = op_module.Model(*init).to(device).eval()
    kernel = bank.load(op, *init).to(device).eval()
    kernel.load_state_dict(reference.state_dict())

    def draw() -> list[Any]:
        return [x.to(device) if isinstance(x, torch.Tensor) else x for x in op_module.get_inputs()]

    why = fallback(bank, op, kernel, draw())
    if why is not None:
        return why
    sides: dict[str, Callable[[Any], Any]] = {"eager": lambda x: reference(*x), "kernel": lambda x: kernel(*x)}
    if compile_too:
        compiled = torch.compile(reference, mode=compile_mode)
        sides["compile"] = lambda x: compiled(*x)
    regimes = {}
    for name, cold in (("warm", False), ("cold", True)):
        t = time_sides(sides, draw, rounds, cold, flush_bytes(device), device)
        regimes[name] = Regime(
            _ratio(t["eager"], t["kernel"]), _ratio(t["compile"], t["kernel"]) if "compile" in t else None
        )
    return regimes


def _mark(held: bool | None) -> str:
    return "-" if held is None else "yes" if held else "NO"


def with_heap(heap: str) -> None:
    """Re-run this benchmark under the asked allocator behaviour (glibc reads it once, at start)."""
    env = dict(os.environ)
    if heap == "kept":
        env.update(KEPT_HEAP)
    else:
        for name in KEPT_HEAP:
            env.pop(name, None)
    if any(os.environ.get(name) != env.get(name) for name in KEPT_HEAP):
        os.execve(sys.executable, restart_argv(), env)


Claims = tuple[PairedRatio | None, PairedRatio | None]


def _rows(
    kernel_id: int,
    op: str,
    claim: str,
    claimed_compile: str,
    judged: str,
    regimes: dict[str, Regime],
    claims: Claims,
    spread: float,
) -> tuple[list[str], list[bool | None]]:
    """Two lines per kernel (its judged regime first, bracketed) and the judged regime's verdicts."""
    lines, held_in_judged = [], []
    for i, name in enumerate(sorted(regimes, key=lambda n: n != judged)):
        r = regimes[name]
        held = [r.eager.agrees(claims[0], spread), r.compiled.agrees(claims[1], spread) if r.compiled else None]
        if name == judged:
            held_in_judged = held
        head = f"{kernel_id:>6d} {op:18s} {claim:>20s} {claimed_compile:>20s}" if i == 0 else " " * 67
        shown = f"[{name}]" if name == judged else f" {name} "
        lines.append(
            f"{head} | {shown:6s} {r.eager!s:>20s} {r.compiled or '-'!s:>20s} | "
            f"{_mark(held[0]):>5s} {_mark(held[1]):>7s}"
        )
    return lines, held_in_judged


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("bank", type=Path)
    ap.add_argument("--rounds", type=int, default=31, help="calls a side in each regime")
    ap.add_argument("--kernel", type=int, action="append", help="only these kernel ids")
    ap.add_argument("--no-compile", action="store_true", help="leave torch.compile out")
    ap.add_argument("--threads", type=int, help="torch's intra-op threads (default: torch's own, one per core)")
    ap.add_argument("--compile-mode", default=None, help="torch.compile's mode (default: its default, as forge's)")
    ap.add_argument(
        "--heap",
        choices=("kept", "returned"),
        default="kept",
        help="kept: freed memory stays with the process, as in forge's workers; returned: glibc's default",
    )
    ap.add_argument(
        "--json", type=Path, help="also write each kernel's figures here (python -m benchmarks.claims reads it)"
    )
    add_page_option(ap)
    a = ap.parse_args()
    with_heap(a.heap)
    if a.threads:
        torch.set_num_threads(a.threads)
    engine = open_for_writing(a.bank)
    bank = kb.open(a.bank)
    mode = f", torch.compile mode {a.compile_mode}" if a.compile_mode else ""
    print(
        f"{torch.get_num_threads()} threads, heap {a.heap}{mode}; warm = back-to-back calls on the same inputs, "
        "cold = LLC flushed, fresh inputs;\n"
        "ratios are eager's (torch.compile's) time over the kernel's, per round"
    )
    print(
        f"{'kernel':>6s} {'op':18s} {'claim x eager (CI)':>20s} {'x compile (CI)':>20s} | {'regime':6s} "
        f"{'x eager (CI)':>20s} {'x compile (CI)':>20s} | agrees: eager compile"
    )
    held_all: list[bool] = []
    rows: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory() as tmp:
        for summary in active_kernels(engine, a.kernel):
            k = kernel_detail(engine, summary.id)
            op_path = Path(tmp) / f"op_{k.summary.id}.py"
            op_path.write_text(k.op_source)
            op_module = import_file(f"reproduce_op_{k.summary.id}", op_path)
            device = k.evidence.device or "cpu"
            if device == "cuda" and not torch.cuda.is_available():  # not a disagreement: not checkable here
                print(f"{k.summary.id:>6d} {k.op_name:18s} not timed here: verified on CUDA, and torch sees no GPU")
                continue
            regimes = measure(op_module, bank, k.op_name, a.rounds, a.compile_mode, not a.no_compile, device)
            lines, held = report(k.summary.id, k.op_name, k.evidence, regimes)
            print("\n".join(lines), flush=True)
            held_all += [h for h in held if h is not None]
            rows.append(as_record(k.summary.id, k.op_name, k.evidence, regimes, held))
    print(
        f"in the judged regime, {sum(held_all)} of {len(held_all)} claims agree with this loop "
        "(its median inside the claim's interval widened by the claim's null spread)"
    )
    if a.json:
        meta = {"heap": a.heap, "threads": torch.get_num_threads(), "rounds": a.rounds, "torch": torch.__version__}
        a.json.write_text(json.dumps({**meta, "kernels": rows}, indent=1))


def _pair(p: PairedRatio | Ratio | None) -> list[float] | None:
    return None if p is None else [p.median, p.low, p.high]


def as_record(
    kernel_id: int, op: str, v: Verdict, regimes: dict[str, Regime] | str, held: list[bool | None]
) -> dict[str, Any]:
    """One kernel's figures for --json: its claims, the isolated and user-loop figures they came
    from, this loop's per regime, and whether the claims held in the judged regime."""
    claims, isolated = v.claim_pairs(), v.timing_stats.headline_pairs()
    loop = v.user_loop
    record: dict[str, Any] = {
        "kernel": kernel_id,
        "op": op,
        "judged": str(v.timing_stats.regime or "cold"),
        "spread": null_spread(v),
        "claim": _pair(claims[0]),
        "claim_compile": _pair(claims[1]) if v.speedup_vs_compile else None,
        "isolated": _pair(isolated[0]),
        "isolated_compile": _pair(isolated[1]),
        "user_loop": _pair(loop.eager) if loop else None,
        "user_loop_compile": _pair(loop.compiled) if loop else None,
        "agrees": held[0],
        "agrees_compile": held[1] if len(held) > 1 else None,
    }
    if isinstance(regimes, str):
        record["not_running"] = regimes
    else:
        for name, r in regimes.items():
            record[name] = _pair(r.eager)
            record[f"{name}_compile"] = _pair(r.compiled)
    return record


def _shown(median: float | None, pair: PairedRatio | None) -> str:
    if median is None:
        return "-"
    return f"{median:.2f}x" + (f" ({pair.low:.2f}-{pair.high:.2f})" if pair is not None else "")


def report(
    kernel_id: int, op: str, v: Verdict, regimes: dict[str, Regime] | str
) -> tuple[list[str], list[bool | None]]:
    """One kernel's lines and the agreement of its claims in the judged regime (a kernel that
    falls back agrees with none of its claims)."""
    eager, compiled = v.claim_pairs()
    compiled = compiled if v.speedup_vs_compile else None
    claim, claimed_compile = _shown(v.speedup_vs_eager, eager), _shown(v.speedup_vs_compile, compiled)
    if isinstance(regimes, str):
        head = f"{kernel_id:>6d} {op:18s} {claim:>20s} {claimed_compile:>20s}"
        return [f"{head} | NOT RUNNING: {regimes}; not timed"], [False, False if compiled else None]
    judged = str(v.timing_stats.regime or "cold")  # verdicts from before the regimes were timed cold
    spread = null_spread(v)
    lines, held = _rows(kernel_id, op, claim, claimed_compile, judged, regimes, (eager, compiled), spread)
    lines[0] += f"  (null spread {spread:.2f})"
    return lines, held


if __name__ == "__main__":
    raise SystemExit(run_with_page(main, "Banked claims reproduced in a plain loop"))
