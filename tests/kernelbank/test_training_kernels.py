"""A kernel whose backward was verified and whose training step is not slower than eager's
(``forge verify --train --save``) runs where autograd needs gradients, and its gradients are the
reference's; one verified for inference only leaves the reference to autograd there. Real
verifier, real bank; the training kernel is the built-in coder's (its backward lowered from the
joint graph), on a pointwise chain whose fused step beat eager's by about 2x on an AVX-512 machine
(on a 2-core AVX2 one its backward lost to eager's, and the kernel rightly stays off under autograd:
the test of the runtime's training path sets its standing on, as a user may, whatever this machine
measured)."""

from __future__ import annotations

import pytest
import torch

import forge.kernelbank as kb
from forge.agents.builtin.lowering import program
from forge.core.acceptance import TrainingStanding, training_standing
from forge.core.paths import BankLocation
from forge.db import list_kernels, open_for_writing, set_training_standing
from forge.harness import bank_reverify, verify_candidate
from forge.verifier.parent.compare import tolerance
from tests.conftest import OPS
from tests.ops import gated_tanh_wide
from tests.verifier.test_gradients import FUNCTION, NO_BACKWARD, RIGHT

GATED, WIDE = OPS / "gated_scale.py", OPS / "gated_tanh_wide.py"


def _bank_with(tmp_path, fast_settings, op, source: str, train: bool):  # type: ignore[no-untyped-def]
    tmp_path.mkdir(exist_ok=True)
    cand = tmp_path / "candidate.py"
    cand.write_text(source)
    bank = tmp_path / "bank.db"
    settings = fast_settings.model_copy(update={"verify_gradients": train})
    done = verify_candidate(op, cand, settings, save=True, bank=BankLocation.parse(str(bank)))
    assert done.verdict.passed, done.verdict.reason
    (entry,) = list_kernels(open_for_writing(BankLocation.parse(str(bank))), op.stem)
    # what `forge bank list` and `show` say of it is what its evidence says; a training kernel's
    # standing also rests on its step's speed here (training_standing), which no unit test fixes
    standing = training_standing(done.verdict)
    assert entry.trains is standing.used, done.verdict.training_step
    if not train:
        assert not entry.trains
    return kb.open(bank), standing


def _lowered_for_training() -> str:
    model = gated_tanh_wide.Model(*gated_tanh_wide.get_init_inputs())
    lowered = program.analyze_train(model, gated_tanh_wide.get_inputs())
    assert not isinstance(lowered, str), lowered
    return program.render(lowered)


def _step(layer: torch.nn.Module, x: torch.Tensor, gate: torch.Tensor) -> list[torch.Tensor]:
    layer.zero_grad()
    xs, gs = x.clone().requires_grad_(), gate.clone().requires_grad_()
    layer(xs, gs).square().sum().backward()
    return [xs.grad, gs.grad, layer.weight.grad]  # type: ignore[list-item]


@pytest.mark.e2e
def test_a_kernel_verified_for_training_runs_under_autograd_with_the_reference_gradients(tmp_path, fast_settings):
    _bank_with(tmp_path, fast_settings, WIDE, _lowered_for_training(), train=True)
    # its use under autograd also rests on its step's speed on this machine (_bank_with): set on here
    location = BankLocation.parse(str(tmp_path / "bank.db"))
    (entry,) = list_kernels(open_for_writing(location), "gated_tanh_wide")
    set_training_standing(open_for_writing(location), entry.id, TrainingStanding(used=True, why="set by the test"))
    bank = kb.open(tmp_path / "bank.db")
    layer = bank.load("gated_tanh_wide", 512)
    x, gate = gated_tanh_wide.get_inputs()
    with bank.watch() as seen:
        got = _step(layer, x, gate)
    assert seen.usage("gated_tanh_wide").kernel_calls == 1, seen.report()
    reference = gated_tanh_wide.Model(512)  # the op file's own Model, holding the same weight
    reference.load_state_dict(layer.state_dict())
    # the weight's gradient sums over the batch in another order than eager's: the same within
    # the slack the verifier accepted the gradients with
    atol, rtol = tolerance(torch.float32, None)
    for want, g in zip(_step(reference, x, gate), got, strict=True):
        torch.testing.assert_close(g, want, atol=atol, rtol=rtol)


def test_a_kernel_verified_for_inference_leaves_autograd_to_the_reference(tmp_path, fast_settings):
    bank, _ = _bank_with(tmp_path, fast_settings, GATED, FUNCTION.format(**RIGHT), train=False)
    layer = bank.load("gated_scale", 16)
    with bank.watch() as seen:
        _step(layer, torch.randn(4, 24, 16), torch.randn(4, 24, 16))
    assert seen.usage("gated_scale").fallbacks == 1, seen.report()
    with torch.no_grad(), bank.watch() as seen:
        layer(torch.randn(4, 24, 16), torch.randn(4, 24, 16))
    assert seen.usage("gated_scale").kernel_calls == 1, seen.report()


@pytest.mark.e2e
def test_re_verifying_keeps_a_training_kernels_standing_and_train_adds_one(tmp_path, fast_settings):
    """``forge bank verify``: a kernel verified for training is verified for training again (its
    evidence rewritten with its standing under autograd); ``--train`` verifies one verified for
    inference only for training too; and one whose backward fails stays in use for inference."""
    _bank_with(tmp_path / "wide", fast_settings, WIDE, _lowered_for_training(), train=True)
    wide = BankLocation.parse(str(tmp_path / "wide" / "bank.db"))
    (again,) = bank_reverify(wide, None, fast_settings)
    assert again.training is not None and any(c.name == "gradients" for c in again.verdict.checks)
    (entry,) = list_kernels(open_for_writing(wide), "gated_tanh_wide")
    assert entry.trains is again.training.used  # the rewritten evidence carries the standing
    # a model whose training step it slowed set it off under autograd: re-verifying keeps that, and says it
    slowed = TrainingStanding(used=False, why="in a model, the training step ran 0.90x eager", by_model=True)
    set_training_standing(open_for_writing(wide), entry.id, slowed)
    (kept_off,) = bank_reverify(wide, None, fast_settings)
    assert kept_off.training == slowed
    (entry,) = list_kernels(open_for_writing(wide), "gated_tanh_wide")
    assert not entry.trains and entry.training_by_model == slowed

    _bank_with(tmp_path / "gated", fast_settings, GATED, FUNCTION.format(**RIGHT), train=False)
    gated = BankLocation.parse(str(tmp_path / "gated" / "bank.db"))
    (plain,) = bank_reverify(gated, None, fast_settings)
    assert plain.training is None and not any(c.name == "gradients" for c in plain.verdict.checks)
    (trained,) = bank_reverify(gated, None, fast_settings, train=True)
    gradients = next(c for c in trained.verdict.checks if c.name == "gradients")
    assert gradients.passed and trained.training is not None, trained.verdict.checks

    _bank_with(tmp_path / "none", fast_settings, GATED, NO_BACKWARD, train=False)
    none = BankLocation.parse(str(tmp_path / "none" / "bank.db"))
    (kept,) = bank_reverify(none, None, fast_settings, train=True)
    assert kept.verdict.passed and kept.training is not None and not kept.training.used
    assert "backward failed" in kept.training.why, kept.training.why
    (entry,) = list_kernels(open_for_writing(none), "gated_scale")
    assert entry.status == "active" and not entry.trains  # still the kernel for inference
