"""The verdict: what the verifier decided about one candidate, as a typed record.

It is built only in the trusted parent (``forge.verifier``), stored as JSON in the bank (an
attempt's row, a kernel's evidence) and read back into this type wherever it is used. Reading is
lenient about what older forges did not write (a missing field takes its default, an unknown key
is ignored), so banks written before a field existed still load; a value of the wrong type is
refused (``ValueError``).

A session adds the fields of a confirmation (a finalist timed again before it is banked) to the
verdict of that second measurement; they are left out of the JSON of a plain verification.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field, model_serializer

from forge.core.op_brief import CandidateProfile
from forge.core.roofline_record import Roofline
from forge.core.statuses import BindMode, ModuleMode, VerdictStatus
from forge.core.timing_records import (
    PairedRatio,
    Timings,
    TimingSides,
    TrainingStepTimes,
    UserLoop,
    without_none,
)

_LENIENT = ConfigDict(extra="ignore", populate_by_name=True)


class Check(BaseModel):
    """One named check. A non-fatal check that fails is a warning: it never fails the verdict."""

    model_config = _LENIENT
    name: str
    passed: bool
    detail: str = ""
    fatal: bool = True


class MemoryPeak(BaseModel):
    """Peak resident size (MiB) of each process of a verification, the op's bound (max(1 GiB, 8x
    the op's inputs and outputs of one call): what a worker sizes its batches from) and the
    candidate's limit: the bound, or the reference's own peak plus a margin where that is more (a
    candidate may use what the reference does). ``forge_mib`` is the process that ran the
    verification (a session's, over the session so far); a reference worker kept across a
    session's verifications reports its peak over all of them. Only the candidate is held to
    the limit: the other processes are forge's and the op's."""

    model_config = _LENIENT
    candidate_mib: int | None = None
    reference_mib: int | None = None
    forge_mib: int | None = None
    bound_mib: int | None = None
    limit_mib: int | None = None  # None in verdicts from before the limit: the bound applies

    @property
    def within_limit(self) -> bool:
        limit = self.limit_mib or self.bound_mib
        return limit is None or self.candidate_mib is None or self.candidate_mib <= limit

    @model_serializer(mode="wrap")
    def _present_only(self, handler: Any) -> dict[str, Any]:
        return without_none(handler(self))


class FailingCase(BaseModel):
    """The first case the candidate failed: which one, and (for a wrong result) how it was off."""

    model_config = _LENIENT
    id: str = ""
    shape: str = ""
    inputs: str = ""  # "normal" or the stress distribution
    output: int | None = None  # the first output that was off (-1: the output structure)
    mismatch: str | None = None  # count, missing, dtype, shape, device, nan, inf, values, structure
    detail: str | None = None
    max_abs: float | None = None
    max_rel: float | None = None

    @model_serializer(mode="wrap")
    def _mismatch_when_known(self, handler: Any) -> dict[str, Any]:
        data: dict[str, Any] = handler(self)
        if self.mismatch is None:  # it raised: there is no result to describe
            return {k: data[k] for k in ("id", "shape", "inputs")}
        return data


class TensorSpec(BaseModel):
    model_config = _LENIENT
    shape: list[int]
    dtype: str


class InputVariant(BaseModel):
    """The inputs of one shape variant, as verified."""

    model_config = _LENIENT
    variant: str
    inputs: list[TensorSpec] = Field(default_factory=list)


class Versions(BaseModel):
    model_config = _LENIENT
    torch: str = ""
    python: str = ""
    triton: str = ""


class NodeSpec(BaseModel):
    """The cluster node a verification ran on (``forge optimize --executor ray``): speedups are
    compared only between verdicts timed on the same ``device_name``."""

    model_config = _LENIENT
    host: str = ""
    node_id: str = ""  # Ray's id for the node
    device_name: str = ""  # the CPU model or the GPU's name
    cpus: int = 0  # the cores its verifications were given

    @property
    def label(self) -> str:
        """host:node, short: several nodes may share a host."""
        return f"{self.host}:{self.node_id[:8]}"


class Binding(BaseModel):
    """How the candidate ran on an instance of the user's class holding weights of its own, the
    way ``bank.kernelize`` will run it (``mode`` none: kernelize leaves such instances alone)."""

    model_config = _LENIENT
    mode: BindMode
    reason: str = ""


class Verdict(BaseModel):
    """A plain, serializable record of one verification (see the module docstring)."""

    model_config = _LENIENT
    problem: str = ""
    candidate: str = ""
    device: str = ""
    status: VerdictStatus = VerdictStatus.PASSED
    reason: str | None = None
    checks: list[Check] = Field(default_factory=list)
    timings_ms: Timings = Field(default_factory=Timings)
    timing_stats: TimingSides = Field(default_factory=TimingSides)
    speedup_vs_eager: float | None = None
    speedup_vs_compile: float | None = None
    timing_meaningful: bool = True
    roofline: Roofline | None = None
    memory: MemoryPeak | None = None
    failing_case: FailingCase | None = None
    warnings: list[str] = Field(default_factory=list)
    candidate_output: str = ""
    backend: str = "torch"
    op_hash: str = ""
    target_class: str | None = None  # "module:Class" when the op's Model comes from user code
    capability: str | None = None  # CUDA compute capability ("9.0"), None on CPU
    inputs: list[InputVariant] = Field(default_factory=list)
    cases: int = 0
    shapes: list[str] = Field(default_factory=list)
    seed: int = 0
    threads: int = 1
    elapsed_s: float = 0.0
    versions: Versions = Field(default_factory=Versions)
    binding: Binding | None = None  # None: not checked (a failed verdict, or an older forge)
    # The module modes the candidate was verified in; None: an older forge, which verified in
    # training mode (eval mode for a reference that is random in training mode).
    modes: list[ModuleMode] | None = None
    user_loop: UserLoop | None = None  # a finalist's confirmation: timed in a user's loop too
    training_step: TrainingStepTimes | None = None  # verified for training: its steps timed too
    profile: CandidateProfile | None = None  # where its time goes (``ForgeSettings.profile_candidate``)
    node: NodeSpec | None = None  # the cluster node that verified it; None: the driver's own machine
    instance: str | None = None  # a carved op verified on another of its instances (``FORGE_INSTANCE``)
    # A confirmation (the finalist timed again, alone, before banking): stored under the keys in
    # the aliases, as forge always has.
    confirm_trials: int | None = Field(default=None, alias="trials")  # timed calls a side
    confirm_held: bool | None = Field(default=None, alias="held")  # beat eager beyond the noise again
    confirm_reason: str | None = Field(default=None, alias="why")  # the acceptance rule's words
    confirm_attempt_id: int | None = None  # banked evidence: the confirmation's own attempt row
    # Banked evidence: True when timed again after it was chosen, False when banked from its round's
    # figures on a Ctrl-C; None for a kernel saved by `forge verify --save`.
    confirmed: bool | None = None

    @property
    def passed(self) -> bool:
        return self.status is VerdictStatus.PASSED

    def claim_pairs(self) -> tuple[PairedRatio | None, PairedRatio | None]:
        """(vs eager, vs torch.compile) as banked, per baseline: the user loop's figure (its range
        across the user's processes) where its median is the lower, else the isolated measurement
        (``TimingSides.headline_pairs``) with its interval reaching up to the user loop's range.
        The figure is never above either median; the interval spans what a user's process reads."""
        isolated = self.timing_stats.headline_pairs()
        loop = self.user_loop
        if loop is None:
            return isolated
        return _claimed(isolated[0], loop.eager), _claimed(isolated[1], loop.compiled)

    def add(self, name: str, passed: bool, detail: str = "", fatal: bool = True) -> Check:
        check = Check(name=name, passed=passed, detail=detail, fatal=fatal)
        self.checks.append(check)
        return check

    def fail(self, status: VerdictStatus, reason: str) -> None:
        """Record the first failure; later ones do not overwrite it."""
        assert status is not VerdictStatus.PASSED
        if self.status is VerdictStatus.PASSED:
            self.status = status
            self.reason = reason

    def first_failed_check(self) -> Check | None:
        """The first fatal check that failed (what made the verdict fail)."""
        return next((c for c in self.checks if not c.passed and c.fatal), None)

    def to_json(self) -> dict[str, Any]:
        """The JSON object ``forge verify --json`` prints and the bank stores (with ``passed``)."""
        data = self.model_dump(mode="json", by_alias=True)
        for key in _CONFIRMATION_KEYS:
            if data[key] is None:
                del data[key]
        data["passed"] = self.passed
        return data

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Verdict:
        """A stored verdict read back (ValueError when a field holds the wrong type)."""
        return cls.model_validate(data)


def _claimed(isolated: PairedRatio | None, loop: PairedRatio | None) -> PairedRatio | None:
    if isolated is None or loop is None:
        return isolated or loop
    if loop.median <= isolated.median:
        return loop
    # The workers' conditions read lower than a user's processes: the lower figure is claimed, and
    # a user's process reading above its interval, as the loop's did, is no surprise.
    return isolated.model_copy(update={"high": max(isolated.high, loop.high)})


_CONFIRMATION_KEYS = ("trials", "held", "why", "confirm_attempt_id", "confirmed")
