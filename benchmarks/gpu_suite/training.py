"""The GPU suite's training part: ``forge optimize --train`` on this device (the built-in agent's
kernels with their backward, verified against the reference's autograd, training steps timed), then
each banked kernel as a user gets it in a training step: did it run (no fallback), do its outputs
and gradients equal the reference's, and its step timed beside eager's in one plain loop. The
shipped training example also runs its training loop (``examples/training/train_loop.py``) on the
device: losses equal eager's at every step, every call ran the kernel. Op by op, resumable."""

from __future__ import annotations

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

EXAMPLE = ROOT / "examples" / "training"
# losses, norms and activations whose backward is worth a kernel; on a GPU, after the example
CATALOG_TRAINING = ("cross_entropy.py", "huber_loss.py", "layernorm_written.py", "gelu_tanh_written.py")
MIN_OP_S = 240.0  # an op is started only with this much of the part's time left
OP_LIMIT_S = 150.0  # each op's --time-limit at most
CHECK_S = 150.0  # kept back from an op's session for its training check and the example's loop
GRAD_TOLERANCE = 1e-3  # the largest difference allowed, relative to the largest value of each tensor
STEP_ROUNDS = 20


@dataclass
class TrainRow:
    """One op's line: what its --train session banked, and the banked kernel in a training step."""

    op: str
    status: str  # accepted, or the session's status, or how forge optimize ended
    forward: str = "-"  # the banked claim: forward x eager (judged regime)
    step_claim: str = "-"  # the banked training step: x eager / x compile
    standing: str = "-"  # used under autograd, or why not
    ran: str = "-"  # the kernel in a training step: calls, fallbacks
    grads: str = "-"  # largest relative difference of outputs and gradients from the reference's
    eager_step_ms: float | None = None
    kernel_step_ms: float | None = None
    loop: str = "-"  # the example's training loop: losses, calls, step times
    used: bool = False  # its standing: used under autograd (else the reference runs in training)
    held: bool = False

    COLUMNS: ClassVar[tuple[str, ...]] = (
        "op",
        "status",
        "forward x eager (banked)",
        "training step x eager / x compile (banked)",
        "used under autograd",
        "kernel in a training step",
        "outputs and gradients",
        "eager step ms",
        "kernel step ms",
        "x eager",
        "training loop",
    )

    def cells(self) -> list[str]:
        over = times(self.eager_step_ms / self.kernel_step_ms) if self.eager_step_ms and self.kernel_step_ms else "-"
        return [
            self.op,
            self.status,
            self.forward,
            self.step_claim,
            self.standing,
            self.ran,
            self.grads,
            ms(self.eager_step_ms),
            ms(self.kernel_step_ms),
            over,
            self.loop,
        ]


def _table(rows: dict[str, TrainRow]) -> Table:
    title = "forge optimize --train (built-in agent), then each banked kernel in a training step"
    return Table(title, list(TrainRow.COLUMNS), [r.cells() for r in rows.values()])


def training_part(ctx: Context) -> PartResult:
    """The shipped training example (a dry run: it alone, one round), then some of
    the catalog's ops, with --train into one bank. Passes when the example's kernel is banked, used
    under autograd and its loop holds, and every banked kernel ran in a training step with the
    reference's outputs and gradients."""
    bank = ctx.work / "training.db"
    example = _example_copy(ctx)
    ops = [example / "rmsnorm_op.py"] + ([] if ctx.dry else [CATALOG / name for name in CATALOG_TRAINING])
    rows = saved_rows(ctx, TrainRow)
    walk = Walk("training", ops, lambda op, left, _whole: _one_op(ctx, op, bank, left), _table, MIN_OP_S)
    cut = walk.run(ctx, rows)
    if cut is not None:
        return cut
    first = rows.get("rmsnorm_op")
    banked = [r for r in rows.values() if r.status == "accepted"]
    held = sum(r.held for r in banked)
    ok = first is not None and first.held and held == len(banked)
    summary = (
        f"{len(banked)} of {len(rows)} ops banked, {sum(r.used for r in banked)} used under autograd; {held} of "
        f"them held in a training step (the kernel, or the reference where not used, ran with the reference's "
        f"gradients); the example's loop: {first.loop if first else 'not run'}"
    )
    return PartResult("training", "passed" if ok else "failed", summary, tables=[_table(rows)], state=rows_state(rows))


