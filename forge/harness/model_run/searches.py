"""A model-level run's searches: one session per carved op, then its kernel checked on every
instance the op stands for, in waves.

The first wave searches every op the run carved. Each op that banked a kernel then has the
kernel verified on its other instances (``instances.check_instances``); the instances it failed
on become an op of their own (carved beside it, named after it), which the next wave searches.
So a model of 12 identical blocks costs one search and eleven verifications, and a block whose
attributes do change the result still gets a kernel of its own. The waves share the run's limits
(``Limits``): each op's part of the time limit and budget is its share of the model's time.
"""

from __future__ import annotations

import threading
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from forge.core.carved_ops import InstanceOutcome
from forge.core.errors import ForgeError
from forge.core.figures import fmt_seconds
from forge.core.model_records import ModelProfile
from forge.core.settings import ForgeSettings
from forge.db import open_for_writing
from forge.harness import events as ev
from forge.harness.model_run.carve import write_ops
from forge.harness.model_run.choose import OpGroup, op_group
from forge.harness.model_run.instances import InstanceRun, InstanceScope, check_instances
from forge.harness.model_run.kept import Recorded, twins
from forge.harness.runs.control import RunControl
from forge.harness.runs.limits import Limits, ctrl_c_stops
from forge.harness.runs.options import OptimizeOptions, session_settings
from forge.harness.runs.run import RunResult, optimize
from forge.harness.sessions.session import SessionResult

WEIGHT_FLOOR = 0.01  # an op's weight in the run's limits, as a share of the model's time, at least


def amdahl(share: float, speedup: float | None) -> float | None:
    """The model's speedup if only this part ran ``speedup`` times faster."""
    if speedup is None or speedup <= 0:
        return None
    return 1.0 / ((1.0 - share) + share / speedup)


@dataclass
class CarvedOp:
    """One op carved from the model, what its session found, and where its kernel was checked."""

    group: OpGroup
    path: Path
    twins: dict[str, str]  # per instance, the first built and called exactly as it (``carve.twins``)
    split_from: str | None = None  # the op whose kernel failed on these instances
    search_note: str | None = None  # how the run chose to search it (a whole model: the rounds it got, and why)
    result: SessionResult | None = None
    instances: InstanceRun | None = None  # None: its kernel not checked on its instances (none banked)

    @property
    def accepted(self) -> bool:
        return self.result is not None and self.result.accepted

    @property
    def speedup_vs_eager(self) -> float | None:
        return self.result.speedup_vs_eager if self.result is not None and self.result.accepted else None

    @property
    def runs_on(self) -> list[str]:
        """The instances its kernel runs on: those it was checked on and passed."""
        return self.instances.runs_on if self.instances is not None else []

    @property
    def runs_on_share(self) -> float:
        """Of the model's time, the share of the instances its kernel runs on (all of the op's
        before its kernel is checked on them)."""
        if self.instances is None:
            return self.group.share
        on, members = set(self.runs_on), self.group.members
        total = sum(m.inclusive_ms for m in members) or 1.0
        return round(self.group.share * sum(m.inclusive_ms for m in members if m.path in on) / total, 4)

    @property
    def model_gain(self) -> float | None:
        """What Amdahl expects of the model from its kernel, over the instances it runs on."""
        gain = amdahl(self.runs_on_share, self.speedup_vs_eager)
        return round(gain, 4) if gain else None

    def to_json(self) -> dict[str, Any]:
        r = self.result
        checks = self.instances.checks if self.instances is not None else []
        return {
            "op": self.group.name,
            "class": self.group.cls.name,
            "file": str(self.path),
            "instances": self.group.paths,
            "split_from": self.split_from,
            "share": self.group.share,
            "runs_on_share": self.runs_on_share,
            "accepted": self.accepted,
            "kernel_id": r.kernel_id if r else None,
            "speedup_vs_eager": self.speedup_vs_eager,
            "speedup_vs_compile": r.speedup_vs_compile if r and r.accepted else None,
            "eager_only": r.eager_only if r else None,
            "expected_model_gain": self.model_gain,
            "reason": None if r is None or r.accepted else r.reason,
            "search_note": self.search_note,
            "runs_on": self.runs_on,
            "instance_checks": [c.model_dump(mode="json") for c in checks],
            "search_s": r.seconds if r else None,
            "instances_s": round(self.instances.seconds, 2) if self.instances is not None else None,
            "verifications": self.instances.verifications if self.instances is not None else 0,
            "tokens": r.tokens if r else 0,
            "cost_usd": r.cost_usd if r else None,
        }


@dataclass(frozen=True)
class SearchPlan:
    """What each wave of a model run needs."""

    profile: ModelProfile
    folder: Path  # where op files are carved
    recorded: Recorded  # the calls' kept tensors, per instance
    options: OptimizeOptions
    settings: ForgeSettings
    device: str
    emit: ev.Emit
    control: RunControl | None

    def said(self, detail: str) -> None:
        """One instance check's outcome, as a stage of the model's run ("instance"; the op's
        summary after its checks is "instances")."""
        model_stage(self, "instance", detail)


@dataclass
class Searched:
    """Every op the waves searched (the split ones after those they came from), and the run."""

    ops: list[CarvedOp] = field(default_factory=list)
    run: RunResult = field(default_factory=RunResult)


def carve(groups: list[OpGroup], plan: SearchPlan, split_from: str | None = None) -> list[CarvedOp]:
    """Each group's op file written, as the op the run searches."""
    paths = write_ops(groups, plan.profile, plan.folder, plan.recorded)
    return [CarvedOp(g, p, twins(g, plan.recorded), split_from) for g, p in zip(groups, paths, strict=True)]


