"""The GPU suite's model part: ``forge optimize MODEL --modules --train`` on the shipped models
(profile, choose the hot classes, carve them out, optimize them for training, prove the kernelized
model), and the proof's figures as forge measured them: eager, kernelized, torch.compile,
kernelized and compiled, with the nulls beside them, and the training step (gradients compared,
steps timed). Model by model, resumable."""

from __future__ import annotations

import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

from benchmarks.gpu_suite.archive import remove_bank
from benchmarks.gpu_suite.part import Context, PartResult, Table, Walk, last_json, rows_state, saved_rows
from benchmarks.support.paths import ROOT

SHIPPED_MODELS = (ROOT / "examples" / "models" / "decoder.py", ROOT / "examples" / "models" / "cnn_block.py")
DRY_MODEL = ROOT / "tests" / "model_probe" / "models" / "normnet.py"  # two layers: the dry run's minute
MIN_MODEL_S = 300.0  # a model is started only with this much of the part's time left
AFTER_SESSIONS_S = 150.0  # kept back from the sessions' time limit for the profile and the proof


@dataclass
class ModelRow:
    """One model's line: how its run ended, what it optimized, and the proof's figures (warm)."""

    model: str
    status: str  # proven (outputs match), or what went wrong
    forward: str = "-"  # eager's forward, and the device
    optimized: str = "-"  # each chosen class's op: its share, and x eager where a kernel was banked
    instances: str = "-"  # the model's instances kernelize swapped in the proof
    kernelized: str = "-"  # x eager, 95% interval (the judged regime of the proof: warm)
    compiled: str = "-"
    both: str = "-"  # kernelized and compiled, x eager
    vs_compile: str = "-"  # kernelized and compiled over compiled
    nulls: str = "-"  # what two runs of the original read apart: eager, compiled
    training: str = "-"  # the training step: gradients, training kernel calls, x eager (warm)
    banked_and_ran: bool = False

    COLUMNS: ClassVar[tuple[str, ...]] = (
        "model",
        "status",
        "eager forward",
        "classes optimized (share, x eager)",
        "instances kernelized",
        "kernelized x eager",
        "compile x eager",
        "kernelized+compile x eager",
        "vs compile",
        "nulls (eager, compile)",
        "training step",
    )

    def cells(self) -> list[str]:
        return [
            self.model,
            self.status,
            self.forward,
            self.optimized,
            self.instances,
            self.kernelized,
            self.compiled,
            self.both,
            self.vs_compile,
            self.nulls,
            self.training,
        ]


def _table(rows: dict[str, ModelRow]) -> Table:
    title = "forge optimize MODEL --modules (built-in agent), the kernelized model proven and timed (warm)"
    return Table(title, list(ModelRow.COLUMNS), [r.cells() for r in rows.values()])


def model_part(ctx: Context) -> PartResult:
    """Each shipped model (a dry run: a two-layer test model, one round) through the model-level
    run into its own bank; passes when every model is proven (its kernelized outputs match the
    original's) and at least one ran a banked kernel in place (a dry run's one round on a tiny
    model may bank none: there, the proof is what is checked)."""
    models = [DRY_MODEL] if ctx.dry else list(SHIPPED_MODELS)
    rows = saved_rows(ctx, ModelRow)
    cut = Walk("model", models, lambda m, left, whole: _one_model(ctx, m, left, whole), _table, MIN_MODEL_S).run(
        ctx, rows
    )
    if cut is not None:
        return cut
    proven = sum(r.status.startswith("proven") for r in rows.values())
    ran = sum(r.banked_and_ran for r in rows.values())
    ok = proven == len(rows) and (ran > 0 or ctx.dry)
    summary = f"{proven} of {len(rows)} models proven (outputs match), {ran} with a banked kernel running in place"
    return PartResult("model", "passed" if ok else "failed", summary, tables=[_table(rows)], state=rows_state(rows))


def _one_model(ctx: Context, model: Path, left_s: float, whole: bool) -> ModelRow | None:
    """The model's run; None when the part's time ran out on a model started with less than all of it."""
    bank = ctx.work / f"model_{model.stem}.db"
    remove_bank(bank)  # a model cut off earlier starts again in a fresh bank
    args = ["optimize", str(model), "--modules", "--train", "--bank", str(bank), "--json"]
    args += ["--ops-dir", str(ctx.work / "forge_ops" / model.stem)]
    if ctx.dry:
        args += ["--rounds", "1", "--prove-rounds", "4"]
    else:
        args += ["--time-limit", f"{max(left_s - AFTER_SESSIONS_S, 60.0):.0f}", "--prove-rounds", "15"]
    try:
        done = ctx.forge(*args, timeout=1200.0 if ctx.dry else left_s)
    except subprocess.TimeoutExpired:
        return ModelRow(model.name, f"timed out after {left_s:.0f} s") if whole else None
    data = (last_json(done.stdout) or {}).get("model")
    if not isinstance(data, dict):
        return ModelRow(model.name, f"exit {done.returncode}, no result: {done.stderr.strip()[-300:]}")
    return _row(model.name, data, done.returncode)


def _ratio(r: dict[str, Any] | None) -> str:
    return f"{r['median']:.2f}x ({r['low']:.2f}-{r['high']:.2f})" if r else "-"


def _row(name: str, m: dict[str, Any], code: int) -> ModelRow:
    optimized = ", ".join(
        f"{o['class']} {o['share']:.0%} " + (f"{o['speedup_vs_eager']:.2f}x" if o["accepted"] else "no kernel")
        for o in m["ops"]
    )
    row = ModelRow(name, "", f"{m['forward_ms']:.3f} ms ({m['device']})", optimized or "none chosen")
    proof = m.get("proof")
    if proof is None:
        row.status = f"not proven: {str(m.get('proof_error'))[:200]}"
        return row
    row.status = "proven" if proof["outputs_match"] else f"outputs DIFFER: {str(proof.get('detail'))[:200]}"
    row.instances = str(proof["kernelized"])
    row.banked_and_ran = code == 0
    warm = next((t for t in proof["timings"] if t["regime"] == "warm"), None) or {}
    row.kernelized, row.compiled = _ratio(warm.get("kernelized_vs_eager")), _ratio(warm.get("compiled_vs_eager"))
    row.both, row.vs_compile = (
        _ratio(warm.get("kernelized_compiled_vs_eager")),
        _ratio(warm.get("kernelized_compiled_vs_compiled")),
    )
    row.nulls = f"{_ratio(warm.get('eager_null'))}, {_ratio(warm.get('compiled_null'))}"
    if proof.get("compile_error"):
        row.status += f"; torch.compile: {str(proof['compile_error'])[:120]}"
    row.training = _training(proof.get("training"))
    if proof.get("training") and not proof["training"]["gradients_match"]:
        row.status = "training step: gradients DIFFER"
    return row


def _training(t: dict[str, Any] | None) -> str:
    if not t:
        return "not proven"
    if not t["gradients_match"]:
        return f"gradients DIFFER: {str(t.get('detail'))[:160]}"
    calls = sum(u["kernel_calls"] for u in t["ops"])
    warm = next((w for w in t["timings"] if w["regime"] == "warm"), None) or {}
    return f"gradients match, {calls} training kernel call(s), {_ratio(warm.get('kernelized_vs_eager'))} eager"
