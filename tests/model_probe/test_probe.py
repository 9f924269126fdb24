"""The model probe on real models, in its own process: profiling (hooks, profiler, recorded
constructor arguments) and proving a kernelized model (a real bank, the runtime's kernelize, the
four ways timed), including a banked kernel that is wrong on the model's real inputs."""

from __future__ import annotations

from pathlib import Path

import pytest

from forge.core.model_records import ModelProfile
from forge.harness.model_run.carve import write_ops
from forge.harness.model_run.choose import MIN_CEILING, choose_classes
from forge.model_probe import ModelRunError, profile_in_process, prove_in_process
from tests.conftest import sweep
from tests.kernelbank.helpers import checked_on, make_bank

ROOT = Path(__file__).resolve().parents[2]
NORMNET = Path(__file__).resolve().parent / "models" / "normnet.py"

KERNEL = """
import torch
from forge_reference import Model


class ModelNew(Model):
    def forward(self, x):
        return self.weight * x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps) * SCALE
"""


@pytest.fixture(scope="module")
def normnet_profile() -> ModelProfile:
    return profile_in_process(str(NORMNET), "cpu")


@pytest.mark.alone  # reads the profile's measured shares: one test at a time (.ci/run's last step)
def test_profile_finds_classes_instances_and_constructor_arguments(normnet_profile):
    p = normnet_profile
    assert p.import_name == "normnet" and p.root == "normnet:Model" and p.forward_ms > 0
    classes = {c.key: c for c in p.classes}
    norm, linear = classes["normnet:ScaleNorm"], classes["torch.nn:Linear"]
    assert [i.path for i in norm.instances] == ["norm_a", "norm_b"]
    assert norm.instances[0].init.args == ["256", "1e-06"] and norm.library_share == 0.0
    assert norm.instances[0].signatures[0].tensors[0].shape == [64, 256]
    # the addmm inside it: 0.4-0.8 of its time (the module call around it weighs more on a busy machine)
    assert linear.torch_builtin and linear.library_share > 0.2
    assert linear.instances[0].init.args[:3] == ["256", "256", "True"]
    assert 0 < norm.share < 1 and 0 < linear.share < 1


@pytest.mark.alone  # the classes chosen follow measured shares: one test at a time (.ci/run's last step)
def test_shipped_models_profile_with_their_hot_classes():
    decoder = profile_in_process(str(ROOT / "examples" / "models" / "decoder.py"), "cpu")
    choices = {c.cls.name: c for c in choose_classes(decoder, "decoder")}
    shares = {c.name: c for c in decoder.classes}
    # RMSNorm reads about 3% of the decoder's time, at the threshold: chosen exactly when its
    # measured share reaches it (each rule on hand-set shares: tests/harness/test_model_choose.py)
    norm = choices["RMSNorm"]
    assert norm.chosen is (shares["RMSNorm"].share >= 0.03), (shares["RMSNorm"].share, norm.reason)
    assert {"SwiGLU", "Attention"} <= {n for n, c in choices.items() if c.chosen}
    assert choices["Block"].chosen, choices["Block"].reason  # a repeated block, or for its own work
    cnn = profile_in_process(str(ROOT / "examples" / "models" / "cnn_block.py"), "cpu")
    chosen = {c.cls.name: c for c in choose_classes(cnn, "cnn_block") if c.chosen}
    # a residual block's own convolution, batch norm, addition and ReLU are half its time: it is
    # optimized whole unless its convolutions (74-82% of its time here, more on a busier profile)
    # leave the rest within the noise (Amdahl); ConvBNReLU is optimized in the stem and the blocks
    library = next(c for c in cnn.classes if c.name == "Residual").library_share
    assert ("Residual" in chosen) is not (library > 0 and 1 / library < MIN_CEILING), library
    assert "ConvBNReLU" in chosen and set(chosen) <= {"ConvBNReLU", "Residual"}, chosen
    if "Residual" in chosen:  # its groups, and the ConvBNReLU ones beside it
        assert [g.paths for g in chosen["Residual"].groups] == [["blocks.0", "blocks.1"]]
        assert sorted(g.paths for g in chosen["ConvBNReLU"].groups) == [["blocks.0.first", "blocks.1.first"], ["stem"]]


