"""What a front end asks a parallel-plan session for (``forge plan MODEL.py``),
checked before anything runs."""

from __future__ import annotations

import re
from dataclasses import dataclass, fields, replace
from pathlib import Path
from typing import Any

from pydantic import TypeAdapter

from forge.agents import AgentChoice
from forge.core.errors import BankError, UsageError
from forge.core.paths import BankLocation

DEFAULT_PLAN_ROUNDS = 3  # built-in: the best-ranked plans run for real; LLM: plans proposed
_MESH = re.compile(r"^\s*(\d+)\s*[xX×]\s*(\d+)\s*$")


@dataclass(frozen=True)
class PlanChoices:
    """What a plan session keeps of its options (the bank stores them with it,
    ``StoredPlanOptions``) and a resumed one takes back: the model's mesh and memory, and the agents.

    ``mesh``: "DPxTP" (``2x2``), or None to let the agent choose among the world size's meshes.
    ``simulate``: rank plans with the cost model alone (meshes larger than this machine).
    """

    world_size: int = 0
    mesh: str | None = None
    memory_per_device_gib: float | None = None
    train: bool = True
    simulate: bool = False
    model: str | None = None
    judge_model: str | None = None
    api_base: str | None = None
    rounds: int | None = None

    @property
    def agents(self) -> AgentChoice:
        return AgentChoice(self.model, self.judge_model, self.api_base)

    @property
    def round_limit(self) -> int:
        return DEFAULT_PLAN_ROUNDS if self.rounds is None else self.rounds

    def choices(self) -> dict[str, Any]:
        """This record's ``PlanChoices`` fields alone (of a subclass too), by name."""
        return {f.name: getattr(self, f.name) for f in fields(PlanChoices)}


@dataclass(frozen=True)
class PlanOptions(PlanChoices):
    """One parallel-plan session over one model: its choices (``PlanChoices``), and this run's
    limits, bank and real runs, or the stored session to resume (its plans kept)."""

    budget_usd: float | None = None
    time_limit_s: float | None = None
    bank: BankLocation | None = None
    steps: int = 5  # timed steps per real run (after one warm-up)
    run_timeout_s: float = 240.0  # one real run, every rank
    resume: int | None = None  # a stored plan session's id: its model, mesh and agents, its plans kept

    @property
    def memory_limit_bytes(self) -> int | None:
        return None if self.memory_per_device_gib is None else int(self.memory_per_device_gib * 2**30)

    def mesh_shape(self) -> tuple[int, int] | None:
        """(dp, tp) from ``--mesh``; UsageError when it is not DPxTP or not the world size."""
        if self.mesh is None:
            return None
        found = _MESH.match(self.mesh)
        if not found:
            raise UsageError(f"--mesh {self.mesh!r}: write it as DPxTP, for example 2x2 (data x tensor parallel)")
        dp, tp = int(found.group(1)), int(found.group(2))
        if dp < 1 or tp < 1 or dp * tp != self.world_size:
            raise UsageError(
                f"--mesh {self.mesh}: {dp} x {tp} = {dp * tp} ranks, but --world-size is {self.world_size}; "
                "the mesh's sizes must multiply to the world size"
            )
        return dp, tp

    def check(self) -> None:
        """UsageError naming the bad option."""
        if self.world_size == 0 and self.resume is None:
            raise UsageError("forge plan needs --world-size N (the number of ranks)")
        if self.world_size < 2:
            raise UsageError(f"--world-size {self.world_size}: a parallel plan needs at least 2 ranks")
        self.mesh_shape()
        if self.rounds is not None and self.rounds < 1:
            raise UsageError(f"--rounds must be at least 1 (got {self.rounds})")
        if self.memory_per_device_gib is not None and self.memory_per_device_gib <= 0:
            raise UsageError(f"--memory-per-device must be more than 0 GiB (got {self.memory_per_device_gib})")

    def to_json(self, model_path: Path) -> dict[str, Any]:
        """What the session row stores: what ``--resume`` needs (``StoredPlanOptions``)."""
        kept = self.choices()
        stored = StoredPlanOptions(**{**kept, "rounds": self.round_limit}, op_path=str(model_path))
        row: dict[str, Any] = _STORED.dump_python(stored, mode="json")
        return row


@dataclass(frozen=True)
class StoredPlanOptions(PlanChoices):
    """A plan session's choices as the bank keeps them (JSON), with its model file."""

    parallel: bool = True  # tells a plan session's settings from a kernel session's
    op_path: str = ""

    @classmethod
    def read(cls, settings: dict[str, Any]) -> StoredPlanOptions:
        """The session row's settings (JSON written by ``PlanOptions.to_json``); BankError when
        they lack the model file or the world size a resume needs."""
        stored = _STORED.validate_python(settings)
        if not stored.op_path or stored.world_size < 2:
            raise BankError("the stored plan settings lack the model file or the world size")
        return stored

    def resumed(self, given: PlanOptions) -> PlanOptions:
        """``given`` (this run's flags: bank, limits) with the session's own model, mesh and agents;
        a ``rounds`` given now replaces the stored count."""
        kept = self.choices()
        return replace(given, **{**kept, "rounds": self.rounds if given.rounds is None else given.rounds})


_STORED: TypeAdapter[StoredPlanOptions] = TypeAdapter(StoredPlanOptions)
