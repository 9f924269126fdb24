"""Whether eager ran slower in one set of calls than in another, beyond a 2-core VM's noise.

The user loop asks it twice: of eager's calls before and after the candidate was imported (in
one process), and, when that reads slower, of eager's calls in a process with the candidate and
in a process without it, the two taking turns (``user_loop_turns``)."""

from __future__ import annotations

SLOWED = 1.5  # eager this much slower beside the candidate: the candidate slowed it


def median_ms(ns: list[int]) -> float:
    return round(sorted(ns)[len(ns) // 2] / 1e6, 6)


def slowed(plain_ns: list[int], beside_ns: list[int], where: str) -> str | None:
    """``beside_ns`` (eager's calls beside the candidate) read ``SLOWED`` times slower than
    ``plain_ns`` (without it): even the fastest quarter of the calls beside it took that many
    times the slowest quarter of the plain ones. Two medians of 10-60 calls alone read 0.7-1.6x
    apart on a 2-core VM with nothing loaded (a cold RMSNorm, 10 calls a side). ``where`` ends
    the sentence that says so ("once the candidate was loaded")."""
    plain, beside = sorted(plain_ns), sorted(beside_ns)
    if not plain or not beside or beside[len(beside) // 4] <= SLOWED * plain[(3 * len(plain)) // 4]:
        return None
    b, d = median_ms(plain_ns), median_ms(beside_ns)
    return f"eager ran {d / b:.2f}x slower ({b} -> {d} ms, medians; every quarter of its calls) {where}"


__all__ = ["SLOWED", "median_ms", "slowed"]
