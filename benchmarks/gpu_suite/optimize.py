"""The GPU suite's optimize and runtime parts: what the built-in agent banks on this device, each kernel
timed as a user gets it, and the runtime (kernelize, torch.compile over it, dispatch, reproduce.py)."""

from __future__ import annotations

import json
import statistics
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

import torch

from benchmarks.gpu_suite.part import (
    CATALOG,
    EXAMPLE_OPS,
    TEST_OPS,
    Context,
    PartResult,
    Table,
    Walk,
    last_json,
    ms,
    rows_state,
    run_group,
    saved_rows,
    times,
)
from benchmarks.support.paths import ROOT
from benchmarks.support.user_code import import_from

USERPKG = ROOT / "examples" / "kernelbank"
USER_ROWS = 8192  # the runtime part's rmsnorm: rows enough for a kernel to beat eager beyond the noise
MIN_OP_S = 180.0  # an op is started only with this much of the part's time left
MEASURE_S = 90.0  # kept back from an op's forge optimize for timing what it banked


@dataclass(frozen=True)
class OpSet:
    """The ops one part optimizes into its bank: ``rounds`` and at most ``op_limit_s`` seconds an op
    on a GPU (a loan's part fits several), ``dry`` on the CPU (one round)."""

    part: str
    folder: Path
    bank: str
    rounds: int
    op_limit_s: float
    dry: tuple[Path, ...]
    # on a dry run, a session that ends banking nothing (one round on a shared CPU, its finalist within
    # the null control's spread) passes: the optimize part, whose steps are the same, must bank
    dry_may_bank_none: bool = False

    def ops(self, ctx: Context) -> list[Path]:
        return list(self.dry) if ctx.dry else sorted(self.folder.glob("*.py"))


# the shipped examples first (the runtime part reads their bank). The dry run's ops are ones the
# CPU's kernels beat eager on; for the examples, the shipped RMSNorm at a quarter of its rows (the
# part's steps are what a dry run checks: the shipped size took two minutes of it, and the tests
# run that example end to end)
EXAMPLES = OpSet("optimize", EXAMPLE_OPS, "optimize.db", 4, 240.0, (TEST_OPS / "quick_rmsnorm.py",))
CATALOG_OPS = OpSet("catalog", CATALOG, "catalog.db", 2, 150.0, (CATALOG / "gelu_tanh_written.py",), True)


@dataclass
class OpRow:
    """One op's line in the optimize part's table (and its saved state)."""

    op: str
    status: str  # accepted, or the session's status (no_gain, ...), or how forge optimize ended
    judged: str = "-"  # the regime the kernel was judged in
    eager_ms: float | None = None  # medians in one plain loop, the kernel loaded from the bank
    compile_ms: float | None = None
    autotune_ms: float | None = None  # torch.compile(mode="max-autotune"): the shipped examples only
    kernel_ms: float | None = None
    roofline: str = "-"  # the fraction of the roofline the kernel reached when it was verified
    runs_in_eval: str = "-"  # "yes", or why the bank's kernel falls back to the reference
    claim: str = "-"  # the banked claim, x eager / x compile
    first_session: str = ""  # a dry run's op banked by a second session: how the first ended

    COLUMNS: ClassVar[tuple[str, ...]] = (
        "op",
        "status",
        "judged",
        "eager ms",
        "compile ms",
        "max-autotune ms",
        "kernel ms",
        "x eager",
        "x compile",
        "x max-autotune",
        "% of roofline",
        "runs in eval",
        "banked claim x eager / x compile",
    )

    def cells(self) -> list[str]:
        def over(ms_: float | None) -> str:
            return times(ms_ / self.kernel_ms) if ms_ and self.kernel_ms else "-"

        return [
            self.op,
            self.status,
            self.judged,
            ms(self.eager_ms),
            ms(self.compile_ms),
            ms(self.autotune_ms),
            ms(self.kernel_ms),
            over(self.eager_ms),
            over(self.compile_ms),
            over(self.autotune_ms),
            self.roofline,
            self.runs_in_eval,
            self.claim,
        ]


def _table(rows: dict[str, OpRow]) -> Table:
    title = "forge optimize, built-in agent, then each banked kernel in one plain loop"
    return Table(title, list(OpRow.COLUMNS), [r.cells() for r in rows.values()])


def optimize_part(ctx: Context) -> PartResult:
    """The shipped examples (see ``optimize_ops``)."""
    return optimize_ops(ctx, EXAMPLES)


