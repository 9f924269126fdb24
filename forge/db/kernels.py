"""Bank entries: saving a verified kernel, listing and reading entries, export, import, removal.

The parent process is the only writer. A kernel's evidence (``core.evidence.Evidence``: its verdict,
its configs, its standings) is stored as JSON and read back into its type here, so nothing above
this module reads the stored JSON by key.
"""

from __future__ import annotations

import contextlib
import shutil
import sqlite3
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from sqlalchemy import Engine, select
from sqlalchemy.orm import Session

from forge.core.acceptance import CompileStanding, TrainingStanding
from forge.core.candidate_config import CandidateConfig
from forge.core.errors import BankError, ForgeError
from forge.core.evidence import Evidence
from forge.core.evidence_keys import EvidenceKey
from forge.core.instance_checks import InstanceCheck
from forge.core.paths import BankLocation
from forge.core.problem import ProblemSource
from forge.core.statuses import KernelStatus
from forge.core.verdict import Verdict
from forge.db.engine import open_for_writing, session_factory
from forge.db.instances import copied_instances, instance_check
from forge.db.models import KernelConfigRow, KernelRow
from forge.db.plans import copy_plans
from forge.db.problems import get_or_create_problem


@dataclass(frozen=True)
class Provenance:
    """Who produced a banked kernel, and the config it is banked with (per shape bucket)."""

    session_id: int | None = None
    attempt_id: int | None = None
    agent: str = "manual"
    model: str | None = None
    cost_usd: float | None = None
    config: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class KernelSummary:
    """One line of ``forge bank list``."""

    id: int
    op: str
    op_hash: str  # its first 12 characters
    backend: str
    device: str
    capability: str | None
    dtype: str
    speedup_vs_eager: float | None
    speedup_vs_compile: float | None
    beats_reference: bool
    # True: timed again after it was chosen; False: banked from its round's figures on a Ctrl-C;
    # None: saved by `forge verify --save`
    confirmed: bool | None
    status: KernelStatus
    agent: str | None
    torch: str
    created_at: str | None
    # Used under torch.compile, and why; None: banked before forge judged that (re-verify it)
    compile_standing: CompileStanding | None = None
    # Its backward verified against the reference's autograd (``forge verify --train``): used where
    # autograd needs gradients
    trains: bool = False
    # Not used there after all: a model-level run found it slows the model's training step
    training_by_model: TrainingStanding | None = None

    @property
    def eager_only(self) -> bool:
        """Worth using in eager alone: under torch.compile the runtime leaves it off."""
        return self.compile_standing is None or not self.compile_standing.beats

    def to_json(self) -> dict[str, Any]:
        standing = self.compile_standing.model_dump() if self.compile_standing is not None else None
        fields = {k: v for k, v in self.__dict__.items() if k != "training_by_model"}  # shown as "under autograd"
        return {**fields, "status": str(self.status), "compile_standing": standing}


@dataclass(frozen=True)
class BucketConfig:
    bucket: list[Any]  # input shapes, e.g. [[4096, 1024]]
    config: dict[str, Any]
    timing_ms: float | None


@dataclass(frozen=True)
class KernelDetail:
    """One entry in full: what ``forge bank show`` prints, and what re-verifying it needs."""

    summary: KernelSummary
    source: str
    evidence: Verdict
    verified_shapes: list[Any]
    configs: list[BucketConfig]
    target_class: str | None
    op_name: str
    op_hash: str
    op_source: str
    # the instances of its model it was checked on (an op carved from a model); [] for any other
    instances: list[InstanceCheck] = field(default_factory=list)


def _evidence(k: KernelRow) -> Evidence:
    try:
        return Evidence.from_json(dict(k.evidence or {}))
    except ValueError as exc:
        raise BankError(f"kernel {k.id}'s stored evidence cannot be read ({exc}); the bank may be damaged") from exc


