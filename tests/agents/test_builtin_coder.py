"""The built-in coder as a Coder: a candidate for every shipped example, a clear refusal otherwise."""

from __future__ import annotations

import pytest

from forge.agents import CoderContext, HistoryItem, JudgeFeedback
from forge.agents.builtin import BuiltinCoder, BuiltinJudge
from forge.agents.builtin.tuner import default_config
from forge.core.statuses import AttemptStatus, VerdictStatus
from forge.core.timing_records import Timings
from forge.core.verdict import Verdict
from tests.conftest import EXAMPLES, OPS

SHIPPED = sorted((EXAMPLES / "ops").glob("*.py"))


@pytest.mark.parametrize("op", SHIPPED, ids=[p.stem for p in SHIPPED])
def test_every_shipped_example_gets_a_candidate(op):
    (proposal,) = BuiltinCoder(op, inductor_candidate=False).propose(
        CoderContext(op.stem, op.read_text(), "cpu", "cpp")
    )
    assert proposal.error is None, proposal.error
    assert proposal.source and "class ModelNew(Model)" in proposal.source and proposal.backend == "cpp"


def _op_file(tmp_path, name, body):
    op = tmp_path / f"{name}.py"
    op.write_text(
        "import torch\nclass Model(torch.nn.Module):\n    def __init__(self):\n        super().__init__()\n"
        f"    def forward(self, x):\n        return {body}\n"
        "def get_inputs():\n    return [torch.randn(4, 8)]\ndef get_init_inputs():\n    return []\n"
    )
    return op


def test_an_op_outside_the_lowering_gets_inductors_code(tmp_path):
    op = _op_file(tmp_path, "sort", "torch.sort(x, dim=1)[0]")
    (proposal,) = BuiltinCoder(op).propose(CoderContext("sort", op.read_text(), "cpu", "cpp"))
    assert proposal.error is None and proposal.source is not None
    assert "async_compile" in proposal.source and "torch.compile(" not in proposal.source
    assert (proposal.note or "").startswith("inductor family")


def test_unknown_op_is_refused_with_a_hint(tmp_path):
    """Neither the lowering nor Inductor (fullgraph) follows a forward that reads a data pointer:
    both reasons are named."""
    op = _op_file(tmp_path, "pointer", "x + float(x.data_ptr() % 1)")
    (proposal,) = BuiltinCoder(op).propose(CoderContext("pointer", op.read_text(), "cpu", "cpp"))
    assert proposal.source is None and proposal.error is not None
    assert proposal.error.startswith("the built-in agent can't handle pointer (the reference could not be traced")
    assert "Inductor's code cannot run as a candidate: torch.compile could not compile it whole" in proposal.error
    assert proposal.error.endswith("use --model to let an LLM write the kernel")


def test_cuda_gets_triton_and_raw_cuda_is_refused():
    op = OPS / "small_softmax.py"
    (proposal,) = BuiltinCoder(op, "triton", inductor_candidate=False).propose(
        CoderContext("small_softmax", op.read_text(), "cuda", "triton")
    )
    assert proposal.error is None and proposal.backend == "triton" and "@triton.jit" in (proposal.source or "")
    (proposal,) = BuiltinCoder(op, "cuda").propose(CoderContext("small_softmax", op.read_text(), "cuda", "cuda"))
    assert proposal.source is None and proposal.fatal and "Triton (CUDA)" in (proposal.error or "")
    assert "--model" in (proposal.error or "")


def test_configs_that_render_the_same_kernel_are_not_proposed_twice():
    """The one-pass layernorm accumulates in double whatever ``acc`` says: after the one-pass
    kernel was measured, neither the judge nor the coder hands out {one_pass, acc=float}."""
    op = OPS / "small_layernorm.py"
    coder = BuiltinCoder(op, inductor_candidate=False)
    space = coder.space()
    assert space is not None
    base = default_config(space)
    one = {**base, "moments": "one_pass"}
    same = {**one, "acc": "float"}
    assert coder.canonical(same) == coder.canonical(one) != coder.canonical(base)
    history = [
        HistoryItem(
            1, "src", AttemptStatus.PASSED, timings_ms=Timings(candidate=2.0), config=base, speedup_vs_eager=1.0
        ),
        HistoryItem(
            2,
            "src",
            AttemptStatus.PASSED,
            timings_ms=Timings(candidate=1.0),
            config=one,
            parent_config=base,
            speedup_vs_eager=2.0,
            feedback=JudgeFeedback(config=same),
        ),
    ]
    ctx = CoderContext(op.stem, op.read_text(), "cpu", "cpp", history=history, parent=history[1])
    proposals = coder.propose(ctx)
    measured = {str(coder.canonical(c)) for c in (base, one)}
    assert proposals and all(str(coder.canonical(p.configs.config or {})) not in measured for p in proposals)
    review = BuiltinJudge(coder).review(ctx, Verdict(status=VerdictStatus.PASSED))
    assert review.feedback is not None and review.feedback.config
    assert str(coder.canonical(review.feedback.config)) not in measured


@pytest.mark.parametrize("backend", ["cpp", "triton"])
@pytest.mark.parametrize("op", SHIPPED, ids=[p.stem for p in SHIPPED])
def test_a_knob_changes_the_kernel_exactly_when_the_family_says_it_counts(op, backend):
    """For every one-knob change from the defaults and from each knob's other values: configs the
    family's canonical map calls equal render the same source, and any other change renders a
    different one (no knob the tuner spends rounds on is secretly inert)."""
    coder = BuiltinCoder(op, backend, inductor_candidate=False)
    space = coder.space()
    assert space is not None
    family, recipe = coder._family, coder._recipe
    assert family is not None
    for base_knob, base_values in space.items():
        for base_value in base_values:
            base = {**default_config(space), base_knob: base_value}
            for knob, values in space.items():
                for value in values:
                    cfg = {**base, knob: value}
                    same = coder.canonical(cfg) == coder.canonical(base)
                    assert (family.render(recipe, cfg) == family.render(recipe, base)) == same, (base, cfg)


def test_the_builtin_judge_says_where_a_kernel_stands_against_its_bound():
    """Under 60% of its bound the search goes on, and a stop there says the configs ran out, not
    that the kernel reached the machine's limit; past 80% it says little is left."""
    from forge.agents.builtin.judge import _bottleneck, _stop_step
    from forge.core.roofline_record import Roofline

    def passed(frac: float) -> Verdict:
        roof = Roofline(bytes=1, bandwidth_gbs=1.0, bound_ms=1.0, fraction_candidate=frac, fraction_eager=0.1)
        return Verdict(status=VerdictStatus.PASSED, roofline=roof)

    assert "under 60% of it: far from the machine's limit, the search goes on" in _bottleneck(passed(0.3))
    assert "close to the machine's limit" in _bottleneck(passed(0.9)) and "goes on" not in _bottleneck(passed(0.7))
    assert "at 30% of the bound: the built-in coder's schedules for this op have nothing left" in _stop_step(
        passed(0.3)
    )
    assert _stop_step(passed(0.7)) == "every neighbouring config of every passing one has been tried; stop"
