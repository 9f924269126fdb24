"""The keys of a kernel's evidence that the runtime reads: named once, light (an enum), so the
runtime's reader (``forge.bank_schema``) reads them without loading forge's records; the record
that writes them is ``core.evidence.Evidence``."""

from __future__ import annotations

import enum


class EvidenceKey(enum.StrEnum):
    """Top-level keys of a kernel's evidence that the runtime reads."""

    BINDING = "binding"  # the verdict's: how it binds to a model's instances, {"mode", "reason"}
    MODES = "modes"  # the verdict's: the module modes it verified
    # whether it is used under torch.compile: {"beats", "why", "by_model"} (``CompileStanding``)
    COMPILE_STANDING = "compile_standing"
    # whether it is used where autograd needs gradients: its backward passed the ``gradients``
    # check and its training step is not slower than eager's (``acceptance.training_standing``)
    GRADIENTS_VERIFIED = "gradients_verified"
    # why not, where a model-level run found it slows a model's training step (``TrainingStanding``
    # with ``by_model``); the runtime reads ``gradients_verified`` alone
    TRAINING_STANDING = "training_standing"
