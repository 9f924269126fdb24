"""The gradient check (``verify_gradients``, ``forge verify --train``): a candidate's backward
against the reference's autograd, in the real verifier's two workers. Each wrong backward the
issue names is caught, by the tensor it gets wrong; an honest one passes."""

from __future__ import annotations

from pathlib import Path

import pytest

from forge.core.acceptance import training_standing
from forge.core.settings import ForgeSettings
from forge.verifier import verify
from forge.verifier.worker.gradients import training_step
from tests.conftest import CANDIDATES, OPS, sweep

GATED = OPS / "gated_scale.py"

# A candidate with its own backward (a torch.autograd.Function); {gx}, {ggate} and {gw} are the
# gradients it returns, written in terms of g (the output's gradient), x, gate's sigmoid s and w.
FUNCTION = """
import torch
from torch import nn


class _Gated(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, gate, w):
        s = torch.sigmoid(gate)
        ctx.save_for_backward(x, s, w)
        return x * s * w

    @staticmethod
    def backward(ctx, g):
        x, s, w = ctx.saved_tensors
        return {gx}, {ggate}, {gw}


class ModelNew(nn.Module):
    def __init__(self, channels):
        super().__init__()
        self.weight = nn.Parameter(torch.randn(channels))

    def forward(self, x, gate):
        return _Gated.apply(x, gate, self.weight)
"""
RIGHT = {"gx": "g * s * w", "ggate": "g * x * w * s * (1 - s)", "gw": "(g * x * s).sum(dim=(0, 1))"}


def _write(tmp_path: Path, name: str, **wrong: str) -> Path:
    path = tmp_path / f"{name}.py"
    path.write_text(FUNCTION.format(**{**RIGHT, **wrong}))
    return path


def _gradients(op: Path, candidate: Path, settings: ForgeSettings):  # type: ignore[no-untyped-def]
    s = settings.model_copy(update={"verify_gradients": True})
    v = verify(op, candidate, s)
    return v, next((c for c in v.checks if c.name == "gradients"), None)


def test_an_autograd_function_with_the_right_backward_passes(tmp_path, fast_settings):
    v, check = _gradients(GATED, _write(tmp_path, "right"), fast_settings)
    assert v.status == "passed", v.reason
    assert check is not None and check.passed and "match the reference's autograd" in check.detail
    # its backward is torch ops on saved tensors: differentiable again under create_graph=True
    assert "double backward (create_graph=True) gives gradients with their graph" in check.detail, check.detail


# The right gradients, computed without a graph: under create_graph=True they would silently drop
# a gradient penalty's terms
NO_GRAPH = {name: f"({grad}).detach()" for name, grad in RIGHT.items()}
# The right gradients, and a loud refusal of a double backward (as the built-in training kernels do)
REFUSING = {"gx": "_refuse() or g * s * w"}
REFUSE = """

def _refuse():
    if torch.is_grad_enabled():
        raise RuntimeError("double backward is not provided")
"""


def test_a_backward_whose_gradients_drop_their_graph_under_create_graph_fails_and_one_refusing_passes(
    tmp_path, fast_settings
):
    v, check = _gradients(GATED, _write(tmp_path, "no_graph", **NO_GRAPH), fast_settings)
    assert v.status == "failed_correctness"
    assert check is not None and "with create_graph=True" in check.detail and "silently dropped" in check.detail
    refusing = _write(tmp_path, "refusing", **REFUSING)
    refusing.write_text(refusing.read_text() + REFUSE)
    v, check = _gradients(GATED, refusing, fast_settings)
    assert v.status == "passed", v.reason
    assert check is not None and "double backward (create_graph=True) raises: not provided" in check.detail


@pytest.mark.parametrize(
    ("wrong", "named"),
    [
        ({"gx": "-(g * s * w)"}, "gradient of input 0"),  # a sign flipped
        ({"ggate": "g * x * w * s"}, "gradient of input 1"),  # a missing term: sigmoid's (1 - s)
        ({"ggate": "None"}, "gradient of input 1: the candidate's backward gives none"),  # one of two inputs
        ({"gw": "(g * x * s).sum(dim=(0, 1)) * 0 + 1"}, "gradient of parameter weight"),  # a constant
    ],
)
def test_a_wrong_backward_fails_naming_the_gradient_it_gets_wrong(tmp_path, fast_settings, wrong, named):
    v, check = _gradients(GATED, _write(tmp_path, "wrong", **wrong), fast_settings)
    assert v.status == "failed_correctness"
    assert check is not None and not check.passed
    assert named in check.detail, check.detail


