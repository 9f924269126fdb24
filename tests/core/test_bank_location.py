"""Where a bank lives: a path, or a PostgreSQL URL (never printed with its password)."""

from __future__ import annotations

from pathlib import Path

import pytest

from forge.core.errors import UsageError
from forge.core.paths import BankLocation, bank_or_default, default_bank


def test_a_path_is_a_file_bank():
    where = BankLocation.parse("~/banks/team.db")
    assert not where.is_server and where.file() == Path("~/banks/team.db").expanduser()
    assert where.sqlalchemy_url() == f"sqlite:///{where.file()}"
    assert BankLocation.parse("sqlite:////tmp/x.db").file() == Path("/tmp/x.db")


@pytest.mark.parametrize("scheme", ["postgresql", "postgres", "postgresql+psycopg"])
def test_a_postgresql_url_is_a_server_bank(scheme):
    where = BankLocation.parse(f"{scheme}://forge:s3cret@db.internal:5433/kernels")
    assert where.is_server and where.sqlalchemy_url() == "postgresql+psycopg://forge:s3cret@db.internal:5433/kernels"
    assert where.libpq_url() == "postgresql://forge:s3cret@db.internal:5433/kernels"
    assert str(where) == "postgresql://forge:***@db.internal:5433/kernels"  # printed without the password
    assert str(BankLocation.parse("postgresql://forge@h/db")) == "postgresql://forge@h/db"


def test_another_kind_of_url_names_what_forge_reads():
    with pytest.raises(UsageError, match=r"SQLite file \(a path\) or on PostgreSQL.*not 'mysql'"):
        BankLocation.parse("mysql://u@h/db")


def test_forge_bank_may_hold_either(monkeypatch, tmp_path):
    monkeypatch.setenv("FORGE_BANK", "postgresql://forge@h/db")
    assert default_bank().is_server and bank_or_default(None).is_server
    monkeypatch.setenv("FORGE_BANK", str(tmp_path / "b.db"))
    assert default_bank().file() == tmp_path / "b.db"
    assert bank_or_default(tmp_path / "c.db").file() == tmp_path / "c.db"  # the Python API takes a path too
    monkeypatch.delenv("FORGE_BANK")
    assert default_bank().file().name == "bank.db"
