"""``forge verify``'s operation: one candidate checked and timed, and saved to the bank when asked."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from forge.core.problem import read_problem_source
from forge.core.settings import ForgeSettings
from forge.core.verdict import Verdict
from forge.verifier import ProgressNote, verify


@dataclass(frozen=True)
class Verification:
    """``forge verify``'s outcome: the verdict, and the kernel's id when it was saved."""

    verdict: Verdict
    kernel_id: int | None = None


def verify_candidate(
    op_path: Path,
    candidate_path: Path,
    settings: ForgeSettings,
    progress: ProgressNote | None = None,
    *,
    save: bool = False,
    bank: Path | None = None,
) -> Verification:
    """Verify a candidate file against an op file; with ``save``, a passing one goes into ``bank``."""
    verdict = verify(op_path, candidate_path, settings, progress=progress)
    if not (save and verdict.passed):
        return Verification(verdict)
    # The bank's database layer (SQLAlchemy) loads only to save: a plain `forge verify` starts its
    # workers ~0.2 s sooner, and most verifications save nothing.
    from forge.db import open_bank, save_kernel

    spec = read_problem_source(op_path)
    with open_bank(bank, must_exist=False) as engine:
        return Verification(verdict, save_kernel(engine, spec, candidate_path.read_text(), verdict))
