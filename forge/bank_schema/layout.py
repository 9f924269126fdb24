"""What a bank holds, named once: its schema revisions and what each brings, and the keys of a
kernel's evidence that the runtime reads. ``forge.db`` writes by these names (its migrations
are checked against ``REVISIONS``); the runtime's reader reads by them."""

from __future__ import annotations

import enum
from dataclasses import dataclass

# Every schema revision this forge knows, oldest first (``forge/db/migrations/versions``).
REVISIONS: tuple[str, ...] = ("0001", "0002", "0003", "0004", "0005")


@dataclass(frozen=True)
class RevisionFeatures:
    """What a bank of one revision holds beyond the first revision's problems and kernels."""

    configs: bool  # per-shape launch configs, and a kernel's status (active or retired)
    plans: bool  # banked parallel plans
    instances: bool  # the instances a carved op's kernel was checked on


def features(revision: str) -> RevisionFeatures:
    """What a bank of ``revision`` holds (one of ``REVISIONS``)."""
    at = REVISIONS.index(revision)
    return RevisionFeatures(configs=at >= 1, plans=at >= 2, instances=at >= 4)


class EvidenceKey(enum.StrEnum):
    """Top-level keys of a kernel's evidence (its verdict's JSON, and standings set beside it)
    that the runtime reads."""

    BINDING = "binding"  # how it binds to a model's instances: {"mode", "reason"}
    MODES = "modes"  # the module modes its verdict verified
    # whether it is used under torch.compile: {"beats", "why"} (``acceptance.CompileStanding``)
    COMPILE_STANDING = "compile_standing"
    # whether it is used where autograd needs gradients: its backward passed the ``gradients``
    # check and its training step is not slower than eager's (``acceptance.training_standing``)
    GRADIENTS_VERIFIED = "gradients_verified"
    # why not, where a model-level run found it slows a model's training step
    # (``TrainingStanding`` with ``by_model``); the runtime reads ``gradients_verified`` alone
    TRAINING_STANDING = "training_standing"
