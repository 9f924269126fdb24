"""Shape variants: the declared FORGE_SHAPES, or sizes derived from the op's integer constants.

Derived variants shrink every size constant (ints >= 8; small ints such as a reduction ``dim`` or
a kernel size are left alone): one variant halves them, one maps them to odd values that are not a
multiple of any power-of-two block size. A variant is kept only if the reference still runs on it
(checked by the caller), so coupled constants that cannot change independently are dropped.
"""

from __future__ import annotations

from typing import Any

MIN_SIZE = 8


def size_like(constants: dict[str, Any]) -> dict[str, int]:
    return {k: v for k, v in constants.items() if type(v) is int and v >= MIN_SIZE}


def odd_size(c: int) -> int:
    """An odd size near 0.6 * c (so never a multiple of 2, 4, ..., 128), at least 3."""
    v = max(3, int(c * 0.6))
    return v if v % 2 else v + 1 if v + 1 < c else v - 1


FAMILIES = {"small": lambda c: max(1, c // 2), "odd": odd_size}


def family_overrides(constants: dict[str, Any]) -> dict[str, dict[str, int]]:
    """For each variant family, the override of every size constant at once."""
    sizes = size_like(constants)
    return {name: {k: fn(v) for k, v in sizes.items()} for name, fn in FAMILIES.items()} if sizes else {}


def describe(overrides: dict[str, Any]) -> str:
    return ", ".join(f"{k}={v}" for k, v in overrides.items()) or "as declared"
