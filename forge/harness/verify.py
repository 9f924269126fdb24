"""``forge verify``'s operation: one candidate checked and timed, judged against a null control
when asked, and saved to the bank when asked."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from forge.core.paths import BankLocation
from forge.core.problem import read_problem_source
from forge.core.settings import ForgeSettings
from forge.core.verdict import Verdict
from forge.harness.sessions.confirm import confirm_finalist
from forge.harness.sessions.null_control import null_timeout
from forge.verifier import ProgressNote, VerifierService, resolve_device, timed_calls, verify


@dataclass(frozen=True)
class Verification:
    """``forge verify``'s outcome: the verdict, and the kernel's id when it was saved."""

    verdict: Verdict
    kernel_id: int | None = None
    # With the null control: whether a session would bank it (``acceptance.beats_eager``), and why.
    accepted: bool | None = None
    acceptance: str | None = None


def verify_candidate(
    op_path: Path,
    candidate_path: Path,
    settings: ForgeSettings,
    progress: ProgressNote | None = None,
    *,
    save: bool = False,
    bank: BankLocation | None = None,
    null_control: bool = False,
    instance: str | None = None,
) -> Verification:
    """Verify a candidate file against an op file; with ``null_control``, judge it as a session
    judges a finalist (timed in a user's loop too, unless ``user_loop`` is off, and the reference
    verified against itself next to it); with ``save``, a
    passing one goes into ``bank``. ``instance``: for an op carved from a model, another of its
    instances to build (``FORGE_INSTANCES``)."""
    accepted: tuple[bool, str] | None = None
    if null_control:
        verdict, accepted = _with_null_control(op_path, candidate_path, settings, progress)
    else:
        verdict = verify(op_path, candidate_path, settings, progress=progress, instance=instance)
    ok, why = accepted if accepted is not None else (None, None)
    if not (save and verdict.passed):
        return Verification(verdict, accepted=ok, acceptance=why)
    # The bank's database layer (SQLAlchemy) loads only to save: a plain `forge verify` starts its
    # workers ~0.2 s sooner, and most verifications save nothing.
    from forge.db import open_bank, save_kernel

    spec = read_problem_source(op_path)
    with open_bank(bank, must_exist=False) as engine:
        kernel_id = save_kernel(engine, spec, candidate_path.read_text(), verdict)
        return Verification(verdict, kernel_id, accepted=ok, acceptance=why)


def _with_null_control(
    op_path: Path, candidate_path: Path, settings: ForgeSettings, progress: ProgressNote | None
) -> tuple[Verdict, tuple[bool, str]]:
    """The candidate confirmed as a session confirms a finalist (``confirm_finalist``), where it
    lies, then judged against the null control, measured against the same kept reference worker
    with as many calls; the verdict carries the null (or a warning why there is none)."""
    with VerifierService(op_path, settings, resolve_device(settings.device)) as service:

        def null_of(finalist: Verdict) -> Verdict:
            trials = timed_calls(finalist)
            if progress is not None:
                progress(f"null control: the reference verified against itself, {trials} calls a side")
            return service.verify_null(trials, null_timeout(settings, finalist, trials))

        if progress is not None and settings.user_loop:
            progress(f"confirming it: where it is faster, also timed in {settings.user_loop_processes} user loop(s)")
        judged = confirm_finalist(
            lambda: service.confirm_file(candidate_path, None, settings.timeout), null_of, null_for_any_timing=True
        )
    verdict = judged.verdict
    if judged.blocked is not None:  # said in the verdict too: no bar was set
        verdict = verdict.model_copy(update={"warnings": [*verdict.warnings, judged.why]})
    return verdict, (judged.accepted, judged.why)
