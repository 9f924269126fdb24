"""The built-in tuner: coordinate descent over a kernel family's knobs, driven by verdicts.

From the fastest passing config so far, it varies one knob at a time to a value not yet tried;
when the fastest has no untried neighbour left, it goes on from the next fastest. A knob value
whose single change made a candidate fail is banned for the rest of the search (the
verifier, not the tuner, decides what is correct: e.g. float accumulation may pass or fail the
stress cases depending on the op).

Some knobs do not change the kernel under some configs (the matmul tile when the library does
the matmul): a family's ``canonical`` resets them, and configs equal after it are one config, so
the search does not spend rounds re-measuring the same kernel.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from forge.agents.roles import HistoryItem
from forge.core.statuses import AttemptStatus

Space = dict[str, list[Any]]
# The knob that picks between two families' kernels (``coder.rivals``): a family whose first
# kernel failed still has its other configs to try, so its value is never banned
FAMILY_KNOB = "family"
Canonical = Callable[[dict[str, Any]], dict[str, Any]]


@dataclass(frozen=True)
class Trial:
    config: dict[str, Any]
    passed: bool
    time_ms: float | None
    parent: dict[str, Any] | None = None  # the config this one changed one knob of
    speedup: float | None = None  # vs eager, measured in the same run: steadier than raw times

    @property
    def score(self) -> float:
        if self.speedup:
            return self.speedup
        return 1.0 / self.time_ms if self.time_ms else 0.0


def config_key(config: dict[str, Any]) -> str:
    return json.dumps(config, sort_keys=True, default=str)


def default_config(space: Space) -> dict[str, Any]:
    return {knob: values[0] for knob, values in space.items()}


def ranked_trials(trials: list[Trial]) -> list[Trial]:
    """The passing, timed trials, fastest first."""
    return sorted((t for t in trials if t.passed and t.score > 0), key=lambda t: t.score, reverse=True)


def best_trial(trials: list[Trial]) -> Trial | None:
    ranked = ranked_trials(trials)
    return ranked[0] if ranked else None


def banned(trials: list[Trial]) -> set[tuple[str, str]]:
    out = set()
    for t in trials:
        if t.passed or t.parent is None:
            continue
        changed = [k for k in t.config if t.parent.get(k) != t.config[k]]
        if len(changed) == 1 and changed[0] != FAMILY_KNOB:
            out.add((changed[0], config_key({"v": t.config[changed[0]]})))
    return out


def next_configs(
    space: Space,
    trials: list[Trial],
    n: int = 1,
    exclude: set[str] | None = None,
    canonical: Canonical | None = None,
) -> list[dict[str, Any]]:
    """Up to ``n`` untried configs, each one knob away from the best (the default when nothing
    passed yet), then from the next best; empty when every passing config's neighbourhood is.
    ``exclude``: keys (``canonical_key``) already handed out; ``canonical``: the family's map to
    the config that renders the same kernel."""

    def key(config: dict[str, Any]) -> str:
        return canonical_key(space, config, canonical)

    default = default_config(space)
    # the best config's neighbours first, then the runner-up's, ...: a search whose best has no
    # untried neighbour goes on from the next (timing noise can rank a two-knob winner's first
    # step below the default)
    bases = [{**default, **{k: v for k, v in t.config.items() if k in space}} for t in ranked_trials(trials)]
    taken = tried_keys(space, trials, canonical) | (exclude or set())  # grows with each config handed out
    ban = banned(trials)
    out: list[dict[str, Any]] = []

    def offer(config: dict[str, Any]) -> None:
        k = key(config)
        if k not in taken:
            taken.add(k)
            out.append(config)

    for base in bases or [default]:
        offer(base)
        for knob, values in space.items():
            for value in values:
                if value != base[knob] and (knob, config_key({"v": value})) not in ban:
                    offer({**base, knob: value})
        if len(out) >= n:
            break
    return out[:n]


def tried_keys(space: Space, trials: list[Trial], canonical: Canonical | None = None) -> set[str]:
    """The keys (``canonical_key``) of the kernels ``trials`` measured."""
    return {canonical_key(space, t.config, canonical) for t in trials}


def canonical_key(space: Space, config: dict[str, Any], canonical: Canonical | None = None) -> str:
    """The key of the kernel ``config`` renders: its knobs in ``space``, inert ones reset."""
    mine = {k: config.get(k) for k in space}
    return config_key(canonical(mine) if canonical else mine)


def effective_config(space: Space, config: dict[str, Any], canonical: Canonical | None = None) -> dict[str, Any]:
    """``config`` without its inert knobs: those no value of which changes the kernel it renders.
    What a kernel is banked and shown with (the layernorm's ``acc`` under one-pass moments would
    say float accumulation where the kernel accumulates in double)."""
    if canonical is None:
        return dict(config)
    key = canonical_key(space, config, canonical)

    def inert(knob: str) -> bool:
        return all(canonical_key(space, {**config, knob: v}, canonical) == key for v in space[knob])

    return {k: v for k, v in config.items() if k not in space or not inert(k)}


def trials_from(history: list[HistoryItem]) -> list[Trial]:
    """The tuner's view of a history: one trial per attempt that carried a config."""
    return [_trial(h, h.config) for h in history if h.config is not None]


def _trial(h: HistoryItem, config: dict[str, Any]) -> Trial:
    passed = h.status == AttemptStatus.PASSED
    return Trial(dict(config), passed, h.timings_ms.candidate, h.parent_config, h.speedup_vs_eager)
