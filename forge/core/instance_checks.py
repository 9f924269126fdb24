"""Which instances of a model a carved op's kernel was verified on (``forge optimize --modules``).

An op carved from a model stands for several instances of one class (``FORGE_INSTANCES``): its
search runs on the first, and its banked kernel is then verified on each of the others, with that
instance's own constructor arguments and recorded calls. The bank keeps one ``InstanceCheck`` per
instance and kernel; ``kernelize`` binds the kernel to the instance at a path only where its check
passed and the instance is still configured as it was (its state's shapes, its plain attributes).
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict

from forge.core.carved_ops import InstanceOutcome


class InstanceCheck(BaseModel):
    """One instance and one kernel: the outcome, and what it rests on."""

    model_config = ConfigDict(extra="forbid")
    path: str  # its path in the model ("" for the model itself)
    config: str  # its configuration as verified (``instance_binding.config_text``)
    outcome: InstanceOutcome
    detail: str = ""  # the cases run, the failing check's words, or the instance it is the same as
    seconds: float = 0.0  # what its verification took (0 for one it shares)


__all__ = ["InstanceCheck"]
