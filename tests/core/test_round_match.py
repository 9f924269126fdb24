"""What a round's match decides: a side whose every head-to-head interval is above 1.0 wins beyond
the noise; otherwise the side faster head to head than the most others wins within the noise
(then the one beaten beyond the noise by the fewest, then the better median over eager); a failed
match decides nothing, and a lone timed side is chosen as the only one."""

from __future__ import annotations

from forge.core.round_match import MatchedPair, MatchedSide, RoundMatch
from forge.core.timing_records import PairedRatio


def _r(median: float, low: float, high: float) -> PairedRatio:
    return PairedRatio(pairs=20, median=median, low=low, high=high)


def _match(b_over_a: PairedRatio, failed: str | None = None) -> RoundMatch:
    sides = [
        MatchedSide(name="attempt_1", vs_eager=_r(1.2, 1.1, 1.3)),
        MatchedSide(name="attempt_2", vs_eager=_r(1.5, 1.4, 1.6)),
        MatchedSide(name="attempt_3", failed="raised: boom"),
    ]
    pairs = [MatchedPair(faster="attempt_2", slower="attempt_1", ratio=b_over_a)]
    return RoundMatch(sides=sides, pairs=pairs, regime="cold", failed=failed)


def test_the_fastest_over_eager_wins_beyond_the_noise_when_its_head_to_head_interval_clears_one():
    match = _match(_r(1.25, 1.1, 1.4))
    assert match.winner == "attempt_2" and match.decisive
    said = match.summary()
    assert "attempt 2 chosen beyond the noise" in said and "attempt 3: no figure (raised: boom)" in said


def test_a_head_to_head_interval_reaching_one_ranks_by_the_median_only():
    match = _match(_r(1.05, 0.97, 1.12))
    assert match.winner == "attempt_2" and not match.decisive
    assert "within the noise" in match.summary()


def test_a_failed_match_or_a_lone_timed_side_decides_nothing():
    failed = _match(_r(1.25, 1.1, 1.4), failed="timed while the machine was busy")
    assert failed.winner is None and not failed.decisive
    assert failed.summary() == "timed together: decided nothing (timed while the machine was busy)"
    lone = RoundMatch(sides=[MatchedSide(name="a", vs_eager=_r(2.0, 1.9, 2.1)), MatchedSide(name="b", failed="x")])
    assert lone.winner == "a" and not lone.decisive
    assert "a chosen as the only side timed" in lone.summary()


def test_a_side_that_wins_head_to_head_beyond_the_noise_wins_over_a_better_median_against_eager():
    """Eager's noise is in each side's figure over eager, not in their ratio to each other: a side
    clearly faster head to head is chosen even where the other's median over eager reads higher."""
    sides = [MatchedSide(name="a", vs_eager=_r(1.6, 1.0, 2.2)), MatchedSide(name="b", vs_eager=_r(1.5, 1.3, 1.7))]
    pairs = [MatchedPair(faster="b", slower="a", ratio=_r(1.1, 1.04, 1.2))]
    match = RoundMatch(sides=sides, pairs=pairs)
    assert match.winner == "b" and match.decisive


def test_within_the_noise_the_side_faster_head_to_head_than_the_most_others_wins():
    """No side beats every other beyond the noise: the one faster head to head (at the median) than
    the most others is chosen, even where another's median over eager reads higher."""
    sides = [
        MatchedSide(name="a", vs_eager=_r(1.9, 1.0, 2.5)),
        MatchedSide(name="b", vs_eager=_r(1.7, 1.5, 1.9)),
        MatchedSide(name="c", vs_eager=_r(1.6, 1.5, 1.7)),
    ]
    pairs = [
        MatchedPair(faster="b", slower="a", ratio=_r(1.04, 0.97, 1.1)),
        MatchedPair(faster="b", slower="c", ratio=_r(1.03, 0.98, 1.09)),
        MatchedPair(faster="a", slower="c", ratio=_r(1.02, 0.95, 1.1)),
    ]
    match = RoundMatch(sides=sides, pairs=pairs, regime="warm")
    assert match.winner == "b" and not match.decisive
    said = match.summary()
    assert said.startswith("timed together (warm): b ran 1.04x as fast as a [0.97-1.10]; ")
    assert "b chosen within the noise, by the median; over eager in the match" in said


def test_a_cycle_goes_to_the_side_not_beaten_beyond_the_noise_and_a_dead_heat_is_no_win():
    sides = [
        MatchedSide(name="b", vs_eager=_r(1.9, 1.8, 2.0)),
        MatchedSide(name="a", vs_eager=_r(1.8, 1.7, 1.9)),
        MatchedSide(name="c", vs_eager=_r(1.7, 1.6, 1.8)),
    ]
    cycle = [
        MatchedPair(faster="a", slower="b", ratio=_r(1.2, 1.1, 1.3)),  # beyond the noise
        MatchedPair(faster="b", slower="c", ratio=_r(1.05, 0.95, 1.15)),
        MatchedPair(faster="c", slower="a", ratio=_r(1.03, 0.96, 1.1)),
    ]
    assert RoundMatch(sides=sides, pairs=cycle).winner == "a"  # one win each: b lost beyond the noise
    heat = [MatchedPair(faster="a", slower="b", ratio=_r(1.0, 0.9, 1.1))]  # medians rounded to a tie
    assert RoundMatch(sides=sides[:2], pairs=heat).winner == "b"  # no win: the better median over eager
