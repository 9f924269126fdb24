"""Read-only access to a bank with its plain driver (no SQLAlchemy on the runtime path): a file
through sqlite3, a PostgreSQL bank through psycopg.

A file is opened with ``mode=ro``, which never writes; one in a read-only directory whose WAL side
files cannot be created is reopened with ``immutable=1``. A server bank is read in read-only
transactions (``default_transaction_read_only``), one per query, so a long-lived program never
holds a snapshot open while drivers write.
"""

from __future__ import annotations

import hashlib
import json
import sqlite3
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Any, Protocol

from forge.core.carved_ops import InstanceOutcome
from forge.core.errors import BankError
from forge.core.paths import BankLocation

_MIGRATIONS = Path(__file__).resolve().parents[1] / "db" / "migrations" / "versions"


def known_revisions() -> set[str]:
    return {p.name.split("_", 1)[0] for p in _MIGRATIONS.glob("[0-9]*_*.py")}


@dataclass(frozen=True)
class InstanceRecord:
    """One instance a carved op's kernel was checked on, as the runtime reads it."""

    outcome: InstanceOutcome
    config: str  # its configuration as verified (``instance_binding.config_text``)
    detail: str


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
    # The module modes its verdict verified ("eval", "train"), as JSON text from the evidence;
    # None for kernels verified before forge verified modes (see ``modes``).
    modes_json: str | None = None
    # Used under torch.compile (its evidence's ``compile_standing``: sqlite gives 1/0, PostgreSQL
    # 'true'/'false'), and why; None for kernels banked before forge judged that.
    compile_beats_stored: Any = None
    compile_why: str | None = None
    # Its backward verified against the reference's autograd (``forge verify --train``), as the
    # database gives a JSON boolean; None for kernels verified for inference only.
    gradients_stored: Any = None
    configs: list[tuple[list[list[int]], dict[str, Any]]] = field(default_factory=list)
    # For a kernel of an op carved from a model: per instance path, how it stands with the kernel
    # (``core.instance_checks``); empty for any other kernel (bound to every instance of its class)
    instances: dict[str, InstanceRecord] = field(default_factory=dict)

    @cached_property
    def eval_only(self) -> bool:
        """Verified in eval mode alone (an op random in training mode): the reference runs in
        training mode. Kernels from before modes were verified were verified in training mode."""
        modes = _json(self.modes_json) if self.modes_json else None
        return isinstance(modes, list) and "train" not in modes

    @cached_property
    def trains(self) -> bool:
        """Used where autograd needs gradients: its backward was verified."""
        return self.gradients_stored in (1, True, "true", "1")

    @cached_property
    def beats_compile(self) -> bool:
        """Used under torch.compile: it beat the compiled reference beyond the noise."""
        return self.compile_beats_stored in (1, True, "true", "1")

    @property
    def compile_reason(self) -> str:
        """Why it is, or is not, used under torch.compile (for warnings)."""
        before = "banked before forge judged kernels against torch.compile; `forge bank verify` judges it"
        return self.compile_why or before

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
    raise BankError(
        f"cannot read the kernel bank {str(path)!r}: it is not a forge bank, or is unreadable (SQLite said: {last}); "
        "pass the path of a bank forge wrote"
    )


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


class _Rows(Protocol):
    """One dialect's way to run a query written with ``?`` parameters."""

    errors: tuple[type[Exception], ...]  # what its driver raises

    def rows(self, sql: str, params: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]: ...

    def json_text(self, column: str, *keys: str) -> str: ...


