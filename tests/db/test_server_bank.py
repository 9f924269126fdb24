"""A bank on a real PostgreSQL server (started by the test run): the same migrations as SQLite,
several writing processes losing nothing, the same `forge bank list --json` as a SQLite bank, the
runtime reading it read-only, and clear errors for a server that is not there."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from alembic.autogenerate import compare_metadata
from alembic.migration import MigrationContext
from sqlalchemy import text

from forge.core.errors import BankError
from forge.core.paths import BankLocation
from forge.db.engine import bank_exists, bank_facts, current_revision, head_revision, open_for_writing, open_reader
from forge.db.kernels import copy_kernels, list_kernels
from forge.db.models import Base
from tests.kernelbank.helpers import KERNEL, OP, passed_verdict

pytestmark = pytest.mark.postgres
ROOT = Path(__file__).resolve().parents[2]


def forge_cli(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "forge", *args],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env={**os.environ, **(env or {})},
        timeout=600,
    )


def test_a_fresh_server_bank_is_migrated_to_the_models(pg_bank):
    where = BankLocation.parse(pg_bank)
    assert not bank_exists(where)
    engine = open_for_writing(where)
    try:
        assert current_revision(engine) == head_revision() and bank_exists(where)
        with engine.connect() as conn:
            assert compare_metadata(MigrationContext.configure(conn), Base.metadata) == []
        facts = bank_facts(where)
        assert facts.exists and facts.revision == head_revision() and facts.kernels == 0 and facts.size_bytes > 0
    finally:
        engine.dispose()


def test_a_server_bank_from_a_newer_forge_is_refused(pg_bank):
    engine = open_for_writing(pg_bank)
    with engine.begin() as conn:
        conn.execute(text("UPDATE alembic_version SET version_num = 'ffff_future'"))
    engine.dispose()
    with pytest.raises(BankError, match="newer forge"):
        open_for_writing(pg_bank)


def test_a_reader_cannot_write(pg_bank):
    open_for_writing(pg_bank).dispose()
    reader = open_reader(pg_bank)
    try:
        with pytest.raises(Exception, match="read-only"), reader.begin() as conn:
            conn.execute(text("DELETE FROM kernels"))
    finally:
        reader.dispose()


WRITER = """
import sys
sys.path.insert(0, {root!r})
from tests.kernelbank.helpers import OP, KERNEL, passed_verdict
from forge.db.engine import open_for_writing
from forge.db.kernels import save_kernel
from forge.core.problem import read_problem_source
engine = open_for_writing({url!r})  # a fresh database: each writer races to create the schema
spec = read_problem_source(OP)
for i in range({n}):
    save_kernel(engine, spec, KERNEL.read_text() + f"# writer {{sys.argv[1]}} #{{i}}", passed_verdict(OP))
"""


def test_three_processes_writing_one_server_bank_lose_nothing(pg_bank):
    n = 20
    script = WRITER.format(root=str(ROOT), url=pg_bank, n=n)
    procs = [subprocess.Popen([sys.executable, "-c", script, str(k)], cwd=ROOT) for k in range(3)]
    assert [p.wait(timeout=300) for p in procs] == [0, 0, 0]
    engine = open_for_writing(pg_bank)
    try:
        sources = {k.id for k in list_kernels(engine)}
        assert len(sources) == 3 * n
        with engine.connect() as conn:
            assert conn.execute(text("SELECT count(*) FROM problems")).scalar() == 1  # one op, shared by all
    finally:
        engine.dispose()


def test_sqlite_and_server_banks_list_the_same(tmp_path, pg_bank):
    from forge.core.problem import read_problem_source
    from forge.db.kernels import save_kernel

    file_bank = tmp_path / "bank.db"
    src = open_for_writing(file_bank)
    spec = read_problem_source(OP)
    for i in range(3):
        save_kernel(src, spec, KERNEL.read_text() + f"# {i}", passed_verdict(OP, speedup_vs_eager=1.5 + i))
    src.dispose()
    imported = forge_cli("bank", "import", str(file_bank), "--bank", pg_bank, "--json")
    assert imported.returncode == 0, imported.stderr
    listed = [forge_cli("bank", "list", "--bank", bank, "--json") for bank in (str(file_bank), pg_bank)]
    assert [r.returncode for r in listed] == [0, 0], [r.stderr for r in listed]
    from_file, from_server = (json.loads(r.stdout) for r in listed)
    assert len(from_file) == 3 and from_file == from_server
    assert all(k["created_at"].endswith("+00:00") for k in from_server)  # both in UTC, both marked so


USE_SERVER_BANK = """
import sys, torch, forge.kernelbank as kb
sys.path.insert(0, {fixtures!r})
from mylayers.norm import RMSNorm
torch.manual_seed(0)
bank = kb.open({url!r}, strict=True)
layer = bank.load("user_rmsnorm", 256)
x = torch.randn(8, 256)
print("RESULT", type(layer).__name__, bool(torch.allclose(layer(x), RMSNorm(256)(x), atol=1e-5)))
try:
    bank._db._db.conn.execute("DELETE FROM kernels")
