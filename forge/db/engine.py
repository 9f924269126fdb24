"""Opening a bank: engines and sessions, created on demand (never at import).

A bank is a SQLite file (the embedded default) or a PostgreSQL database that a team shares
(``BankLocation``). A bank opened for writing is migrated to the current schema first, by the same
Alembic migrations on both, under a lock (a file lock beside a SQLite bank, an advisory lock on
the server) so two processes opening a fresh bank at once do not both create it; one written by a
newer forge is refused. SQLite connections run with foreign keys on, WAL journaling and a generous
busy timeout, so concurrent writers wait for each other instead of failing. A viewer opens a
reader instead (``open_reader``): its connections refuse writes and hold no lock between queries.
``bank_facts`` describes a bank without migrating or creating it.
"""

from __future__ import annotations

import contextlib
import fcntl
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from sqlalchemy import Connection, Engine, create_engine, event, inspect, text
from sqlalchemy.exc import DBAPIError, OperationalError
from sqlalchemy.orm import Session, sessionmaker

from forge.core.errors import BankError
from forge.core.paths import BankLike, BankLocation, bank_or_default

MIGRATIONS = Path(__file__).parent / "migrations"
_BUSY_MS = 60_000
_POOL_OVERFLOW = 256  # connections beyond the pool's own, one per session thread at most (cluster_run)
_POOL_WAIT_S = 120.0
# pg_advisory_xact_lock's key for "a forge process is migrating this database" (any fixed number)
_MIGRATION_LOCK = 0x666F726765


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


def _sqlite_engine(path: Path, *, read_only: bool = False) -> Engine:
    engine = create_engine(
        f"sqlite:///{path}",
        connect_args={"timeout": _BUSY_MS / 1000},
        max_overflow=_POOL_OVERFLOW,
        pool_timeout=_POOL_WAIT_S,
    )
    event.listen(engine, "connect", _on_connect)
    if read_only:
        event.listen(engine, "connect", lambda conn, _rec: conn.execute("PRAGMA query_only=ON"))
    return engine


def _server_engine(where: BankLocation, *, read_only: bool = False) -> Engine:
    args: dict[str, Any] = {"connect_timeout": 10}
    if read_only:
        args["options"] = "-c default_transaction_read_only=on"
    try:
        # sessions side by side on a cluster each write from a thread of the driver: room for them
        return create_engine(
            where.sqlalchemy_url(),
            pool_pre_ping=True,
            connect_args=args,
            pool_size=8,
            max_overflow=_POOL_OVERFLOW,
            pool_timeout=_POOL_WAIT_S,
        )
    except ModuleNotFoundError as exc:
        raise BankError(
            f"the bank {where} is on PostgreSQL, which needs psycopg: pip install 'forge-kernels[postgres]' ({exc})"
        ) from exc


def make_engine(where: BankLocation, *, read_only: bool = False) -> Engine:
    if where.is_server:
        return _server_engine(where, read_only=read_only)
    return _sqlite_engine(where.file(), read_only=read_only)


def _revision_on(conn: Connection) -> str | None:
    if not inspect(conn).has_table("alembic_version"):
        return None
    return conn.execute(text("SELECT version_num FROM alembic_version")).scalar()


def current_revision(engine: Engine) -> str | None:
    with engine.connect() as conn:
        return _revision_on(conn)


@contextlib.contextmanager
def _file_lock(path: Path) -> Iterator[None]:
    lock = path.with_name(path.name + ".lock")
    with open(lock, "a") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


def _unreadable(where: BankLocation, exc: BaseException) -> BankError:
    if where.is_server:
        cause = getattr(exc, "orig", None) or exc
        return BankError(f"cannot use the bank {where}: {str(cause).strip()}; check the URL and that the server is up")
    return BankError(f"{str(where)!r} is not a forge bank (SQLite said: {getattr(exc, '__cause__', None) or exc})")


def _migrate_on(conn: Connection, where: BankLocation, revision: str) -> None:
    from alembic import command

    rev = _revision_on(conn)
    if rev is not None and rev not in known_revisions():
        raise BankError(f"{where} was written by a newer forge (schema revision {rev!r}); upgrade forge to use it")
    if rev != (head_revision() if revision == "head" else revision):
        command.upgrade(_alembic_config(conn), revision)


