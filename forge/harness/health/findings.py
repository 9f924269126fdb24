"""What ``forge doctor`` reports: a record of its own, so that a front end that shows findings (the
TUI at start-up) does not load the machine probes, the verifier and torch."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any


@dataclass(frozen=True)
class Finding:
    topic: str
    ok: bool | None  # None: a fact, neither good nor bad
    detail: str
    fix: str = ""  # what to do when it is missing or wrong
    needed: bool = False  # forge's main job cannot run without it


@dataclass(frozen=True)
class DoctorReport:
    findings: list[Finding]

    @property
    def can_run(self) -> bool:
        """Everything forge's main job needs is here."""
        return all(f.ok for f in self.findings if f.needed)

    def to_json(self) -> dict[str, Any]:
        return {"can_run": self.can_run, "findings": [asdict(f) for f in self.findings]}
