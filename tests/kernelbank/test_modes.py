"""Lowered kernels as a user gets them: made by the built-in coder, verified by the real verifier,
banked, then loaded with ``bank.load`` and ``kernelize`` and watched (``bank.watch``) in eval mode,
the mode inference runs in, and in training mode under no_grad. An op that is the same in both
modes runs its kernel in both; BatchNorm runs the kernel of each mode; dropout runs its kernel in
eval mode and the reference in training mode."""

from __future__ import annotations

import copy

import pytest
import torch
from torch import nn

import forge.kernelbank as kb
from forge.agents import CoderContext
from forge.agents.builtin import BuiltinCoder
from forge.core.problem import read_problem_source
from forge.db.engine import open_for_writing
from forge.db.kernels import save_kernel
from forge.verifier import verify

LAYERS = """
import torch
from torch import nn


class ScaledTanh(nn.Module):
    def __init__(self, n):
        super().__init__()
        self.weight = nn.Parameter(torch.randn(n))

    def forward(self, x):
        return torch.tanh(x * self.weight) + x.mean(-1, keepdim=True)


class NormRelu(nn.Module):
    def __init__(self, n):
        super().__init__()
        self.bn = nn.BatchNorm1d(n)

    def forward(self, x):
        return torch.relu(self.bn(x))


class DropShift(nn.Module):
    def __init__(self, n):
        super().__init__()
        self.drop = nn.Dropout(0.5)

    def forward(self, x):
        return self.drop(x * 2.0) + 1.0
"""

OP = """
import torch
from modes_layers import {cls} as Model

N = 64


def get_inputs():
    return [torch.randn(32, N)]


def get_init_inputs():
    return [N]
"""

# class -> (modes verified, whether the kernel runs in training mode)
CASES = {"ScaledTanh": (["eval", "train"], True), "NormRelu": (["eval", "train"], True), "DropShift": (["eval"], False)}


@pytest.fixture
def banked(tmp_path, monkeypatch, fast_settings):  # type: ignore[no-untyped-def]
    """Bank the built-in coder's verified kernel for one of the layers; returns (bank, op, class)."""
    (tmp_path / "modes_layers.py").write_text(LAYERS)
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.chdir(tmp_path)

    def bank_one(cls_name: str) -> tuple[kb.KernelBank, str, type]:
        op = tmp_path / f"{cls_name.lower()}.py"
        op.write_text(OP.format(cls=cls_name))
        spec = read_problem_source(op)
        (proposal,) = BuiltinCoder(op, "cpp", inductor_candidate=False).propose(
            CoderContext(spec.name, spec.source, "cpu", "cpp")
        )
        assert (proposal.note or "").startswith("lowered family"), proposal.note or proposal.error
        candidate = tmp_path / f"{cls_name.lower()}_kernel.py"
        candidate.write_text(proposal.source or "")
        verdict = verify(op, candidate, fast_settings)
        assert verdict.passed, verdict.reason
        assert verdict.modes == CASES[cls_name][0]
        assert any(c.name == "runs_kernel" and c.passed for c in verdict.checks)
        engine = open_for_writing(tmp_path / "bank.db")
        save_kernel(engine, spec, proposal.source or "", verdict)
        engine.dispose()
        bank = kb.open(tmp_path / "bank.db")
        return bank, spec.name, bank.reference_class(spec.name)

    return bank_one


def _watched(bank: kb.KernelBank, op: str, module: nn.Module, x: torch.Tensor) -> tuple[torch.Tensor, kb.OpUsage]:
    with torch.no_grad(), bank.watch() as seen:
        out = module(x)
    return out, seen.ops[op]


@pytest.mark.parametrize("cls_name", sorted(CASES))
def test_a_lowered_kernel_runs_in_eval_mode_loaded_and_kernelized(banked, cls_name):
    bank, op, reference_cls = banked(cls_name)
    x = torch.randn(32, 64)
    torch.manual_seed(3)
    reference = reference_cls(64).eval()
    with torch.no_grad():
        if cls_name == "NormRelu":  # running statistics unlike a fresh module's
            reference.bn.running_mean.uniform_(-1, 1)
            reference.bn.running_var.uniform_(0.5, 2)
        want = reference(x)
    loaded = bank.load(op, 64).eval()
    loaded.load_state_dict(reference.state_dict())
    got, used = _watched(bank, op, loaded, x)
    assert (used.calls, used.fallbacks) == (1, 0), used
    torch.testing.assert_close(got, want, rtol=1e-4, atol=1e-5)

    model = nn.Sequential(copy.deepcopy(reference)).eval()
    assert bank.kernelize(model) == 1
    got, used = _watched(bank, op, model, x)
    assert (used.calls, used.fallbacks) == (1, 0), used
    torch.testing.assert_close(got, want, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("cls_name", sorted(CASES))
def test_training_mode_runs_the_kernel_of_that_mode_or_the_reference(banked, cls_name):
    bank, op, reference_cls = banked(cls_name)
    x = torch.randn(32, 64)
    reference = reference_cls(64).train()
    model = nn.Sequential(copy.deepcopy(reference)).train()
    assert bank.kernelize(model) == 1
    got, used = _watched(bank, op, model, x)
    runs_in_training = CASES[cls_name][1]
    assert used.fallbacks == (0 if runs_in_training else 1), used
    assert str(used).startswith(f"{op}: 1 calls")
    if runs_in_training:  # deterministic in training mode: the same outputs and buffers as the reference
        with torch.no_grad():
            want = reference(x)
        torch.testing.assert_close(got, want, rtol=1e-4, atol=1e-5)
        for (name, w), g in zip(reference.state_dict().items(), model[0].state_dict().values(), strict=True):
            torch.testing.assert_close(g, w, rtol=1e-5, atol=1e-6, msg=f"module state {name}")
