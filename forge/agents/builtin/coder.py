"""The built-in coder: the ``Coder`` role without an LLM.

It loads the op, traces its reference and emits a kernel from the first family that recognises
it (row-wise, then pointwise), rendered with a config from the built-in judge (the tuner). For
anything else it says so, so that the session can tell the user to pass ``--model``.
"""

from __future__ import annotations

from pathlib import Path
from types import ModuleType
from typing import Any

from forge.agents.builtin import pointwise, rowwise
from forge.agents.builtin.tuner import Space, best_trial, config_key, default_config, next_configs, trials_from
from forge.agents.roles import CoderContext, Proposal
from forge.errors import ProblemError

UNSUPPORTED = "the built-in agent can't handle {op} ({why}); use --model to let an LLM write the kernel"


class BuiltinCoder:
    """Proposes C++ kernels for CPU from a trace of the reference (CUDA/Triton: not yet)."""

    def __init__(self, op_path: Path) -> None:
        self.op_path = op_path
        self._family: ModuleType | None = None
        self._recipe: Any = None
        self._why: str | None = None
        self._problem_error = False
        self._issued: set[str] = set()  # configs handed out (evolve asks per parent before verifying)

    def _analyze(self) -> None:
        if self._family is not None or self._why is not None:
            return
        from forge.harness.problem import load_problem

        try:
            problem = load_problem(self.op_path)
            model = problem.model_cls(*problem.init_inputs())
            inputs = problem.inputs()
        except ProblemError as exc:
            self._why, self._problem_error = exc.message, True
            return
        reasons = []
        for family in (rowwise, pointwise):
            recipe = family.analyze(model, inputs)
            if isinstance(recipe, str):
                reasons.append(recipe)
                continue
            self._family, self._recipe = family, recipe
            return
        self._why = "; ".join(reasons)

    def space(self) -> Space | None:
        """The tuner's knobs for this op (None when the op is not one the coder handles)."""
        self._analyze()
        return None if self._family is None else dict(self._family.space(self._recipe))

    def propose(self, context: CoderContext) -> list[Proposal]:
        if context.device != "cpu":
            why = f"it only writes CPU kernels so far, not {context.device}"
            return [Proposal(None, "cpp", error=UNSUPPORTED.format(op=context.op_name, why=why), fatal=True)]
        self._analyze()
        if self._family is None:
            msg = self._why if self._problem_error else UNSUPPORTED.format(op=context.op_name, why=self._why)
            return [Proposal(None, "cpp", error=msg, fatal=True)]
        space = self.space() or {}
        configs: list[dict[str, Any]] = []
        parent = context.parent
        if context.want == 1 and parent is not None and parent.feedback and parent.feedback.config:
            suggested = {k: v for k, v in parent.feedback.config.items() if k in space}
            configs = [] if config_key(suggested) in self._issued else [suggested]
        if not configs:
            configs = next_configs(space, trials_from(context.history), n=context.want, exclude=self._issued)
        self._issued.update(config_key(c) for c in configs)
        if not configs and not context.history:
            configs = [default_config(space)]
        best = best_trial(trials_from(context.history))
        base = best.config if best else (parent.config if parent else None)
        name = self._family.__name__.rsplit(".", 1)[1]
        return [
            Proposal(
                self._family.render(self._recipe, cfg),
                "cpp",
                config=cfg,
                parent_config=base if base != cfg else None,
                note=f"{name} family: {type(self._recipe).__name__}, config {cfg}",
            )
            for cfg in configs
        ]