DETACHED = """
import torch
from torch import nn


class ModelNew(nn.Module):
    def __init__(self, channels):
        super().__init__()
        self.weight = nn.Parameter(torch.randn(channels))

    def forward(self, x, gate):
        return x * torch.sigmoid(gate) * self.weight.detach()
"""

NO_BACKWARD = """
import torch
from torch import nn


class ModelNew(nn.Module):
    def __init__(self, channels):
        super().__init__()
        self.weight = nn.Parameter(torch.randn(channels))

    def forward(self, x, gate):
        with torch.no_grad():  # as a kernel without a backward returns its result
            return x * torch.sigmoid(gate) * self.weight
"""


def test_a_backward_wrong_only_on_large_inputs_fails_its_stress_cases(tmp_path, fast_settings):
    # sigmoid's derivative from a clamped gate: exact for ordinary gates, off where they are large
    clamped = "torch.sigmoid(torch.logit(s).clamp(-8, 8))"
    wrong = {"gx": f"g * {clamped} * w", "ggate": f"g * x * w * {clamped} * (1 - {clamped})"}
    v, check = _gradients(GATED, _write(tmp_path, "clamped", **wrong), fast_settings)
    assert v.status == "failed_correctness"
    assert check is not None and ":grad-" in check.detail and ":grad-normal:" not in check.detail, check.detail


@pytest.mark.parametrize(
    ("source", "named"),
    [
        (DETACHED, "gradient of parameter weight: the candidate's backward gives none"),
        (NO_BACKWARD, "carry no autograd graph: it provides no backward"),
    ],
)
def test_a_detached_parameter_and_a_kernel_without_backward_fail(tmp_path, fast_settings, source, named):
    path = tmp_path / "cand.py"
    path.write_text(source)
    v, check = _gradients(GATED, path, fast_settings)
    assert v.status == "failed_correctness"
    assert check is not None and named in check.detail, check.detail


# The gated scale as a torch.library custom op, its backward registered with register_autograd;
# {fake} is its fake implementation (what torch.compile traces it with)
CUSTOM_OP = """
import torch
from torch import nn


@torch.library.custom_op("forge_test::gated", mutates_args=())
def gated(x: torch.Tensor, gate: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    return x * torch.sigmoid(gate) * w


{fake}


def _setup(ctx, inputs, output):
    ctx.save_for_backward(*inputs)


def _backward(ctx, g):
    x, gate, w = ctx.saved_tensors
    s = torch.sigmoid(gate)
    return g * s * w, g * x * w * s * (1 - s), (g * x * s).sum(dim=(0, 1))


gated.register_autograd(_backward, setup_context=_setup)


class ModelNew(nn.Module):
    def __init__(self, channels):
        super().__init__()
        self.weight = nn.Parameter(torch.randn(channels))

    def forward(self, x, gate):
        return gated(x, gate, self.weight)
"""
FAKE = """
@gated.register_fake
def _(x, gate, w):
    return torch.empty_like(x){wrong}
"""


# The same op without an autograd formula of its own, differentiated by an autograd.Function
# around it: opcheck has no formula of the op's to test, and the candidate passes
WRAPPED = """

class _Gated(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, gate, w):
        ctx.save_for_backward(x, gate, w)
        return gated(x, gate, w)

    @staticmethod
    def backward(ctx, g):
        return _backward(ctx, g)


ModelNew.forward = lambda self, x, gate: _Gated.apply(x, gate, self.weight)
"""


@pytest.mark.parametrize(
    ("fake", "wrapped", "passes"),
    sweep(
        [
            (FAKE.format(wrong=""), False, True),
            (FAKE.format(wrong="[..., :1]"), False, False),  # not the kernel's shape: torch.compile traces it wrong
            (FAKE.format(wrong=""), True, True),
            ("", False, False),  # no fake implementation: torch.compile cannot trace the op
        ],
        ids=["passes", "fake_of_another_shape", "wrapped_passes", "no_fake"],
        kept=2,
        marker=pytest.mark.variants,
    ),
)
def test_a_custom_op_candidate_is_checked_with_opcheck(tmp_path, fast_settings, fake, wrapped, passes):
    source = CUSTOM_OP.format(fake=fake)
    if wrapped:  # no autograd formula of the op's own: the Function around it differentiates it
        source = source.replace("gated.register_autograd(_backward, setup_context=_setup)\n", "") + WRAPPED
    path = tmp_path / "custom_op.py"
    path.write_text(source)
    v, check = _gradients(GATED, path, fast_settings)
    assert check is not None
    if passes:
        assert v.status == "passed", v.reason
        assert "torch.library.opcheck passed on forge_test::gated" in check.detail, check.detail
    else:
        assert v.status == "failed_correctness"
        assert "custom op forge_test::gated: torch.library.opcheck" in check.detail, check.detail