def _example_copy(ctx: Context) -> Path:
    """The shipped training example, copied (its train_loop.py reads the bank and the op beside it)."""
    copy = ctx.work / "training_example"
    copy.mkdir(parents=True, exist_ok=True)
    for path in EXAMPLE.glob("*.py"):
        (copy / path.name).write_text(path.read_text())
    return copy


def _one_op(ctx: Context, op: Path, bank: Path, left_s: float) -> TrainRow | None:
    """The op's session and its checks; None when it ran out of the part's time having had less
    than its whole share."""
    limit = min(OP_LIMIT_S, left_s - CHECK_S)
    args = ["optimize", str(op), "--train", "--bank", str(bank), "--json"]
    args += ["--rounds", "1"] if ctx.dry else ["--rounds", "2", "--time-limit", f"{limit:.0f}"]
    try:
        done = ctx.forge(*args, timeout=1800.0 if ctx.dry else limit + 60.0, path=op.parent)
    except subprocess.TimeoutExpired:
        return TrainRow(op.stem, f"timed out after {limit + 60:.0f} s") if limit >= OP_LIMIT_S else None
    result = ((last_json(done.stdout) or {}).get("problems") or [{}])[0]
    if not result.get("accepted"):
        status = str(result.get("status") or f"exit {done.returncode}: {done.stderr.strip()[-200:]}")
        return TrainRow(op.stem, status, standing=str(result.get("reason") or "-")[:200])
    row = _banked(op.stem, bank, int(result["kernel_id"]))
    try:
        _in_a_training_step(ctx, op, bank, str(result["problem"]), row)
    except Exception as exc:  # the loaded kernel breaking under autograd is the op's finding
        row.ran = f"NO: the training step raised {type(exc).__name__}: {str(exc)[:160]}"
    if op.stem == "rmsnorm_op":
        row.loop, loop_ok = _training_loop(ctx, op.parent, bank)
        row.held = row.held and loop_ok and row.standing.startswith("used")
    return row


def _banked(name: str, bank: Path, kernel_id: int) -> TrainRow:
    """The row with what the bank holds for the kernel: its claims and its standing."""
    from forge.core.acceptance import training_standing
    from forge.db.engine import open_for_writing
    from forge.db.kernels import kernel_detail

    v = kernel_detail(open_for_writing(bank), kernel_id).evidence
    forward = v.timing_stats.headline_pairs()[0]
    step = v.training_step.headline() if v.training_step is not None else (None, None)
    standing = training_standing(v)

    def ratio(r: Any) -> str:
        return f"{r.median:.2f}x ({r.low:.2f}-{r.high:.2f})" if r is not None else "-"

    return TrainRow(
        name,
        "accepted",
        forward=f"{ratio(forward)} {v.timing_stats.regime or 'cold'}",
        step_claim=f"{ratio(step[0])} / {ratio(step[1])}",
        standing=("used: " if standing.used else "not used: ") + standing.why[:160],
        used=standing.used,
    )


def _in_a_training_step(ctx: Context, op: Path, bank_path: Path, name: str, row: TrainRow) -> None:
    """The kernel as ``bank.load`` gives it, in a training step on the op's inputs (forward with the
    inputs requiring grad, backward of fixed output gradients) beside the reference's."""
    import forge.kernelbank as kb
    from forge.core.problem import load_problem

    module = load_problem(op).module  # as forge loads it: the example's op imports its layers
    init = module.get_init_inputs()
    torch.manual_seed(0)
    reference = module.Model(*init).to(ctx.device)
    bank = kb.open(bank_path)
    kernel = bank.load(name, *init).to(ctx.device)
    kernel.load_state_dict(reference.state_dict())
    inputs = [x.to(ctx.device) if isinstance(x, torch.Tensor) else x for x in module.get_inputs()]
    with torch.no_grad():
        out = reference(*inputs)
    seed = torch.Generator().manual_seed(3)
    grad_out = torch.randn(out.shape, generator=seed, dtype=out.dtype).to(out.device)  # made once, outside the timing
    with bank.watch() as seen:
        got = _step(kernel, inputs, grad_out)
    want = _step(reference, inputs, grad_out)
    usage = seen.usage(name)
    row.ran = f"{usage.kernel_calls} kernel call(s), {usage.fallbacks} fallback(s)"
    worst = max(_relative(a, b) for a, b in zip(got, want, strict=True))
    row.grads = f"{'equal' if worst <= GRAD_TOLERANCE else 'DIFFER'}: {worst:.1e} ({len(got)} tensors)"
    if not row.used:  # where gradients are needed the reference runs, as the kernel's standing says
        row.ran += " (the reference runs under autograd, as its standing says)"
        row.held = usage.calls > 0 and usage.kernel_calls == 0 and worst <= GRAD_TOLERANCE
        return
    row.held = usage.kernel_calls > 0 and usage.fallbacks == 0 and worst <= GRAD_TOLERANCE
    row.eager_step_ms, row.kernel_step_ms = _step_times(ctx, {"eager": reference, "kernel": kernel}, inputs, grad_out)