def run_limits(plan: SearchPlan) -> Limits:
    """The run's limits, shared by all its waves (a Ctrl-C or the control's stop ends them)."""
    limits = Limits(budget_usd=plan.options.budget_usd, time_limit_s=plan.options.time_limit_s)
    if plan.control is not None:
        limits.stop_requested = plan.control.stop_requested
    return limits


def search_ops(first: list[CarvedOp], plan: SearchPlan, limits: Limits | None = None) -> Searched:
    """The waves: search ``first``, check each banked kernel on its instances, search those it
    failed on as ops of their own, until none is left, a limit is reached (those instances keep
    their reference, their checks say why) or the run is stopped. ``limits``: the run's, where
    its ops are searched in more than one call (``whole_model``)."""
    limits = limits or run_limits(plan)
    done, pending = Searched(), list(first)
    while pending:
        if done.ops and (reached := limits.exceeded()) is not None:
            names = ", ".join(c.group.name for c in pending)
            model_stage(plan, "carved", f"not searched ({str(reached).replace('_', ' ')} reached): {names}")
            break
        done.ops += pending
        if not _search_wave(pending, plan, limits, done.run):
            break
        try:
            with ctrl_c_stops(limits):
                pending = _check_wave(pending, plan, {c.group.name for c in done.ops}, limits.stop_requested)
        except KeyboardInterrupt:
            done.run.interrupted = True
            break
    done.run.tokens, done.run.cost_usd = limits.tokens, limits.cost_reported
    return done


def _search_wave(wave: list[CarvedOp], plan: SearchPlan, limits: Limits, run: RunResult) -> bool:
    """One session per op of the wave, its limits' parts by the ops' shares of the model's time;
    False when the run ends here (interrupted, or an op file of a later wave could not run)."""
    weights = [max(c.group.share, WEIGHT_FLOOR) for c in wave]
    try:
        found = optimize(
            [c.path for c in wave], plan.options, plan.settings, plan.emit, plan.control, weights=weights, limits=limits
        )
    except ForgeError as exc:
        if wave[0].split_from is None:  # the run's own op files: the user's mistake, said as one
            raise
        model_stage(plan, "carved", f"the ops split off could not be searched: {exc.message}")
        return False
    run.results += found.results
    run.skipped += found.skipped
    by_name = {r.problem: r for r in found.results}
    for c in wave:
        c.result = by_name.get(c.group.name)
    run.interrupted = run.interrupted or found.interrupted
    return not found.interrupted


def _check_wave(wave: list[CarvedOp], plan: SearchPlan, taken: set[str], stop: threading.Event) -> list[CarvedOp]:
    """Check each banked kernel of the wave on its op's instances; the ops of the instances a
    kernel failed on, carved and ready to search."""
    engine = open_for_writing(plan.options.bank)
    settings = session_settings(plan.settings, plan.options)
    split: list[CarvedOp] = []
    try:
        for c in wave:
            if not c.accepted or c.result is None or c.result.kernel_id is None:
                continue
            scope = InstanceScope(c.path, engine, settings, plan.device, stop, plan.said)
            c.instances = InstanceRun()  # filled as it goes: a Ctrl-C keeps what was checked
            try:
                check_instances(c.group, c.twins, c.result.kernel_id, scope, c.instances)
            except ForgeError as exc:  # its kernel then runs where it was checked (kernelize reads the bank)
                model_stage(
                    plan, "instances", f"{c.group.name}: its kernel could not be checked on its instances: {exc}"
                )
                continue
            model_stage(plan, "instances", _checked(c, c.result.kernel_id))
            failed = [m for m in c.group.members if m.path in set(c.instances.failed)]
            if failed:
                group = op_group(c.group.cls, _next_name(c.group.name, taken), failed)
                taken.add(group.name)
                split += carve([group], plan, split_from=c.group.name)
                model_stage(
                    plan, "carved", f"{group.name}: the {len(failed)} instance(s) {c.group.name}'s kernel failed on"
                )
    finally:
        engine.dispose()
    return split


def _checked(op: CarvedOp, kernel_id: int) -> str:
    """ "decoder_Layer: kernel 3 runs on 7 of its 8 instances (6 verified in 31 s, 1 built alike;
    failed on layers.7)"."""
    run = op.instances or InstanceRun()
    counts = Counter(c.outcome for c in run.checks)
    parts = [f"{run.verifications} verified in {fmt_seconds(run.seconds)}"] if run.verifications else []
    parts += [f"{counts[InstanceOutcome.SAME]} built and called alike"] if counts[InstanceOutcome.SAME] else []
    off = [f"{c.outcome} on {c.path or 'the model itself'}" for c in run.checks if not c.outcome.binds]
    said = ", ".join(parts) + ("; " if parts and off else "") + ", ".join(off[:3]) + (", ..." if len(off) > 3 else "")
    n = len(op.group.members)
    return f"{op.group.name}: kernel {kernel_id} runs on {len(run.runs_on)} of its {n} instances" + (
        f" ({said})" if said else ""
    )


def _next_name(name: str, taken: set[str]) -> str:
    n = 2
    while f"{name}_{n}" in taken:
        n += 1
    return f"{name}_{n}"


def model_stage(plan: SearchPlan, stage: str, detail: str) -> None:
    plan.emit(ev.ModelStage(problem=plan.profile.source, session_id=0, stage=stage, detail=detail))


__all__ = [
    "WEIGHT_FLOOR",
    "CarvedOp",
    "SearchPlan",
    "Searched",
    "amdahl",
    "carve",
    "model_stage",
    "run_limits",
    "search_ops",
]
