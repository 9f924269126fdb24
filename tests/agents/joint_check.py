"""Training kernels of the general lowering (``lowering.joint``) against the reference's autograd:
shared by the C++ tests (``test_lowering_joint``) and the Triton check, which runs this module on
CPU with TRITON_INTERPRET=1 in a fresh process (Triton reads the variable when it is imported) or
on a GPU, and prints one JSON line: case id -> "ok" or the error.
"""

from __future__ import annotations

import atexit
import copy
import json
import shutil
import sys
import tempfile
import traceback
import types
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn

from forge.core.importing import import_file

Analyze = Callable[[nn.Module, list[torch.Tensor]], Any]
Render = Callable[[Any, dict[str, Any] | None], str]


class RMSNorm(nn.Module):
    def __init__(self, hidden: int = 40) -> None:
        super().__init__()
        self.weight = nn.Parameter(torch.rand(hidden) + 0.5)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-6) * self.weight


class CrossEntropy(nn.Module):
    def forward(self, logits: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
        return F.cross_entropy(logits, target)


class SwiGLU(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.gate, self.up, self.down = nn.Linear(24, 36), nn.Linear(24, 36), nn.Linear(36, 24)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.down(F.silu(self.gate(x)) * self.up(x))


class ResidualNorm(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.norm = nn.LayerNorm(40)

    def forward(self, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        return self.norm(x + y)


class TwoOutputs(nn.Module):
    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        return F.gelu(x), x.pow(2).mean(-1)


class CumSum(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.cumsum(x.exp(), dim=1)


class LogCumSumExp(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.logcumsumexp(x * 2.0, dim=1)


class Rotary(nn.Module):
    """Rotary embeddings over interleaved pairs: strided slices (their backward scatters through an
    index), position tables as buffers, a stack flattened back."""

    def __init__(self, dim: int = 16, positions: int = 12) -> None:
        super().__init__()
        angles = torch.outer(torch.arange(positions).float(), 1.0 / 100 ** (torch.arange(0, dim, 2).float() / dim))
        self.register_buffer("cos", angles.cos(), persistent=False)
        self.register_buffer("sin", angles.sin(), persistent=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x1, x2 = x[..., 0::2], x[..., 1::2]
        cos, sin = self.cos[: x.shape[-2]], self.sin[: x.shape[-2]]
        return torch.stack((x1 * cos - x2 * sin, x1 * sin + x2 * cos), dim=-1).flatten(-2)


class Attention(nn.Module):
    def forward(self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
        return F.scaled_dot_product_attention(q, k, v, is_causal=True)


def cases() -> dict[str, tuple[nn.Module, list[torch.Tensor]]]:
    """Norms, activations, softmax and cross-entropy, a gated MLP, a convolution, a scan, an op
    with two outputs, rotary embeddings: op -> (model, inputs)."""
    g = torch.Generator().manual_seed(0)

    def randn(*shape: int) -> torch.Tensor:
        return torch.randn(*shape, generator=g)

    return {
        "layernorm": (nn.LayerNorm(40), [randn(12, 40)]),
        "rmsnorm": (RMSNorm(), [randn(12, 40)]),
        "groupnorm": (nn.GroupNorm(2, 8), [randn(3, 8, 5, 5)]),
        "gelu": (nn.GELU(), [randn(12, 40)]),
        "gelu_tanh": (nn.GELU("tanh"), [randn(12, 40)]),
        "silu": (nn.SiLU(), [randn(12, 40)]),
        "mish": (nn.Mish(), [randn(12, 40)]),
        "softplus": (nn.Softplus(), [randn(12, 40)]),
        "elu": (nn.ELU(), [randn(12, 40)]),
        "hardswish": (nn.Hardswish(), [randn(12, 40)]),
        "softmax": (nn.Softmax(-1), [randn(12, 40)]),
        "log_softmax": (nn.LogSoftmax(1), [randn(12, 40)]),
        "cross_entropy": (CrossEntropy(), [randn(12, 40), torch.randint(0, 40, (12,), generator=g)]),
        "swiglu": (SwiGLU(), [randn(3, 5, 24)]),
        "residual_layernorm": (ResidualNorm(), [randn(12, 40), randn(12, 40)]),
        "conv": (nn.Conv2d(3, 4, 3), [randn(2, 3, 9, 9)]),
        "cumsum": (CumSum(), [randn(6, 30)]),
        "logcumsumexp": (LogCumSumExp(), [randn(6, 30)]),
        "two_outputs": (TwoOutputs(), [randn(12, 40)]),
        "rotary": (Rotary(), [randn(2, 3, 10, 16)]),
    }


def joint_candidate(model: nn.Module, inputs: list[torch.Tensor], analyze: Analyze, render: Render) -> nn.Module:
    """The lowering's training candidate for ``model``, as the verifier loads it (state copied)."""
    lowered = analyze(model, inputs)
    assert not isinstance(lowered, str), lowered
    reference = types.ModuleType("forge_reference")
    reference.Model = type(model)  # type: ignore[attr-defined]
    sys.modules["forge_reference"] = reference
    # from a file, as the verifier loads it: Triton's @jit reads a kernel's source from its file
    path = Path(tempfile.mkdtemp(prefix="forge-joint-")) / "candidate.py"
    atexit.register(shutil.rmtree, path.parent, True)  # kept while the test process may still compile it
    path.write_text(render(lowered, None))
    new_class = import_file(f"forge_joint_{path.parent.name}", path).ModelNew
    candidate = new_class.__new__(new_class)
    candidate.__dict__.update(copy.deepcopy(model).__dict__)
    return candidate


def grads(model: nn.Module, inputs: list[torch.Tensor], seed: int | None, device: str) -> dict[str, Any]:
    """Outputs, input gradients and parameter gradients of one forward and a backward of output
    gradients drawn with ``seed`` (ones when None)."""
    leaves = [x.detach().clone().to(device).requires_grad_(x.is_floating_point()) for x in inputs]
    out = model(*leaves)
    outs = list(out) if isinstance(out, tuple) else [out]
    g = torch.Generator().manual_seed(seed or 0)
    given = [torch.ones_like(o) if seed is None else torch.randn(o.shape, generator=g).to(device) for o in outs]
    torch.autograd.backward(outs, given)
    found: dict[str, Any] = {f"output {k}": o.detach() for k, o in enumerate(outs)}
    found["grad_fn"] = type(outs[0].grad_fn).__name__
    found.update({f"input {k}": x.grad for k, x in enumerate(leaves) if x.grad is not None})
    found.update({f"parameter {n}": p.grad for n, p in model.named_parameters()})
    return found


def compare(model: nn.Module, inputs: list[torch.Tensor], analyze: Analyze, render: Render, device: str) -> None:
    """The candidate's output and every gradient match the reference's, through the training
    kernels (its output's grad_fn is their autograd Function)."""
    candidate = joint_candidate(model, inputs, analyze, render).to(device)
    reference = copy.deepcopy(model).to(device)
    want, got = grads(reference, inputs, 1, device), grads(candidate, inputs, 1, device)
    assert got.pop("grad_fn") == "_JointBackward", "the candidate's training kernels did not run"
    want.pop("grad_fn")
    assert set(got) == set(want), (set(got), set(want))
    for name, value in want.items():
        torch.testing.assert_close(got[name], value, rtol=1e-4, atol=1e-5, msg=lambda m, n=name: f"{n}: {m}")


def run_cases(device: str = "cpu") -> dict[str, str]:
    from forge.agents.builtin.lowering import triton_program

    results = {}
    for name, (model, inputs) in cases().items():
        try:
            compare(model, inputs, triton_program.analyze_train, triton_program.render, device)
            results[name] = "ok"
        except Exception:
            results[name] = traceback.format_exc()[-1500:]
    return results


if __name__ == "__main__":
    print(json.dumps(run_cases(sys.argv[sys.argv.index("--device") + 1] if "--device" in sys.argv else "cpu")))
