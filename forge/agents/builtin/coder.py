"""The built-in coder: the ``Coder`` role without an LLM.

It loads the op, traces its reference and emits a kernel from the first family that recognises
it (row-wise, residual add + norm, pointwise, then the general lowering of any traced graph),
rendered with a config from the built-in judge (the tuner): C++
with OpenMP and SIMD for CPU, Triton for CUDA. For anything else it says so, so that the session
can tell the user to pass ``--model``.

For training (``forge optimize --train``) only the general lowering writes kernels: it derives
the backward from torch's joint graph and lowers it with the forward (``lowering.joint``); the
hand-tuned families have no backward.
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Generic, TypeVar

from forge.agents.builtin import (
    inductor,
    pointwise,
    residual_norm,
    rowwise,
    triton_pointwise,
    triton_residual_norm,
    triton_rowwise,
)
from forge.agents.builtin.lowering import program as lowered
from forge.agents.builtin.lowering import triton_program as lowered_triton
from forge.agents.builtin.tuner import (
    FAMILY_KNOB,
    Space,
    best_trial,
    canonical_key,
    default_config,
    effective_config,
    next_configs,
    trials_from,
    tried_keys,
)
from forge.agents.roles import CoderContext, Proposal
from forge.core.candidate_config import CandidateConfig
from forge.core.errors import ProblemError
from forge.core.module_call import CallRefused, recorded_call
from forge.core.problem import load_problem

UNSUPPORTED = "the built-in agent can't handle {op} ({why}); use --model to let an LLM write the kernel"


R = TypeVar("R")
Config = dict[str, Any]  # a tuner config: knob -> value, as attempts store it (JSON)


def _same_config(_recipe: object, config: Config) -> Config:
    return config


@dataclass(frozen=True)
class Family(Generic[R]):
    """One family of the built-in coder, typed by its recipe ``R`` (what ``analyze`` makes of an
    op it recognises): its kernels' knobs for a recipe, a kernel rendered from a recipe and a
    config, and the config that renders the same kernel with inert knobs reset (see tuner)."""

    name: str
    # a recipe, or the reason the op is not in the family (the general lowering's also takes a
    # call's template, ``module_call``, for an op called as its forge_call says)
    analyze: Callable[..., R | str]
    space: Callable[[R], Space]
    render: Callable[[R, Config | None], str]
    canonical: Callable[[R, Config], Config] = _same_config


FAMILIES: dict[str, tuple[Family[Any], ...]] = {
    "cpp": (
        Family("rowwise", rowwise.analyze, rowwise.space, rowwise.render, rowwise.canonical),
        Family("residual_norm", residual_norm.analyze, residual_norm.space, residual_norm.render),
        Family("pointwise", pointwise.analyze, pointwise.space, pointwise.render, pointwise.canonical),
        # the general lowering (issue #18), for what no hand-tuned family recognises
        Family("lowered", lowered.analyze, lowered.space, lowered.render, lowered.canonical),
    ),
    "triton": (
        Family("rowwise", rowwise.analyze, triton_rowwise.triton_space, triton_rowwise.render_triton),
        Family(
            "residual_norm",
            residual_norm.analyze,
            triton_rowwise.triton_space,
            triton_residual_norm.render_triton,
        ),
        Family(
            "pointwise",
            pointwise.analyze,
            triton_pointwise.triton_space,
            triton_pointwise.render_triton,
            triton_pointwise.triton_canonical,
        ),
        # the general lowering written as Triton kernels, for what no hand-tuned family recognises
        Family(
            "lowered", lowered_triton.analyze, lowered_triton.space, lowered_triton.render, lowered_triton.canonical
        ),
    ),
}


# Inductor's own code for the op (eval mode), the first candidate on either backend; it competes
# with the family above that recognises the op (``rivals``)
INDUCTOR = Family("inductor", inductor.analyze, inductor.space, inductor.render)


@dataclass(frozen=True)
class RivalRecipes:
    """Two families' recipes for one op: the ``family`` knob picks which one renders."""

    first: Family[Any]
    first_recipe: Any
    second: Family[Any]
    second_recipe: Any

    def side(self, config: Config) -> tuple[Family[Any], Any]:
        # a config from before the knob existed (a resumed session's history) had no rival
        chosen = config.get(FAMILY_KNOB) or self.first.name
        if chosen == self.first.name:
            return self.first, self.first_recipe
        if chosen != self.second.name:
            raise ValueError(f"{FAMILY_KNOB}={chosen!r} is neither {self.first.name} nor {self.second.name}")
        return self.second, self.second_recipe

    def space(self) -> Space:
        first, second = self.first.space(self.first_recipe), self.second.space(self.second_recipe)
        clash = (set(first) & set(second)) | ((set(first) | set(second)) & {FAMILY_KNOB})
        if clash:  # a programming error in the families' knob names
            raise ValueError(f"families {self.first.name} and {self.second.name} share knobs {sorted(clash)}")
        return {FAMILY_KNOB: [self.first.name, self.second.name], **first, **second}

    def canonical(self, config: dict[str, Any]) -> dict[str, Any]:
        """The chosen side's knobs canonical, the other side's reset to their defaults."""
        family, recipe = self.side(config)
        other, other_recipe = (self.first, self.first_recipe)
        if family is self.first:
            other, other_recipe = self.second, self.second_recipe
        own = family.space(recipe)
        mine = family.canonical(recipe, {k: v for k, v in config.items() if k in own})
        return {**config, **mine, **default_config(other.space(other_recipe))}

    def render(self, config: dict[str, Any] | None) -> str:
        cfg = config or {}
        family, recipe = self.side(cfg)
        own = family.space(recipe)
        return family.render(recipe, {k: v for k, v in cfg.items() if k in own})