def _summary(k: KernelRow) -> KernelSummary:
    evidence = _evidence(k)
    return KernelSummary(
        id=k.id,
        op=k.op_name,
        op_hash=k.op_hash[:12],
        backend=k.backend,
        device=k.device_kind,
        capability=k.capability_min,
        dtype=k.dtype,
        speedup_vs_eager=k.speedup_vs_eager,
        speedup_vs_compile=k.speedup_vs_compile,
        beats_reference=k.beats_reference,
        confirmed=evidence.verdict.confirmed,
        status=KernelStatus(k.status),
        agent=k.agent,
        torch=k.torch_version,
        created_at=k.created_at.isoformat() if k.created_at else None,
        compile_standing=evidence.compile_standing,
        trains=evidence.gradients_verified,
        training_by_model=evidence.training_standing,
    )


def _float_dtype(verdict: Verdict) -> str:
    for variant in verdict.inputs:
        for x in variant.inputs:
            if x.dtype.startswith(("float", "bfloat")):
                return x.dtype
    return "float32"


def save_kernel(
    engine: Engine,
    spec: ProblemSource,
    source: str,
    verdict: Verdict,
    provenance: Provenance | None = None,
    config: CandidateConfig | None = None,
) -> int:
    """Store a *passed* verdict's candidate as a bank entry; returns the kernel id."""
    if not verdict.passed:
        raise BankError(f"only passing candidates enter the bank; this one is {str(verdict.status)!r}")
    prov = provenance or Provenance()
    meaningful = verdict.timing_meaningful
    speedup = verdict.speedup_vs_eager
    with session_factory(engine).begin() as db:
        problem = get_or_create_problem(db, spec, verdict.op_hash, verdict.target_class)
        kernel = KernelRow(
            problem_id=problem.id,
            op_name=spec.name,
            op_hash=verdict.op_hash,
            backend=verdict.backend,
            source=source,
            entry_point="ModelNew",
            device_kind=verdict.device,
            capability_min=verdict.capability,
            capability_max=verdict.capability,
            dtype=_float_dtype(verdict),
            verified_shapes=[[x.shape for x in v.inputs] for v in verdict.inputs],
            speedup_vs_eager=speedup if meaningful else None,
            speedup_vs_compile=verdict.speedup_vs_compile if meaningful else None,
            beats_reference=bool(meaningful and speedup is not None and speedup > 1.0),
            evidence=Evidence.of(verdict, config).to_json(),
            session_id=prov.session_id,
            attempt_id=prov.attempt_id,
            agent=prov.agent,
            model=prov.model,
            cost_usd=prov.cost_usd,
            torch_version=verdict.versions.torch,
            triton_version=verdict.versions.triton or None,
        )
        if verdict.inputs and verdict.timings_ms.candidate is not None:
            bucket = [x.shape for x in verdict.inputs[0].inputs]
            kernel.configs.append(
                KernelConfigRow(bucket=bucket, config=dict(prov.config), timing_ms=verdict.timings_ms.candidate)
            )
        db.add(kernel)
        db.flush()
        return int(kernel.id)


def list_kernels(engine: Engine, op: str | None = None) -> list[KernelSummary]:
    with session_factory(engine)() as db:
        q = select(KernelRow).order_by(KernelRow.op_name, KernelRow.id)
        if op:
            q = q.where(KernelRow.op_name == op)
        return [_summary(k) for k in db.scalars(q)]


def _row(db: Session, kernel_id: int) -> KernelRow:
    k = db.get(KernelRow, kernel_id)
    if k is None:
        raise BankError(f"no kernel with id {kernel_id} in this bank; `forge bank list` shows the ids")
    return k


def kernel_detail(engine: Engine, kernel_id: int) -> KernelDetail:
    with session_factory(engine)() as db:
        k = _row(db, kernel_id)
        return KernelDetail(
            summary=_summary(k),
            source=k.source,
            evidence=_evidence(k).verdict,
            verified_shapes=list(k.verified_shapes or []),
            configs=[BucketConfig(c.bucket, dict(c.config or {}), c.timing_ms) for c in k.configs],
            target_class=k.problem.target_class_path,
            op_name=k.problem.name,
            op_hash=k.op_hash,
            op_source=k.problem.source,
            instances=[instance_check(row) for row in k.instances],
        )


def remove_provisional(engine: Engine, session_id: int) -> list[int]:
    """Remove the kernels a session banked without a confirmation (an interrupted session banks its
    round's best that way); its resumed run confirms, and banks what holds up. Returns their ids."""
    with session_factory(engine).begin() as db:
        rows = db.scalars(select(KernelRow).where(KernelRow.session_id == session_id))
        gone = [k for k in rows if _evidence(k).verdict.confirmed is False]
        for k in gone:
            db.delete(k)
        return [int(k.id) for k in gone]


