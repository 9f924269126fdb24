"""The instances a carved op's kernel was checked on: kept per kernel and path (a later check
replaces an earlier one), shown by ``forge bank show``, copied with the kernel by export, and read
by the runtime's own driver; removing the kernel removes them."""

from __future__ import annotations

import sqlite3

from forge.bank_schema import ReadOnlyBank
from forge.core.carved_ops import InstanceOutcome
from forge.core.instance_checks import InstanceCheck
from forge.core.paths import BankLocation
from forge.db import export_bank, kernel_detail, kernel_instances, open_for_writing, record_instances, remove_kernel
from forge.present.kernel_view import kernel_details
from tests.kernelbank.helpers import KERNEL, OP, make_bank


def _check(path: str, outcome: InstanceOutcome, detail: str = "") -> InstanceCheck:
    return InstanceCheck(path=path, config='{"attr:eps": 1e-06}', outcome=outcome, detail=detail)


def test_instance_checks_are_kept_shown_exported_and_removed_with_their_kernel(tmp_path):
    bank = tmp_path / "bank.db"
    (kid,) = make_bank(bank, [(OP, KERNEL.read_text(), {})])
    engine = open_for_writing(BankLocation(path=bank))
    record_instances(engine, kid, [_check("a", InstanceOutcome.SEARCHED), _check("b", InstanceOutcome.VERIFIED)])
    record_instances(
        engine, kid, [_check("b", InstanceOutcome.FAILED, "wrong outputs"), _check("c", InstanceOutcome.SAME)]
    )
    assert [(c.path, c.outcome) for c in kernel_instances(engine, kid)] == [
        ("a", InstanceOutcome.SEARCHED),
        ("b", InstanceOutcome.FAILED),
        ("c", InstanceOutcome.SAME),
    ]
    shown = kernel_details(kernel_detail(engine, kid))["runs on"]
    assert shown.startswith("the 2 instance(s) of its model it was verified on: a, c")
    assert "not on 1: b (failed: wrong outputs)" in shown
    out = tmp_path / "shipped.db"
    assert export_bank(engine, out) == 1
    (entry,) = ReadOnlyBank(BankLocation(path=out)).entries(kernel_detail(engine, kid).op_name)
    assert {p: r.outcome for p, r in entry.instances.items()} == {"a": "searched", "b": "failed", "c": "same"}
    remove_kernel(engine, kid)
    engine.dispose()
    with sqlite3.connect(bank) as conn:
        assert conn.execute("SELECT COUNT(*) FROM kernel_instances").fetchone() == (0,)