def catalog_part(ctx: Context) -> PartResult:
    """The op catalog (see ``optimize_ops``): the longest part, last, done over several loans."""
    return optimize_ops(ctx, CATALOG_OPS)


def optimize_ops(ctx: Context, ops: OpSet) -> PartResult:
    """``forge optimize`` (built-in agent, this device's backend) op by op into one bank, each banked
    kernel then timed in one plain loop beside eager and torch.compile. Saved after every op: a run
    cut off continues with the next op; an op is started only with ``MIN_OP_S`` left."""
    bank = ctx.work / ops.bank
    rows = saved_rows(ctx, OpRow)
    walk = Walk(ops.part, ops.ops(ctx), lambda op, left, _whole: _one_op(ctx, op, bank, left, ops), _table, MIN_OP_S)
    cut = walk.run(ctx, rows)
    if cut is not None:
        return cut
    banked = [r for r in rows.values() if r.status == "accepted"]
    running = sum(1 for r in banked if r.runs_in_eval == "yes")
    status = "passed" if banked and running == len(banked) else "failed"
    summary = f"{len(banked)} of {len(rows)} ops banked, {running} of them run (no fallback) in eval mode"
    for r in rows.values():
        if r.first_session:
            summary += f"; {r.op} banked by a second session (the first ended {r.first_session})"
        elif r.status != "accepted" and ctx.dry:  # the dry run's few ops: why each banked nothing
            summary += f"; {r.op}: {r.status}"
    ended = all(not r.status.startswith(("exit", "timed out")) for r in rows.values())  # a session's own status
    if ctx.dry and ops.dry_may_bank_none and not banked and ended:
        status, summary = "passed", summary + " (a dry run's one round on a shared CPU may bank nothing)"
    return PartResult(ops.part, status, summary, tables=[_table(rows)], state=rows_state(rows))


def _one_op(ctx: Context, op: Path, bank: Path, left_s: float, ops: OpSet) -> OpRow | None:
    """The op's row, or None when it ran out of the part's time having had less than its whole
    share. The session is given a time limit that leaves room to time what it banks."""
    t0 = time.monotonic()
    limit = min(ops.op_limit_s, left_s - MEASURE_S)
    args = ["optimize", str(op), "--bank", str(bank), "--json"]
    args += ["--rounds", "1"] if ctx.dry else ["--rounds", str(ops.rounds), "--time-limit", f"{limit:.0f}"]
    earlier = ""
    # a dry run's one round on a shared CPU can see its finalist's confirmation land within the null's
    # spread: it gets one more session, and the row keeps why the first banked nothing
    for session in range(2 if ctx.dry and not ops.dry_may_bank_none else 1):
        try:
            done = ctx.forge(*args, timeout=1800.0 if ctx.dry else limit + 60.0)  # its start and last verification
        except subprocess.TimeoutExpired:
            return OpRow(op.stem, f"timed out after {limit + 60:.0f} s") if limit >= ops.op_limit_s else None
        result = ((last_json(done.stdout) or {}).get("problems") or [{}])[0]
        if result.get("accepted"):
            break
        status = str(result.get("status") or f"exit {done.returncode}")
        why = str(result.get("reason") or done.stderr.strip()[-300:] or "no reason given")
        earlier += f"{'; then ' if session else ''}{status}: {why}"
    else:
        return OpRow(op.stem, earlier, str(result.get("regime") or "-"))
    # max-autotune (minutes of autotuning) for the shipped examples, where the part has time for it
    autotune = op.parent == EXAMPLE_OPS and left_s - (time.monotonic() - t0) > 2 * MEASURE_S
    try:
        row = _measure(ctx, op, bank, int(result["kernel_id"]), autotune)
    except Exception as exc:  # torch.compile or the loaded kernel breaking on one op is that op's finding
        return OpRow(op.stem, f"banked; timing it raised {type(exc).__name__}: {str(exc)[:160]}")
    row.first_session = earlier
    return row


