"""The roofline's count of transcendental evaluations: what a kernel computes with an exp, a log,
a tanh, ... (a general power among them), not a power it computes with multiplies, a division or a
square root (an RMSNorm's ``x.pow(2)``)."""

from __future__ import annotations

import pytest
import torch

from forge.verifier.worker.op_work import roofline


def _counted(fn, *xs: torch.Tensor) -> int:  # type: ignore[no-untyped-def]
    counter = roofline.FlopCounter()
    with counter, torch.no_grad():
        fn(*xs)
    return counter.transcendentals


X = torch.rand(8, 16) + 0.5


@pytest.mark.parametrize("exponent", [2, 3, -1, 0.5, -0.5, 4.0])
def test_a_power_written_with_multiplies_or_a_square_root_is_not_counted(exponent):
    assert _counted(lambda x: x.pow(exponent), X) == 0


@pytest.mark.parametrize("fn", [lambda x: x.pow(2.7), lambda x: x.pow(7), lambda x: torch.pow(x, x), torch.exp])
def test_a_general_power_and_an_exp_are_counted_once_an_element(fn):
    assert _counted(fn, X) == X.numel()
