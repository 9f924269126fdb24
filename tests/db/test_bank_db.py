"""The bank database: migrations, schema agreement, newer-schema refusal, concurrent writers."""

from __future__ import annotations

import json
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest
from alembic.autogenerate import compare_metadata
from alembic.migration import MigrationContext

from forge.bank_schema import REVISIONS, ReadOnlyBank, features
from forge.core.errors import BankError
from forge.core.paths import BankLocation
from forge.db.engine import current_revision, head_revision, known_revisions, open_for_writing
from forge.db.kernels import list_kernels
from forge.db.models import Base

ROOT = Path(__file__).resolve().parents[2]


def test_fresh_bank_is_at_head_in_wal_mode_with_foreign_keys(tmp_path):
    engine = open_for_writing(tmp_path / "sub" / "bank.db")
    assert current_revision(engine) == head_revision()
    with engine.connect() as conn:
        assert conn.exec_driver_sql("PRAGMA journal_mode").scalar() == "wal"
        assert conn.exec_driver_sql("PRAGMA foreign_keys").scalar() == 1


def test_models_agree_with_migrations(tmp_path):
    engine = open_for_writing(tmp_path / "bank.db")
    with engine.connect() as conn:
        diff = compare_metadata(MigrationContext.configure(conn), Base.metadata)
    assert diff == []


def test_migration_from_first_revision_keeps_data(tmp_path):
    path = tmp_path / "old.db"
    open_for_writing(path, revision="0001").dispose()
    with sqlite3.connect(path) as conn:
        conn.execute(
            "INSERT INTO problems (id, name, op_hash, source, created_at) VALUES (1, 'op', 'h', 'src', '2026-01-01')"
        )
        conn.execute(
            "INSERT INTO kernels (problem_id, op_name, op_hash, backend, source, entry_point, device_kind, dtype, "
            "verified_shapes, beats_reference, evidence, torch_version, created_at) VALUES "
            "(1, 'op', 'h', 'torch', 'class ModelNew: pass', 'ModelNew', 'cpu', 'float32', '[]', 1, ?, '2.13.0', "
            "'2026-01-01')",
            (json.dumps({"status": "passed"}),),
        )
    engine = open_for_writing(path)
    assert current_revision(engine) == head_revision()
    rows = list_kernels(engine)
    assert len(rows) == 1 and rows[0].op == "op" and rows[0].status == "active"


def test_the_schemas_revisions_are_the_migrations_oldest_first():
    assert list(REVISIONS) == known_revisions()[::-1]


@pytest.mark.parametrize("revision", REVISIONS)
def test_the_runtimes_reader_reads_a_bank_of_every_revision_by_what_it_holds(tmp_path, revision):
    path = tmp_path / "bank.db"
    open_for_writing(path, revision=revision).dispose()
    bank = ReadOnlyBank(BankLocation.parse(str(path)))
    assert bank.revision == revision and bank.holds == features(revision)
    # a reader that asked an old bank for what it lacks (a kernel's status, the plans table) would raise
    assert bank.entries("op") == [] and bank.plans(2, "cpu") == []


def test_bank_from_a_newer_forge_is_refused(tmp_path):
    path = tmp_path / "new.db"
    open_for_writing(path).dispose()
    with sqlite3.connect(path) as conn:
        conn.execute("UPDATE alembic_version SET version_num = 'ffff_future'")
    with pytest.raises(BankError, match="newer forge"):
        open_for_writing(path)


def test_not_a_bank(tmp_path):
    path = tmp_path / "junk.db"
    path.write_bytes(b"this is not sqlite" * 100)
    with pytest.raises(BankError, match="not a forge bank"):
        open_for_writing(path)


WRITER = """
import sys
from pathlib import Path
sys.path.insert(0, {tests!r})
from tests.kernelbank.helpers import OP, KERNEL, passed_verdict
from forge.db.engine import open_for_writing
from forge.db.kernels import save_kernel
from forge.core.problem import read_problem_source
engine = open_for_writing(Path({path!r}))
spec = read_problem_source(OP)
for i in range({n}):
    save_kernel(engine, spec, KERNEL.read_text() + f"# writer {{sys.argv[1]}} #{{i}}", passed_verdict(OP))
"""


def test_two_processes_writing_at_once_lose_nothing(tmp_path):
    path = tmp_path / "bank.db"
    n = 25
    script = WRITER.format(tests=str(ROOT), path=str(path), n=n)
    procs = [subprocess.Popen([sys.executable, "-c", script, str(k)], cwd=ROOT) for k in range(2)]
    assert [p.wait(timeout=300) for p in procs] == [0, 0]
    engine = open_for_writing(path)
    rows = list_kernels(engine)
    assert len(rows) == 2 * n
    with sqlite3.connect(path) as conn:
        assert conn.execute("SELECT COUNT(*) FROM problems").fetchone()[0] == 1  # one problem, shared
