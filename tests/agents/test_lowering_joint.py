"""The general lowering's training kernels: the backward derived from torch's joint
graph, lowered with the forward, against the reference's autograd; when ``ModelNew`` takes them
and when it leaves a call to the reference; what the lowering refuses, and why."""

from __future__ import annotations

import copy

import pytest
import torch
from torch import nn

from forge.agents.builtin import BuiltinCoder
from forge.agents.builtin.lowering import program
from forge.agents.builtin.lowering.joint import Source, trace_joint
from tests.agents.joint_check import Attention, RMSNorm, cases, compare, grads, joint_candidate
from tests.agents.triton_check import run_interpreted

CASES = cases()


@pytest.mark.parametrize("name", list(CASES))
def test_training_kernels_give_the_reference_gradients_in_cpp(name):
    model, inputs = CASES[name]
    compare(model, inputs, program.analyze_train, program.render, "cpu")


def test_attention_trains_through_torchs_own_backward_in_cpp():
    q, k, v = (torch.randn(2, 3, 10, 16, generator=torch.Generator().manual_seed(s)) for s in range(3))
    compare(Attention(), [q, k, v], program.analyze_train, program.render, "cpu")


def test_attention_is_refused_for_training_on_the_gpu_backend():
    from forge.agents.builtin.lowering import triton_program

    q = torch.randn(2, 3, 10, 16)
    found = triton_program.analyze_train(Attention(), [q, q, q])
    assert isinstance(found, str) and "runs on CPU only" in found, found


@pytest.fixture(scope="module")
def triton_checked() -> dict[str, str]:
    pytest.importorskip("triton")
    return run_interpreted("tests.agents.joint_check")


@pytest.mark.parametrize("name", list(CASES))
def test_training_kernels_give_the_reference_gradients_in_triton(triton_checked, name):
    assert triton_checked[name] == "ok", triton_checked[name]


def _candidate(model: nn.Module, inputs: list[torch.Tensor]) -> nn.Module:
    return joint_candidate(model, inputs, program.analyze_train, program.render)


def _traced(name: str) -> tuple[list[torch.fx.Node], list[torch.fx.Node]]:
    """The values the forward returns (the op's outputs) and those it computes and saves for the
    backward, views followed to their source."""
    model, inputs = CASES[name]
    joint = trace_joint(model, inputs)
    assert not isinstance(joint, str), joint
    returned = next(n for n in joint.forward.graph.graph.nodes if n.op == "output").args[0]
    saved = []
    for route in joint.saved:
        if route.source is Source.COMPUTED:
            node = returned[route.index]
            while node.target is torch.ops.prims.view_of.default:
                node = node.args[0]
            saved.append(node)
    return [returned[r.index] for r in joint.outputs], saved


def test_the_forward_saves_row_statistics_and_its_outputs_and_the_backward_recomputes_the_rest():
    """The partition takes the op's inputs and outputs as free to save (they exist anyway) and
    recomputes pointwise values: cross-entropy saves per-row statistics, not a value of the
    logits' size (log-softmax, or its exp); softmax's backward reads the softmax it returned."""
    logits = CASES["cross_entropy"][1][0]
    _, saved = _traced("cross_entropy")
    assert saved and all(n.meta["val"].numel() < logits.numel() for n in saved), saved
    outputs, saved = _traced("softmax")
    assert saved == outputs


def test_the_backward_reads_what_costly_ops_computed_rather_than_running_them_again():
    q, k, v = (torch.randn(2, 3, 10, 16, generator=torch.Generator().manual_seed(s)) for s in range(3))
    joint = trace_joint(Attention(), [q, k, v])
    assert not isinstance(joint, str), joint
    called = {str(n.target) for n in joint.backward.graph.graph.nodes if n.op == "call_function"}
    assert "aten._scaled_dot_product_flash_attention_for_cpu.default" not in called, called
    assert "aten._scaled_dot_product_flash_attention_for_cpu_backward.default" in called


def test_building_leaves_no_gradient_on_the_module():
    model = RMSNorm()
    program.analyze_train(model, [torch.randn(4, 40)])
    assert model.weight.grad is None


