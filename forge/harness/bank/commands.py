"""What a front end does with the bank: list, show, export, import, re-verify and remove kernels,
and list, show, export (as Python) and remove parallel plans.
Each call opens the bank it is given (default: the per-user bank), migrating an older one, and
closes it; a bank that does not exist is an error (``BankError``) except for an import into it.
"""

from __future__ import annotations

import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from sqlalchemy import Engine

from forge.core.acceptance import TrainingStanding, training_standing
from forge.core.errors import BankError
from forge.core.paths import BankLocation
from forge.core.settings import ForgeSettings
from forge.core.statuses import KernelStatus
from forge.core.verdict import Verdict
from forge.db import (
    KernelDetail,
    KernelSummary,
    PlanDetail,
    PlanSummary,
    bank_to_import,
    copy_kernels,
    export_bank,
    kernel_detail,
    list_kernels,
    list_plans,
    open_bank,
    plan_detail,
    remove_kernel,
    remove_plan,
    set_status,
)
from forge.kernelbank.plan_export import plan_module
from forge.verifier import verify


def bank_list(bank: BankLocation | None, op: str | None = None) -> list[KernelSummary]:
    with open_bank(bank) as engine:
        return list_kernels(engine, op)


def bank_plans(bank: BankLocation | None, op: str | None = None) -> list[PlanSummary]:
    """The bank's parallel plans (``list`` shows them beside its kernels)."""
    with open_bank(bank) as engine:
        return list_plans(engine, op)


def bank_show_plan(bank: BankLocation | None, plan_id: int) -> PlanDetail:
    with open_bank(bank) as engine:
        return plan_detail(engine, plan_id)


def bank_remove_plan(bank: BankLocation | None, plan_id: int) -> None:
    with open_bank(bank) as engine:
        remove_plan(engine, plan_id)


def bank_export_plan(bank: BankLocation | None, plan_id: int, out: Path) -> None:
    """Plan ``plan_id`` as a Python file at ``out`` that applies it with plain torch.distributed."""
    if out.exists():
        raise BankError(f"{str(out)!r} already exists; choose a new file name")
    if out.suffix != ".py":
        raise BankError(f"{str(out)!r}: a plan is exported as Python; name the file *.py")
    d = bank_show_plan(bank, plan_id)
    s = d.summary
    measured = f"measured {s.step_ms:.3g} ms a step" if s.step_ms is not None else "predicted only, never measured"
    header = (
        f"Parallel plan {s.id} for {s.op} (mesh dp x tp = {s.mesh}, {s.world_size} ranks, {s.mode}), exported from "
        f"a forge bank.\nVerified on {s.device} ranks: outputs, gradients and a step equal the unsharded model's; "
        f"{measured}.\nModel structure {d.structure_hash[:16]}; {d.plan.note}"
    )
    out.write_text(plan_module(d.plan, header))


def bank_show(bank: BankLocation | None, kernel_id: int) -> KernelDetail:
    with open_bank(bank) as engine:
        return kernel_detail(engine, kernel_id)


def bank_export(bank: BankLocation | None, out: Path, ops: list[str] | None = None) -> int:
    """A standalone bank at ``out`` with the given ops' kernels (all when None); returns how many."""
    with open_bank(bank) as engine:
        return export_bank(engine, out, ops)


def bank_import(bank: BankLocation | None, path: Path) -> int:
    """Merge the kernels of the bank file at ``path`` (left as it is) into ``bank``; returns how many.
    The file is checked before ``bank`` is opened (or created)."""
    with bank_to_import(path) as source, open_bank(bank, must_exist=False) as engine:
        return copy_kernels(source, engine)


def bank_remove(bank: BankLocation | None, kernel_id: int) -> None:
    with open_bank(bank) as engine:
        remove_kernel(engine, kernel_id)


@dataclass(frozen=True)
class Reverified:
    kernel_id: int
    verdict: Verdict  # the verification recorded (for inference alone where the backward failed)
    training: TrainingStanding | None = None  # verified for training: its standing under autograd now


def bank_reverify(
    bank: BankLocation | None,
    kernel_id: int | None,
    settings: ForgeSettings,
    starting: Callable[[int], None] | None = None,
    train: bool = False,
) -> list[Reverified]:
    """Verify one kernel (or every kernel) again on this machine, recording each outcome: a kernel
    that fails, or whose reference changed since it was saved, gets status ``bad``. ``starting``
    is told each kernel's id before its verification. A kernel verified for training is verified
    for training again, and with ``train`` every kernel is. One whose backward alone fails stays
    in use for inference: it is verified again without gradients and that evidence recorded."""
    with open_bank(bank) as engine:
        ids = [kernel_id] if kernel_id is not None else [k.id for k in list_kernels(engine)]
        out = []
        for i in ids:
            if starting is not None:
                starting(i)
            out.append(_reverify(engine, i, settings, train))
        return out


def _reverify(engine: Engine, kernel_id: int, settings: ForgeSettings, train: bool) -> Reverified:
    k = kernel_detail(engine, kernel_id)
    trained = train or any(c.name == "gradients" for c in k.evidence.checks)
    verdict = _verify_entry(k, settings.model_copy(update={"verify_gradients": True}) if trained else settings)
    training = training_standing(verdict) if trained else None
    if training is not None and k.summary.training_by_model is not None:
        training = k.summary.training_by_model  # a model's training step it slowed: kept (set_status)
    if trained and _backward_alone_failed(verdict):
        verdict = _verify_entry(k, settings)  # its inference evidence, without the failed standing
    same_reference = verdict.op_hash == k.op_hash
    if not same_reference:
        verdict.warnings.append("the reference changed since this kernel was saved")
    status = KernelStatus.ACTIVE if verdict.passed and same_reference else KernelStatus.BAD
    set_status(engine, kernel_id, status, evidence=verdict if verdict.passed else None)
    return Reverified(kernel_id, verdict, training)


def _verify_entry(k: KernelDetail, settings: ForgeSettings) -> Verdict:
    with tempfile.TemporaryDirectory(prefix="forge-reverify-") as tmp:
        op_path = Path(tmp) / f"{k.op_name}.py"
        cand_path = Path(tmp) / f"kernel_{k.summary.id}.py"
        op_path.write_text(k.op_source)
        cand_path.write_text(k.source)
        return verify(op_path, cand_path, settings)


def _backward_alone_failed(verdict: Verdict) -> bool:
    """The gradient check failed and every other check passed (a kernel without a backward, or
    with a wrong one): it is still right for inference."""
    failed = [c.name for c in verdict.checks if not c.passed]
    return not verdict.passed and failed == ["gradients"]
