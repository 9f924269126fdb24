"""The built-in coder: the ``Coder`` role without an LLM.

It loads the op, traces its reference and emits a kernel from the first family that recognises
it (row-wise, then pointwise). For anything else it says so, so that the session can tell the
user to pass ``--model``.
"""

from __future__ import annotations

from pathlib import Path

from forge.agents.builtin import pointwise, rowwise
from forge.agents.roles import CoderContext, Proposal
from forge.errors import ProblemError

UNSUPPORTED = "the built-in agent can't handle {op} ({why}); use --model to let an LLM write the kernel"


class BuiltinCoder:
    """Proposes C++ kernels for CPU from a trace of the reference (CUDA/Triton: not yet)."""

    def __init__(self, op_path: Path) -> None:
        self.op_path = op_path

    def propose(self, context: CoderContext) -> list[Proposal]:
        if context.device != "cpu":
            why = f"it only writes CPU kernels so far, not {context.device}"
            return [Proposal(None, "cpp", error=UNSUPPORTED.format(op=context.op_name, why=why))]
        from forge.harness.problem import load_problem

        try:
            problem = load_problem(self.op_path)
            model = problem.model_cls(*problem.init_inputs())
            inputs = problem.inputs()
        except ProblemError as exc:
            return [Proposal(None, "cpp", error=exc.message)]
        reasons = []
        for family in (rowwise, pointwise):
            recipe = family.analyze(model, inputs)
            if isinstance(recipe, str):
                reasons.append(recipe)
                continue
            note = f"{family.__name__.rsplit('.', 1)[1]} family: {type(recipe).__name__}"
            return [Proposal(family.render(recipe), "cpp", note=note)]
        why = "; ".join(reasons)
        return [Proposal(None, "cpp", error=UNSUPPORTED.format(op=context.op_name, why=why))]
