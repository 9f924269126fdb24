"""The engine's problem side: op files, shape variants (sessions and search come later).

Names load lazily so that ``forge.harness.identity`` (used by the runtime) stays light.
"""

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from forge.harness.problem import (
        Problem,
        ProblemSource,
        Tolerance,
        load_problem,
        read_problem_source,
        reference_hash,
    )

__all__ = ["Problem", "ProblemSource", "Tolerance", "load_problem", "read_problem_source", "reference_hash"]


def __getattr__(name: str) -> Any:
    if name in __all__:
        from forge.harness import problem

        return getattr(problem, name)
    raise AttributeError(f"module 'forge.harness' has no attribute {name!r}")
