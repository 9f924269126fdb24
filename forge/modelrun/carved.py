"""``forge.model_probe.carved`` under the name that op files carved before the rename import."""

from forge.model_probe.carved import instance_init_args, recorded_inputs

__all__ = ["instance_init_args", "recorded_inputs"]
