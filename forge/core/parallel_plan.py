"""A parallel plan: how a model is spread over a device mesh. What forge's agents propose, its
checks judge, the bank stores (as JSON) and ``bank.parallelize`` applies.

- ``mesh``: sizes of the mesh's dimensions. ``dp`` (data parallel, sharded by FSDP) and ``tp``
  (tensor parallel) are run for real; ``pp`` (pipeline) and ``cp`` (context) are recorded and
  judged by the static rules and the cost model only (pipelines hang on gloo today).
- ``tp``: a tensor-parallel style per module-name pattern (matched part by dotted part against
  ``model.named_modules()`` names, ``*`` and ``[qkv]`` within one part: ``blocks.*.attn.[qkv]``),
  with the layouts of its input and output as torch.distributed.tensor.parallel takes them.
- ``fsdp``: which modules are FSDP units, and whether they reshard after forward.
- ``microbatches`` and ``checkpoint``: activation checkpointing per module pattern.

A plan round-trips through JSON unchanged (``to_json`` / ``from_json``). ``matched_modules`` is
how every consumer reads a pattern; ``structure_hash`` names the model a plan was made for.
"""

from __future__ import annotations

import hashlib
from fnmatch import fnmatchcase
from typing import TYPE_CHECKING, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

from forge.core.statuses import TextEnum

if TYPE_CHECKING:  # a module only walked here: readers of banked plans (the TUI) do not import torch
    from torch import nn


class TpStyle(TextEnum):
    """The torch.distributed.tensor.parallel style a pattern's modules get."""

    COLWISE = "colwise"  # Linear: weight rows (out_features) split; Embedding: embedding_dim split
    ROWWISE = "rowwise"  # Linear: weight columns (in_features) split; Embedding: vocabulary split
    SEQUENCE = "sequence"  # a norm (or dropout) run on the sequence-sharded activation


class Layout(TextEnum):
    """How an activation lies across the tp ranks where two planned modules meet."""

    REPLICATE = "replicate"  # every rank holds all of it
    SHARD_LAST = "shard_last"  # split along the hidden (last) dimension: a colwise output
    SHARD_SEQUENCE = "shard_sequence"  # split along the sequence dimension (1): sequence parallel


_STRICT = ConfigDict(extra="forbid", frozen=True)


class TpRule(BaseModel):
    """One tensor-parallel rule; ``None`` layouts take the style's default (``default_layouts``)."""

    model_config = _STRICT
    pattern: str = Field(min_length=1)
    style: TpStyle
    input_layout: Layout | None = None
    output_layout: Layout | None = None

    def layouts(self) -> tuple[Layout, Layout]:
        """(input, output) as torch applies them: the given ones, else the style's defaults."""
        default_in, default_out = default_layouts(self.style)
        return self.input_layout or default_in, self.output_layout or default_out


def default_layouts(style: TpStyle) -> tuple[Layout, Layout]:
    """torch's defaults: colwise takes a replicated input and leaves its output sharded on the
    hidden dimension; rowwise takes that and all-reduces back to replicated; sequence parallel
    keeps the sequence-sharded activation as it is."""
    return {
        TpStyle.COLWISE: (Layout.REPLICATE, Layout.SHARD_LAST),
        TpStyle.ROWWISE: (Layout.SHARD_LAST, Layout.REPLICATE),
        TpStyle.SEQUENCE: (Layout.SHARD_SEQUENCE, Layout.SHARD_SEQUENCE),
    }[style]


class FsdpSettings(BaseModel):
    model_config = _STRICT
    units: list[str] = Field(default_factory=list)  # module-name patterns wrapped as FSDP units
    reshard_after_forward: bool = True


MeshDim = Literal["dp", "tp", "pp", "cp"]


def _single_rank() -> dict[MeshDim, int]:
    return {"dp": 1, "tp": 1}


class ParallelPlan(BaseModel):
    model_config = _STRICT
    mesh: dict[MeshDim, int] = Field(default_factory=_single_rank)
    tp: list[TpRule] = Field(default_factory=list)
    fsdp: FsdpSettings | None = None
    microbatches: int = Field(default=1, ge=1)
    checkpoint: list[str] = Field(default_factory=list)  # module-name patterns recomputed in backward
    note: str = ""  # why the agent proposed it (shown, not used)

    @field_validator("mesh")
    @classmethod
    def _positive(cls, mesh: dict[MeshDim, int]) -> dict[MeshDim, int]:
        bad = {k: v for k, v in mesh.items() if v < 1}
        if bad:
            raise ValueError(f"mesh sizes must be at least 1: {bad}")
        return mesh

    def degree(self, dim: MeshDim) -> int:
        return self.mesh.get(dim, 1)

    @property
    def world_size(self) -> int:
        n = 1
        for size in self.mesh.values():
            n *= size
        return n

    def to_json(self) -> dict[str, Any]:
        return self.model_dump(mode="json")

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> ParallelPlan:
        return cls.model_validate(data)

    def mesh_text(self) -> str:
        """The mesh as the CLI takes it: dp x tp (``2x1``), pp and cp appended when set."""
        sizes = [self.degree("dp"), self.degree("tp")] + [self.degree(d) for d in ("pp", "cp") if self.degree(d) > 1]
        return "x".join(str(n) for n in sizes)

    def patterns(self) -> list[str]:
        """Every module-name pattern the plan uses (tp rules, FSDP units, checkpointing)."""
        return [r.pattern for r in self.tp] + (self.fsdp.units if self.fsdp else []) + self.checkpoint


def matched_modules(model: nn.Module, pattern: str) -> list[str]:
    """The names of ``model``'s submodules that ``pattern`` matches, part by dotted part (``*``
    stays within one part: ``blocks.*`` is each block, not everything inside them)."""
    parts = pattern.split(".")
    return [
        name
        for name, _ in model.named_modules()
        if name
        and len(name.split(".")) == len(parts)
        and all(fnmatchcase(n, p) for n, p in zip(name.split("."), parts, strict=True))
    ]


def structure_hash(model: nn.Module) -> str:
    """What a plan depends on in a model: its modules' names and types and its parameters' names,
    shapes and dtypes. Equal for two instances built alike; different once a layer is added,
    renamed or resized (a stored plan no longer matches)."""
    lines = [f"{name}:{type(m).__name__}" for name, m in model.named_modules()]
    lines += [f"{name}:{tuple(p.shape)}:{p.dtype}" for name, p in model.named_parameters()]
    return hashlib.sha256("\n".join(lines).encode()).hexdigest()