class _FileRows:
    errors: tuple[type[Exception], ...] = (sqlite3.Error,)

    def __init__(self, path: Path) -> None:
        self.conn = connect_readonly(path)

    def rows(self, sql: str, params: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
        return self.conn.execute(sql, params).fetchall()

    def json_text(self, column: str, *keys: str) -> str:
        return f"json_extract({column}, '$.{'.'.join(keys)}')"


class _ServerRows:
    def __init__(self, where: BankLocation) -> None:
        try:
            import psycopg  # an optional extra: only a program reading a server bank needs it
        except ImportError as exc:
            raise BankError(
                f"the bank {where} is on PostgreSQL; reading it needs psycopg: pip install 'forge-kernels[postgres]'"
            ) from exc
        try:
            self.conn = psycopg.connect(
                where.libpq_url(), autocommit=True, connect_timeout=10, options="-c default_transaction_read_only=on"
            )
        except psycopg.Error as exc:
            raise BankError(f"cannot read the kernel bank {where}: {str(exc).strip()}") from exc
        self.errors: tuple[type[Exception], ...] = (psycopg.Error,)

    def rows(self, sql: str, params: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
        return list(self.conn.execute(sql.replace("?", "%s"), params).fetchall())

    def json_text(self, column: str, *keys: str) -> str:
        path = "".join(f" -> '{k}'" for k in keys[:-1])
        return f"({column}::json{path} ->> '{keys[-1]}')"


def _outcome(stored: str) -> InstanceOutcome:
    """An instance's stored outcome; one a newer forge wrote, unknown here, binds nothing."""
    try:
        return InstanceOutcome(stored)
    except ValueError:
        return InstanceOutcome.REFUSED


def _json(value: Any) -> Any:
    """A JSON column's value: text from sqlite3, already decoded by psycopg."""
    return json.loads(value) if isinstance(value, str | bytes) else value


class ReadOnlyBank:
    def __init__(self, where: BankLocation) -> None:
        self.where = where
        self._db: _Rows = _ServerRows(where) if where.is_server else _FileRows(where.file())
        try:
            row = self._db.rows("SELECT version_num FROM alembic_version")
        except self._db.errors as exc:
            raise BankError(f"{str(where)!r} is not a forge kernel bank ({str(exc).strip()})") from exc
        self.revision = row[0][0] if row else None
        if self.revision not in known_revisions():
            raise BankError(
                f"{str(where)!r} was written by a newer forge (schema revision {self.revision!r}); upgrade forge"
            )
        self.has_configs = self.revision != "0001"
        self.has_plans = self.revision not in ("0001", "0002")
        self.has_instances = self.revision not in ("0001", "0002", "0003", "0004")

    def problems(self, name: str) -> list[OpRecord]:
        rows = self._db.rows(
            "SELECT id, name, op_hash, source, target_class_path FROM problems WHERE name = ? ORDER BY id DESC",
            (name,),
        )
        return [OpRecord(*r) for r in rows]

    def target_problems(self) -> list[OpRecord]:
        rows = self._db.rows(
            "SELECT id, name, op_hash, source, target_class_path FROM problems "
            "WHERE target_class_path IS NOT NULL ORDER BY id DESC"
        )
        return [OpRecord(*r) for r in rows]

    def op_names(self) -> list[str]:
        return [r[0] for r in self._db.rows("SELECT DISTINCT name FROM problems ORDER BY name")]

    def entries(self, op_name: str) -> list[KernelEntry]:
        status = "AND status = 'active'" if self.has_configs else ""
        rows = self._db.rows(
            "SELECT id, op_name, op_hash, backend, source, entry_point, device_kind, capability_min, capability_max, "
            "dtype, speedup_vs_eager, torch_version, triton_version, "
            f"{self._db.json_text('evidence', 'binding', 'mode')}, "
            f"{self._db.json_text('evidence', 'binding', 'reason')}, "
            f"{self._db.json_text('evidence', 'modes')}, "
            f"{self._db.json_text('evidence', 'compile_standing', 'beats')}, "
            f"{self._db.json_text('evidence', 'compile_standing', 'why')}, "
            f"{self._db.json_text('evidence', 'gradients_verified')} "
            f"FROM kernels WHERE op_name = ? {status} "
            "ORDER BY COALESCE(speedup_vs_eager, 0) DESC, id DESC",
            (op_name,),
        )
        entries = [KernelEntry(*r) for r in rows]
        if self.has_configs:
            for e in entries:
                for bucket, config in self._db.rows(
                    "SELECT bucket, config FROM kernel_configs WHERE kernel_id = ?", (e.id,)
                ):
                    e.configs.append((_json(bucket), _json(config)))
        if self.has_instances:
            for e in entries:
                for path, outcome, config, detail in self._db.rows(
                    "SELECT path, outcome, config, detail FROM kernel_instances WHERE kernel_id = ? ORDER BY id",
                    (e.id,),
                ):
                    e.instances[path] = InstanceRecord(_outcome(outcome), config, detail or "")
        return entries

    def plans(self, world_size: int, device_kind: str) -> list[PlanEntry]:
        """Active banked plans for a world size on a device kind, fastest measured first."""
        if not self.has_plans:
            return []
        rows = self._db.rows(
            "SELECT id, name, structure_hash, world_size, mesh, device_kind, mode, plan, step_ms FROM parallel_plans "
            "WHERE world_size = ? AND device_kind = ? AND status = 'active' AND structure_hash IS NOT NULL "
            "ORDER BY step_ms IS NULL, step_ms, id DESC",
            (world_size, device_kind),
        )
        # psycopg hands the plan over decoded; the runtime validates it from its JSON text
        return [
            PlanEntry(
                r[0], r[1], r[2], r[3], r[4], r[5], r[6], r[7] if isinstance(r[7], str) else json.dumps(r[7]), r[8]
            )
            for r in rows
        ]
