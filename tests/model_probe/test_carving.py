"""Carving the models people have: layers built from a config object, called with keyword
arguments, None, flags and a tuple of tensors, returning a tuple with None in it
(``models/configured.py``, built as transformers builds its layers). The real probe profiles it,
the op files are carved, a candidate is verified in the real verifier's workers against the call
the model makes, and ``kernelize`` runs it on the model's own instances."""

from __future__ import annotations

import sys
import warnings
from pathlib import Path

import pytest
import torch

from forge.core.carved_ops import INSTANCE
from forge.core.class_source import imported_source
from forge.core.errors import ProblemError
from forge.core.module_call import (
    CallRefused,
    call_arguments,
    call_template,
    match_call,
    output_layout,
    output_tensors,
    rebuild_output,
)
from forge.core.problem import load_problem
from forge.core.statuses import VerdictStatus
from forge.harness.model_run.carve import write_ops
from forge.harness.model_run.choose import ClassChoice, choose_classes
from forge.harness.verify import verify_candidate
from forge.model_probe import profile_in_process
from tests.kernelbank.helpers import checked_on, make_bank

MODELS = Path(__file__).resolve().parent / "models"
CONFIGURED = MODELS / "configured.py"

# What an LLM writes for the carved attention: the user's class, its forward's own signature
ATTENTION_KERNEL = """
import torch
from forge_reference import Model


class ModelNew(Model):
    def forward(self, hidden_states, position_embeddings, attention_mask=None, cache=None, output_weights=False):
        b, s, w = hidden_states.shape
        d = w // self.heads
        q, k, v = self.qkv(hidden_states).view(b, s, 3, self.heads, d).permute(2, 0, 3, 1, 4)
        cos, sin = position_embeddings
        q, k = q * cos + q.flip(-1) * sin, k * cos + k.flip(-1) * sin
        o = torch.nn.functional.scaled_dot_product_attention(q, k, v, attn_mask=attention_mask)
        return self.out(o.transpose(1, 2).reshape(b, s, w)), RETURNED
"""


@pytest.fixture(scope="module")
def carved(tmp_path_factory: pytest.TempPathFactory) -> tuple[list[ClassChoice], dict[str, Path]]:
    folder = tmp_path_factory.mktemp("ops")
    profile = profile_in_process(str(CONFIGURED), "cpu", recorded=folder / ".recorded.pt")
    # included by name: whether matmuls leave room (the Amdahl gate) is measured, and a loaded
    # machine read the attention's at 94%; these tests are about how a chosen class is carved
    choices = choose_classes(profile, "configured", include={"Attention", "Norm"}, min_share=0.0)
    groups = [g for c in choices if c.chosen for g in c.groups]
    recorded = torch.load(folder / ".recorded.pt", weights_only=True)
    paths = write_ops(groups, profile, folder, recorded)
    return choices, {g.name: p for g, p in zip(groups, paths, strict=True)}


def test_classes_built_from_a_config_and_called_with_keywords_are_carved(carved):
    choices, ops = carved
    by_name = {c.cls.name: c for c in choices}
    assert by_name["Attention"].chosen and by_name["Norm"].chosen
    # a cache object carries state from call to call: refused, with how to run without one
    assert not by_name["Counter"].chosen and "use_cache=False" in by_name["Counter"].reason
    # the two blocks' norms differ in their epsilon alone (the same state, the same call): one op
    # standing for both, whose kernel is verified on each; so are their attentions
    assert [g.paths for g in by_name["Norm"].groups] == [["blocks.0.norm", "blocks.1.norm"]]
    assert [g.paths for g in by_name["Attention"].groups] == [["blocks.0.attn", "blocks.1.attn"]]
    source = ops["configured_Attention"].read_text()
    assert "instance_init_args(" in source and "FORGE_FIXED_INPUTS = [1, 2, 3]" in source
    assert "_BUILT_WITH = {\n    'blocks.0.attn': '" in source and "FORGE_INSTANCES = list(_BUILT_WITH)" in source
    assert "model(hidden_states=x0, attention_mask=x1, position_embeddings=(x2, x3), cache=None)" in source


