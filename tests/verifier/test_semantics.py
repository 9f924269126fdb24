"""What the verifier holds beyond outputs: a module's buffers as output (state), random references
verified in eval mode, exact integer outputs, and the scalar (loss) tolerance."""

from __future__ import annotations

import torch

from forge.verifier import verify
from forge.verifier.parent import checks
from forge.verifier.parent.compare import compare, reduction_atol, scalar_rtol

BATCHNORM = """
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.bn = nn.BatchNorm1d(16)

    def forward(self, x):
        return self.bn(x)


def get_inputs():
    return [torch.randn(64, 16) * 2 + 1]


def get_init_inputs():
    return []
"""

# Normalises with the batch's statistics, as training mode does, but never updates the running ones.
SKIPS_UPDATE = """
import torch
from forge_reference import Model


class ModelNew(Model):
    def forward(self, x):
        bn = self.bn
        if not self.training:
            return (x - bn.running_mean) / torch.sqrt(bn.running_var + bn.eps) * bn.weight + bn.bias
        mean, var = x.mean(0), x.var(0, unbiased=False)
        return (x - mean) / torch.sqrt(var + bn.eps) * bn.weight + bn.bias
"""

# Training mode's op in both modes: right in training mode, wrong in eval mode (what the bank is for).
TRAINING_ONLY = SKIPS_UPDATE.replace("        if not self.training:\n", "        if False:\n")

UPDATES = SKIPS_UPDATE.replace(
    "        return (x - mean)",
    """        with torch.no_grad():
            m = bn.momentum
            bn.running_mean.mul_(1 - m).add_(mean * m)
            bn.running_var.mul_(1 - m).add_(x.var(0, unbiased=True) * m)
            bn.num_batches_tracked.add_(1)
        return (x - mean)""",
)


def _verify(tmp_path, op: str, cand: str, settings):  # type: ignore[no-untyped-def]
    (tmp_path / "op.py").write_text(op)
    (tmp_path / "cand.py").write_text(cand)
    return verify(tmp_path / "op.py", tmp_path / "cand.py", settings)


def test_a_candidate_that_skips_the_running_statistics_fails_the_state_check(tmp_path, fast_settings):
    v = _verify(tmp_path, BATCHNORM, SKIPS_UPDATE, fast_settings)
    assert v.status == "failed_correctness"
    assert v.reason.startswith("module_state: ") and "running_mean" in v.reason
    assert any(c.name == "correctness" and c.passed for c in v.checks)  # the outputs themselves agree


def test_a_candidate_that_updates_them_passes_with_the_state_check_listed(tmp_path, fast_settings):
    v = _verify(tmp_path, BATCHNORM, UPDATES, fast_settings)
    assert v.status == "passed", v.reason
    assert [c.passed for c in v.checks if c.name == "module_state"] == [True]
    assert v.modes == ["eval", "train"]  # BatchNorm computes another op in training mode
    assert any("verified in both modes alike" in w for w in v.warnings), v.warnings


def test_a_mode_dependent_op_is_verified_in_eval_mode_too(tmp_path, fast_settings):
    """The bank's kernels run in eval mode: a kernel of training mode's BatchNorm fails there."""
    v = _verify(tmp_path, BATCHNORM, TRAINING_ONLY, fast_settings)
    assert v.status == "failed_correctness"
    assert v.reason.startswith("correctness: case base/0:normal:0") and "outside" in v.reason, v.reason


DROPOUT = """
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(32, 32)
        self.drop = nn.Dropout(0.25)

    def forward(self, x):
        return self.drop(torch.relu(self.lin(x)))


def get_inputs():
    return [torch.randn(8, 32)]


def get_init_inputs():
    return []
"""

NO_DROPOUT = """
import torch
from forge_reference import Model


class ModelNew(Model):
    def forward(self, x):
        return torch.relu(self.lin(x))
"""