def _measure(ctx: Context, op: Path, bank_path: Path, kernel_id: int, autotune: bool) -> OpRow:
    """The banked kernel as ``bank.load`` gives it, timed beside eager and torch.compile (and its
    max-autotune mode, for the shipped examples: its autotuning takes minutes an op)."""
    import forge.kernelbank as kb
    from benchmarks.claims.reproduce import fallback
    from forge.core.importing import import_file
    from forge.db.engine import open_for_writing
    from forge.db.kernels import kernel_detail
    from forge.verifier.machine.facts import flush_bytes
    from forge.verifier.worker.timing.plain_loop import time_sides

    detail = kernel_detail(open_for_writing(bank_path), kernel_id)
    module = import_file(f"suite_{op.stem}", op)
    init = module.get_init_inputs()
    reference = module.Model(*init).to(ctx.device).eval()
    bank = kb.open(bank_path)
    kernel = bank.load(detail.op_name, *init).to(ctx.device).eval()
    kernel.load_state_dict(reference.state_dict())

    def draw() -> list[torch.Tensor]:
        return [x.to(ctx.device) if isinstance(x, torch.Tensor) else x for x in module.get_inputs()]

    why = fallback(bank, detail.op_name, kernel, draw())
    sides = {"eager": lambda x: reference(*x), "kernel": lambda x: kernel(*x), "compile": _compiled(reference, None)}
    if autotune and not ctx.dry:
        sides["max-autotune"] = _compiled(reference, "max-autotune")
    judged = str(detail.evidence.timing_stats.regime or "cold")
    t = time_sides(sides, draw, 3 if ctx.dry else 30, judged == "cold", flush_bytes(ctx.device), ctx.device)
    med = {name: statistics.median(v) / 1e6 for name, v in t.items()}
    roof = detail.evidence.roofline
    fraction = f"{roof.fraction_candidate:.0%}" if roof and roof.fraction_candidate and roof.holds else "-"
    claim = f"{times(detail.evidence.speedup_vs_eager)} / {times(detail.evidence.speedup_vs_compile)}"
    return OpRow(
        op.stem,
        "accepted",
        judged,
        med["eager"],
        med["compile"],
        med.get("max-autotune"),
        med["kernel"],
        fraction,
        "yes" if why is None else f"NO: {why}",
        claim,
    )


def _compiled(model: torch.nn.Module, mode: str | None) -> Any:
    compiled = torch.compile(model, mode=mode)
    return lambda x: compiled(*x)


def runtime_part(ctx: Context) -> PartResult:
    """A user's model kernelized from a bank this device filled, outputs checked, then compiled
    whole over the kernel, its dispatch cost, and reproduce.py on the optimize part's bank."""
    bank = ctx.work / "runtime.db"
    args = ["optimize", str(_user_op(ctx)), "--bank", str(bank), "--json"]
    third = ctx.left() / 3
    args += ["--rounds", "1"] if ctx.dry else ["--time-limit", f"{third:.0f}"]
    try:
        done = ctx.forge(*args, timeout=third + 60, path=USERPKG)  # the op imports mylayers
    except subprocess.TimeoutExpired:
        return PartResult("runtime", "failed", "forge optimize on the user's rmsnorm ran past its time")
    result = ((last_json(done.stdout) or {}).get("problems") or [{}])[0]
    if not result.get("accepted"):
        why = result.get("reason") or done.stderr[-600:]
        return PartResult("runtime", "failed", f"no rmsnorm kernel was banked to kernelize: {why}")
    notes = _kernelized(ctx, bank)
    notes.append(_reproduced(ctx, ctx.left()))
    failed = any(n.startswith("FAILED") for n in notes)
    return PartResult("runtime", "failed" if failed else "passed", notes[0].splitlines()[0], notes=notes)


def _user_op(ctx: Context) -> Path:
    """The user's rmsnorm op with USER_ROWS rows (its file has 64: too few for a kernel to beat eager by
    more than the noise, on a GPU or a CPU), next to its package so that its import resolves."""
    op = USERPKG / "rmsnorm_op.py"
    text = op.read_text().replace("batch_size = 64\n", f"batch_size = {USER_ROWS}\n")
    if text == op.read_text():
        raise ValueError(f"{op}: no 'batch_size = 64' line to scale up")
    copy = ctx.work / "user_op" / "rmsnorm_op.py"
    copy.parent.mkdir(parents=True, exist_ok=True)
    copy.write_text(text)
    return copy