def rivals(
    first: Family[Any], first_recipe: Any, second: Family[Any], second_recipe: Any
) -> tuple[Family[RivalRecipes], RivalRecipes]:
    """One family whose ``family`` knob chooses between two (the first is the default)."""
    both = RivalRecipes(first, first_recipe, second, second_recipe)
    family = Family(
        f"{first.name}|{second.name}",
        lambda *_: both,
        lambda r: r.space(),
        lambda r, config: r.render(config),
        lambda r, config: r.canonical(config),
    )
    return family, both


# For training kernels: the general lowering with its backward (see the module docstring).
TRAIN_FAMILIES: dict[str, tuple[Family[Any], ...]] = {
    "cpp": (Family("lowered", lowered.analyze_train, lowered.space, lowered.render, lowered.canonical),),
    "triton": (
        Family(
            "lowered",
            lowered_triton.analyze_train,
            lowered_triton.space,
            lowered_triton.render,
            lowered_triton.canonical,
        ),
    ),
}


class BuiltinCoder:
    """Proposes C++ kernels (CPU) or Triton kernels (CUDA) from a trace of the reference."""

    def __init__(
        self,
        op_path: Path,
        backend: str = "cpp",
        train: bool = False,
        inductor_candidate: bool = True,
        wide_simd: bool = True,
    ) -> None:
        self.op_path = op_path
        self.backend = backend
        # whether the CPU that verifies may run 512-bit vectors (AVX-512; True where not known, a
        # cluster's): where it cannot, the lowering's simd_width knob is the same code both ways
        self.wide_simd = wide_simd
        self.inductor_candidate = inductor_candidate  # Inductor's code for the op as a candidate
        self._inductor_why: str | None = None  # why it is not one, where another family took the op
        self.train = train  # kernels with their backward (see the module docstring)
        self._family: Family[Any] | None = None
        self._recipe: Any = None
        self._why: str | None = None
        self._problem_error = False
        self._issued: set[str] = set()  # configs handed out (evolve asks per parent before verifying)

    def _analyze(self) -> None:
        if self._family is not None or self._why is not None:
            return
        try:
            problem = load_problem(self.op_path)
            model = problem.build_model()
            inputs = problem.inputs()
        except ProblemError as exc:
            self._why, self._problem_error = exc.message, True
            return
        families = (TRAIN_FAMILIES if self.train else FAMILIES).get(self.backend, ())
        call = getattr(problem.module, "forge_call", None)
        template = None
        if callable(call):  # called as a model calls its layers: the general lowering, on that call
            try:
                template = recorded_call(call, model, inputs)
            except CallRefused as exc:
                self._why = f"its forge_call cannot be followed: {exc}"
                return
            if self.train:
                self._why = "training kernels for an op called with keyword arguments (forge_call) are not written yet"
                return
            families = tuple(f for f in families if f.name == "lowered")
        reasons = []
        for family in families:
            recipe = family.analyze(model, inputs) if template is None else family.analyze(model, inputs, template)
            if isinstance(recipe, str):
                reasons.append(recipe)
                continue
            if isinstance(recipe, lowered.LoweredGraph) and not self.wide_simd:
                recipe = replace(recipe, wide_simd=False)
            self._family, self._recipe = family, recipe
            break
        if self.inductor_candidate and not self.train and self.backend in FAMILIES:
            # on a copy: the capture compiles the module in eval mode
            device = "cuda" if self.backend == "triton" else "cpu"
            captured = inductor.analyze(copy.deepcopy(model), inputs, template, device=device, op_path=self.op_path)
            if not isinstance(captured, str):
                if self._family is None:
                    self._family, self._recipe = INDUCTOR, captured
                else:
                    self._family, self._recipe = rivals(INDUCTOR, captured, self._family, self._recipe)
                return
            reasons.append(captured)
            self._inductor_why = captured
        if self._family is not None:
            return
        # the general lowering's reason names the node it cannot express: the hand-tuned families'
        # reasons ("takes exactly one float32 input") say nothing more to the user
        general = [r for f, r in zip(families, reasons, strict=False) if f.name == "lowered"]
        self._why = "; ".join(general + reasons[len(families) :]) if general else "; ".join(reasons)
        self._why = self._why or f"it writes C++ (CPU) and Triton (CUDA) kernels, not {self.backend}"

    def space(self) -> Space | None:
        """The tuner's knobs for this op (None when the op is not one the coder handles)."""
        self._analyze()
        return None if self._family is None else dict(self._family.space(self._recipe))

    def canonical(self, config: dict[str, Any]) -> dict[str, Any]:
        """``config`` with the knobs that do not change this op's kernel reset (see tuner)."""
        self._analyze()
        return config if self._family is None else self._family.canonical(self._recipe, config)

    def _compiler_code(self, config: dict[str, Any]) -> bool:
        """Whether ``config`` renders Inductor's own code for the op (the session's floor)."""
        if isinstance(self._recipe, RivalRecipes):
            return self._recipe.side(config)[0] is INDUCTOR
        return self._family is INDUCTOR

    def propose(self, context: CoderContext) -> list[Proposal]:
        if context.backend != self.backend:  # the session fixed the backend when it made this coder
            self.backend, self._family, self._why = context.backend, None, None
            self._issued = set()  # keys of the other backend's space
        self._analyze()
        if self._family is None:
            msg = self._why if self._problem_error else UNSUPPORTED.format(op=context.op_name, why=self._why)
            return [Proposal(None, self.backend, error=msg, fatal=True)]
        space = self.space() or {}
        configs: list[dict[str, Any]] = []
        trials = trials_from(context.history)
        parent = context.parent
        if context.want == 1 and parent is not None and parent.feedback and parent.feedback.config:
            suggested = {k: v for k, v in parent.feedback.config.items() if k in space}
            # a suggestion is dropped when this coder handed it out or the history measured it
            # (a resumed session's coder has issued nothing yet)
            done = self._issued | tried_keys(space, trials, self.canonical)
            configs = [] if canonical_key(space, suggested, self.canonical) in done else [suggested]
        if not configs:
            configs = next_configs(space, trials, n=context.want, exclude=self._issued, canonical=self.canonical)
        self._issued.update(canonical_key(space, c, self.canonical) for c in configs)
        if not configs and not context.history:
            configs = [default_config(space)]
        best = best_trial(trials)
        base = best.config if best else (parent.config if parent else None)
        family = self._family
        out = []
        for cfg in configs:
            shown = effective_config(space, cfg, self.canonical)
            note = f"{family.name} family ({self.backend}): {type(self._recipe).__name__}, config {shown}"
            if self._inductor_why:
                note += f" ({self._inductor_why})"
            out.append(
                Proposal(
                    family.render(self._recipe, cfg),
                    self.backend,
                    configs=CandidateConfig(
                        config=cfg or None,
                        parent_config=base if base != cfg else None,
                        kernel_config=shown,
                        compiler_code=self._compiler_code(cfg),
                    ),
                    note=note,
                )
            )
        return out
