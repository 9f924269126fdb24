"""Read-only access to a bank file with plain sqlite3 (no SQLAlchemy on the runtime path).

``mode=ro`` never writes; a bank in a read-only directory whose WAL side files cannot be created
is reopened with ``immutable=1``.
"""

from __future__ import annotations

import hashlib
import json
import sqlite3
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Any

from forge.core.errors import BankError

_MIGRATIONS = Path(__file__).resolve().parents[1] / "db" / "migrations" / "versions"


def known_revisions() -> set[str]:
    return {p.name.split("_", 1)[0] for p in _MIGRATIONS.glob("[0-9]*_*.py")}


@dataclass
class KernelEntry:
    """One kernel row, as the runtime needs it."""

    id: int
    op_name: str
    op_hash: str
    backend: str
    source: str
    entry_point: str
    device_kind: str
    capability_min: str | None
    capability_max: str | None
    dtype: str
    speedup_vs_eager: float | None
    torch_version: str
    triton_version: str | None
    # How the verifier found it binds to existing instances ("direct", "view", "none"), from its
    # evidence; None for kernels verified before forge checked that.
    binding: str | None = None
    binding_reason: str | None = None
    configs: list[tuple[list[list[int]], dict[str, Any]]] = field(default_factory=list)

    @cached_property
    def key(self) -> str:
        """Identity across banks (ids are per bank): what the kernel is, not where it is stored."""
        digest = hashlib.sha256(f"{self.entry_point}\n{self.source}".encode()).hexdigest()[:16]
        return f"{self.op_hash[:12]}:{digest}"


@dataclass
class OpRecord:
    id: int
    name: str
    op_hash: str
    source: str
    target_class_path: str | None


def connect_readonly(path: Path) -> sqlite3.Connection:
    if not path.is_file():
        raise BankError(f"no kernel bank at {str(path)!r}; create one with `forge verify ... --save` or pass path=")
    uri = f"file:{path}?mode=ro"
    for extra in ("", "&immutable=1"):
        try:
            conn = sqlite3.connect(uri + extra, uri=True, check_same_thread=False)
            conn.execute("SELECT 1 FROM sqlite_master LIMIT 1").fetchall()
            return conn
        except sqlite3.Error as exc:
            last = exc
    raise BankError(f"cannot read the kernel bank {str(path)!r}: {last}")


@dataclass
class PlanEntry:
    """One banked parallel plan, as the runtime needs it (the plan still as JSON)."""

    id: int
    op_name: str
    structure_hash: str
    world_size: int
    mesh: str
    device_kind: str
    mode: str
    plan_json: str
    step_ms: float | None


class ReadOnlyBank:
    def __init__(self, path: Path) -> None:
        self.path = path
        self.conn = connect_readonly(path)
        try:
            row = self.conn.execute("SELECT version_num FROM alembic_version").fetchone()
        except sqlite3.Error as exc:
            raise BankError(f"{str(path)!r} is not a forge kernel bank ({exc})") from exc
        self.revision = row[0] if row else None
        if self.revision not in known_revisions():
            raise BankError(
                f"{str(path)!r} was written by a newer forge (schema revision {self.revision!r}); upgrade forge"
            )
        self.has_configs = self.revision != "0001"
        self.has_plans = self.revision not in ("0001", "0002")

    def problems(self, name: str) -> list[OpRecord]:
        rows = self.conn.execute(
            "SELECT id, name, op_hash, source, target_class_path FROM problems WHERE name = ? ORDER BY id DESC",
            (name,),
        ).fetchall()
        return [OpRecord(*r) for r in rows]

    def target_problems(self) -> list[OpRecord]:
        rows = self.conn.execute(
            "SELECT id, name, op_hash, source, target_class_path FROM problems "
            "WHERE target_class_path IS NOT NULL ORDER BY id DESC"
        ).fetchall()
        return [OpRecord(*r) for r in rows]

    def op_names(self) -> list[str]:
        return [r[0] for r in self.conn.execute("SELECT DISTINCT name FROM problems ORDER BY name")]

    def entries(self, op_name: str) -> list[KernelEntry]:
        status = "AND status = 'active'" if self.has_configs else ""
        rows = self.conn.execute(
            "SELECT id, op_name, op_hash, backend, source, entry_point, device_kind, capability_min, capability_max, "
            "dtype, speedup_vs_eager, torch_version, triton_version, "
            "json_extract(evidence, '$.binding.mode'), json_extract(evidence, '$.binding.reason') "
            f"FROM kernels WHERE op_name = ? {status} "
            "ORDER BY COALESCE(speedup_vs_eager, 0) DESC, id DESC",
            (op_name,),
        ).fetchall()
        entries = [KernelEntry(*r) for r in rows]
        if self.has_configs:
            for e in entries:
                for bucket, config in self.conn.execute(
                    "SELECT bucket, config FROM kernel_configs WHERE kernel_id = ?", (e.id,)
                ):
                    e.configs.append((json.loads(bucket), json.loads(config)))
        return entries

    def plans(self, world_size: int, device_kind: str) -> list[PlanEntry]:
        """Active banked plans for a world size on a device kind, fastest measured first."""
        if not self.has_plans:
            return []
        rows = self.conn.execute(
            "SELECT id, name, structure_hash, world_size, mesh, device_kind, mode, plan, step_ms FROM parallel_plans "
            "WHERE world_size = ? AND device_kind = ? AND status = 'active' AND structure_hash IS NOT NULL "
            "ORDER BY step_ms IS NULL, step_ms, id DESC",
            (world_size, device_kind),
        ).fetchall()
        return [PlanEntry(*r) for r in rows]
