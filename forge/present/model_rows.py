"""A model-level run as both front ends show it: the classes and why each was or was not
optimized, its ops (the instances each stands for, what each cost and bought), the four-way
timing's rows, and one line that sums the run up."""

from __future__ import annotations

from typing import TYPE_CHECKING

from forge.core.acceptance import null_bar
from forge.core.model_records import FourWay, TrainingProof
from forge.core.timing_records import PairedRatio
from forge.present.formats import fmt_seconds, fmt_times

if TYPE_CHECKING:  # the run itself loads torch and the profiler: not at a front end's start-up
    from forge.harness import ModelRunResult
    from forge.harness.model_run.searches import CarvedOp

CLASS_COLUMNS = ("class", "share", "", "why")
OP_COLUMNS = (
    "op",
    "share",
    "runs on",
    "kernel",
    "x eager",
    "x compile",
    "model gain (Amdahl)",
    "search",
    "checks",
    "tokens",
)
FOUR_WAY_COLUMNS = ("regime", "eager", "kernelized", "torch.compile", "kernelized+compile", "vs compile", "nulls")


def ratio_text(r: PairedRatio | None) -> str:
    return f"{r.median:.2f}x ({r.low:.2f}-{r.high:.2f})" if r is not None else "—"


def class_cells(result: ModelRunResult) -> list[tuple[str, str, str, str]]:
    return [
        (c.cls.key, f"{c.cls.share:.1%}", "optimized" if c.chosen else "left out", c.reason) for c in result.choices
    ]


def op_runs_on(op: CarvedOp) -> str:
    """The instances its kernel runs on, of those the op stands for: "12 of 12", "7 of 8" (the
    kernel failed on one, which got an op of its own); "8" before any check."""
    n = len(op.group.members)
    if op.instances is None:
        return f"{n}" + (f" (from {op.split_from})" if op.split_from else "")
    return f"{len(op.runs_on)} of {n}"


def op_cells(op: CarvedOp) -> tuple[str, ...]:
    """One op of a model run: its share, the instances its kernel runs on, its kernel and
    speedups, the model gain Amdahl expects from it (over those instances), and what it cost:
    its session, its kernel's checks on the other instances, its tokens."""
    r, checked, gain = op.result, op.instances, op.model_gain
    accepted = r is not None and r.accepted
    only = " eager only" if accepted and r is not None and r.eager_only else ""
    checks = f"{checked.verifications}: {fmt_seconds(checked.seconds)}" if checked and checked.verifications else "—"
    return (
        op.group.name,
        f"{op.group.share:.1%}",
        op_runs_on(op),
        str(r.kernel_id) if r is not None and accepted else "none",
        fmt_times(op.speedup_vs_eager),
        fmt_times(r.speedup_vs_compile if r is not None and accepted else None) + only,
        f"{gain:.3f}x" if gain else "—",
        fmt_seconds(r.seconds) if r is not None and r.seconds is not None else "—",
        checks,
        f"{r.tokens:,}" if r is not None and r.tokens else "—",
    )


def four_way_cells(t: FourWay) -> tuple[str, ...]:
    def way(ms: float | None, r: PairedRatio | None) -> str:
        return f"{ms:.3f} ms  {ratio_text(r)}" if ms is not None else "—"

    return (
        f"{t.regime} ({t.rounds} rounds)",
        f"{t.eager_ms:.3f} ms",
        way(t.kernelized_ms, t.kernelized_vs_eager),
        way(t.compiled_ms, t.compiled_vs_eager),
        way(t.kernelized_compiled_ms, t.kernelized_compiled_vs_eager),
        ratio_text(t.kernelized_compiled_vs_compiled),
        f"{ratio_text(t.eager_null)} / {ratio_text(t.compiled_null)}",
    )


def model_line(result: ModelRunResult) -> str:
    """ "decoder.py: 1 of 3 ops banked, verified on 4 of their 6 instances; outputs match; warm:
    kernelized 1.02x eager (0.98-1.06), kernelized+compiled 1.00x compile (0.97-1.03)"."""
    banked = sum(1 for o in result.ops if o.result is not None and o.result.accepted)
    line = f"{result.model}: {banked} of {len(result.ops)} ops banked"
    instances = {p for o in result.ops if o.split_from is None for p in o.group.paths}
    runs_on = {p for o in result.ops for p in o.runs_on}
    if runs_on:
        line += f", verified on {len(runs_on)} of their {len(instances)} instances"
    proof = result.proof
    if proof is None:
        return f"{line}; not proven: {result.proof_error}"
    if not proof.outputs_match:
        return f"{line}; the kernelized model's outputs DIFFER: {proof.detail}"
    line += "; outputs match"
    if proof.timings:
        t = proof.timings[0]
        line += f"; {t.regime}: kernelized {_against(t.kernelized_vs_eager, t.eager_null)} eager"
        if t.kernelized_compiled_vs_compiled is not None:
            line += f", kernelized+compiled {_against(t.kernelized_compiled_vs_compiled, t.compiled_null)} compile"
    return line + training_line(proof.training)


def training_line(proof: TrainingProof | None) -> str:
    """ "; training step: gradients match, warm: kernelized 1.10x eager (1.02-1.19)" (empty
    without a training proof)."""
    if proof is None:
        return ""
    if not proof.gradients_match:
        return f"; training step: the kernelized model's outputs or gradients DIFFER: {proof.detail}"
    ran = sum(u.kernel_calls for u in proof.ops)
    line = f"; training step: gradients match ({ran} training kernel call(s))"
    if proof.timings:
        t = proof.timings[0]
        line += f", {t.regime}: kernelized {_against(t.kernelized_vs_eager, t.eager_null)} eager"
    return line


def _against(r: PairedRatio | None, null: PairedRatio | None) -> str:
    """The ratio, and "within the noise" when its interval does not clear what the null reads."""
    if r is None:
        return "—"
    bar = null_bar(null)
    clear = r.low > bar or r.high < 1.0 / bar
    return ratio_text(r) + ("" if clear else " (within the noise)")
