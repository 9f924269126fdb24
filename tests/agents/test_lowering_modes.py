"""The general lowering in the modes users call it in: the bank's kernels run in eval mode
(``model.eval()``), so a lowered kernel must run there, never fall back to the reference. An op
that is the same in both modes gets one kernel; BatchNorm gets one per mode; dropout gets eval
mode's kernel and the reference in training mode (its random numbers cannot be verified)."""

from __future__ import annotations

import copy

import pytest
import torch
from torch import nn

from forge.agents.builtin.lowering import program
from forge.agents.builtin.lowering.program import LoweredGraph
from tests.agents.test_lowering_kernels import lowered_candidate


class Counted(nn.Module):
    """A reference whose own forward counts its calls: a lowered kernel that falls back shows up."""

    calls = 0

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        Counted.calls += 1  # on the base: a ModelNew subclassing the op counts here too
        return self.body(x)


class Scaled(Counted):
    def __init__(self) -> None:
        super().__init__()
        self.weight = nn.Parameter(torch.randn(32))

    def body(self, x: torch.Tensor) -> torch.Tensor:
        return torch.tanh(x * self.weight) + x.mean(-1, keepdim=True)


class Normed(Counted):
    def __init__(self) -> None:
        super().__init__()
        self.bn = nn.BatchNorm1d(32)

    def body(self, x: torch.Tensor) -> torch.Tensor:
        return torch.relu(self.bn(x))


class Dropped(Counted):
    def __init__(self) -> None:
        super().__init__()
        self.drop = nn.Dropout(0.5)

    def body(self, x: torch.Tensor) -> torch.Tensor:
        return self.drop(x * 2.0) + 1.0


def _run(model: nn.Module, train: bool) -> tuple[torch.Tensor, torch.Tensor, int]:
    """(reference output, candidate output, the reference's calls made by the candidate) in one mode."""
    x = torch.randn(16, 32)
    candidate = lowered_candidate(model, [x])
    reference = copy.deepcopy(model)
    candidate.train(train)
    reference.train(train)
    with torch.no_grad():
        want = reference(x)
        before = Counted.calls
        got = candidate(x)
        return want, got, Counted.calls - before


@pytest.mark.parametrize("train", [False, True], ids=["eval", "train"])
def test_an_op_the_same_in_both_modes_gets_one_kernel_that_runs_in_both(train):
    model = Scaled()
    lowered = program.analyze(model, [torch.randn(16, 32)])
    assert isinstance(lowered, LoweredGraph) and lowered.train is None and not lowered.train_random
    assert "self.training" not in program.render(lowered)
    want, got, fell_back = _run(model, train)
    assert fell_back == 0
    torch.testing.assert_close(got, want)


@pytest.mark.parametrize("train", [False, True], ids=["eval", "train"])
def test_batchnorm_gets_a_kernel_per_mode_and_runs_both(train):
    model = Normed()
    with torch.no_grad():  # running statistics unlike a fresh module's zeros and ones
        model.bn.running_mean.uniform_(-1, 1)
        model.bn.running_var.uniform_(0.5, 2)
    lowered = program.analyze(model, [torch.randn(16, 32)])
    assert isinstance(lowered, LoweredGraph) and lowered.train is not None
    source = program.render(lowered)
    assert "def _kernel_train(self, xs)" in source and "def _kernel(self, xs)" in source
    want, got, fell_back = _run(model, train)
    assert fell_back == 0
    torch.testing.assert_close(got, want, rtol=1e-4, atol=1e-5)


def test_dropout_runs_its_kernel_in_eval_mode_and_the_reference_in_training_mode():
    model = Dropped()
    lowered = program.analyze(model, [torch.randn(16, 32)])
    assert isinstance(lowered, LoweredGraph) and lowered.train_random and lowered.train is None
    want, got, fell_back = _run(model, False)
    assert fell_back == 0
    torch.testing.assert_close(got, want)
    _, _, fell_back = _run(model, True)
    assert fell_back == 1  # random numbers in training mode: the reference draws them
