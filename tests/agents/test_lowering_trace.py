"""The general lowering's first step: every op of the catalog (one per category the built-in agent
must cover) traces to the lowering's node set; scans, pooling, arg-reductions and library
producers stay whole; an op whose output size depends on the data is named with the reason."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from forge.agents.builtin.lowering import kind_of, packet_name, trace, unloweable
from forge.core.problem import load_problem

CATALOG = sorted((Path(__file__).parents[2] / "benchmarks" / "op_catalog").glob("*.py"))


def _trace(path: Path):  # type: ignore[no-untyped-def]
    problem = load_problem(path)
    return trace(problem.model_cls(*problem.init_inputs()), problem.inputs())


@pytest.mark.parametrize("path", CATALOG, ids=[p.stem for p in CATALOG])
def test_every_catalog_op_traces_to_the_node_set(path):
    traced = _trace(path)
    assert unloweable(traced) == []
    kinds = {kind_of(n) for n in traced.graph.graph.nodes if n.op == "call_function"}
    assert None not in kinds and kinds


def test_the_kept_ops_stay_whole_and_composites_break_down():
    names = {p.stem: {packet_name(n) for n in _trace(p).graph.graph.nodes if n.op == "call_function"} for p in CATALOG}
    assert names["cumsum"] == {"aten.cumsum"}  # not the table's O(n^2) masked sum
    assert "aten.max_pool2d_with_indices" in names["maxpool2d"] and "aten.as_strided" not in names["maxpool2d"]
    assert "aten.convolution" in names["conv2d_bias_relu"] and "aten.bmm" in names["bmm_scale_softmax"]
    assert names["softmax_dim1"] >= {"prims.amax", "prims.exp", "prims.sum", "prims.div"}
    assert names["leaky_relu"] == {"prims.gt", "prims.mul", "prims.where"}


def test_a_data_dependent_output_size_is_named():
    class Nonzero(torch.nn.Module):
        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return torch.nonzero(x > 0)

    assert unloweable(trace(Nonzero(), [torch.randn(8)])) == ["aten.nonzero: its output size depends on the data"]
