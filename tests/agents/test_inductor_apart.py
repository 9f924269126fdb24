"""Inductor's code is captured in a process of its own where the op has a file: a kernel that
corrupts its process's memory kills that process, not forge's, and the capture is refused with
the reason."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from forge.agents.builtin import inductor
from forge.agents.builtin.inductor.capture import InductorRefused, capture
from forge.agents.builtin.inductor.capture_apart import capture_apart
from forge.core.problem import load_problem

# each captures Inductor's code in a process of its own (~10 s here); the pipeline tests capture it too
pytestmark = pytest.mark.e2e

OP = """
import os

import torch


class Model(torch.nn.Module):
    def forward(self, x):
        if os.environ.get("FORGE_TEST_DIE_IN_CAPTURE") and not torch.compiler.is_compiling():
            os.abort()  # as a kernel that corrupted the heap ends its process
        return torch.relu(x) * 2.0


def get_inputs():
    return [torch.randn(64, 32)]


def get_init_inputs():
    return []
"""


@pytest.fixture
def op(tmp_path: Path) -> Path:
    path = tmp_path / "relu_twice.py"
    path.write_text(OP)
    return path


def _unnumbered(code: str) -> str:
    return re.sub(r"^# AOT ID: \['\d+_", "# AOT ID: ['N_", code, flags=re.MULTILINE)


def test_a_capture_apart_gives_the_code_a_capture_here_gives(op):
    problem = load_problem(op)
    here = capture(problem.build_model(), problem.inputs(), None, {})
    apart = capture_apart(op, "cpu", {})
    # Inductor numbers each process's compilations in a comment ("# AOT ID: ['0_inference']"): a
    # test worker that compiled before this test counts on from there, the fresh process from 0
    assert _unnumbered(apart.code) == _unnumbered(here.code)
    assert apart.args == here.args and apart.inputs == here.inputs


def test_a_capture_whose_process_dies_is_refused_and_forge_goes_on(op, monkeypatch):
    problem = load_problem(op)
    model, inputs = problem.build_model(), problem.inputs()
    recipe = inductor.analyze(model, inputs, op_path=op)
    assert isinstance(recipe, inductor.InductorRecipe), recipe
    monkeypatch.setenv("FORGE_TEST_DIE_IN_CAPTURE", "1")  # the children from now on die
    with pytest.raises(InductorRefused, match="killed by SIGABRT"):
        capture_apart(op, "cpu", {})
    source = inductor.render(recipe, {"ind_chunk": 64})  # a new capture, in a child that dies
    assert source.startswith("raise ImportError(") and "killed by SIGABRT" in source, source