def _migrate_file(engine: Engine, where: BankLocation, revision: str) -> None:
    path = where.file()
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise BankError(f"cannot create the bank's directory {str(path.parent)!r}: {exc}") from exc
    with _file_lock(path):
        try:
            with engine.connect() as conn:
                conn.exec_driver_sql("PRAGMA journal_mode=WAL")
            with engine.begin() as conn:
                _migrate_on(conn, where, revision)
        except BankError:
            raise
        except Exception as exc:  # not a database, a locked or unreadable file, ...
            raise _unreadable(where, exc) from exc


def _migrate_server(engine: Engine, where: BankLocation, revision: str) -> None:
    try:
        with engine.begin() as conn:
            # one migrating process at a time; the lock ends with this transaction
            conn.execute(text("SELECT pg_advisory_xact_lock(:key)"), {"key": _MIGRATION_LOCK})
            _migrate_on(conn, where, revision)
    except DBAPIError as exc:  # unreachable, refused, or a role that may not create the schema
        raise _unreadable(where, exc) from exc


def open_for_writing(where: BankLike | None = None, revision: str = "head") -> Engine:
    """An engine on a bank that is migrated to ``revision`` (created if missing)."""
    where = bank_or_default(where)
    engine = make_engine(where)
    if where.is_server:
        _migrate_server(engine, where, revision)
    else:
        _migrate_file(engine, where, revision)
    return engine


def bank_exists(where: BankLike | None) -> bool:
    """A file bank exists once its file does; a server bank once its schema does."""
    where = bank_or_default(where)
    if not where.is_server:
        return where.file().is_file()
    engine = make_engine(where)
    try:
        with engine.connect() as conn:
            return inspect(conn).has_table("alembic_version")
    except OperationalError as exc:
        raise _unreadable(where, exc) from exc
    finally:
        engine.dispose()


@contextlib.contextmanager
def open_bank(where: BankLike | None, *, must_exist: bool = True) -> Iterator[Engine]:
    """The bank at ``where`` (default: $FORGE_BANK or the per-user bank), migrated if it is older,
    closed on exit. A missing bank is an error unless the caller is about to add to it."""
    where = bank_or_default(where)
    if must_exist and not bank_exists(where):
        raise BankError(f"no kernel bank at {str(where)!r}; `forge verify OP CAND --save` creates it")
    engine = open_for_writing(where)
    try:
        yield engine
    finally:
        engine.dispose()


def open_reader(where: BankLike | None) -> Engine:
    """An engine that only reads an existing bank (migrated first when it is older): what a
    viewer keeps open and polls. Its connections refuse writes (``query_only`` on SQLite, read-only
    transactions on PostgreSQL); in WAL mode a SQLite reader never blocks the writer nor waits
    for it, and between queries it holds no lock."""
    where = bank_or_default(where)
    if not bank_exists(where):
        raise BankError(f"no kernel bank at {str(where)!r}; `forge optimize OP.py` or `forge verify --save` creates it")
    open_for_writing(where).dispose()  # the schema at head (a no-op when it is)
    return make_engine(where, read_only=True)


@dataclass(frozen=True)
class BankFacts:
    """What ``forge doctor`` says about a bank."""

    location: BankLocation
    exists: bool
    revision: str | None  # the schema revision it is at (None: not a bank yet)
    head: str  # the revision this forge writes
    size_bytes: int
    kernels: int
    sessions: int
    attempts: int


def _size_bytes(conn: Connection, where: BankLocation) -> int:
    if where.is_server:
        return int(conn.execute(text("SELECT pg_database_size(current_database())")).scalar() or 0)
    return where.file().stat().st_size


def bank_facts(where: BankLike | None) -> BankFacts:
    """The bank's schema revision, size and row counts, read without migrating or creating it."""
    where = bank_or_default(where)
    head = head_revision()
    if not bank_exists(where):
        return BankFacts(where, False, None, head, 0, 0, 0, 0)
    engine = make_engine(where, read_only=True)
    try:
        with engine.connect() as conn:
            revision = _revision_on(conn)
            counts = [
                int(conn.execute(text(f"SELECT count(*) FROM {table}")).scalar() or 0)
                if inspect(conn).has_table(table)
                else 0
                for table in ("kernels", "sessions", "attempts")
            ]
            size = _size_bytes(conn, where)
    except Exception as exc:
        raise _unreadable(where, exc) from exc
    finally:
        engine.dispose()
    return BankFacts(where, True, revision, head, size, *counts)


def session_factory(engine: Engine) -> sessionmaker[Session]:
    return sessionmaker(engine, expire_on_commit=False)
