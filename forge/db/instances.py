"""The instances of a model a carved op's kernel was verified on (``core.instance_checks``):
written by a model-level run once it has checked them, read by ``forge bank show`` and copied
with the kernel; the runtime reads them with its own driver (``forge.bank_schema``)."""

from __future__ import annotations

from sqlalchemy import Engine, select

from forge.core.carved_ops import InstanceOutcome
from forge.core.errors import BankError
from forge.core.instance_checks import InstanceCheck
from forge.db.engine import session_factory
from forge.db.models import KernelInstanceRow, KernelRow


def record_instances(engine: Engine, kernel_id: int, checks: list[InstanceCheck]) -> None:
    """Keep ``checks`` for the kernel, each replacing an earlier one for the same path."""
    with session_factory(engine).begin() as db:
        kernel = db.get(KernelRow, kernel_id)
        if kernel is None:
            raise BankError(f"no kernel with id {kernel_id} in this bank; `forge bank list` shows the ids")
        held = {row.path: row for row in kernel.instances}
        for check in checks:
            row = held.get(check.path)
            if row is None:
                row = held[check.path] = KernelInstanceRow(path=check.path)
                kernel.instances.append(row)
            row.config, row.outcome, row.detail, row.seconds = (
                check.config,
                str(check.outcome),
                check.detail,
                check.seconds,
            )


def kernel_instances(engine: Engine, kernel_id: int) -> list[InstanceCheck]:
    """The instances the kernel was checked on, in the order they were recorded ([] for a kernel
    of an op not carved from a model)."""
    with session_factory(engine)() as db:
        rows = db.scalars(
            select(KernelInstanceRow).where(KernelInstanceRow.kernel_id == kernel_id).order_by(KernelInstanceRow.id)
        )
        return [instance_check(row) for row in rows]


def instance_check(row: KernelInstanceRow) -> InstanceCheck:
    try:
        outcome = InstanceOutcome(row.outcome)
    except ValueError as exc:
        raise BankError(
            f"kernel {row.kernel_id}: instance {row.path!r} has an unknown outcome {row.outcome!r}"
        ) from exc
    return InstanceCheck(
        path=row.path, config=row.config, outcome=outcome, detail=row.detail or "", seconds=row.seconds or 0.0
    )


def copied_instances(kernel: KernelRow) -> list[KernelInstanceRow]:
    """A kernel's instance rows for its copy in another bank."""
    keys = ("path", "config", "outcome", "detail", "seconds", "created_at")
    return [KernelInstanceRow(**{k: getattr(row, k) for k in keys}) for row in kernel.instances]
