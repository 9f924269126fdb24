"""Shape buckets: choosing among a kernel's per-shape-bucket configs (pure logic)."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any


def log_distance(a: Sequence[Sequence[int]], b: Sequence[Sequence[int]]) -> float:
    """Distance between two lists of input shapes in log2 space; inf when ranks differ."""
    if len(a) != len(b):
        return math.inf
    total = 0.0
    for sa, sb in zip(a, b, strict=True):
        if len(sa) != len(sb):
            return math.inf
        total += sum((math.log2(max(x, 1)) - math.log2(max(y, 1))) ** 2 for x, y in zip(sa, sb, strict=True))
    return math.sqrt(total)


def nearest_config(
    configs: Sequence[tuple[list[list[int]], dict[str, Any]]], shapes: list[list[int]]
) -> dict[str, Any] | None:
    """The config of the bucket nearest to ``shapes`` (None when no bucket has the same ranks)."""
    best, best_d = None, math.inf
    for bucket, config in configs:
        d = log_distance(bucket, shapes)
        if d < best_d:
            best, best_d = config, d
    return best
