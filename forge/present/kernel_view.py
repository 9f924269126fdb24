"""A bank entry in full, as ``forge bank show`` prints it and the TUI's bank screen shows it."""

from __future__ import annotations

from typing import Any

from forge.core.acceptance import null_bar, training_standing
from forge.core.verdict import Verdict
from forge.harness import KernelDetail


def binds_text(v: Verdict) -> str:
    """How kernelize runs the entry on existing instances of the user's class."""
    if v.binding is None:
        return "not checked (saved by an older forge; `forge bank verify` checks it)"
    if v.binding.mode == "none":
        return f"no: {v.binding.reason}"
    return f"{v.binding.mode}: {v.binding.reason}"


def null_text(v: Verdict) -> str:
    """The null control its confirmation measured, and the bar it set."""
    null = v.timing_stats.null_eager
    if null is None:
        return "none (banked without one: an older forge, null_control off, or not confirmed)"
    return (
        f"the reference against itself {null.median:.2f}x ({null.low:.2f}-{null.high:.2f}, {null.pairs} pairs); "
        f"the speedup's interval had to clear {null_bar(null):.2f}x"
    )


def compile_text(k: KernelDetail) -> str:
    """Whether kernelize uses it while torch.compile traces the model, and why."""
    standing = k.summary.compile_standing
    if standing is None:
        return "not used: banked before forge judged kernels against torch.compile (`forge bank verify` judges it)"
    return ("used: " if standing.beats else "not used (eager only): ") + standing.why


def _autograd_text(k: KernelDetail) -> str:
    if k.summary.training_by_model is not None:
        return "not used: " + k.summary.training_by_model.why
    standing = training_standing(k.evidence)
    if k.summary.trains and not standing.used:  # stored by a forge that did not time training steps
        return "used: its backward was verified against the reference's autograd (its training step was not timed)"
    return ("used: " if k.summary.trains else "not used: ") + standing.why


def kernel_runs_on(k: KernelDetail) -> str:
    """Which instances kernelize runs it on: those of its model it passed on, or any instance of
    its class (a kernel of an op not carved from a model)."""
    if not k.instances:
        return "any instance of its class configured as the verified one"
    on = [c.path or "the model itself" for c in k.instances if c.outcome.binds]
    off = [f"{c.path} ({c.outcome}: {c.detail})" for c in k.instances if not c.outcome.binds]
    shown = ", ".join(on[:6]) + (f", ... ({len(on)} in all)" if len(on) > 6 else "")
    line = f"the {len(on)} instance(s) of its model it was verified on: {shown}" if on else "none"
    return line + (f"; not on {len(off)}: " + "; ".join(off[:3]) if off else "")


def kernel_details(k: KernelDetail, with_source: bool = False) -> dict[str, Any]:
    """Summary, shapes, per-bucket configs, binding, timing regimes, checks (and the source)."""
    info = {
        **k.summary.to_json(),
        "verified_shapes": k.verified_shapes,
        "configs": [{"bucket": c.bucket, "config": c.config, "timing_ms": c.timing_ms} for c in k.configs],
        "target_class": k.target_class,
        "binds to instances": binds_text(k.evidence),
        "runs on": kernel_runs_on(k),
        "instances": [c.model_dump(mode="json", exclude={"config"}) for c in k.instances],
        "timing regimes": next((c.detail for c in k.evidence.checks if c.name == "regimes"), "cold only (older forge)"),
        "null control": null_text(k.evidence),
        "under torch.compile": compile_text(k),
        "under autograd": _autograd_text(k),
        "reason_checks": [{"name": c.name, "passed": c.passed} for c in k.evidence.checks],
    }
    if with_source:
        info["source"] = k.source
    return info


def evidence_line(k: KernelDetail) -> str:
    passed = sum(1 for c in k.evidence.checks if c.passed)
    return f"{passed}/{len(k.evidence.checks)} checks passed when saved"
