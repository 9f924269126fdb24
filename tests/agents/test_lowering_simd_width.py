"""The C++ lowering's SIMD width knob: offered where the math has a transcendental, and the only
thing it changes is the vector width GCC compiles the kernel's loops to on an AVX-512 CPU."""

from __future__ import annotations

import re
import subprocess

import pytest
import torch
import torch.nn.functional as F

from forge.agents.builtin.lowering import program
from forge.agents.builtin.lowering.program import LoweredGraph
from forge.cpp import DEFAULT_FLAGS
from tests.agents.test_lowering_kernels import Op, check


def _mish(x: torch.Tensor) -> torch.Tensor:
    return torch.clamp(x * torch.tanh(F.softplus(x)) * 1.5, -1.0, 4.0)


def _lowered(fn, inputs: list[torch.Tensor]) -> LoweredGraph:  # type: ignore[no-untyped-def]
    lowered = program.analyze(Op(fn), inputs)
    assert isinstance(lowered, LoweredGraph), lowered
    return lowered


def _cpp(source: str) -> str:
    return source.split('cpp.load(r"""', 1)[1].split('""")', 1)[0]


def _zmm_lines(cpp_source: str, tmp_path) -> int:  # type: ignore[no-untyped-def]
    """Instructions on 512-bit registers in the assembly GCC writes for ``cpp_source`` with forge's
    flags, for a Sapphire Rapids CPU whatever this machine is (compiled, never run)."""
    src, asm = tmp_path / "k.cpp", tmp_path / "k.s"
    src.write_text(cpp_source)
    flags = [f for f in DEFAULT_FLAGS if not f.startswith("-march=")]
    subprocess.run(["g++", *flags, "-march=sapphirerapids", "-S", str(src), "-o", str(asm)], check=True)
    return len(re.findall(r"%zmm\d+", asm.read_text()))


def test_the_simd_width_knob_is_offered_where_the_math_has_a_transcendental_only():
    x = torch.randn(64, 256)
    assert _lowered(_mish, [x]).knobs()["simd_width"] == [512, 256]
    assert _lowered(torch.exp, [x]).knobs()["simd_width"] == [512, 256]
    for plain in (lambda t: t * 2.0 + 1.0, lambda t: torch.relu(t).sum(-1)):
        lowered = _lowered(plain, [x])
        assert "simd_width" not in lowered.knobs()
        assert program.render(lowered, {"simd_width": 512}) == program.render(lowered, {"simd_width": 256})


def test_512_compiles_the_loops_to_512_bit_vectors_on_avx512_and_256_does_not(tmp_path):
    lowered = _lowered(_mish, [torch.randn(64, 256)])
    wide, narrow = (_cpp(program.render(lowered, {"simd_width": w})) for w in (512, 256))
    assert "prefer-vector-width=512" in wide and "prefer-vector-width" not in narrow
    assert _zmm_lines(wide, tmp_path) > 20
    assert _zmm_lines(narrow, tmp_path) == 0


@pytest.mark.parametrize("width", [512, 256])
def test_both_widths_compute_the_reference(width):
    x = torch.randn(33, 300) * 4
    x[0, :5] = torch.tensor([float("nan"), float("inf"), -float("inf"), 80.0, -90.0])
    check(Op(_mish), [x], {**program.DEFAULT, "simd_width": width})
    check(Op(lambda t: torch.log_softmax(t, -1) * torch.sigmoid(t)), [x], {**program.DEFAULT, "simd_width": width})


MISH_OP = """
import torch

class Model(torch.nn.Module):
    def forward(self, x):
        return x * torch.tanh(torch.nn.functional.softplus(x))

def get_inputs():
    return [torch.randn(64, 256)]

def get_init_inputs():
    return []
"""


@pytest.mark.parametrize("wide", [True, False])
def test_the_builtin_coder_offers_the_knob_only_where_the_verifying_cpu_runs_512_bit_vectors(tmp_path, wide):
    from forge.agents.builtin import BuiltinCoder

    op = tmp_path / "mish.py"
    op.write_text(MISH_OP)
    coder = BuiltinCoder(op, "cpp", inductor_candidate=False, wide_simd=wide)
    space = coder.space()
    assert space is not None
    assert ("simd_width" in space) is wide