def test_a_random_reference_is_detected_and_verified_in_eval_mode(tmp_path, fast_settings):
    v = _verify(tmp_path, DROPOUT, NO_DROPOUT, fast_settings)
    assert v.status == "passed", v.reason
    assert any("random" in w and "eval mode" in w for w in v.warnings), v.warnings
    assert v.modes == ["eval"]  # the runtime runs the reference in training mode


def test_a_deterministic_reference_is_not_called_random(tmp_path, fast_settings):
    v = _verify(tmp_path, BATCHNORM, UPDATES, fast_settings)
    assert not any("random" in w for w in v.warnings)


def test_integer_outputs_are_compared_exactly_and_scalars_get_a_summation_tolerance():
    idx = torch.tensor([3, 1, 2])
    assert compare([idx], [torch.tensor([3, 1, 1])], None, "cpu") is not None
    loss = torch.tensor(1.0)
    off = torch.tensor(1.0 + 2e-4)
    assert compare([loss], [off], None, "cpu") is not None  # a scalar of a small reduction: 1e-4
    assert compare([loss], [off], None, "cpu", reduced=2_000_000) is None  # of two million elements
    assert scalar_rtol(torch.float32, 1e-4, 1) == 1e-4
    assert abs(scalar_rtol(torch.float32, 1e-4, 10**6) - 2 * 2**-23 * 1000) < 1e-12
    # a tolerance the op declares is not widened
    assert compare([loss], [off], None, "cpu", {"atol": 1e-6, "rtol": 1e-6}, reduced=2_000_000) is not None


def test_a_tensor_of_reductions_gets_an_atol_from_its_partial_sums():
    """A row sum that cancels to near zero is off by as much as any row when summed in another
    order (row_sum's timed calls failed at 1.6e-4 against atol 1e-4); the widening follows the
    per-element reduction size and the output's rms, and a real error still fails."""
    gen = torch.Generator().manual_seed(0)
    x = torch.randn(256, 4096, generator=gen)
    x[7] -= x[7].mean()  # a row whose sum cancels to about zero
    ref = x.sum(1)
    other_order = x.view(256, 4096 // 32, 32).sum(2).sum(1)
    near_zero = 7
    shifted = ref.clone()
    shifted[near_zero] += 2e-4  # about what another summation order gives on this row
    assert compare([ref], [shifted], None, "cpu") is not None  # as a plain tensor: atol 1e-4
    assert compare([ref], [shifted], None, "cpu", reduced=x.numel()) is None  # 4096 per element
    assert compare([ref], [other_order], None, "cpu", reduced=x.numel()) is None
    rms = float(ref.double().square().mean().sqrt())
    assert abs(reduction_atol(torch.float32, 1e-4, 4096, ref) - 2 * 2**-23 * 64 * rms) < 1e-9
    wrong = ref.clone()
    wrong[near_zero] += 0.05  # a dropped element or two
    assert compare([ref], [wrong], None, "cpu", reduced=x.numel()) is not None
    # an elementwise op (one input element per output) is not widened, nor a declared tolerance
    assert reduction_atol(torch.float32, 1e-4, 1, ref) == 1e-4
    assert compare([ref], [shifted], None, "cpu", {"atol": 1e-4, "rtol": 1e-4}, reduced=x.numel()) is not None


def test_timed_outputs_use_the_reduction_tolerance_of_their_inputs():
    x = torch.randn(64, 4096, generator=torch.Generator().manual_seed(1))
    x[0] -= x[0].mean()
    ref = x.sum(1)
    shifted = ref.clone()
    shifted[0] += 2e-4
    assert checks.timed_outputs_mismatch([[ref]], [[shifted]], None, [[x]]) is None
    assert checks.timed_outputs_mismatch([[ref]], [[shifted]], None) is not None  # no inputs known: 1e-4
    assert "timed call 1" in str(checks.timed_outputs_mismatch([[ref]], [[ref + 0.05]], None, [[x]]))
