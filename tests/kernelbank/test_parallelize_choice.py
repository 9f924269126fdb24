"""How ``bank.parallelize`` picks a banked plan: by the model's structure, the world size, the
device kind, training or inference and the caller's mesh; anything else leaves the model as it
is with a warning (strict: an error). The real two-process application is in
tests/parallel/test_plan_session.py."""

from __future__ import annotations

import warnings
from pathlib import Path

import pytest

import forge.kernelbank as kb
from forge.bank_schema import ReadOnlyBank
from forge.core.errors import KernelUnavailableError
from forge.core.parallel_plan import FsdpSettings, ParallelPlan, structure_hash
from forge.core.paths import BankLocation
from forge.core.plan_evidence import PlanEvidence
from forge.core.problem import read_problem_source
from forge.core.statuses import AttemptStatus
from forge.db import PlanProvenance, PlanTarget, open_for_writing, save_plan
from forge.kernelbank.parallelize_plan import MeshWanted, choose_plan
from tests.parallel.models import TinyTransformer

OP = Path(__file__).parents[1] / "parallel" / "ops" / "tiny_transformer.py"
PLAN = ParallelPlan(mesh={"dp": 2, "tp": 1}, fsdp=FsdpSettings(units=["blocks.*"]))


def _bank(where: Path, train: bool = True) -> Path:
    where.mkdir(exist_ok=True)
    path = where / "bank.db"
    engine = open_for_writing(path)
    target = PlanTarget("h" * 64, structure_hash(TinyTransformer()), 2, "2x1", "cpu", train)
    evidence = PlanEvidence(
        status=AttemptStatus.PASSED, reason="matched", world_size=2, mesh="2x1", train=train, device_kind="cpu"
    )
    save_plan(engine, read_problem_source(OP), target, PLAN, evidence, PlanProvenance())
    engine.dispose()
    return path


def test_the_plan_for_this_model_and_mesh_is_chosen(tmp_path):
    db = ReadOnlyBank(BankLocation(path=_bank(tmp_path)))
    entry, plan = choose_plan(db, TinyTransformer(), MeshWanted(2, "cpu", None), train=True)
    assert plan == PLAN and entry.mesh == "2x1"
    assert choose_plan(db, TinyTransformer(), MeshWanted(2, "cpu", (2, 1)), train=True)[1] == PLAN  # type: ignore[index]
    # inference may use a plan verified for training
    assert not isinstance(choose_plan(db, TinyTransformer(), MeshWanted(2, "cpu", None), train=False), str)


def test_what_does_not_match_is_named(tmp_path):
    db = ReadOnlyBank(BankLocation(path=_bank(tmp_path)))
    assert "no plan for 4 ranks" in str(choose_plan(db, TinyTransformer(), MeshWanted(4, "cpu", None), train=True))
    assert "no plan for 2 ranks on cuda" in str(choose_plan(db, TinyTransformer(), MeshWanted(2, "cuda", None), True))
    grown = TinyTransformer(layers=3)  # a layer added since the plan was made
    assert "another structure" in str(choose_plan(db, grown, MeshWanted(2, "cpu", None), train=True))
    assert "fits the mesh (1, 2)" in str(choose_plan(db, TinyTransformer(), MeshWanted(2, "cpu", (1, 2)), True))
    infer_only = ReadOnlyBank(BankLocation(path=_bank(tmp_path / "infer", train=False)))
    assert "no plan" in str(choose_plan(infer_only, TinyTransformer(), MeshWanted(2, "cpu", None), train=True))


def test_without_a_usable_plan_the_model_is_left_alone_with_one_warning(tmp_path):
    bank = kb.open(_bank(tmp_path))
    model = TinyTransformer()
    before = {n: p.clone() for n, p in model.state_dict().items()}
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        assert bank.parallelize(model) is None  # torch.distributed is not initialised in this process
        assert bank.parallelize(model) is None
    said = [str(w.message) for w in caught if issubclass(w.category, kb.KernelBankWarning)]
    assert len(said) == 1 and "left unsharded" in said[0] and "not initialised" in said[0]
    assert all((p == before[n]).all() for n, p in model.state_dict().items())
    with pytest.raises(KernelUnavailableError, match="not initialised"):
        kb.open(_bank(tmp_path / "strict"), strict=True).parallelize(model)
