"""Parallel plans on a real model: the static rules a plan must pass before anything runs (the
first rung of the ladder; the cost model and the real multi-process run build on it)."""

from forge.parallel.static_checks import matched_modules, static_checks

__all__ = ["matched_modules", "static_checks"]
