"""The built-in offline coder and judge (no LLM): kernels generated from a trace of the reference.

Two families so far: row-wise (softmax, log-softmax, layernorm, rmsnorm, sum/mean/amax over the
last dimension) and pointwise chains with broadcast parameters, optionally after an nn.Linear.
"""

from forge.agents.builtin import pointwise, rowwise
from forge.agents.builtin.coder import BuiltinCoder
from forge.agents.builtin.pointwise import PointwiseRecipe
from forge.agents.builtin.rowwise import RowRecipe, analyze, render

__all__ = ["BuiltinCoder", "PointwiseRecipe", "RowRecipe", "analyze", "pointwise", "render", "rowwise"]
