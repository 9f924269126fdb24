"""``forge verify``'s operation: one candidate checked and timed, judged against a null control
when asked, and saved to the bank when asked."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from forge.core.acceptance import beats_eager
from forge.core.paths import BankLocation
from forge.core.problem import read_problem_source
from forge.core.settings import ForgeSettings
from forge.core.verdict import Verdict
from forge.harness.sessions.null_control import judged_against
from forge.verifier import ProgressNote, VerifierService, measure_user_loop, resolve_device, verify, with_user_loop


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
    """The candidate's verdict, then the null control against the same kept reference worker;
    the verdict carries the null (or a warning why there is none) and the acceptance judgement."""
    with VerifierService(op_path, settings, resolve_device(settings.device)) as service:
        verdict = service.verify_file(candidate_path)
        if not verdict.passed or not verdict.timing_meaningful:
            return verdict, beats_eager(verdict)
        timed = verdict.timing_stats.candidate
        trials = max(5, timed.trials if timed is not None else 0)  # as many calls as the candidate had
        if settings.user_loop:  # as a session's confirmation: timed in a user's loop too, the lower claimed
            if progress is not None:
                progress(
                    f"user loop: timed in a plain loop in {settings.user_loop_processes} fresh process(es), "
                    f"{trials} rounds each"
                )
            verdict = with_user_loop(verdict, measure_user_loop(op_path, candidate_path, verdict, settings, trials))
        if progress is not None:
            progress(f"null control: the reference verified against itself, {trials} calls a side")
        null = service.verify_null(trials, settings.timeout)
    verdict, ok, why, blocked = judged_against(verdict, null)
    if blocked is not None:  # said in the verdict too: no bar was set
        verdict = verdict.model_copy(update={"warnings": [*verdict.warnings, why]})
    return verdict, (ok, why)
