"""Paired timing: each candidate call next to a baseline call, and what their ratios say.

On a shared machine load comes and goes on the scale of milliseconds to seconds. Timing all of
one side, then all of the other (or batch against batch) lets a burst land on one side only and
move the speedup by 2-10x. Timing the sides call by call, alternating which goes first (ABBA:
baseline-candidate, candidate-baseline, ...), puts each burst on both sides of a pair or on a
single pair, and a slow drift cancels within each pair. The decision reads the distribution of
per-pair ratios, with a confidence interval for its median, not two independent medians.

The same rules serve every measurement forge pairs: the verifier's workers, the user loop's
processes, the model probe's proof and the benchmarks. ``slowed`` answers the user loop's other
question: whether eager ran slower in one set of calls than in another (before and after the
candidate was imported; in a process with the candidate and one without it, taking turns).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from forge.core.timing_records import PairedRatio

_CONFIDENCE_TAIL = 0.025  # two-sided 95%
_MIN_PAIRS_FOR_INTERVAL = 6  # below this no order statistic gives 95%: the whole range is reported


def baseline_first(pair_index: int, batch_index: int = 0) -> bool:
    """ABBA across pairs: pairs 0, 3, 4, 7, 8, ... time the baseline first; 1, 2, 5, 6, ... the
    candidate. Every other batch is mirrored (the candidate first in pairs 0, 3, 4, ...).

    A call that follows its own worker's call runs faster on a 2-core VM than one that follows
    the other worker's (its OpenMP threads are still awake). Unmirrored, a batch of two pairs
    runs baseline, candidate, candidate, baseline: the candidate gets a call after its own in
    every batch, the baseline none. With the heap-room bias of the time (see
    ``timing.prefault_heap``) the reference timed against itself read 1.13-1.51x on
    residual_rmsnorm at 60 calls a side, 1.08-1.20x with the batches mirrored. Mirrored, each
    side follows itself, and opens a batch, equally often over every two batches, whatever their size."""
    return (pair_index % 4 in (0, 3)) != (batch_index % 2 == 1)


def call_order(pairs: int, batch_index: int) -> str:
    """The sides in the order one batch times them: 'b' the baseline, 'c' the candidate."""
    return "".join("bc" if baseline_first(i, batch_index) else "cb" for i in range(pairs))


def side_orders(pairs: int, batch_index: int, sides: int) -> list[list[int]]:
    """For each pair (a round of calls, one a side), the sides in the order it times them: 0 the
    baseline, 1 the candidate, 2... its rivals (a round's other candidates timed in the same
    batches). Two sides keep ``call_order``'s ABBA. More rotate by one each pair (pair i starts with
    side ``(i + batch_index) % sides``): every side opens a pair, and closes one, equally often over
    ``sides`` pairs, and no call ever follows its own worker's (which runs faster: its threads are
    still awake), since a pair ends with the side two before the next pair's first."""
    if sides == 2:
        return [[0, 1] if side == "b" else [1, 0] for side in call_order(pairs, batch_index)[::2]]
    return [[(i + batch_index + j) % sides for j in range(sides)] for i in range(pairs)]


def _binomial_cdf(k: int, n: int) -> float:
    """P(X <= k) for X ~ Binomial(n, 1/2)."""
    return float(sum(math.comb(n, i) for i in range(k + 1)) / 2**n)


def median_interval_ranks(n: int) -> tuple[int, int]:
    """0-based ranks (lo, hi) of the sorted sample bounding a 95% confidence interval for the
    median, from the binomial distribution of how many values fall below it (distribution-free)."""
    if n < _MIN_PAIRS_FOR_INTERVAL:
        return 0, n - 1
    k = 0
    while _binomial_cdf(k, n) <= _CONFIDENCE_TAIL:
        k += 1
    return max(k - 1, 0), n - k  # the k-th smallest and k-th largest values (1-based k)


def paired_ratio(baseline_ns: Sequence[int], candidate_ns: Sequence[int]) -> PairedRatio | None:
    """Baseline time over candidate time per pair: median and its 95% interval (None without pairs)."""
    ratios = sorted(b / c for b, c in zip(baseline_ns, candidate_ns, strict=True) if c > 0 and b > 0)
    if not ratios:
        return None
    n = len(ratios)
    median = ratios[n // 2] if n % 2 else (ratios[n // 2 - 1] + ratios[n // 2]) / 2
    lo, hi = median_interval_ranks(n)
    return PairedRatio(pairs=n, median=round(median, 4), low=round(ratios[lo], 4), high=round(ratios[hi], 4))


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
