"""Read-only access to a bank with its plain driver (no SQLAlchemy on the runtime path): a file
through sqlite3, a PostgreSQL bank through psycopg.

A file is opened with ``mode=ro``, which never writes; one in a read-only directory whose WAL side
files cannot be created is reopened with ``immutable=1``. A server bank is read in read-only
transactions (``default_transaction_read_only``), one per query, so a long-lived program never
holds a snapshot open while drivers write.
"""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path
from typing import Any, Protocol

from forge.bank_schema.layout import REVISIONS, EvidenceKey, features
from forge.bank_schema.records import InstanceRecord, KernelEntry, OpRecord, PlanEntry, stored_json
from forge.core.carved_ops import InstanceOutcome
from forge.core.errors import BankError
from forge.core.paths import BankLocation


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


class ReadOnlyBank:
    def __init__(self, where: BankLocation) -> None:
        self.where = where
        self._db: _Rows = _ServerRows(where) if where.is_server else _FileRows(where.file())
        try:
            row = self._db.rows("SELECT version_num FROM alembic_version")
        except self._db.errors as exc:
            raise BankError(f"{str(where)!r} is not a forge kernel bank ({str(exc).strip()})") from exc
        self.revision = row[0][0] if row else None
        if self.revision not in REVISIONS:
            raise BankError(
                f"{str(where)!r} was written by a newer forge (schema revision {self.revision!r}); upgrade forge"
            )
        self.holds = features(self.revision)

    def _evidence(self, key: EvidenceKey, *inner: str) -> str:
        """The SQL expression reading ``key`` (and ``inner`` keys below it) from a kernel's evidence."""
        return self._db.json_text("evidence", str(key), *inner)

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
        status = "AND status = 'active'" if self.holds.configs else ""
        rows = self._db.rows(
            "SELECT id, op_name, op_hash, backend, source, entry_point, device_kind, capability_min, capability_max, "
            "dtype, speedup_vs_eager, torch_version, triton_version, "
            f"{self._evidence(EvidenceKey.BINDING, 'mode')}, {self._evidence(EvidenceKey.BINDING, 'reason')}, "
            f"{self._evidence(EvidenceKey.MODES)}, "
            f"{self._evidence(EvidenceKey.COMPILE_STANDING, 'beats')}, "
            f"{self._evidence(EvidenceKey.COMPILE_STANDING, 'why')}, "
            f"{self._evidence(EvidenceKey.GRADIENTS_VERIFIED)} "
            f"FROM kernels WHERE op_name = ? {status} "
            "ORDER BY COALESCE(speedup_vs_eager, 0) DESC, id DESC",
            (op_name,),
        )
        entries = [KernelEntry(*r) for r in rows]
        if self.holds.configs:
            for e in entries:
                for bucket, config in self._db.rows(
                    "SELECT bucket, config FROM kernel_configs WHERE kernel_id = ?", (e.id,)
                ):
                    e.configs.append((stored_json(bucket), stored_json(config)))
        if self.holds.instances:
            for e in entries:
                for path, outcome, config, detail in self._db.rows(
                    "SELECT path, outcome, config, detail FROM kernel_instances WHERE kernel_id = ? ORDER BY id",
                    (e.id,),
                ):
                    e.instances[path] = InstanceRecord(_outcome(outcome), config, detail or "")
        return entries

    def plans(self, world_size: int, device_kind: str) -> list[PlanEntry]:
        """Active banked plans for a world size on a device kind, fastest measured first."""
        if not self.holds.plans:
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
