"""A carved op's banked kernel checked on every instance the op stands for.

An op stands for instances of one class that share their state's shapes and their call
(``choose._share_key``); its search runs on the first. Its plain attributes may differ from one
instance to the next (a layer index used only for a cache, a drop-path rate that eval ignores, an
epsilon that does change the result), and whether that difference changes what the kernel must
compute is decided here by evidence: the kernel is verified on each other instance, built with
that instance's own constructor arguments and called with its own recorded values (the op file
with ``FORGE_INSTANCE`` set to it), correctness, gradients and the bound form, not timed. An
instance built and called exactly as one already checked (``carve.twins``) shares that check.
The outcomes go into the bank (``kernel_instances``), where ``kernelize`` reads them: the kernel
runs on the instances it passed on; those it failed on are named, and get an op of their own.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from sqlalchemy import Engine

from forge.core.errors import ForgeError
from forge.core.instance_checks import InstanceCheck, InstanceOutcome
from forge.core.model_records import InstanceUse
from forge.core.settings import ForgeSettings
from forge.core.statuses import BindMode
from forge.core.verdict import Verdict
from forge.db import kernel_detail, record_instances
from forge.harness.model_run.choose import OpGroup
from forge.verifier import VerifierService
from forge.verifier.service import Job


@dataclass
class InstanceRun:
    """What checking one op's kernel on its instances found, and what it took."""

    checks: list[InstanceCheck] = field(default_factory=list)
    seconds: float = 0.0  # the verifications' wall time together
    verifications: int = 0  # run here (the searched instance and twins take none)

    @property
    def failed(self) -> list[str]:
        return [c.path for c in self.checks if c.outcome is InstanceOutcome.FAILED]

    @property
    def bound(self) -> int:
        return sum(1 for c in self.checks if c.outcome.bound)


def _passed(verdict: Verdict, searched_binds: bool) -> tuple[bool, str]:
    """Whether the kernel holds on the instance, and the words that say so."""
    if not verdict.passed:
        return False, f"{verdict.status}: {verdict.reason or 'failed'}"
    binding = verdict.binding
    if searched_binds and (binding is None or binding.mode is BindMode.NONE):
        why = binding.reason if binding is not None else "not checked"
        return False, f"bound to this instance it does not run exactly: {why}"
    shapes = ", ".join(verdict.shapes) or "as declared"
    return True, f"{verdict.cases} cases ({shapes}), seed {verdict.seed}"


def check_instances(
    op_path: Path,
    group: OpGroup,
    twins: dict[str, str],
    kernel_id: int,
    engine: Engine,
    settings: ForgeSettings,
    device: str,
    stop: threading.Event | None = None,
    said: Callable[[str], None] = lambda _detail: None,
) -> InstanceRun:
    """Verify kernel ``kernel_id`` (banked for the op at ``op_path``, found on ``group``'s first
    instance) on each of the group's instances, record every outcome in the bank, and return them.
    ``stop`` (Ctrl-C) raises KeyboardInterrupt; what was checked before is kept. ``said`` is told
    each outcome as it is known."""
    detail = kernel_detail(engine, kernel_id)
    evidence = detail.evidence
    searched_binds = evidence.binding is not None and evidence.binding.mode is not BindMode.NONE
    first = group.members[0]
    run = InstanceRun()
    run.checks.append(
        InstanceCheck(
            path=first.path,
            config=first.config,
            outcome=InstanceOutcome.SEARCHED,
            detail=f"its search verified and timed the kernel here ({evidence.cases} cases)",
        )
    )
    by_path = {first.path: run.checks[0]}
    job = Job(f"kernel_{kernel_id}", detail.source)
    with VerifierService(op_path, settings, device, stop=stop) as verifier:
        try:
            for n, member in enumerate(group.members[1:], start=2):
                twin = by_path.get(twins.get(member.path, member.path))
                check = (
                    _as_twin(member, twin)
                    if twin is not None
                    else _verified(verifier, job, member, run, searched_binds)
                )
                run.checks.append(check)
                by_path[member.path] = check
                said(_progress(group, check, n))
        finally:  # a Ctrl-C keeps what was checked before it
            record_instances(engine, kernel_id, run.checks)
    return run


def _as_twin(member: InstanceUse, twin: InstanceCheck) -> InstanceCheck:
    """An instance built and called exactly as one already checked: the same verification."""
    return InstanceCheck(
        path=member.path,
        config=member.config,
        outcome=InstanceOutcome.SAME if twin.outcome.bound else InstanceOutcome.FAILED,
        detail=f"built and called exactly as {twin.path or 'the model itself'!r}: {twin.detail}",
    )


def _verified(
    verifier: VerifierService, job: Job, member: InstanceUse, run: InstanceRun, searched_binds: bool
) -> InstanceCheck:
    """The kernel verified on ``member`` (its own arguments and recorded calls), not timed."""
    started = time.monotonic()
    try:
        held, said = _passed(verifier.verify_instance(job, member.path), searched_binds)
    except ForgeError as exc:  # the op cannot be built as this instance: nothing of it verified
        held, said = False, f"the op could not be verified as this instance: {exc.message}"
    seconds = round(time.monotonic() - started, 2)
    run.seconds += seconds
    run.verifications += 1
    outcome = InstanceOutcome.VERIFIED if held else InstanceOutcome.FAILED
    return InstanceCheck(path=member.path, config=member.config, outcome=outcome, detail=said, seconds=seconds)


def _progress(group: OpGroup, check: InstanceCheck, n: int) -> str:
    where = check.path or "the model itself"
    if check.outcome is InstanceOutcome.FAILED:
        return f"{group.name}: FAILED on {where} ({n} of {len(group.members)}): {check.detail}"
    return f"{group.name}: {check.outcome} on {where} ({n} of {len(group.members)})"
