"""A round's candidates timed together (``VerifierService.time_together``), through real workers:
the rival that runs fastest wins whichever side it is on; a rival that fails to build is dropped
and the others still decide; a rival whose timed outputs go wrong voids the match."""

from __future__ import annotations

from forge.verifier import Job, VerifierService
from tests.conftest import OPS

OP = OPS / "quick_rmsnorm.py"

_HEAD = """import torch
import torch.nn as nn

calls = 0


class ModelNew(nn.Module):
    def __init__(self, hidden, eps):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(hidden))

    def forward(self, x):
        global calls
        calls += 1
"""
ONE_PASS = _HEAD + "        return x * torch.rsqrt(x.pow(2).mean(dim=-1, keepdim=True) + self.eps) * self.weight\n"
# the same output after seven redundant passes over x: slower by construction (by about 8x, far
# more than a loaded machine's noise), and correct
EIGHT_PASSES = (
    _HEAD
    + "        for _ in range(7):\n            y = x * torch.rsqrt(x.pow(2).mean(dim=-1, keepdim=True) + self.eps)\n"
    + "        return x * torch.rsqrt(x.pow(2).mean(dim=-1, keepdim=True) + self.eps) * self.weight\n"
)
UNBUILDABLE = _HEAD.replace("        self.eps = eps\n", "        raise RuntimeError('no weights for me')\n") + (
    "        return x\n"
)
RAISES_LATER = ONE_PASS.replace(
    "        return x *",
    "        if calls > 5:\n            raise RuntimeError('gone')\n        return x *",
)
# right through every check of its own verification's size, then off by half once timing goes on
WRONG_LATER = ONE_PASS.replace(
    "        return x *",
    "        scale = 1.5 if calls > 5 else 1.0\n        return scale * x *",
)


def test_the_fastest_wins_from_the_rivals_side_and_an_unbuildable_rival_is_dropped(fast_settings):
    jobs = [Job("eight_passes", EIGHT_PASSES), Job("one_pass", ONE_PASS), Job("unbuildable", UNBUILDABLE)]
    with VerifierService(OP, fast_settings, "cpu") as service:
        match = service.time_together(jobs)
    assert match.failed is None, match.failed
    sides = {s.name: s for s in match.sides}
    assert sides["unbuildable"].failed is not None and "no weights for me" in sides["unbuildable"].failed
    assert match.winner == "one_pass" and match.decisive, match.summary()
    (pair,) = match.pairs
    assert (pair.faster, pair.slower) == ("one_pass", "eight_passes")
    # eight passes over x against one: the head-to-head reads well above 3x, and below 12x
    assert 3.0 < pair.ratio.median < 12.0, pair.ratio
    assert sides["eight_passes"].vs_eager is not None and sides["eight_passes"].vs_eager.median < 0.5


def test_a_rival_whose_timed_outputs_go_wrong_or_that_raises_once_timed_voids_the_match(fast_settings):
    """Either could have slowed the other sides, or been slowed to lose: the match decides nothing."""
    jobs = [Job("one_pass", ONE_PASS), Job("wrong_later", WRONG_LATER), Job("raises_later", RAISES_LATER)]
    with VerifierService(OP, fast_settings, "cpu") as service:
        match = service.time_together(jobs)
    assert match.winner is None and match.failed is not None and not match.leader_failed
    assert "wrong_later: timed outputs" in match.failed, match.failed
    assert "raises_later: raised: RuntimeError: gone" in match.failed, match.failed