def _kernelized(ctx: Context, bank_path: Path) -> list[str]:
    import forge.kernelbank as kb

    norm = import_from(USERPKG, "mylayers.norm")  # the user's own layers, as their program imports them
    Block, RMSNorm = norm.Block, norm.RMSNorm

    torch.manual_seed(0)
    model = Block(256).to(ctx.device).eval()
    original = Block(256).to(ctx.device).eval()
    original.load_state_dict(model.state_dict())
    bank = kb.open(bank_path)
    swapped = bank.kernelize(model)
    # at the banked shape: a kernel built for its verified shapes alone (Inductor's code, specialized)
    # runs the reference at any other, and the watch would count that as a fallback
    x = torch.randn(USER_ROWS, 256, device=ctx.device)
    with torch.no_grad():
        with bank.watch() as seen:
            out, want = model(x), original(x)
        # compiled outside the watch: the watch's bookkeeping is Python that a full graph cannot hold
        compiled = torch.compile(model, fullgraph=True)(x)
    same = torch.allclose(out, want, atol=1e-4, rtol=1e-4) and torch.allclose(compiled, want, atol=1e-4, rtol=1e-4)
    ran = seen.ops.get("user_rmsnorm")
    kernel_ran = ran is not None and ran.calls > 0 and not ran.fallbacks
    head = "FAILED: " if not (swapped == 2 and same and kernel_ran) else ""
    overhead = _dispatch_us(ctx, bank, RMSNorm)
    return [
        f"{head}kernelize swapped {swapped} of 2 RMSNorm layers; eager and torch.compile(fullgraph=True) outputs "
        f"{'match' if same else 'DIFFER FROM'} the original",
        seen.report(),
        overhead,
    ]


def _dispatch_us(ctx: Context, bank: Any, layer_cls: type[torch.nn.Module]) -> str:
    direct = bank.load("user_rmsnorm", 256).to(ctx.device)
    patched = layer_cls(256).to(ctx.device)
    bank.kernelize(patched)
    x = torch.randn(1, 256, device=ctx.device)

    def per_call_us(fn: Any, n: int = 2000) -> float:
        with torch.no_grad():
            for _ in range(50):
                fn(x)
            if ctx.device == "cuda":
                torch.cuda.synchronize()
            t0 = time.perf_counter_ns()
            for _ in range(n):
                fn(x)
            if ctx.device == "cuda":
                torch.cuda.synchronize()
        return (time.perf_counter_ns() - t0) / n / 1e3

    kernel_us, patched_us = per_call_us(type(direct)(256).to(ctx.device)), per_call_us(patched)
    return (
        f"dispatch: the kernel called directly {kernel_us:.1f} us a call, through kernelize {patched_us:.1f} us "
        f"(overhead {patched_us - kernel_us:.1f} us; 1x256 rmsnorm)"
    )


def _claimed(kernel: dict[str, Any]) -> str:
    return f"{kernel['claim'][0]:.2f}x" if kernel.get("claim") else "no claim"


def _looped(kernel: dict[str, Any]) -> str:
    """What reproduce.py's loop measured for a kernel in its judged regime (or why it did not)."""
    figure = kernel.get(kernel["judged"])
    return f"this loop {figure[0]:.2f}x" if figure else str(kernel.get("not_running", "not timed"))[:120]


def _reproduced(ctx: Context, left_s: float) -> str:
    bank = ctx.work / "optimize.db"
    if not bank.is_file():
        return "FAILED: reproduce.py had no bank to check: run the optimize part first"
    out = ctx.work / "reproduce.json"
    # x eager only: torch.compile of every banked op would not fit a loan's command (the optimize
    # part's table has each kernel against torch.compile, in one loop)
    cmd = [
        sys.executable,
        "-m",
        "benchmarks.claims.reproduce",
        str(bank),
        "--rounds",
        "5" if ctx.dry else "15",
        "--no-compile",
        "--json",
        str(out),
    ]
    try:
        done = run_group(cmd, max(left_s, 30.0), cwd=ROOT, env=ctx.env())
    except subprocess.TimeoutExpired:
        return f"FAILED: reproduce.py ran past the part's time ({left_s:.0f} s): give it a longer --part-budget-s"
    if done.returncode != 0 or not out.is_file():
        return f"FAILED: reproduce.py ended {done.returncode}: {done.stderr[-800:]}"
    lines = [ln for ln in done.stdout.splitlines() if ln.startswith("in the judged regime")]
    said = "reproduce.py: " + (lines[-1] if lines else "no kernels")
    kernels = json.loads(out.read_text())["kernels"]
    apart = [k for k in kernels if k["agrees"] is False]
    if not apart:
        return said
    figures = ", ".join(f"{k['op']} (banked {_claimed(k)}, {_looped(k)})" for k in apart)
    banked_on = ctx.machine_of("optimize")
    # a banked claim this loop does not reproduce is what the GPU user would be told wrongly; on the
    # dry run's CPU (5 rounds, a shared machine) it is noted, not failed, and a bank filled on
    # another GPU (a later loan's) is not this one's to judge
    if ctx.dry or banked_on != ctx.machine:
        where = "" if ctx.dry else f" (banked on {banked_on or 'an unnamed machine'}, reproduced on {ctx.machine})"
        return f"{said}; not reproduced{where}: {figures}"
    return f"FAILED: {said}; not reproduced: {figures}"
