"""The enumerated choices a user makes (flags, settings, the TUI's form) and the bank stores.

Each is a ``str`` enum, so it prints, stores and compares as its plain value ("cpp", "refine"),
and a front end offers exactly its members.
"""

from __future__ import annotations

from forge.core.errors import UsageError
from forge.core.statuses import TextEnum


class Backend(TextEnum):
    """What a session writes kernels in; ``auto`` is Triton on CUDA and C++ on a CPU."""

    AUTO = "auto"
    TRITON = "triton"
    CPP = "cpp"
    CUDA = "cuda"


class Strategy(TextEnum):
    """How a session searches: one trajectory (``refine``), a population (``evolve``); a
    parallel-plan session (``forge plan``) is stored as ``parallel``."""

    REFINE = "refine"
    EVOLVE = "evolve"
    PARALLEL = "parallel"


class Device(TextEnum):
    """Where candidates are verified: ``auto`` takes CUDA where there is a GPU."""

    AUTO = "auto"
    CPU = "cpu"
    CUDA = "cuda"


class Executor(TextEnum):
    """Where a run's sessions run: this machine, or a Ray cluster."""

    LOCAL = "local"
    RAY = "ray"


SEARCH_STRATEGIES = (Strategy.REFINE, Strategy.EVOLVE)  # what `forge optimize --strategy` offers


def search_strategy(text: str) -> Strategy:
    """``--strategy``: how a kernel session searches (a plan session is ``forge plan``'s)."""
    if text not in SEARCH_STRATEGIES:
        raise UsageError(f"--strategy {text!r}: choose {' or '.join(SEARCH_STRATEGIES)}")
    return Strategy(text)
