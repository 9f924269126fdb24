"""How a model run searches the model whole after its parts (pure logic over records): with the
run's rounds only where its parts' kernels leave room for a whole-model kernel, since each of that
op's attempts compiles and times the whole model, a cost that grows with the model's depth; with
one round otherwise, so that every depth makes the same searches."""

from __future__ import annotations

from pathlib import Path

import pytest

from forge.core.carved_ops import InstanceOutcome
from forge.core.instance_checks import InstanceCheck
from forge.core.settings import ForgeSettings
from forge.core.statuses import SessionStatus
from forge.harness.model_run import whole_model
from forge.harness.model_run.choose import choose_classes
from forge.harness.model_run.instances import InstanceRun
from forge.harness.model_run.searches import CarvedOp, Searched, SearchPlan
from forge.harness.model_run.whole_model import outer_shares, search_parts_then_whole, whole_model_call
from forge.harness.runs.options import OptimizeOptions
from forge.harness.sessions.session import SessionResult
from forge.present import op_cells
from tests.harness.test_model_choose import _cls, _inst, _profile

LAYERS = 4


def _ops(layer_vs_compile: float | None = 1.02, layers_bound: int = LAYERS) -> list[CarvedOp]:
    """A decoder of four layers (90% of the model), each with two norms inside, and a final norm
    outside them (1%): the layers' op and the norms' op, both banked."""
    layers = [_inst(f"layers.{i}", ms=9.0, args=["8", str(i)]) for i in range(LAYERS)]
    norms = [_inst(f"layers.{i}.{n}", ms=0.2) for i in range(LAYERS) for n in ("norm1", "norm2")]
    norms.append(_inst("norm", ms=0.4))
    profile = _profile(_cls("Layer", 0.9, *layers), _cls("Norm", 0.09, *norms))
    choices = {c.cls.name: c for c in choose_classes(profile, "toy", min_share=0.01)}
    ops = []
    for name, vs_compile, bound in (("Layer", layer_vs_compile, layers_bound), ("Norm", 1.3, len(norms))):
        (group,) = choices[name].groups
        op = CarvedOp(group, Path(f"toy_{name}.py"), {})
        op.result = SessionResult(group.name, 1, SessionStatus.FINISHED, accepted=True, kernel_id=1,
                                  speedup_vs_eager=1.2, speedup_vs_compile=vs_compile)  # fmt: skip
        held = InstanceOutcome.VERIFIED
        outcomes = [held if k < bound else InstanceOutcome.FAILED for k in range(len(group.members))]
        op.instances = InstanceRun([InstanceCheck(path=m.path, config="c", outcome=o)
                                    for m, o in zip(group.members, outcomes, strict=True)])  # fmt: skip
        ops.append(op)
    return ops


def test_a_kernel_inside_another_counts_only_where_it_runs_outside_it():
    shares = outer_shares(_ops())
    # the norms inside the layers run the layers' kernel: only the final norm is the norm kernel's own
    assert shares["toy_Layer"] == pytest.approx(0.9)
    assert shares["toy_Norm"] == pytest.approx(0.09 * 0.4 / (8 * 0.2 + 0.4))


def test_parts_that_cover_the_model_at_compile_speed_leave_the_whole_model_no_room():
    call = whole_model_call(_ops())
    assert not call.room
    assert "92% of its time" in call.reason and "1.02x-1.30x compile" in call.reason and "--include" in call.reason


@pytest.mark.parametrize(
    ("ops", "said"),
    [
        (_ops(layer_vs_compile=0.9), "slower than torch.compile's code for their part: toy_Layer (0.90x)"),
        (_ops(layers_bound=2), "run on 50.4% of its time, below 80%"),  # the layers' kernel failed on half of them
        (_ops(layer_vs_compile=None), "toy_Layer: not timed against torch.compile"),
    ],
)
def test_parts_that_leave_room_give_the_whole_model_room(ops, said):
    call = whole_model_call(ops)
    assert call.room and said in call.reason


def _model_op() -> CarvedOp:
    profile = _profile(_cls("Model", 1.0, _inst("")))
    (choice,) = choose_classes(profile, "toy")
    return CarvedOp(choice.groups[0], Path("toy_Model.py"), {})


@pytest.mark.parametrize("layer_vs_compile", [1.02, 0.8])
def test_the_model_is_searched_after_its_parts_in_one_round_where_they_leave_no_room(monkeypatch, layer_vs_compile):
    """The order and the rounds, not the sessions: ``search_ops`` here hands back the parts as a
    real search would have left them, and records which ops each call was asked to search, with
    how many rounds."""
    parts, model = _ops(layer_vs_compile), _model_op()
    asked: list[tuple[list[str], int]] = []

    def searched(first, plan, limits=None):
        asked.append(([c.group.name for c in first], plan.options.round_limit))
        return Searched(ops=list(first))

    monkeypatch.setattr(whole_model, "search_ops", searched)
    options = OptimizeOptions(rounds=3)
    plan = SearchPlan(_profile(), Path("."), {}, options, ForgeSettings(), "cpu", lambda _e: None, None)
    done = search_parts_then_whole([model, *parts], "toy:Model", False, plan)
    room = layer_vs_compile < whole_model.AT_COMPILE
    assert asked == [(["toy_Layer", "toy_Norm"], 3), (["toy_Model"], 3 if room else 1)]
    assert done.ops[0] is model and model.search_note is not None
    assert ("the run's rounds" if room else "one round: its parts' kernels run on 92%") in model.search_note
    assert model.to_json()["search_note"] == model.search_note and op_cells(model)[3] == "none"
    forced = search_parts_then_whole([_model_op(), *parts], "toy:Model", True, plan)
    assert forced.ops[0].group.name == "toy_Model" and asked[-1] == (["toy_Model"], 3)
    assert "--include names the model's class" in (forced.ops[0].search_note or "")
