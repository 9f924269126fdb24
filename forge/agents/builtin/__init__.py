"""The built-in offline coder and judge (no LLM): kernels generated from a trace of the reference,
tuned by coordinate descent over each family's knobs.

The coder tries its families in this order and takes the first that recognises the op
(``coder.FAMILIES``; the Triton backend has the same order):

1. row-wise (``rowwise``): softmax, log-softmax, layernorm, rmsnorm, sum/mean/amax over the last
   dimension, hand-tuned;
2. residual add + layernorm/RMSNorm with the sum as a second output (``residual_norm``);
3. pointwise chains with broadcast parameters, optionally after an nn.Linear (``pointwise``);
4. the general lowering (``lowering``) of any traced graph the three above do not take.

So an op a hand-tuned family recognises (softmax, say) never reaches the lowering: a change to
``lowering/`` shows only on ops outside the first three families.

The pointwise ops both the pointwise family and the lowering write are one table, ``ops.OPS``
(keyed by the name the trace gives an op: ``prims.exp``), one record per op holding its C++ and
Triton forms; the C++ programs include the vectorisable float math their ops call
(``ops.cpp_math``). Adding an op is one record and its test (docs/lowering.md, "The op table").
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
