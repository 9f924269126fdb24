"""When a banked kernel is used where autograd needs gradients (``training_standing``): its
backward verified and its training step not measurably slower than eager's."""

from __future__ import annotations

import pytest

from forge.core.acceptance import training_standing
from forge.core.timing_records import PairedRatio, TrainingStepTimes
from forge.core.verdict import Verdict


def _verdict(
    gradients: bool | None, step: tuple[float, float, float] | None, null: tuple[float, float, float] | None = None
) -> Verdict:
    v = Verdict()
    if gradients is not None:
        v.add("gradients", gradients, "13 cases" if gradients else "gradient of input 0: off by 2")
    if step is not None:
        median, low, high = step
        nulled = PairedRatio(pairs=60, median=null[0], low=null[1], high=null[2]) if null else None
        eager = PairedRatio(pairs=12, median=median, low=low, high=high)
        v.training_step = TrainingStepTimes(eager=eager, null_eager=nulled)
    return v


@pytest.mark.parametrize(
    ("gradients", "step", "used", "said"),
    [
        (None, None, False, "inference only"),
        (False, (2.0, 1.8, 2.2), False, "failed verification"),
        (True, None, False, "not timed"),
        (True, (0.7, 0.6, 0.8), False, "slower than eager's step"),
        (True, (0.98, 0.9, 1.05), True, "0.98x eager"),  # not measurably slower: used
        (True, (1.9, 1.7, 2.1), True, "1.90x eager"),
    ],
)
def test_training_standing(gradients, step, used, said):
    standing = training_standing(_verdict(gradients, step))
    assert standing.used is used and said in standing.why, standing.why


@pytest.mark.parametrize(
    ("null", "used"),
    [
        (None, False),  # against 1.0x: measurably slower
        ((1.02, 0.98, 1.06), False),  # a null reading 1.06x at most: slower still, beyond its spread
        ((0.95, 0.90, 1.03), True),  # the reference's step read 0.90-1.03x against itself: within the noise
    ],
)
def test_a_finalists_step_is_judged_slower_only_beyond_its_null_control(null, used):
    standing = training_standing(_verdict(True, (0.95, 0.93, 0.97), null))
    assert standing.used is used, standing.why
    assert ("null control" in standing.why) is (null is not None)
