"""A bank's rows as the runtime reads them: typed records, filled by ``reader.ReadOnlyBank``."""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

from forge.core.carved_ops import InstanceOutcome


@dataclass(frozen=True)
class InstanceRecord:
    """One instance a carved op's kernel was checked on, as the runtime reads it."""

    outcome: InstanceOutcome
    config: str  # its configuration as verified (``instance_binding.config_text``)
    detail: str


@dataclass
class KernelEntry:
    """One kernel row, as the runtime needs it."""

    id: int
    op_name: str
    op_hash: str
    backend: str
    source: str
    entry_point: str
    device_kind: str
    capability_min: str | None
    capability_max: str | None
    dtype: str
    speedup_vs_eager: float | None
    torch_version: str
    triton_version: str | None
    # How the verifier found it binds to existing instances ("direct", "view", "none"), from its
    # evidence; None for kernels verified before forge checked that.
    binding: str | None = None
    binding_reason: str | None = None
    # The module modes its verdict verified ("eval", "train"), as JSON text from the evidence;
    # None for kernels verified before forge verified modes (see ``modes``).
    modes_json: str | None = None
    # Used under torch.compile (its evidence's ``compile_standing``: sqlite gives 1/0, PostgreSQL
    # 'true'/'false'), and why; None for kernels banked before forge judged that.
    compile_beats_stored: Any = None
    compile_why: str | None = None
    # Its backward verified against the reference's autograd (``forge verify --train``), as the
    # database gives a JSON boolean; None for kernels verified for inference only.
    gradients_stored: Any = None
    configs: list[tuple[list[list[int]], dict[str, Any]]] = field(default_factory=list)
    # For a kernel of an op carved from a model: per instance path, how it stands with the kernel
    # (``core.instance_checks``); empty for any other kernel (bound to every instance of its class)
    instances: dict[str, InstanceRecord] = field(default_factory=dict)

    @cached_property
    def eval_only(self) -> bool:
        """Verified in eval mode alone (an op random in training mode): the reference runs in
        training mode. Kernels from before modes were verified were verified in training mode."""
        modes = stored_json(self.modes_json) if self.modes_json else None
        return isinstance(modes, list) and "train" not in modes

    @cached_property
    def trains(self) -> bool:
        """Used where autograd needs gradients: its backward was verified."""
        return self.gradients_stored in (1, True, "true", "1")

    @cached_property
    def beats_compile(self) -> bool:
        """Used under torch.compile: it beat the compiled reference beyond the noise."""
        return self.compile_beats_stored in (1, True, "true", "1")

    @property
    def compile_reason(self) -> str:
        """Why it is, or is not, used under torch.compile (for warnings)."""
        before = "banked before forge judged kernels against torch.compile; `forge bank verify` judges it"
        return self.compile_why or before

    @cached_property
    def key(self) -> str:
        """Identity across banks (ids are per bank): what the kernel is, not where it is stored."""
        digest = hashlib.sha256(f"{self.entry_point}\n{self.source}".encode()).hexdigest()[:16]
        return f"{self.op_hash[:12]}:{digest}"


@dataclass
class OpRecord:
    id: int
    name: str
    op_hash: str
    source: str
    target_class_path: str | None


@dataclass
class PlanEntry:
    """One banked parallel plan, as the runtime needs it (the plan still as JSON)."""

    id: int
    op_name: str
    structure_hash: str
    world_size: int
    mesh: str
    device_kind: str
    mode: str
    plan_json: str
    step_ms: float | None


def stored_json(value: Any) -> Any:
    """A JSON column's value: text from sqlite3, already decoded by psycopg."""
    return json.loads(value) if isinstance(value, str | bytes) else value