except Exception as exc:
    print("WRITE", type(exc).__name__)
"""


def test_the_runtime_loads_kernels_from_a_server_bank_read_only(tmp_path, pg_bank):
    from forge.core.problem import read_problem_source
    from forge.db.kernels import save_kernel

    engine = open_for_writing(pg_bank)
    save_kernel(engine, read_problem_source(OP), KERNEL.read_text(), passed_verdict(OP))
    engine.dispose()
    script = USE_SERVER_BANK.format(fixtures=str(OP.parent), url=pg_bank)
    r = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, cwd=tmp_path, timeout=300)
    assert r.returncode == 0, r.stderr
    lines = dict(line.split(" ", 1) for line in r.stdout.splitlines() if line.startswith(("RESULT", "WRITE")))
    assert lines["RESULT"].split()[1] == "True" and lines["RESULT"].split()[0] != "RMSNorm"  # the banked kernel
    assert lines["WRITE"] == "ReadOnlySqlTransaction"


def test_copying_between_a_file_and_a_server_bank_keeps_everything(tmp_path, pg_bank):
    from forge.core.problem import read_problem_source
    from forge.db.kernels import save_kernel

    server = open_for_writing(pg_bank)
    save_kernel(server, read_problem_source(OP), KERNEL.read_text(), passed_verdict(OP))
    back = open_for_writing(tmp_path / "copy.db")
    assert copy_kernels(server, back) == 1
    assert [k.op for k in list_kernels(back)] == [k.op for k in list_kernels(server)]
    server.dispose()
    back.dispose()


def test_a_server_that_is_not_there_is_a_clear_error():
    r = forge_cli("bank", "list", "--bank", "postgresql://forge@127.0.0.1:9/nothing", "--json")
    assert r.returncode == 2 and "Traceback" not in r.stderr
    assert "cannot use the bank postgresql://forge@127.0.0.1:9/nothing" in r.stderr
    assert "check the URL and that the server is up" in r.stderr


def test_a_url_of_another_kind_is_a_usage_error():
    r = forge_cli("bank", "list", "--bank", "mysql://forge@localhost/bank")
    assert r.returncode == 2 and "Traceback" not in r.stderr
    said = " ".join(r.stderr.replace("│", " ").split())  # rich boxes and wraps the message
    assert "forge keeps banks in a SQLite file (a path) or on PostgreSQL" in said


def test_two_drivers_adding_one_op_at_once_share_its_row(pg_bank):
    """Driver A has added the op's row but not committed; driver B adds the same op meanwhile (its
    insert waits on A's). When A commits, B's insert fails on the unique constraint inside its
    savepoint, and B reads and uses A's row: one row, and B's own transaction goes on."""
    import threading

    from forge.core.problem import read_problem_source
    from forge.db.engine import session_factory
    from forge.db.problems import get_or_create_problem

    engine = open_for_writing(pg_bank)
    spec = read_problem_source(OP)
    got: list[int] = []
    try:
        with session_factory(engine).begin() as a:
            mine = get_or_create_problem(a, spec, "h" * 64, None)
            a.flush()

            def driver_b() -> None:
                with session_factory(engine).begin() as b:
                    got.append(get_or_create_problem(b, spec, "h" * 64, None).id)

            other = threading.Thread(target=driver_b)
            other.start()
            other.join(timeout=2)
            assert other.is_alive()  # B waits on A's uncommitted row
        other.join(timeout=30)
        assert got == [mine.id]
        with engine.connect() as conn:
            assert conn.execute(text("SELECT count(*) FROM problems")).scalar() == 1
    finally:
        engine.dispose()
