"""Model-level runs, on the runtime's own code: profile a model per module class and instance,
and prove its kernelized form end to end (outputs, and eager / kernelized / compiled / both timed
round by round). Each step runs the user's model in a process of its own."""

from forge.modelrun.probe import ModelRunError, profile_in_process, prove_in_process

__all__ = ["ModelRunError", "profile_in_process", "prove_in_process"]
