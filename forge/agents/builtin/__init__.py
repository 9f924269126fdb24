"""The built-in offline coder and judge (no LLM): kernels generated from a trace of the reference,
tuned by coordinate descent over each family's knobs.

Three families: row-wise (softmax, log-softmax, layernorm, rmsnorm, sum/mean/amax over the last
dimension), residual add + layernorm/RMSNorm with the sum as a second output, and pointwise chains
with broadcast parameters, optionally after an nn.Linear.
"""

from forge.agents.builtin import pointwise, residual_norm, rowwise
from forge.agents.builtin.coder import BuiltinCoder
from forge.agents.builtin.judge import BuiltinJudge
from forge.agents.builtin.pointwise import PointwiseRecipe
from forge.agents.builtin.residual_norm import ResidualNormRecipe
from forge.agents.builtin.rowwise import RowRecipe, analyze, render
from forge.agents.builtin.tuner import Trial, next_configs

__all__ = [
    "BuiltinCoder",
    "BuiltinJudge",
    "PointwiseRecipe",
    "ResidualNormRecipe",
    "RowRecipe",
    "Trial",
    "analyze",
    "next_configs",
    "pointwise",
    "render",
    "residual_norm",
    "rowwise",
]
