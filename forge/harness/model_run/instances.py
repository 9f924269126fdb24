"""A carved op's banked kernel checked on every instance the op stands for.

An op stands for instances of one class that share their state's shapes and their call
(``choose._share_key``); its search runs on the first. Its plain attributes may differ from one
instance to the next (a layer index used only for a cache, a drop-path rate that eval ignores, an
epsilon that does change the result), and whether that difference changes what the kernel must
compute is decided here by evidence: the kernel is verified on each other instance, built with
that instance's own constructor arguments and called with its own recorded values (the op file
with ``FORGE_INSTANCE`` set to it), correctness, gradients and the bound form, not timed. An
instance built and called exactly as one already checked (``carve.twins``) shares that check.

Before any of that, each instance built by the op file must be the instance the model holds (the
same configuration): a model that changes an attribute after building a layer would otherwise
have a kernel verified on the constructor's value run on its own; such an instance is refused,
and no op of its own is made for it. The outcomes go into the bank (``kernel_instances``) as they
are known, where ``kernelize`` reads them: the kernel runs on the instances it passed on; those it
failed on are named, and get an op of their own.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from sqlalchemy import Engine

from forge.core.carved_ops import INSTANCE, InstanceOutcome
from forge.core.errors import ForgeError
from forge.core.instance_binding import config_text, signature_difference
from forge.core.instance_checks import InstanceCheck
from forge.core.model_records import InstanceUse
from forge.core.problem import load_problem
from forge.core.settings import ForgeSettings
from forge.core.statuses import BindMode
from forge.core.verdict import Verdict
from forge.db import kernel_detail, record_instances
from forge.harness.model_run.choose import OpGroup
from forge.verifier import VerifierService
from forge.verifier.parent.service import Job


@dataclass
class InstanceRun:
    """What checking one op's kernel on its instances found so far, and what it took."""

    checks: list[InstanceCheck] = field(default_factory=list)
    seconds: float = 0.0  # the verifications' wall time together
    verifications: int = 0  # run here (the searched instance and twins take none)

    @property
    def failed(self) -> list[str]:
        """The instances the kernel failed on: each gets an op of its own."""
        return [c.path for c in self.checks if c.outcome is InstanceOutcome.FAILED]

    @property
    def runs_on(self) -> list[str]:
        """The instances ``kernelize`` runs the kernel on."""
        return [c.path for c in self.checks if c.outcome.binds]


def as_held(op_path: Path, member: InstanceUse) -> str | None:
    """Why the op file does not build ``member`` as the model holds it (None: it does), in this
    process (the driver's, which runs the user's reference): the instance built from its own
    constructor arguments must have the configuration the model's instance had when profiled."""
    try:
        built = load_problem(op_path, {INSTANCE: member.path}).build_model()
        differs = signature_difference(
            json.loads(config_text(built)), json.loads(member.config), "built from its arguments", "in the model"
        )
    except ForgeError as exc:
        return f"the op could not build it: {exc.message}"
    if differs is None:
        return None
    return f"the model holds it otherwise than its constructor builds it ({differs}): it changes it after building it"


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


@dataclass(frozen=True)
class InstanceScope:
    """Where and how an op's kernel is checked: its op file, the bank, the verifier's settings."""

    op_path: Path
    engine: Engine
    settings: ForgeSettings
    device: str
    stop: threading.Event | None = None
    said: Callable[[str], None] = lambda _detail: None  # each outcome as it is known


def check_instances(
    group: OpGroup, twins: dict[str, str], kernel_id: int, scope: InstanceScope, run: InstanceRun
) -> None:
    """Check kernel ``kernel_id`` (banked for ``group``'s op, found on its first instance) on each
    of the group's instances, adding each outcome to ``run`` and the bank as it is known. ``stop``
    (Ctrl-C) raises KeyboardInterrupt; what was checked before it is kept."""
    detail = kernel_detail(scope.engine, kernel_id)
    evidence = detail.evidence
    searched_binds = evidence.binding is not None and evidence.binding.mode is not BindMode.NONE
    job = Job(f"kernel_{kernel_id}", detail.source)
    by_path: dict[str, InstanceCheck] = {}
    with VerifierService(scope.op_path, scope.settings, scope.device, stop=scope.stop) as verifier:
        for n, member in enumerate(group.members, start=1):
            twin = by_path.get(twins.get(member.path, member.path))
            if twin is not None:
                check = _as_twin(member, twin)
            elif (refused := as_held(scope.op_path, member)) is not None:
                check = InstanceCheck(
                    path=member.path, config=member.config, outcome=InstanceOutcome.REFUSED, detail=refused
                )
            elif n == 1:
                said = f"its search verified and timed the kernel here ({evidence.cases} cases)"
                check = InstanceCheck(
                    path=member.path, config=member.config, outcome=InstanceOutcome.SEARCHED, detail=said
                )
            else:
                check = _verified(verifier, job, member, run, searched_binds)
            run.checks.append(check)
            by_path[member.path] = check
            record_instances(scope.engine, kernel_id, [check])  # a Ctrl-C keeps what was checked before it
            scope.said(_progress(group, check, n))


def _as_twin(member: InstanceUse, twin: InstanceCheck) -> InstanceCheck:
    """An instance built and called exactly as one already checked: the same check."""
    outcome = InstanceOutcome.SAME if twin.outcome.binds else twin.outcome
    where = twin.path or "the model itself"
    return InstanceCheck(
        path=member.path,
        config=member.config,
        outcome=outcome,
        detail=f"built and called exactly as {where!r}: {twin.detail}",
    )


def _verified(
    verifier: VerifierService, job: Job, member: InstanceUse, run: InstanceRun, searched_binds: bool
) -> InstanceCheck:
    """The kernel verified on ``member`` (its own arguments and recorded calls), not timed."""
    started = time.monotonic()
    outcome = InstanceOutcome.FAILED
    try:
        held, said = _passed(verifier.verify_instance(job, member.path), searched_binds)
    except ForgeError as exc:  # the op cannot be verified as this instance: refused, not split off
        held, said, outcome = (
            False,
            f"the op could not be verified as this instance: {exc.message}",
            InstanceOutcome.REFUSED,
        )
    seconds = round(time.monotonic() - started, 2)
    run.seconds += seconds
    run.verifications += 1
    outcome = InstanceOutcome.VERIFIED if held else outcome
    return InstanceCheck(path=member.path, config=member.config, outcome=outcome, detail=said, seconds=seconds)


def _progress(group: OpGroup, check: InstanceCheck, n: int) -> str:
    where = check.path or "the model itself"
    if check.outcome.binds:
        return f"{group.name}: {check.outcome} on {where} ({n} of {len(group.members)})"
    return f"{group.name}: {str(check.outcome).upper()} on {where} ({n} of {len(group.members)}): {check.detail}"