def test_a_model_that_raises_is_a_clear_error(tmp_path):
    broken = tmp_path / "broken_model.py"
    broken.write_text("import torch\n\nclass Model(torch.nn.Module):\n    pass\n\ndef get_inputs():\n    return []\n")
    with pytest.raises(ModelRunError, match="does not define get_init_inputs"):
        profile_in_process(str(broken), "cpu")
    with pytest.raises(ModelRunError, match="no such model file"):
        profile_in_process(str(tmp_path / "absent.py"), "cpu")


# the wrong kernel's case in the default run; the right one's is a variant: the README's model
# run (tests/cli/test_real_pipeline.py) proves a kernelized model whose outputs match
@pytest.mark.parametrize(("scale", "match"), sweep([("1.01", False), ("1.0", True)], marker=pytest.mark.variants))
def test_prove_checks_every_kernel_in_place_and_times_four_ways(normnet_profile, tmp_path, scale, match):
    # named, not left to the measured shares: on a loaded machine ScaleNorm can read under the threshold
    (choice,) = [c for c in choose_classes(normnet_profile, "normnet", include={"ScaleNorm"}) if c.chosen]
    (op,) = write_ops(choice.groups, normnet_profile, tmp_path / "ops")
    bank = tmp_path / "bank.db"
    (kid,) = make_bank(bank, [(op, KERNEL.replace("SCALE", scale), {"target_class": "normnet:ScaleNorm"})])
    checked_on(bank, kid, choice.groups[0].members)  # as the model run records its checks on both norms
    proof = prove_in_process(str(NORMNET), str(bank), "cpu", rounds=6)
    assert proof.kernelized == 2
    assert [(u.op, u.calls, u.kernel_calls) for u in proof.ops] == [("normnet_ScaleNorm", 2, 2)]
    assert proof.outputs_match is match
    if not match:  # a kernel off by 1% on the model's inputs: caught, and nothing is timed
        assert "differs" in proof.detail and not proof.timings
        return
    assert [t.regime for t in proof.timings] == ["warm", "cold"]
    for t in proof.timings:
        assert t.rounds == 6 and t.kernelized_vs_eager is not None and t.eager_null is not None
        assert proof.compile_error is None and t.kernelized_compiled_vs_compiled is not None, proof.compile_error
    # banked without a torch.compile baseline: left to Inductor under compile, and said so
    assert any("stay off" in w for w in proof.warnings)


def test_outputs_are_compared_leaf_by_leaf_and_nothing_to_compare_is_no_match():
    import torch

    from forge.model_probe.proving import compare_outputs

    x = torch.ones(3)
    assert compare_outputs({"a": x, "b": (x, x)}, {"a": x, "b": (x, x)})[0]
    match, _, _, detail = compare_outputs({"a": x, "b": (x, x)}, {"a": x, "b": (x, x + 1)})
    assert not match and "output 2 differs" in detail
    match, _, _, detail = compare_outputs("text", "text")
    assert not match and "no tensor" in detail


def test_model_file_names_that_cannot_be_module_names_get_a_prefix():
    from forge.model_probe.source import module_name

    assert module_name(Path("decoder.py")) == "decoder"
    assert module_name(Path("44_MiniGPTBlock.py")) == "m_44_MiniGPTBlock"
    assert module_name(Path("code.py")) == "m_code" and module_name(Path("my-model.py")) == "my_model"


TRAINING_KERNEL = """
import torch
from forge_reference import Model


class _Norm(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, weight, eps):
        ctx.save_for_backward(x, weight)
        ctx.eps = eps
        return weight * x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps)

    @staticmethod
    def backward(ctx, grad):
        x, weight = ctx.saved_tensors
        with torch.enable_grad():
            x_, w_ = x.detach().requires_grad_(), weight.detach().requires_grad_()
            out = w_ * x_ * torch.rsqrt(x_.pow(2).mean(-1, keepdim=True) + ctx.eps)
            gx, gw = torch.autograd.grad(out, (x_, w_), grad)
        return gx, gw * SCALE, None


class ModelNew(Model):
    def forward(self, x):
        return _Norm.apply(x, self.weight, self.eps)
"""


