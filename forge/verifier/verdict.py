"""The verdict: a plain, serializable record built only in the trusted parent."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

STATUSES = (
    "passed",
    "failed_correctness",
    "failed_integrity",
    "compile_error",
    "runtime_error",
    "timeout",
    "crashed",
)


@dataclass
class Check:
    """One named check. A non-fatal check that fails is a warning: it never fails the verdict."""

    name: str
    passed: bool
    detail: str = ""
    fatal: bool = True


@dataclass
class Verdict:
    problem: str
    candidate: str
    device: str
    status: str = "passed"
    reason: str | None = None
    checks: list[Check] = field(default_factory=list)
    timings_ms: dict[str, float | None] = field(
        default_factory=lambda: {"candidate": None, "eager": None, "compile": None}
    )
    timing_stats: dict[str, dict[str, Any]] = field(default_factory=dict)
    speedup_vs_eager: float | None = None
    speedup_vs_compile: float | None = None
    timing_meaningful: bool = True
    roofline: dict[str, Any] | None = None
    failing_case: dict[str, Any] | None = None
    warnings: list[str] = field(default_factory=list)
    candidate_output: str = ""
    backend: str = "torch"
    op_hash: str = ""
    target_class: str | None = None  # "module:Class" when the op's Model comes from user code
    capability: str | None = None  # CUDA compute capability ("9.0"), None on CPU
    inputs: list[dict[str, Any]] = field(default_factory=list)  # per shape variant: input shapes, dtypes
    cases: int = 0
    shapes: list[str] = field(default_factory=list)
    seed: int = 0
    threads: int = 1
    elapsed_s: float = 0.0
    versions: dict[str, str] = field(default_factory=dict)

    @property
    def passed(self) -> bool:
        return self.status == "passed"

    def add(self, name: str, passed: bool, detail: str = "", fatal: bool = True) -> Check:
        check = Check(name, passed, detail, fatal)
        self.checks.append(check)
        return check

    def fail(self, status: str, reason: str) -> None:
        """Record the first failure; later ones do not overwrite it."""
        assert status in STATUSES and status != "passed"
        if self.status == "passed":
            self.status = status
            self.reason = reason

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["passed"] = self.passed
        return d
