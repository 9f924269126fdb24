"""Writing and reading bank entries (the parent process is the only writer)."""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

from sqlalchemy import Engine, select

from forge.db.engine import open_for_writing, session_factory
from forge.db.models import Kernel, KernelConfig, Problem
from forge.errors import BankError
from forge.harness.problem import ProblemSource


def _float_dtype(verdict: dict[str, Any]) -> str:
    for variant in verdict.get("inputs") or []:
        for x in variant["inputs"]:
            if x["dtype"].startswith(("float", "bfloat")):
                return str(x["dtype"])
    return "float32"


def get_or_create_problem(session: Any, spec: ProblemSource, op_hash: str, target: str | None) -> Problem:
    found = session.scalars(select(Problem).where(Problem.name == spec.name, Problem.op_hash == op_hash)).first()
    if found is not None:
        return found
    problem = Problem(name=spec.name, op_hash=op_hash, source=spec.source, target_class_path=target)
    session.add(problem)
    session.flush()
    return problem


def save_verdict(
    engine: Engine,
    spec: ProblemSource,
    candidate_source: str,
    verdict: dict[str, Any],
    provenance: dict[str, Any] | None = None,
) -> int:
    """Store a *passed* verdict's candidate as a bank entry; returns the kernel id."""
    if verdict.get("status") != "passed":
        raise BankError(f"only passing candidates enter the bank; this one is {verdict.get('status')!r}")
    prov = provenance or {}
    speedup = verdict.get("speedup_vs_eager")
    meaningful = bool(verdict.get("timing_meaningful", True))
    inputs = verdict.get("inputs") or []
    with session_factory(engine).begin() as session:
        problem = get_or_create_problem(session, spec, verdict["op_hash"], verdict.get("target_class"))
        versions = verdict.get("versions") or {}
        cap = verdict.get("capability")
        kernel = Kernel(
            problem_id=problem.id,
            op_name=spec.name,
            op_hash=verdict["op_hash"],
            backend=verdict.get("backend", "torch"),
            source=candidate_source,
            entry_point="ModelNew",
            device_kind=verdict["device"],
            capability_min=cap,
            capability_max=cap,
            dtype=_float_dtype(verdict),
            verified_shapes=[[x["shape"] for x in v["inputs"]] for v in inputs],
            speedup_vs_eager=speedup if meaningful else None,
            speedup_vs_compile=verdict.get("speedup_vs_compile") if meaningful else None,
            beats_reference=bool(meaningful and speedup is not None and speedup > 1.0),
            evidence=verdict,
            session_id=prov.get("session_id"),
            attempt_id=prov.get("attempt_id"),
            agent=prov.get("agent", "manual"),
            model=prov.get("model"),
            cost_usd=prov.get("cost_usd"),
            torch_version=str(versions.get("torch", "")),
            triton_version=versions.get("triton") or None,
        )
        if inputs and verdict.get("timings_ms", {}).get("candidate") is not None:
            bucket = [x["shape"] for x in inputs[0]["inputs"]]
            kernel.configs.append(
                KernelConfig(
                    bucket=bucket, config=dict(prov.get("config") or {}), timing_ms=verdict["timings_ms"]["candidate"]
                )
            )
        session.add(kernel)
        session.flush()
        return int(kernel.id)


def list_kernels(engine: Engine, op: str | None = None) -> list[dict[str, Any]]:
    with session_factory(engine)() as session:
        q = select(Kernel).order_by(Kernel.op_name, Kernel.id)
        if op:
            q = q.where(Kernel.op_name == op)
        return [kernel_summary(k) for k in session.scalars(q)]


def confirmed(k: Kernel) -> Any:
    """forge optimize: timed again after it was chosen (True), or banked from its round's figures
    on a Ctrl-C (False); None for `forge verify --save`."""
    return (k.evidence or {}).get("confirmed")


def kernel_summary(k: Kernel) -> dict[str, Any]:
    return {
        "id": k.id,
        "op": k.op_name,
        "op_hash": k.op_hash[:12],
        "backend": k.backend,
        "device": k.device_kind,
        "capability": k.capability_min,
        "dtype": k.dtype,
        "speedup_vs_eager": k.speedup_vs_eager,
        "speedup_vs_compile": k.speedup_vs_compile,
        "beats_reference": k.beats_reference,
        "confirmed": confirmed(k),
        "status": k.status,
        "agent": k.agent,
        "torch": k.torch_version,
        "created_at": k.created_at.isoformat() if k.created_at else None,
    }


