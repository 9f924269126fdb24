"""What a bank holds, named once: its schema revisions and what each brings, and the keys of a
kernel's evidence that the runtime reads (``EvidenceKey``, beside the record that writes them,
``core.evidence.Evidence``). ``forge.db`` writes by these names (its migrations are checked
against ``REVISIONS``); the runtime's reader reads by them."""

from __future__ import annotations

from dataclasses import dataclass

from forge.core.evidence_keys import EvidenceKey

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


__all__ = ["REVISIONS", "EvidenceKey", "RevisionFeatures", "features"]
