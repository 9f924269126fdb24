"""The engine's problem side: op files, shape variants (sessions and search come later)."""

from forge.harness.problem import (
    Problem,
    ProblemSource,
    Tolerance,
    load_problem,
    read_problem_source,
    reference_hash,
)

__all__ = ["Problem", "ProblemSource", "Tolerance", "load_problem", "read_problem_source", "reference_hash"]
