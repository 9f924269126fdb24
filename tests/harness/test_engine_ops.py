"""The engine's operations for front ends, called as a front end calls them (on a real bank file)."""

from __future__ import annotations

from pathlib import Path

import pytest

from forge import harness
from forge.core.errors import BankError, ForgeError
from forge.core.statuses import AttemptRole, SessionStatus


@pytest.fixture
def bank(old_bank: Path) -> Path:
    return old_bank


def test_sessions_are_listed_newest_first_and_filtered(bank):
    assert [s.id for s in harness.session_list(bank)] == [3, 2, 1]
    assert [s.id for s in harness.session_list(bank, op="loop_rowsum")] == [2]
    (interrupted,) = harness.session_list(bank, status=SessionStatus.INTERRUPTED)
    assert interrupted.op == "rmsnorm" and interrupted.kernel_id == 3
    assert interrupted.best_speedup_vs_eager is not None and interrupted.best_speedup_vs_eager > 1.0
    assert harness.session_list(bank, op="no_such_op") == []


def test_a_session_is_shown_with_its_attempts(bank):
    shown = harness.session_show(bank, 2)
    assert shown.problem_name == "loop_rowsum" and shown.agent == "llm" and shown.status is SessionStatus.FINISHED
    assert {a.role for a in shown.attempts} == {AttemptRole.CODER, AttemptRole.JUDGE, AttemptRole.CONFIRM}
    with pytest.raises(BankError, match="no session 99"):
        harness.session_show(bank, 99)


def test_reading_a_bank_that_is_not_there_names_it_and_creates_nothing(tmp_path):
    missing = tmp_path / "nowhere.db"
    for read in (harness.bank_list, harness.session_list):
        with pytest.raises(BankError, match="no kernel bank at"):
            read(missing)
    with pytest.raises(ForgeError, match="no such bank file"):
        harness.bank_import(missing, tmp_path / "also_missing.db")
    assert list(tmp_path.iterdir()) == []


def test_import_and_export_through_the_engine(bank, tmp_path):
    shipped = tmp_path / "ship.db"
    assert harness.bank_export(bank, shipped, ["rmsnorm"]) == 1
    fresh = tmp_path / "fresh.db"
    assert harness.bank_import(fresh, shipped) == 1
    (only,) = harness.bank_list(fresh)
    assert only.op == "rmsnorm" and harness.bank_show(fresh, only.id).evidence.passed
    harness.bank_remove(fresh, only.id)
    assert harness.bank_list(fresh) == []
