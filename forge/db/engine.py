"""Opening a bank: engines and sessions, created on demand (never at import).

A bank opened for writing is migrated to the current schema first (under a file lock, so two
processes opening a fresh bank at once do not both create it); one written by a newer forge is
refused. Connections run with foreign keys on, WAL journaling and a generous busy timeout, so
concurrent writers wait for each other instead of failing. A viewer opens a reader instead
(``open_reader``): no writes, no locks held between queries. ``bank_facts`` describes a bank
without touching it.
"""

from __future__ import annotations

import contextlib
import fcntl
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from sqlalchemy import Engine, create_engine, event, inspect, text
from sqlalchemy.orm import Session, sessionmaker

from forge.core.errors import BankError
from forge.core.paths import default_bank_path

MIGRATIONS = Path(__file__).parent / "migrations"
_BUSY_MS = 60_000


def _alembic_config(connection: Any) -> Any:
    from alembic.config import Config

    cfg = Config()
    cfg.set_main_option("script_location", str(MIGRATIONS))
    cfg.attributes["connection"] = connection
    return cfg


def known_revisions() -> list[str]:
    from alembic.script import ScriptDirectory

    script = ScriptDirectory(str(MIGRATIONS))
    return [r.revision for r in script.walk_revisions()]


def head_revision() -> str:
    from alembic.script import ScriptDirectory

    head = ScriptDirectory(str(MIGRATIONS)).get_current_head()
    assert head is not None
    return head


def _on_connect(dbapi_conn: Any, _record: Any) -> None:
    cur = dbapi_conn.cursor()
    cur.execute("PRAGMA foreign_keys=ON")
    cur.execute(f"PRAGMA busy_timeout={_BUSY_MS}")
    cur.close()


def make_engine(path: Path) -> Engine:
    engine = create_engine(f"sqlite:///{path}", connect_args={"timeout": _BUSY_MS / 1000})
    event.listen(engine, "connect", _on_connect)
    return engine


def current_revision(engine: Engine) -> str | None:
    with engine.connect() as conn:
        if not inspect(conn).has_table("alembic_version"):
            return None
        return conn.execute(text("SELECT version_num FROM alembic_version")).scalar()


@contextlib.contextmanager
def _file_lock(path: Path) -> Iterator[None]:
    lock = path.with_name(path.name + ".lock")
    with open(lock, "a") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


def upgrade(engine: Engine, revision: str = "head") -> None:
    from alembic import command

    with engine.begin() as conn:
        command.upgrade(_alembic_config(conn), revision)


def open_for_writing(path: Path | None = None, revision: str = "head") -> Engine:
    """An engine on a bank that is migrated to ``revision`` (created if missing)."""
    path = (path or default_bank_path()).expanduser()
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise BankError(f"cannot create the bank's directory {str(path.parent)!r}: {exc}") from exc
    engine = make_engine(path)
    with _file_lock(path):
        try:
            with engine.connect() as conn:
                conn.exec_driver_sql("PRAGMA journal_mode=WAL")
        except Exception as exc:
            raise BankError(f"{str(path)!r} is not a forge bank (SQLite said: {exc.__cause__ or exc})") from exc
        _check_not_newer(engine, path)
        if current_revision(engine) != (head_revision() if revision == "head" else revision):
            upgrade(engine, revision)
    return engine


@contextlib.contextmanager
def open_bank(path: Path | None, *, must_exist: bool = True) -> Iterator[Engine]:
    """The bank at ``path`` (default: $FORGE_BANK or the per-user bank), migrated if it is older,
    closed on exit. A missing bank is an error unless the caller is about to add to it."""
    where = (path or default_bank_path()).expanduser()
    if must_exist and not where.is_file():
        raise BankError(f"no kernel bank at {str(where)!r}; `forge verify OP CAND --save` creates it")
    engine = open_for_writing(where)
    try:
        yield engine
    finally:
        engine.dispose()


def open_reader(path: Path | None) -> Engine:
    """An engine that only reads an existing bank (migrated first when it is older): what a
    viewer keeps open and polls. Its connections refuse writes (``query_only``), and in WAL mode
    a reader never blocks the writer nor waits for it; between queries it holds no lock."""
    where = (path or default_bank_path()).expanduser()
    if not where.is_file():
        raise BankError(f"no kernel bank at {str(where)!r}; `forge optimize OP.py` or `forge verify --save` creates it")
    open_for_writing(where).dispose()  # the schema at head (a no-op when it is)
    engine = create_engine(f"sqlite:///{where}", connect_args={"timeout": _BUSY_MS / 1000})

    def read_only(dbapi_conn: Any, _record: Any) -> None:
        _on_connect(dbapi_conn, _record)
        dbapi_conn.execute("PRAGMA query_only=ON")

    event.listen(engine, "connect", read_only)
    return engine


@dataclass(frozen=True)
class BankFacts:
    """What ``forge doctor`` says about a bank."""

    path: Path
    exists: bool
    revision: str | None  # the schema revision it is at (None: not a bank yet)
    head: str  # the revision this forge writes
    size_bytes: int
    kernels: int
    sessions: int
    attempts: int


def bank_facts(path: Path | None) -> BankFacts:
    """The bank's schema revision, size and row counts, read without migrating or creating it."""
    where = (path or default_bank_path()).expanduser()
    head = head_revision()
    if not where.is_file():
        return BankFacts(where, False, None, head, 0, 0, 0, 0)
    engine = create_engine(f"sqlite:///{where}")
    try:
        with engine.connect() as conn:
            revision = current_revision(engine)
            counts = [
                int(conn.execute(text(f"SELECT count(*) FROM {table}")).scalar() or 0)
                if inspect(conn).has_table(table) else 0
                for table in ("kernels", "sessions", "attempts")
            ]  # fmt: skip
    except Exception as exc:
        raise BankError(f"{str(where)!r} is not a forge bank (SQLite said: {exc})") from exc
    finally:
        engine.dispose()
    return BankFacts(where, True, revision, head, where.stat().st_size, *counts)


def _check_not_newer(engine: Engine, path: Path) -> None:
    try:
        rev = current_revision(engine)
    except Exception as exc:
        raise BankError(f"{str(path)!r} is not a forge bank (SQLite said: {exc})") from exc
    if rev is not None and rev not in known_revisions():
        raise BankError(
            f"{str(path)!r} was written by a newer forge (schema revision {rev!r}); upgrade forge to use it"
        )


def session_factory(engine: Engine) -> sessionmaker[Session]:
    return sessionmaker(engine, expire_on_commit=False)