def remove_kernel(engine: Engine, kernel_id: int) -> None:
    with session_factory(engine).begin() as db:
        db.delete(_row(db, kernel_id))


def set_status(engine: Engine, kernel_id: int, status: KernelStatus, evidence: Verdict | None = None) -> None:
    """A re-verification's outcome: the status, and (when it passed) its verdict as the new evidence."""
    with session_factory(engine).begin() as db:
        k = _row(db, kernel_id)
        k.status = str(status)
        if evidence is not None:
            k.evidence = _evidence(k).reverified(evidence).to_json()


def set_compile_standing(engine: Engine, kernel_id: int, standing: CompileStanding) -> None:
    """Whether the runtime uses the kernel under torch.compile, as later evidence found (a model
    it slowed when compiled)."""
    with session_factory(engine).begin() as db:
        k = _row(db, kernel_id)
        k.evidence = {**(k.evidence or {}), EvidenceKey.COMPILE_STANDING: standing.model_dump()}


def set_training_standing(engine: Engine, kernel_id: int, standing: TrainingStanding) -> None:
    """Whether the runtime uses the kernel where autograd needs gradients, as later evidence found
    (a model whose training step it slowed)."""
    with session_factory(engine).begin() as db:
        k = _row(db, kernel_id)
        k.evidence = {
            **(k.evidence or {}),
            EvidenceKey.GRADIENTS_VERIFIED: standing.used,
            EvidenceKey.TRAINING_STANDING: standing.model_dump(),
        }


def copy_kernels(src: Engine, dst: Engine, ops: list[str] | None = None) -> int:
    """Copy problems and kernels (with configs and the instances they were verified on), and
    banked parallel plans, from one bank to another; returns the kernels copied."""
    n = 0
    with session_factory(src)() as s_src, session_factory(dst).begin() as s_dst:
        q = select(KernelRow)
        if ops:
            q = q.where(KernelRow.op_name.in_(ops))
        for k in s_src.scalars(q):
            spec = ProblemSource(
                path=Path(k.problem.name), source=k.problem.source, name=k.problem.name, op_hash=k.problem.op_hash
            )
            problem = get_or_create_problem(s_dst, spec, k.problem.op_hash, k.problem.target_class_path)
            fields = {
                c.name: getattr(k, c.name) for c in KernelRow.__table__.columns if c.name not in ("id", "problem_id")
            }
            fields.update(problem_id=problem.id, session_id=None, attempt_id=None)
            copy = KernelRow(**fields)
            copy.configs = [KernelConfigRow(bucket=c.bucket, config=c.config, timing_ms=c.timing_ms) for c in k.configs]
            copy.instances = copied_instances(k)
            s_dst.add(copy)
            n += 1
        copy_plans(s_src, s_dst, ops)
    return n


def export_bank(src: Engine, out: Path, ops: list[str] | None = None) -> int:
    """A standalone bank with only the given ops (all when None), to ship beside a model."""
    if out.exists():
        raise BankError(f"{str(out)!r} already exists; choose a new file name")
    dst = open_for_writing(BankLocation(path=out))
    n = copy_kernels(src, dst, ops)
    dst.dispose()
    # A shipped bank is read from anywhere, read-only directories included: no WAL side files.
    with sqlite3.connect(out) as conn:
        conn.execute("PRAGMA journal_mode=DELETE")
    for side in (out.with_name(out.name + ".lock"),):
        side.unlink(missing_ok=True)
    return n


@contextlib.contextmanager
def bank_to_import(path: Path) -> Iterator[Engine]:
    """The bank file at ``path`` as a source to copy kernels from. The file is left as it is: a
    copy of it is migrated to this forge's schema (a bank from a newer forge is refused) and read."""
    if not path.is_file():
        raise ForgeError(f"{str(path)!r}: no such bank file")
    with tempfile.TemporaryDirectory() as tmp:
        copy = Path(tmp) / "import.db"
        shutil.copyfile(path, copy)
        src = open_for_writing(BankLocation(path=copy))
        try:
            yield src
        finally:
            src.dispose()
