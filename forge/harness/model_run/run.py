"""A model-level run: profile the model, choose its hot classes, carve each out as an op (one per
state and call its instances share), search each op once and check its kernel on every instance
it stands for (``searches``: the runs' limits split by the ops' share of the model's time), then
prove the kernelized model end to end against the original, in eager and under torch.compile."""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch

from forge.agents import AgentKind
from forge.core.errors import UsageError
from forge.core.exit_codes import ExitCode
from forge.core.model_records import ModelProfile, ModelProof
from forge.core.paths import BankLocation, bank_or_default
from forge.core.settings import ForgeSettings
from forge.db import open_for_writing
from forge.harness import events as ev
from forge.harness.model_run.choose import MIN_SHARE, ClassChoice, choose_classes, names_class
from forge.harness.model_run.compile_evidence import demote_slowing_kernels
from forge.harness.model_run.searches import CarvedOp, SearchPlan, carve
from forge.harness.model_run.training_evidence import demote_slowing_training_kernels
from forge.harness.model_run.whole_model import search_parts_then_whole
from forge.harness.runs.control import RunControl
from forge.harness.runs.options import OptimizeOptions
from forge.harness.runs.run import RunResult
from forge.model_probe import ModelRunError, profile_in_process, prove_in_process
from forge.verifier.machine.facts import resolve_device

PROVE_ROUNDS = 30  # rounds per cache regime of the four-way timing


@dataclass(frozen=True)
class ModelChoices:
    """What the user said about the model-level run."""

    include: frozenset[str] = frozenset()  # class names to optimize even if forge would not
    exclude: frozenset[str] = frozenset()
    min_share: float = MIN_SHARE
    ops_dir: Path | None = None  # where the carved op files go (default ./forge_ops/<model>)
    prove_rounds: int = PROVE_ROUNDS


@dataclass
class ModelRunResult:
    model: str
    profile: ModelProfile
    choices: list[ClassChoice]
    ops: list[CarvedOp]
    run: RunResult = field(default_factory=RunResult)
    proof: ModelProof | None = None
    proof_error: str | None = None
    compile_demoted: list[str] = field(default_factory=list)  # kernels this model showed slow compile
    training_demoted: list[str] = field(default_factory=list)  # kernels this model showed slow its training

    def model_json(self) -> dict[str, Any]:
        """The model-level figures (``--json``'s ``model`` key)."""
        return {
            "source": self.model,
            "device": self.profile.device,
            "forward_ms": self.profile.forward_ms,
            "classes": [
                {
                    "class": c.cls.key,
                    "share": c.cls.share,
                    "chosen": c.chosen,
                    "reason": c.reason,
                    "ops": [
                        {"op": o.group.name, "instances": len(o.group.members), "runs_on": len(o.runs_on)}
                        for o in self.ops
                        if o.group.cls.key == c.cls.key
                    ],
                }
                for c in self.choices
            ],
            "ops": [o.to_json() for o in self.ops],
            "proof": self.proof.model_dump(mode="json") if self.proof is not None else None,
            "proof_error": self.proof_error,
            "compile_demoted": self.compile_demoted,
            "training_demoted": self.training_demoted,
        }

    def to_json(self) -> dict[str, Any]:
        return {**self.run.to_json(), "model": self.model_json()}

    @property
    def exit_code(self) -> int:
        """Success: a kernel banked, running in the kernelized model (watched), whose outputs match."""
        if self.run.interrupted:
            return ExitCode.INTERRUPTED
        if self.proof is None or not self.proof.outputs_match:
            return ExitCode.NO_RESULT
        if self.proof.training is not None and not self.proof.training.gradients_match:
            return ExitCode.NO_RESULT
        ran = any(u.kernel_calls for u in self.proof.ops)
        return ExitCode.SUCCESS if ran and any(o.result and o.result.accepted for o in self.ops) else ExitCode.NO_RESULT


def _stage(emit: ev.Emit, model: str, stage: str, detail: str) -> None:
    emit(ev.ModelStage(problem=model, session_id=0, stage=stage, detail=detail))


