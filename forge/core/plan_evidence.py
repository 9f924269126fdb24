"""What forge found about one parallel plan, stored with it (attempt rows, the bank): the static
rules' results, the cost model's prediction, and the real run's measurement and comparison."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from forge.core.statuses import AttemptStatus
from forge.core.verdict import Check

_STORED = ConfigDict(extra="ignore", frozen=True)


class PlanPrediction(BaseModel):
    """The cost model's figures for a plan on one device (see ``forge.parallel.cost_model``)."""

    model_config = _STORED
    memory_bytes: int
    compute_ms: float
    comm_ms: float
    comm_bytes: int
    collectives: int
    step_ms: float  # compute + communication, uncalibrated
    calibrated_step_ms: float | None = None  # with the factors fitted to the session's runs so far


class PlanMeasurement(BaseModel):
    """A real run: the slowest rank's median step and the largest peak memory of any rank."""

    model_config = _STORED
    step_ms: float
    peak_rss_mb: float
    rank_step_ms: list[float] = Field(default_factory=list)


class PlanEvidence(BaseModel):
    model_config = _STORED
    status: AttemptStatus  # passed, refused, failed_correctness, runtime_error, timeout, predicted
    reason: str
    world_size: int
    mesh: str  # "dp x tp", as ParallelPlan.mesh_text gives it
    train: bool
    device_kind: str
    checks: list[Check] = Field(default_factory=list)
    prediction: PlanPrediction | None = None
    measured: PlanMeasurement | None = None

    @property
    def passed(self) -> bool:
        return self.status is AttemptStatus.PASSED

    def to_json(self) -> dict[str, Any]:
        return self.model_dump(mode="json")

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> PlanEvidence:
        return cls.model_validate(data)
