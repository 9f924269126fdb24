"""When a banked kernel is used where autograd needs gradients (``training_standing``): its
backward verified and its training step not measurably slower than eager's."""

from __future__ import annotations

import pytest

from forge.core.acceptance import training_standing
from forge.core.timing_records import PairedRatio, TrainingStepTimes
from forge.core.verdict import Verdict


def _verdict(gradients: bool | None, step: tuple[float, float, float] | None) -> Verdict:
    v = Verdict()
    if gradients is not None:
        v.add("gradients", gradients, "13 cases" if gradients else "gradient of input 0: off by 2")
    if step is not None:
        median, low, high = step
        v.training_step = TrainingStepTimes(eager=PairedRatio(pairs=12, median=median, low=low, high=high))
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