def _trains(op: Path) -> dict[str, object]:
    """A verdict whose backward passed and whose training step was timed: used under autograd."""
    step = {"regime": "cold", "eager": {"pairs": 30, "median": 1.5, "low": 1.2, "high": 1.8}}
    checks = [
        {"name": "correctness", "passed": True, "detail": "", "fatal": True},
        {"name": "gradients", "passed": True, "detail": "", "fatal": True},
    ]
    return {"target_class": "normnet:ScaleNorm", "checks": checks, "training_step": step}


# the matching kernel's proof times training steps (~16 s): with the whole --train model runs (e2e)
@pytest.mark.parametrize(("scale", "match"), sweep([("1.05", False), ("1.0", True)], marker=pytest.mark.e2e))
def test_prove_with_train_checks_the_training_step_and_times_it(normnet_profile, tmp_path, scale, match):
    """--modules --train: the kernelized model's training step against the original's, its
    training kernels running; a kernel whose weight gradient is 5% off is caught there (its
    forward is right: the inference proof passes)."""
    # named, not left to the measured shares: on a loaded machine ScaleNorm can read under the threshold
    (choice,) = [c for c in choose_classes(normnet_profile, "normnet", include={"ScaleNorm"}) if c.chosen]
    (op,) = write_ops(choice.groups, normnet_profile, tmp_path / "ops")
    bank = tmp_path / "bank.db"
    (kid,) = make_bank(bank, [(op, TRAINING_KERNEL.replace("SCALE", scale), _trains(op))])
    checked_on(bank, kid, choice.groups[0].members)
    proof = prove_in_process(str(NORMNET), str(bank), "cpu", rounds=4, train=True)
    assert proof.outputs_match and proof.training is not None
    training = proof.training
    assert [(u.op, u.calls, u.kernel_calls) for u in training.ops] == [("normnet_ScaleNorm", 2, 2)]
    assert training.gradients_match is match
    if not match:
        assert "differs" in training.detail and not training.timings
        return
    assert [t.regime for t in training.timings] == ["warm", "cold"]
    assert all(t.kernelized_vs_eager is not None and t.kernelized_vs_eager.pairs == 4 for t in training.timings)
    assert all(t.eager_null is not None and t.compiled_ms is None for t in training.timings)
    assert prove_in_process(str(NORMNET), str(bank), "cpu", rounds=4).training is None  # without --train, none


def test_a_training_step_draws_the_same_dropout_on_both_sides_and_names_what_differs():
    import copy

    import torch

    from forge.model_probe.training_proof import compare_steps, training_step

    torch.manual_seed(0)
    model = torch.nn.Sequential(
        torch.nn.Linear(8, 8), torch.nn.Dropout(0.5), torch.nn.BatchNorm1d(8), torch.nn.Linear(8, 3)
    ).train()
    model.register_parameter("unused", torch.nn.Parameter(torch.ones(2)))  # no step reaches it: zeros
    grads_out = [torch.randn(4, 3)]
    twin = copy.deepcopy(model)
    inputs = [torch.randn(4, 8)]
    got = training_step(model, grads_out)(inputs)
    assert torch.equal(got["the gradient of unused"], torch.zeros(2)) and "buffer 2.running_mean" in got
    assert compare_steps(training_step(copy.deepcopy(twin), grads_out)(inputs), training_step(twin, grads_out)(inputs))[
        0
    ]
    wrong = copy.deepcopy(twin)
    with torch.no_grad():
        wrong[3].weight.mul_(1.01)
    match, _, _, detail = compare_steps(training_step(twin, grads_out)(inputs), training_step(wrong, grads_out)(inputs))
    assert not match and detail.startswith("output 0 differs")
    stale = copy.deepcopy(twin)
    stale[2].momentum = 0.0  # a norm that leaves its running statistics where they were
    match, _, _, detail = compare_steps(training_step(twin, grads_out)(inputs), training_step(stale, grads_out)(inputs))
    assert not match and detail.startswith("buffer 2.running_mean differs"), detail
