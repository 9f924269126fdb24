"""The acceptance rule: when a passing candidate counts as faster than eager PyTorch."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict

from forge.core.statuses import TimingRegime
from forge.core.timing_records import PairedRatio
from forge.core.verdict import Verdict


def timed_while_busy(verdict: Verdict) -> bool:
    """Its calls were timed while other processes loaded the machine (and the load check was on):
    its figures say nothing either way, and it should be timed again when the machine is quiet."""
    busy = verdict.timing_stats.contention
    return busy is not None and busy.busy and busy.enforced


def null_floor(null: PairedRatio | None) -> float:
    """The ratio a candidate's interval must fall wholly below to be slower beyond the noise: the
    null's lower end, and its median mirrored about 1.0x (``null_bar``'s other side); 1.0x without
    a null."""
    if null is None:
        return 1.0
    return min(1.0, null.low, 1.0 / null.median if null.median > 0 else 0.0)


def null_bar(null: PairedRatio | None) -> float:
    """The speedup a candidate's interval must clear, given the null control (the reference timed
    against itself in a clean worker): the null's upper end, and its median mirrored about 1.0x.

    Two workers running the same code read a few to 15% apart on a 2-core VM. The offset is
    mostly the op's (the candidate's worker shares it: the null's upper end is the bar), but it
    could be drawn the other way in the candidate's worker, so an offset favouring eager counts
    mirrored (a null of 0.88-0.95x, median 0.91x, sets 1.10x; 1.05-1.14x sets 1.14x). The median,
    not the lower end, is mirrored: the candidate's own interval already carries the per-call
    noise, and a tiny op whose null spans 0.73-1.22x would otherwise need 1.37x. Without a null
    control the bar is 1.0x."""
    if null is None:
        return 1.0
    return max(1.0, null.high, 1.0 / null.median if null.median > 0 else float("inf"))


def beats_eager(verdict: Verdict) -> tuple[bool, str]:
    """A passed verdict is accepted only when the candidate beats eager beyond the noise, on a
    machine that was not busy:

    * the 95% confidence interval of the per-pair ratio (eager call / adjacent candidate call)
      lies above 1 in the regime the verdict is judged in (warm when the op's data fits in the
      cache, cold otherwise: ``TimingSides.regime``), and above ``null_bar`` when the verdict
      carries a null control (a finalist's confirmation), and
    * judged cold, the candidate's upper timing quartile lies below eager's lower quartile (the
      rule forge used before pairing; kept because it is stricter whenever the pairs are few), and
    * the OS did not report other processes loading the cores while the calls were timed, and
    * timed in a user's loop too (a confirmation: ``Verdict.user_loop``), it is faster than eager
      at the median there.

    Verdicts stored before pairing or quartiles were recorded fall back to what they have
    (quartiles, else median +/- IQR/2)."""
    if not verdict.passed:
        return False, f"did not pass ({verdict.status})"
    if not verdict.timing_meaningful:
        return False, "its timings are not meaningful on this device (e.g. Triton in the CPU interpreter)"
    stats = verdict.timing_stats
    cand, eager = stats.candidate, stats.eager
    if cand is None or eager is None:
        return False, "no timings"
    if timed_while_busy(verdict) and stats.contention is not None:
        return False, f"the machine was busy while it was timed ({stats.contention.detail})"
    paired = stats.headline_pairs()[0]
    speedup = paired.median if paired is not None else (eager.median_ms / cand.median_ms if cand.median_ms else 0.0)
    regime = f", {stats.regime}" if stats.regime is not None else ""
    interval = f" (95% CI {paired.low:.2f}-{paired.high:.2f}x over {paired.pairs} pairs{regime})" if paired else ""
    if paired is not None and paired.low <= 1.0:
        return False, f"{speedup:.2f}x eager{interval}: the interval reaches 1.0x, within the noise"
    null, bar = stats.null_eager, null_bar(stats.null_eager)
    if null is not None and paired is not None and paired.low <= bar:
        return False, (
            f"{speedup:.2f}x eager{interval}: the interval does not clear {bar:.2f}x, how far the reference "
            f"read from itself in a clean worker ({null.median:.2f}x, {null.low:.2f}-{null.high:.2f}): within "
            "the noise between workers"
        )
    loop = verdict.user_loop.eager if verdict.user_loop is not None else None
    if loop is not None and loop.median <= 1.0:
        return False, (
            f"{speedup:.2f}x eager{interval} in the isolated workers, but {loop.median:.2f}x ({loop.low:.2f}-"
            f"{loop.high:.2f}) timed as a user times it, in fresh processes of its own: not faster where it would run"
        )
    beyond = "beyond the measured noise" + (f" and the null control's {bar:.2f}x" if null is not None else "")
    if loop is not None:
        beyond += f"; {loop.median:.2f}x in a user's loop (the claim is the lower)"
    if stats.regime is TimingRegime.WARM and paired is not None:
        # The quartiles describe the cold calls: another regime than the one judged.
        return True, f"{speedup:.2f}x faster than eager{interval}, {beyond}"
    if cand.upper_ms < eager.lower_ms:
        return True, f"{speedup:.2f}x faster than eager{interval}, {beyond}"
    return False, f"{speedup:.2f}x eager{interval} is within the measured noise (quartiles overlap) or slower"


class CompileStanding(BaseModel):
    """Whether a banked kernel is used under ``torch.compile`` (``beats_compile``'s answer, stored
    in its evidence so the runtime reads it without forge's models)."""

    model_config = ConfigDict(extra="ignore")
    beats: bool
    why: str
    by_model: bool = False  # set by a model-level run (a compiled model it slowed): re-verifying keeps it


def _against_compile(compiled: PairedRatio) -> str:
    return f"{compiled.median:.2f}x torch.compile (95% CI {compiled.low:.2f}-{compiled.high:.2f}x)"


def beats_compile(verdict: Verdict) -> CompileStanding:
    """A kernel replaces the reference under ``torch.compile`` only when it beats the compiled
    reference beyond the noise: the 95% interval of the per-pair ratio (compiled call / adjacent
    kernel call), as banked (``Verdict.claim_pairs``: the user loop's figure where it is the lower),
    lies above 1.0x and above the null control's bar. Otherwise an opaque kernel would stand where
    Inductor fuses the reference with its neighbours, and the compiled model would get slower."""
    if not verdict.passed or not verdict.timing_meaningful:
        return CompileStanding(beats=False, why="its timings say nothing here (not passed, or not meaningful)")
    if timed_while_busy(verdict):
        return CompileStanding(beats=False, why="it was timed while the machine was busy")
    compiled = verdict.claim_pairs()[1]
    if compiled is None:
        return CompileStanding(beats=False, why="no torch.compile baseline was timed for it")
    figure = _against_compile(compiled)
    bar = null_bar(verdict.timing_stats.null_eager)
    if compiled.low <= bar:
        beyond = "1.0x" if bar == 1.0 else f"the null control's {bar:.2f}x"
        return CompileStanding(beats=False, why=f"{figure}: the interval does not clear {beyond}")
    return CompileStanding(beats=True, why=f"{figure}, beyond the noise")


def slower_than_compile(verdict: Verdict) -> str | None:
    """Why a kernel is slower than torch.compile of its op beyond the noise (the interval of its
    banked compile ratio wholly below the null's floor, ``null_floor``), or None when it is not.
    Where Inductor's own code for the op passed too, such a kernel is not the op's best: the
    session banks the compiler's code rather than fall below it."""
    if not verdict.passed or not verdict.timing_meaningful or timed_while_busy(verdict):
        return None
    compiled = verdict.claim_pairs()[1]
    if compiled is None:
        return None
    floor = null_floor(verdict.timing_stats.null_eager)
    if compiled.high >= floor:
        return None
    figure = _against_compile(compiled)
    return f"{figure}: slower than it beyond the noise"


class TrainingStanding(BaseModel):
    """Whether a banked kernel is used where autograd needs gradients (``training_standing``'s
    answer, stored in its evidence as ``gradients_verified`` for the runtime)."""

    model_config = ConfigDict(extra="ignore")
    used: bool
    why: str
    by_model: bool = False  # set by a model-level run (a training step it slowed): re-verifying keeps it


def training_standing(verdict: Verdict) -> TrainingStanding:
    """A kernel stands in for the reference under autograd only when its backward passed the
    gradient check and its training step (forward and backward, ``Verdict.training_step``) is not
    measurably slower than eager's: the 95% interval of the per-pair ratio reaches 1.0x, or, where
    the step carries a null control (a finalist's), its floor (``null_floor``). A faster
    forward with a slower backward would slow the user's training; the reference runs there."""
    grads = next((c for c in verdict.checks if c.name == "gradients"), None)
    if grads is None:
        return TrainingStanding(
            used=False, why="verified for inference only: where gradients are needed the reference runs"
        )
    if not grads.passed:
        return TrainingStanding(used=False, why=f"its backward failed verification: {grads.detail}")
    if not verdict.passed:
        return TrainingStanding(used=False, why=f"its verification failed: {verdict.reason}")
    steps = verdict.training_step
    eager, compiled = steps.headline() if steps is not None else (None, None)
    if eager is None:
        return TrainingStanding(used=False, why="its backward was verified, its training step not timed")
    figure = f"training step {eager.median:.2f}x eager ({eager.low:.2f}-{eager.high:.2f})"
    figure += f", {compiled.median:.2f}x torch.compile" if compiled is not None else ""
    null = steps.null_eager if steps is not None else None
    floor = null_floor(null)
    if null is not None:
        figure += f"; null control {null.median:.2f}x ({null.low:.2f}-{null.high:.2f})"
    if eager.high < floor:
        return TrainingStanding(used=False, why=f"{figure}: slower than eager's step, so the reference runs there")
    if steps is not None and steps.busy:
        return TrainingStanding(used=False, why=f"{figure}, timed while the machine was busy ({steps.busy})")
    return TrainingStanding(used=True, why=f"{figure}; its backward verified against the reference's autograd")
