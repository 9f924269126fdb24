"""What one step of a verification found: its named checks in order, its first failure, its
warnings. Each step fills its own (``forge.verifier.parent.steps``); the verdict is built from
all of them once, at the end (``steps.build_verdict``)."""

from __future__ import annotations

from dataclasses import dataclass, field

from forge.core.statuses import VerdictStatus
from forge.core.verdict import Check


@dataclass
class Findings:
    checks: list[Check] = field(default_factory=list)
    failure: tuple[VerdictStatus, str] | None = None  # the step's first: its status and reason
    warnings: list[str] = field(default_factory=list)

    def add(self, name: str, passed: bool, detail: str = "", fatal: bool = True) -> Check:
        check = Check(name=name, passed=passed, detail=detail, fatal=fatal)
        self.checks.append(check)
        return check

    def fail(self, status: VerdictStatus, reason: str) -> None:
        """Record the step's first failure; later ones do not overwrite it."""
        assert status is not VerdictStatus.PASSED
        if self.failure is None:
            self.failure = (status, reason)