def test_a_carved_op_builds_its_layer_as_the_model_did_and_calls_it_as_the_model_does(carved):
    _, ops = carved
    first = load_problem(ops["configured_Norm"])
    second = load_problem(ops["configured_Norm"], {INSTANCE: "blocks.1.norm"})
    assert first.instances == ["blocks.0.norm", "blocks.1.norm"] and first.module.FORGE_INSTANCE == "blocks.0.norm"
    (config,) = second.init_inputs()
    assert type(config).__name__ == "ToyConfig" and config.eps == 1e-5  # the instance's own config
    assert first.init_inputs()[0].eps == 1e-6 and second.module.FORGE_INSTANCE == "blocks.1.norm"
    with pytest.raises(ProblemError, match="not one of FORGE_INSTANCES"):
        load_problem(ops["configured_Norm"], {INSTANCE: "blocks.7.norm"})
    plain = Path(__file__).resolve().parents[2] / "examples" / "ops" / "rmsnorm.py"
    with pytest.raises(ProblemError, match="not an op carved from a model"):  # forge verify --instance on it
        load_problem(plain, {INSTANCE: "blocks.0.norm"})
    problem = load_problem(ops["configured_Attention"])
    model = problem.model_cls(*problem.init_inputs()).eval()
    x, mask, cos, sin = problem.inputs()
    again = problem.inputs()
    assert not torch.equal(x, again[0]) and torch.equal(mask, again[1])  # activations drawn, the mask kept
    assert torch.isinf(mask).any() and problem.fixed_inputs == {1, 2, 3}
    # each instance's own recorded values, kept once where they are the same (the model gives
    # every block one mask and one rotary table)
    other = load_problem(ops["configured_Attention"], {INSTANCE: "blocks.1.attn"}).inputs()
    assert all(torch.equal(a, b) for a, b in zip(other[1:], (mask, cos, sin), strict=True))
    kept = torch.load(ops["configured_Attention"].with_name("configured_Attention.inputs.pt"), weights_only=True)
    assert len(kept["tensors"]) == 3 and kept["instances"]["blocks.0.attn"] == kept["instances"]["blocks.1.attn"]
    out = problem.module.forge_call(model, x, mask, cos, sin)
    assert output_layout(out) == "(tensor, None)" and len(output_tensors(out)) == 1
    # what an LLM is shown of the class it rewrites: the class and the helper its forward calls
    source, cut = imported_source(problem.model_cls)
    assert "class Attention(nn.Module):" in source and "def rotate(x, cos, sin):" in source and not cut


def test_the_verifier_judges_the_call_and_the_structure_and_kernelize_runs_it(carved, fast_settings, tmp_path):
    choices, ops = carved
    op = ops["configured_Attention"]
    good, wrong = tmp_path / "good.py", tmp_path / "wrong.py"
    good.write_text(ATTENTION_KERNEL.replace("RETURNED", "None"))
    wrong.write_text(ATTENTION_KERNEL.replace(", RETURNED", ""))
    passed = verify_candidate(op, good, fast_settings).verdict
    assert passed.status is VerdictStatus.PASSED, passed.reason
    failed = verify_candidate(op, wrong, fast_settings).verdict
    assert failed.status is VerdictStatus.FAILED_CORRECTNESS
    assert "returned tensor, the reference returns (tensor, None)" in failed.reason
    bank = tmp_path / "bank.db"
    (kid,) = make_bank(bank, [(op, good.read_text(), {"target_class": "configured:Attention"})])
    import forge.kernelbank as kb

    configured = sys.modules.get("configured")
    if configured is None:  # the module the op file imports: the model's classes are its classes
        load_problem(op)
        configured = sys.modules["configured"]
    torch.manual_seed(0)
    model, original = configured.Model().eval(), configured.Model().eval()
    original.load_state_dict(model.state_dict())
    with warnings.catch_warnings(record=True) as caught:  # checked on neither: it runs where it was verified
        warnings.simplefilter("always")
        assert kb.open(bank).kernelize(configured.Model().eval()) == 1
    assert any("verified only on the instance its op builds ('blocks.0.attn')" in str(w.message) for w in caught)
    (group,) = [g for c in choices if c.chosen for g in c.groups if g.name == "configured_Attention"]
    checked_on(bank, kid, group.members)  # as a model run records its check on the second block
    opened = kb.open(bank)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # no torch.compile baseline: said once, not this test's point
        assert opened.kernelize(model) == 2
    x = torch.randn(2, 16, 32)
    with torch.no_grad(), opened.watch() as seen:
        got = model(x)
    assert seen.ops["configured_Attention"].kernel_calls == 2
    torch.testing.assert_close(got, original(x), atol=1e-5, rtol=1e-5)


def test_call_templates_write_what_a_layer_is_called_with():
    x, y = torch.ones(2), torch.zeros(2)
    template = call_template((x,), {"mask": None, "pos": (y, x), "flag": False, "scale": 0.5, "mode": "a"})
    assert template.source == "x0, mask=None, pos=(x1, x0), flag=False, scale=0.5, mode='a'"
    assert template.tensors == [x, y]
    with pytest.raises(CallRefused, match="cannot hold"):
        call_template((x, object()), {})
    assert output_layout({"logits": x, "past": None}) == "{logits: tensor, past: None}"


def test_a_kernel_takes_only_the_call_its_template_writes():
    x, y = torch.ones(2), torch.zeros(3)
    template = "x0, mask=None, pos=(x1, x0), scale=0.5, dtype=torch.float32, eps=float('inf')"
    kwargs = {"mask": None, "pos": (y, x), "scale": 0.5, "dtype": torch.float32, "eps": float("inf")}
    assert match_call(template, (x,), kwargs) == [x, y]
    assert match_call(template, (x,), {**kwargs, "mask": y}) is None  # a mask where it had none
    assert match_call(template, (x,), {**kwargs, "scale": 1}) is None  # another value (and type)
    assert match_call(template, (x,), {**kwargs, "pos": (y, y)}) is None  # x0 is one tensor, twice
    assert match_call(template, (x, y), kwargs) is None and match_call(template, (x,), {"mask": None}) is None
    args, again = call_arguments(template, [x, y])
    assert args == [x] and again["pos"] == (y, x) and again["eps"] == float("inf") and again["dtype"] is torch.float32
    assert rebuild_output("(tensor, None)", [x]) == (x, None) and rebuild_output("tensor", [x]) is x
    assert rebuild_output("{a: tensor, b: (tensor)}", [x, y]) == {"a": x, "b": (y,)}


