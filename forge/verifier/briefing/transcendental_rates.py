"""How fast this machine evaluates transcendental functions: torch's own vectorised exp, tanh,
sigmoid, erf, log and log1p over float32 data in cache, on the brief's threads. The roofline's
bound prices bytes and matmul FLOPs only, so an op of exps (a mish, a softmax, a GELU) can sit at
a tenth of it while its exps take all of its time; a model told neither rate went on tuning its
memory traffic. The brief states these rates, and the least time the op's own evaluations take at
the fastest of them, where the op evaluates any (on a CPU; a GPU's special-function units are
another ceiling, not measured here)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from typing import Any

from forge.verifier.machine.contention import LoadMonitor
from forge.verifier.machine.readings import best_call_seconds

# elements a thread: 256 KiB of float32 read and as much written, in the cores' own caches, so the
# rate is the math's; torch splits an elementwise op into chunks of 32768 elements, so every thread
# gets work (a fixed 1 MiB kept all but 8 of 16 threads idle)
ELEMENTS_A_THREAD = 1 << 16
_INNER = 20  # calls a timed loop
_TURNS = 6  # timed loops a function, taken in turns with the others


@dataclass(frozen=True)
class TranscendentalRates:
    """Billions of elements a second per function (``rates``: name and rate, fastest first) on
    ``threads`` threads, and the op's evaluations a call (the roofline's count)."""

    rates: tuple[tuple[str, float], ...]
    threads: int
    evaluations: int
    load: str | None = None  # other processes' use of the cores while it was measured, where they were busy

    def floor_ms(self) -> float:
        """The op's evaluations at the fastest rate measured, in ms."""
        return self.evaluations / (self.rates[0][1] * 1e9) * 1e3

    def said(self) -> str:
        """The runtime fact the brief states."""
        rates = ", ".join(f"{name} {rate:.1f}" for name, rate in self.rates)
        loaded = f" (measured while {self.load}: they read low)" if self.load else ""
        return (
            f"transcendental functions here: torch's vectorised float32 {rates} G elements/s on {self.threads} "
            f"threads, each over 256 KiB of its own (in cache){loaded}; this op evaluates "
            f"{self.evaluations / 1e6:.2f} M a call (the reference's count), {self.floor_ms():.4f} ms at the fastest "
            "of those rates. The roofline's bound counts none of this: where that time is most of the bound or "
            "more, the math is the limit, and a kernel goes under it only by evaluating fewer (one exp where the "
            "reference takes an exp, a log1p and a tanh) or cheaper ones (a polynomial accurate to a few ulp, wider "
            "vectors)"
        )


def _functions() -> tuple[tuple[str, Callable[..., Any]], ...]:
    import torch

    return (
        ("exp", torch.exp),
        ("tanh", torch.tanh),
        ("sigmoid", torch.sigmoid),
        ("erf", torch.erf),
        ("log", torch.log),
        ("log1p", torch.log1p),
    )


def measure_transcendental_rates(evaluations: int) -> TranscendentalRates:
    """Each function over ``ELEMENTS_A_THREAD`` positive floats a thread into a preallocated output,
    the best of ``_TURNS`` loops of ``_INNER`` calls, taken in turns: a few tens of ms in all."""
    import torch

    elements = ELEMENTS_A_THREAD * torch.get_num_threads()
    x = torch.rand(elements) + 0.5  # inside every function's domain, away from its special cases
    y = torch.empty_like(x)
    monitor = LoadMonitor([])  # this process's own threads are not load
    start = monitor.sample()
    calls = {name: partial(fn, x, out=y) for name, fn in _functions()}
    best = dict.fromkeys(calls, float("inf"))
    # the functions take turns, a loop each a turn, so each one's best is taken over the whole
    # measurement: a burst of other work once read exp at 0.5 G/s beside log's 8.2 (12 alone),
    # when each function's five loops ran back to back and the burst fell on exp's
    for _turn in range(_TURNS):
        for name, call in calls.items():
            best[name] = min(best[name], best_call_seconds("cpu", call, reps=1, inner=_INNER))
    rates = [(name, round(elements / seconds / 1e9, 2)) for name, seconds in best.items()]
    load = monitor.between(start, monitor.sample())
    return TranscendentalRates(
        tuple(sorted(rates, key=lambda r: -r[1])),
        torch.get_num_threads(),
        evaluations,
        load.detail if load is not None and load.busy else None,
    )


__all__ = ["ELEMENTS_A_THREAD", "TranscendentalRates", "measure_transcendental_rates"]
