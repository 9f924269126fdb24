"""What a model run reports of its ops (pure logic over records): the instances each kernel runs
on of those its op stands for, what each op cost (its session, its checks, its tokens) and the
model gain Amdahl expects from it over the instances it runs on."""

from __future__ import annotations

from pathlib import Path

import pytest

from forge.core.carved_ops import InstanceOutcome
from forge.core.instance_checks import InstanceCheck
from forge.core.model_records import ModelProfile
from forge.core.statuses import SessionStatus
from forge.harness.model_run.choose import choose_classes
from forge.harness.model_run.instances import InstanceRun
from forge.harness.model_run.run import ModelRunResult
from forge.harness.model_run.searches import CarvedOp, amdahl
from forge.harness.sessions.session import SessionResult
from forge.present import op_cells
from forge.present.model_rows import model_line
from tests.harness.test_model_choose import _cls, _inst, _profile


def _layers_op() -> tuple[ModelProfile, CarvedOp]:
    layers = [_inst(f"layers.{i}", ms=2.0, args=["8", str(i)]) for i in range(4)]
    profile = _profile(_cls("Layer", 0.8, *layers))
    (choice,) = choose_classes(profile, "toy")
    return profile, CarvedOp(choice.groups[0], Path("toy_Layer.py"), {})


def test_an_op_s_row_says_where_its_kernel_runs_what_it_cost_and_what_it_bought():
    profile, op = _layers_op()
    assert op_cells(op)[2] == "4" and op.runs_on_share == pytest.approx(0.8)  # before any check
    op.result = SessionResult("toy_Layer", 1, SessionStatus.FINISHED, accepted=True, kernel_id=3,
                              speedup_vs_eager=2.0, tokens=1200, seconds=95.0)  # fmt: skip
    outcomes = [InstanceOutcome.SEARCHED, InstanceOutcome.VERIFIED, InstanceOutcome.SAME, InstanceOutcome.FAILED]
    checks = [InstanceCheck(path=f"layers.{i}", config="c", outcome=o) for i, o in enumerate(outcomes)]
    op.instances = InstanceRun(checks=checks, seconds=4.0, verifications=2)
    cells = dict(zip(("op", "share", "runs on", "kernel", "x eager", "x compile", "gain", "search", "checks", "tokens"),
                     op_cells(op), strict=True))  # fmt: skip
    assert cells["runs on"] == "3 of 4" and cells["kernel"] == "3" and cells["x eager"] == "2.00x"
    assert cells["search"] == "95 s" and cells["checks"] == "2: 4.0 s" and cells["tokens"] == "1,200"
    # the gain is over the three layers the kernel runs on (60% of the model), not the op's four
    assert op.runs_on_share == pytest.approx(0.6) and cells["gain"] == f"{amdahl(0.6, 2.0):.3f}x"
    data = op.to_json()
    assert data["runs_on"] == ["layers.0", "layers.1", "layers.2"] and data["verifications"] == 2
    assert [c["outcome"] for c in data["instance_checks"]] == ["searched", "verified", "same", "failed"]
    result = ModelRunResult("toy.py", profile, [], [op])
    assert "1 of 1 ops banked, verified on 3 of their 4 instances" in model_line(result)
