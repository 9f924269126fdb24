"""The bank's kernels a claims script takes: the active ones, those it was told to take only."""

from __future__ import annotations

from sqlalchemy.engine import Engine

from forge.db.kernels import KernelSummary, list_kernels


def active_kernels(engine: Engine, wanted: list[int] | None) -> list[KernelSummary]:
    """The bank's active kernels (``wanted``: only these ids, when given)."""
    return [k for k in list_kernels(engine) if str(k.status) == "active" and (not wanted or k.id in wanted)]