def _step(model: torch.nn.Module, inputs: list[Any], grad_out: torch.Tensor) -> list[torch.Tensor]:
    """One training step, backward of ``grad_out``: the output, then the gradients of the inputs
    and parameters."""
    leaves = [
        x.detach().clone().requires_grad_(x.is_floating_point()) if isinstance(x, torch.Tensor) else x for x in inputs
    ]
    for p in model.parameters():
        p.grad = None
    out = model(*leaves)
    out.backward(grad_out)
    grads = [x.grad for x in leaves if isinstance(x, torch.Tensor) and x.grad is not None]
    return [out.detach(), *grads, *(p.grad for p in model.parameters() if p.grad is not None)]


def _relative(got: torch.Tensor, want: torch.Tensor) -> float:
    scale = float(want.abs().max()) or 1.0
    return float((got.double() - want.double()).abs().max()) / scale


def _step_times(
    ctx: Context, models: dict[str, torch.nn.Module], inputs: list[Any], grad_out: torch.Tensor
) -> tuple[float, float]:
    """Each model's training step, medians (ms) of rounds taken in rotating order, the device's work
    waited for (a dry run's: 3 rounds)."""
    taken: dict[str, list[float]] = {name: [] for name in models}
    names = list(models)
    for k in range(3 if ctx.dry else STEP_ROUNDS):
        for name in names[k % 2 :] + names[: k % 2]:
            if ctx.device == "cuda":
                torch.cuda.synchronize()
            t0 = time.perf_counter()
            _step(models[name], inputs, grad_out)
            if ctx.device == "cuda":
                torch.cuda.synchronize()
            taken[name].append(time.perf_counter() - t0)
    return statistics.median(taken["eager"][1:]) * 1e3, statistics.median(taken["kernel"][1:]) * 1e3


def _training_loop(ctx: Context, example: Path, bank: Path) -> tuple[str, bool]:
    """``train_loop.py`` on this device, in a fresh process: what it said, and whether it held."""
    steps = ["--steps", "6", "--warmup", "2"] if ctx.dry else ["--steps", "30"]
    cmd = [sys.executable, "train_loop.py", str(bank), *steps, "--device", ctx.device, "--json"]
    limit = max(ctx.left(), 60.0)
    try:
        done = run_group(cmd, limit, cwd=example, env=ctx.env())
    except subprocess.TimeoutExpired:
        return f"NO: train_loop.py ran past {limit:.0f} s (what was left of the part's time)", False
    data = last_json(done.stdout.strip().splitlines()[-1] if done.stdout.strip() else "")
    if data is None:
        return f"NO: train_loop.py ended {done.returncode}: {done.stderr.strip()[-200:]}", False
    eager = data["times"]["eager"]["median_ms"]
    kernelized, compiled = (eager / data["times"][k]["median_ms"] for k in ("kernelized", "compiled"))
    worst = data["kernelized_max_rel_diff"]
    said = (
        f"{data['steps']} steps, losses {'equal' if worst <= 1e-4 else 'DIFFER'} ({worst:.1e}), "
        f"{data['kernel_calls']} kernel calls, {data['fallbacks']} fallbacks; step {eager:.2f} ms eager, "
        f"kernelized {kernelized:.2f}x, compiled {compiled:.2f}x"
    )
    return said, bool(data["ok"])