def test_without_the_setting_no_gradient_is_checked(fast_settings):
    v = verify(OPS / "small_affine.py", CANDIDATES / "affine" / "honest.py", fast_settings)
    assert v.status == "passed", v.reason
    assert all(c.name != "gradients" for c in v.checks)


REFERENCE_IN_BACKWARD = """
import torch
from torch import nn
from forge_reference import Model


class _Gated(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, gate, w, owner):
        ctx.save_for_backward(x, gate)
        ctx.owner = owner
        return x * torch.sigmoid(gate) * w

    @staticmethod
    def backward(ctx, g):
        x, gate = ctx.saved_tensors
        with torch.enable_grad():  # the reference's forward, differentiated by torch
            xs, gs = x.detach().requires_grad_(), gate.detach().requires_grad_()
            out = Model.forward(ctx.owner, xs, gs)
            gx, ggate, gw = torch.autograd.grad(out, (xs, gs, ctx.owner.weight), g)
        return gx, ggate, gw, None


class ModelNew(nn.Module):
    def __init__(self, channels):
        super().__init__()
        self.weight = nn.Parameter(torch.randn(channels))

    def forward(self, x, gate):
        return _Gated.apply(x, gate, self.weight, self)
"""


def test_a_backward_that_runs_the_reference_fails_integrity(tmp_path, fast_settings):
    path = tmp_path / "cand.py"
    path.write_text(REFERENCE_IN_BACKWARD)
    v, check = _gradients(GATED, path, fast_settings)
    assert v.status == "failed_integrity", v.reason
    assert check is not None and "gradients are the reference's autograd" in check.detail


def test_training_steps_are_timed_and_a_slow_backward_leaves_training_to_the_reference(tmp_path, fast_settings):
    """--train times forward-and-backward steps against eager's; a right but slow backward (work
    thrown away) passes the gradient check, and its step is measured slower, so the kernel is
    not used where gradients are needed (``training_standing``)."""
    v, _ = _gradients(GATED, _write(tmp_path, "right"), fast_settings)
    assert v.training_step is not None and v.training_step.headline()[0] is not None
    assert any(c.name == "training_step" for c in v.checks)
    wasteful = "[torch.exp(g * s).sum() for _ in range(200)] and g * s * w"
    slow, check = _gradients(GATED, _write(tmp_path, "slow", gx=wasteful), fast_settings)
    assert slow.status == "passed" and check is not None and check.passed, slow.reason
    step = next(c for c in slow.checks if c.name == "training_step")
    assert not step.passed and not step.fatal and "slower than eager's step" in step.detail, step.detail
    standing = training_standing(slow)
    assert not standing.used and "slower" in standing.why


def test_a_training_step_returns_its_outputs_and_gradients_with_fixed_output_gradients():
    import torch
    from torch import nn

    model = nn.Linear(4, 3)
    step = training_step(model)
    x = torch.randn(5, 4)
    out, gx, gb, gw = step([x])  # the output, then the input's gradient, then the parameters' by name
    assert not out.requires_grad and torch.equal(out, model(x).detach())
    assert model.weight.grad is None  # taken off after the step
    again = step([x])
    for first, second in zip((out, gx, gb, gw), again, strict=True):
        torch.testing.assert_close(first, second)  # the same output gradient each step, not accumulated
    assert not torch.equal(gw, torch.ones(5, 3).t() @ x)  # and not ones


CACHING = FUNCTION.replace(
    "        x, s, w = ctx.saved_tensors\n",
    "        x, s, w = ctx.saved_tensors\n"
    "        _SEEN.append(1)\n"
    "        if len(_SEEN) > 40 and _CACHE:  # once timing has begun: the first result, forever\n"
    "            return _CACHE[0]\n",
).replace("class _Gated", "_SEEN, _CACHE = [], []\n\n\nclass _Gated")


def test_a_backward_that_caches_once_timed_fails_integrity(tmp_path, fast_settings):
    """The gradient cases are few; a backward that starts returning a cached result after them
    passes those, and every timed training step's gradients are compared with the reference's."""
    path = tmp_path / "caching.py"
    right = "(g * s * w, g * x * w * s * (1 - s), (g * x * s).sum(dim=(0, 1)))"
    path.write_text(
        CACHING.replace(
            "        return {gx}, {ggate}, {gw}", f"        _CACHE.append({right})\n        return _CACHE[-1]"
        )
    )
    v, check = _gradients(GATED, path, fast_settings)
    assert check is not None and check.passed, v.reason
    assert v.status == "failed_integrity" and "training_outputs" in (v.reason or ""), v.reason
