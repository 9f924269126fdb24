"""The built-in offline coder and judge (no LLM): kernels generated from a trace of the reference."""

from forge.agents.builtin.rowwise import RowRecipe, analyze, render

__all__ = ["RowRecipe", "analyze", "render"]