def get_kernel(engine: Engine, kernel_id: int) -> Kernel:
    with session_factory(engine)() as session:
        k = session.get(Kernel, kernel_id)
        if k is None:
            raise BankError(f"no kernel with id {kernel_id} in this bank; `forge bank list` shows the ids")
        _ = k.configs, k.problem  # load before the session closes
        return k


def remove_provisional(engine: Engine, session_id: int) -> list[int]:
    """Remove the kernels a session banked without a confirmation (an interrupted session banks its
    round's best that way); its resumed run confirms, and banks what holds up. Returns their ids."""
    with session_factory(engine).begin() as session:
        gone = [
            k for k in session.scalars(select(Kernel).where(Kernel.session_id == session_id))
            if confirmed(k) is False
        ]  # fmt: skip
        for k in gone:
            session.delete(k)
        return [int(k.id) for k in gone]


def remove_kernel(engine: Engine, kernel_id: int) -> None:
    with session_factory(engine).begin() as session:
        k = session.get(Kernel, kernel_id)
        if k is None:
            raise BankError(f"no kernel with id {kernel_id} in this bank; `forge bank list` shows the ids")
        session.delete(k)


def set_status(engine: Engine, kernel_id: int, status: str, evidence: dict[str, Any] | None = None) -> None:
    with session_factory(engine).begin() as session:
        k = session.get(Kernel, kernel_id)
        if k is None:
            raise BankError(f"no kernel with id {kernel_id}")
        k.status = status
        if evidence is not None:
            k.evidence = evidence


def copy_kernels(src: Engine, dst: Engine, ops: list[str] | None = None) -> int:
    """Copy problems and kernels (with configs) from one bank to another; returns kernels copied."""
    n = 0
    with session_factory(src)() as s_src, session_factory(dst).begin() as s_dst:
        q = select(Kernel)
        if ops:
            q = q.where(Kernel.op_name.in_(ops))
        for k in s_src.scalars(q):
            spec = ProblemSource(
                path=Path(k.problem.name), source=k.problem.source, name=k.problem.name, op_hash=k.problem.op_hash
            )
            problem = get_or_create_problem(s_dst, spec, k.problem.op_hash, k.problem.target_class_path)
            fields = {
                c.name: getattr(k, c.name) for c in Kernel.__table__.columns if c.name not in ("id", "problem_id")
            }
            fields.update(problem_id=problem.id, session_id=None, attempt_id=None)
            copy = Kernel(**fields)
            copy.configs = [KernelConfig(bucket=c.bucket, config=c.config, timing_ms=c.timing_ms) for c in k.configs]
            s_dst.add(copy)
            n += 1
    return n


def export_bank(src: Engine, out: Path, ops: list[str] | None = None) -> int:
    """A standalone bank with only the given ops (all when None), to ship beside a model."""
    if out.exists():
        raise BankError(f"{str(out)!r} already exists; choose a new file name")
    dst = open_for_writing(out)
    n = copy_kernels(src, dst, ops)
    dst.dispose()
    # A shipped bank is read from anywhere, read-only directories included: no WAL side files.
    with sqlite3.connect(out) as conn:
        conn.execute("PRAGMA journal_mode=DELETE")
    for side in (out.with_name(out.name + ".lock"),):
        side.unlink(missing_ok=True)
    return n


def save_candidate(bank: Path | None, op_path: Path, candidate_path: Path, verdict: dict[str, Any]) -> int:
    """Save a verified candidate file into the bank at ``bank`` (default bank when None)."""
    from forge.harness.problem import read_problem_source

    spec = read_problem_source(op_path)
    engine = open_for_writing(bank)
    try:
        return save_verdict(engine, spec, candidate_path.read_text(), verdict)
    finally:
        engine.dispose()


def reverify(engine: Engine, kernel_id: int, settings: Any, progress: Any = None) -> dict[str, Any]:
    """Verify a stored kernel again on this machine; record the verdict and the kernel's status."""
    import tempfile

    from forge.verifier import verify

    k = get_kernel(engine, kernel_id)
    with tempfile.TemporaryDirectory(prefix="forge-reverify-") as tmp:
        op_path = Path(tmp) / f"{k.problem.name}.py"
        cand_path = Path(tmp) / f"kernel_{k.id}.py"
        op_path.write_text(k.problem.source)
        cand_path.write_text(k.source)
        verdict = verify(op_path, cand_path, settings, progress=progress).to_dict()
    if verdict.get("op_hash") != k.op_hash:
        verdict["warnings"] = [*verdict.get("warnings", []), "the reference changed since this kernel was saved"]
    set_status(
        engine,
        kernel_id,
        "active" if verdict["passed"] and verdict.get("op_hash") == k.op_hash else "bad",
        evidence=verdict if verdict["passed"] else None,
    )
    return verdict
