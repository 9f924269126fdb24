"""The model probe: what runs in the process of its own that a model-level run starts for the
user's model (``probe``): the model loaded (``source``), profiled per module class and instance
(``profiling``), and its kernelized form proven end to end on the runtime's own code (``proving``;
in training, ``training_proof``). A model that crashes or hangs ends that process, not forge.
``carved`` is the part a carved op file runs where it runs: the model built as the probe built it.
The orchestration around the probe (choosing, carving, the sessions) is ``forge.harness.model_run``."""

from forge.model_probe.probe import ModelRunError, profile_in_process, prove_in_process

__all__ = ["ModelRunError", "profile_in_process", "prove_in_process"]