def test_the_built_in_agent_lowers_a_layer_called_with_keywords(carved, fast_settings, tmp_path):
    """The general lowering traces the call the op file's forge_call makes; its kernel takes the
    layer's own call (keywords, a tuple of tables, None) and returns the reference's structure."""
    from forge.agents.builtin.coder import BuiltinCoder

    _, ops = carved
    op = ops["configured_Attention"]
    coder = BuiltinCoder(op, inductor_candidate=False)
    space = coder.space()
    assert space is not None, coder._why
    kernel = tmp_path / "lowered.py"
    kernel.write_text(coder._family.render(coder._recipe, None))
    source = kernel.read_text()
    assert "match_call(_CALL, args, kwargs)" in source and "_LAYOUT = '(tensor, None)'" in source
    verdict = verify_candidate(op, kernel, fast_settings).verdict
    assert verdict.status is VerdictStatus.PASSED, verdict.reason
    assert verdict.binding is not None and verdict.binding.mode != "none"


def test_values_an_op_file_cannot_read_back_are_refused_and_sizes_round_trip():
    import enum
    from collections import namedtuple

    class Mode(enum.IntEnum):
        A = 1

    x = torch.ones(2)
    for odd in (Mode.A, namedtuple("Pair", "a b")(1, 2)):
        with pytest.raises(CallRefused):
            call_template((x, odd), {})
    size = call_template((x,), {"shape": torch.Size([2, 3])}).source
    assert size == "x0, shape=torch.Size([2, 3])" and match_call(size, (x,), {"shape": torch.Size([2, 3])}) == [x]
    # a container of another type than tuple, list or dict is named: a plain tuple is not a record
    assert output_layout(x.view(2, 1).max(0)) == "torch.return_types.max(tensor, tensor)" != output_layout((x, x))


def test_an_op_file_whose_model_now_builds_the_layer_otherwise_says_carve_again():
    from forge.model_probe.carved import instance_init_args
    from forge.model_probe.source import init_digest

    (config,) = instance_init_args(str(CONFIGURED), "blocks.1.norm")
    digest = init_digest([config])
    (again,) = instance_init_args(str(CONFIGURED), "blocks.1.norm", digest)
    assert again is not config and again.eps == config.eps == 1e-5  # copies: no layer shares the model's
    with pytest.raises(ProblemError, match="carve it again"):
        instance_init_args(str(CONFIGURED), "blocks.1.norm", "0" * 16)


def test_an_op_file_carved_before_the_rename_still_builds_its_layer():
    # A bank keeps each op's source, and the runtime imports it: an op file carved when the model
    # probe was ``forge.modelrun`` imports its helpers from there.
    from forge.model_probe import carved

    spelled: dict[str, object] = {}
    exec("from forge.modelrun.carved import instance_init_args, recorded_inputs", spelled)
    assert spelled["instance_init_args"] is carved.instance_init_args
    assert spelled["recorded_inputs"] is carved.recorded_inputs


def test_an_instance_called_two_ways_is_left_out_with_both_calls_named():
    from forge.core.model_records import CallUse, ClassUse, InitCall, InstanceUse, TensorUse
    from forge.harness.model_run.choose import _groups

    t = TensorUse(shape=[2, 4], dtype="float32")
    calls = [CallUse(call="x0, mask=None", tensors=[t]), CallUse(call="x0, mask=x1", tensors=[t, t])]
    inst = InstanceUse(path="a", calls=2, inclusive_ms=1.0, signatures=calls, init=InitCall(), config="c")
    cls = ClassUse(module="m", name="Attn", torch_builtin=False, container=False, library_share=0, share=0.5,
                   instances=[inst])  # fmt: skip
    groups, why = _groups(cls, "m_Attn")
    assert not groups and "called 2 ways" in why and "mask=x1" in why


def test_a_model_whose_inputs_never_change_is_moved_for_its_second_draw():
    from forge.model_probe.profiling import _other_draw
    from forge.model_probe.source import LoadedModel

    fixed = [torch.arange(6.0).view(2, 3), torch.tensor([[1, 5, 2]])]
    loaded = LoadedModel("m.py", None, None, lambda: torch.nn.Identity(), lambda: [t.clone() for t in fixed])  # type: ignore[arg-type]
    other = _other_draw(loaded, [t.clone() for t in fixed], "cpu")
    assert not torch.equal(other[0], fixed[0]) and other[1].min() >= 1 and other[1].max() <= 5