def test_without_gradients_the_inference_kernel_runs():
    x = torch.randn(6, 40)
    candidate = _candidate(RMSNorm(), [x])

    def refuse(xs):  # type: ignore[no-untyped-def]
        raise AssertionError("the training kernels ran where no gradient is needed")

    ran = []
    kernel = candidate._kernel
    candidate._joint = refuse  # type: ignore[method-assign]
    candidate._kernel = lambda xs: ran.append(1) or kernel(xs)  # type: ignore[method-assign]
    with torch.no_grad():
        candidate(x)
    candidate.weight.requires_grad_(False)
    candidate(x)  # grad mode on, but nothing requires grad
    assert ran == [1, 1]  # the inference kernel, not the reference, both times


def test_a_parameter_frozen_when_built_leaves_its_gradient_to_the_reference():
    model, x = RMSNorm(), torch.randn(6, 40)
    model.weight.requires_grad_(False)
    candidate = _candidate(model, [x])  # its backward computes no weight gradient
    candidate.weight.requires_grad_(True)
    reference = copy.deepcopy(model).requires_grad_(True)
    got, want = grads(candidate, [x], None, "cpu"), grads(reference, [x], None, "cpu")
    assert got["grad_fn"] != "_JointBackward"  # the reference ran
    torch.testing.assert_close(got["parameter weight"], want["parameter weight"])


def test_an_expanded_output_gradient_and_a_second_backward_through_it():
    x = torch.randn(6, 40, requires_grad=True)
    candidate = _candidate(RMSNorm(), [x.detach()])
    y = candidate(x)
    assert type(y.grad_fn).__name__ == "_JointBackward"
    (first,) = torch.autograd.grad(y.sum(), x, retain_graph=True)  # a stride-0 output gradient
    reference = RMSNorm()
    reference.load_state_dict(candidate.state_dict())
    (want,) = torch.autograd.grad(reference(x).sum(), x)
    torch.testing.assert_close(first, want)
    # double backward (a gradient penalty): not provided, so refused, never a gradient without its graph
    with pytest.raises(RuntimeError, match=r"double backward \(create_graph=True\) is not provided"):
        torch.autograd.grad(y.sum(), x, create_graph=True)


@pytest.mark.parametrize(
    ("model", "inputs", "why"),
    [
        (nn.BatchNorm1d(8), [torch.randn(4, 8)], "another thing in training mode"),
        (nn.MaxPool2d(2), [torch.randn(1, 2, 4, 4)], "scatter_add"),
        (nn.Sequential(nn.GELU(), nn.Dropout(0.1)), [torch.randn(4, 8)], "another thing in training mode"),
    ],
)
def test_ops_without_a_training_kernel_say_why(model, inputs, why):
    found = program.analyze_train(model, inputs)
    assert isinstance(found, str) and found.startswith("for training:") and why in found


def test_the_coder_for_training_writes_lowered_kernels_with_a_backward(tmp_path):
    op = tmp_path / "softmax_op.py"
    op.write_text(
        "import torch\n\nclass Model(torch.nn.Module):\n    def forward(self, x):\n"
        "        return torch.softmax(x, dim=-1)\n\n"
        "def get_inputs():\n    return [torch.randn(8, 32)]\n\ndef get_init_inputs():\n    return []\n"
    )
    inference, training = BuiltinCoder(op, inductor_candidate=False), BuiltinCoder(op, train=True)
    inference.space(), training.space()
    assert inference._family is not None and inference._family.name == "rowwise"  # a hand-tuned family
    assert training._family is not None and training._family.name == "lowered"  # the one with a backward


@pytest.fixture(scope="module")
def triton_on_gpu() -> dict[str, str]:
    from tests.agents.joint_check import run_cases

    return run_cases("cuda")


@pytest.mark.gpu
@pytest.mark.parametrize("name", list(CASES))
def test_training_kernels_give_the_reference_gradients_in_triton_on_gpu(triton_on_gpu, name):
    assert triton_on_gpu[name] == "ok", triton_on_gpu[name]