def optimize_model(
    model: str,
    options: OptimizeOptions | None = None,
    settings: ForgeSettings | None = None,
    choices: ModelChoices | None = None,
    emit: ev.Emit = ev.ignore,
    control: RunControl | None = None,
) -> ModelRunResult:
    """Profile ``model`` (a model file or module:factory), optimize its hot classes, and prove
    the kernelized model. Raises ForgeError (``ModelRunError``: the model's own failure)."""
    options, settings, choices = options or OptimizeOptions(), settings or ForgeSettings(), choices or ModelChoices()
    device = str(resolve_device(settings.device))
    where = bank_or_default(options.bank)
    stop = control.stop_requested if control is not None else None
    stem = Path(model).stem if model.endswith(".py") else model.partition(":")[0].rsplit(".", 1)[-1]
    folder = choices.ops_dir or Path("forge_ops") / stem
    folder.mkdir(parents=True, exist_ok=True)
    kept = folder / ".recorded.pt"  # the calls' fixed tensors, per instance (carve writes each op's own)
    profile = profile_in_process(model, device, stop=stop, recorded=kept)
    _check_names(profile, choices)
    _stage(emit, model, "profiled", f"{profile.forward_ms:.2f} ms a forward, {len(profile.classes)} module classes")
    # the built-in agent's Inductor candidate can run a whole model as one call
    whole = settings.inductor_candidate and options.agents.kind is AgentKind.BUILTIN
    picked = choose_classes(profile, stem, set(choices.include), set(choices.exclude), choices.min_share, whole)
    groups = [g for c in picked if c.chosen for g in c.groups]
    _stage(emit, model, "chosen", ", ".join(f"{c.cls.name} ({c.cls.share:.0%})" for c in picked if c.chosen) or "none")
    recorded = torch.load(kept, weights_only=True) if kept.exists() else {}
    kept.unlink(missing_ok=True)
    plan = SearchPlan(profile, folder, recorded, options, settings, device, emit, control)
    carved = carve(groups, plan)
    result = ModelRunResult(model, profile, picked, carved)
    if carved:
        _stage(emit, model, "carved", f"{len(carved)} op file(s) in {folder}")
        root = next((c for c in picked if c.cls.key == profile.root), None)
        forced = root is not None and names_class(root.cls, set(choices.include))
        searched = search_parts_then_whole(carved, profile.root, forced, plan)
        result.ops, result.run = searched.ops, searched.run
        for op in result.ops:  # the class table says how the model was searched whole, and why
            if root is not None and op.search_note is not None and op.group.cls.key == root.cls.key:
                root.reason = op.search_note
    if result.run.interrupted:
        return result
    ways = "eager, kernelized, compiled, both" + ("; and a training step" if options.train else "")
    _stage(emit, model, "proving", f"the kernelized model against the original; {ways}")
    open_for_writing(where).dispose()  # a bank to read, even when no session ran (nothing chosen)
    _prove(result, where, device, choices.prove_rounds, stop, train=options.train)
    ops = [c.group.name for c in result.ops]
    if result.proof is not None:
        result.compile_demoted = demote_slowing_kernels(result.proof, ops, where, device)
        result.training_demoted = demote_slowing_training_kernels(result.proof, ops, where, device)
    if demoted := result.compile_demoted + result.training_demoted:
        _stage(emit, model, "proving", "again: " + "; ".join(demoted))
        _prove(result, where, device, choices.prove_rounds, stop, train=options.train)
    result.run.interrupted = result.run.interrupted or bool(stop is not None and stop.is_set())
    _stage(emit, model, "proven", _proven(result.proof))
    return result


def _proven(proof: ModelProof | None) -> str:
    if proof is None or not proof.outputs_match:
        return "not proven"
    if proof.training is None:
        return "outputs match"
    return "outputs match; training step: " + ("gradients match" if proof.training.gradients_match else "DIFFERS")


def _check_names(profile: ModelProfile, choices: ModelChoices) -> None:
    """--include and --exclude name classes the model has (UsageError naming those it has)."""
    unknown = sorted(
        n for n in choices.include | choices.exclude if not any(names_class(c, {n}) for c in profile.classes)
    )
    if unknown:
        known = ", ".join(sorted({c.name for c in profile.classes}))
        raise UsageError(f"--include/--exclude {', '.join(unknown)}: no such class in the model (it has: {known})")


def _prove(
    result: ModelRunResult,
    where: BankLocation,
    device: str,
    rounds: int,
    stop: threading.Event | None,
    *,
    train: bool,
) -> None:
    """The proof (with ``train``, of the training step too), or why not."""
    bank = where.libpq_url() if where.is_server else str(where.file())
    try:
        proof = prove_in_process(result.model, bank, device, rounds, stop=stop, train=train)
        result.proof, result.proof_error = proof, None
    except ModelRunError as exc:
        result.proof, result.proof_error = None, str(exc)
