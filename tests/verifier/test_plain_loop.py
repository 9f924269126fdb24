"""The plain loop the user loop and reproduce.py time with: every side once a round, the first
side rotating; warm rounds write their values into the same buffers, cold rounds hand every side
the round's fresh inputs."""

from __future__ import annotations

import time

import torch

from forge.verifier.worker.timing.plain_loop import WARMUP_CALLS, time_sides


def _recording(rounds: int, cold: bool) -> tuple[list[tuple[str, int, float]], dict[str, list[int]]]:
    seen: list[tuple[str, int, float]] = []
    draws = iter(range(1000))

    def draw() -> list[torch.Tensor]:
        return [torch.full((4,), float(next(draws)))]

    def side(name: str):  # type: ignore[no-untyped-def]
        return lambda x: seen.append((name, id(x[0]), float(x[0][0])))

    times = time_sides({"a": side("a"), "b": side("b"), "c": side("c")}, draw, rounds, cold, 1 << 16)
    return seen, times


def test_each_round_calls_every_side_once_with_the_first_side_rotating():
    seen, times = _recording(4, cold=True)
    timed = seen[3 * WARMUP_CALLS :]
    order = [[name for name, _, _ in timed[3 * r : 3 * r + 3]] for r in range(4)]
    assert order == [["a", "b", "c"], ["b", "c", "a"], ["c", "a", "b"], ["a", "b", "c"]]
    assert all(len(t) == 4 and all(ns > 0 for ns in t) for t in times.values())
    # cold: a round's sides get that round's fresh inputs (one draw a round, after the warm-up's)
    assert [v for _, _, v in timed[:3]] == [1.0, 1.0, 1.0] and [v for _, _, v in timed[3:6]] == [2.0] * 3


def test_warm_rounds_write_their_values_into_the_same_buffers_and_call_each_side_back_to_back():
    seen, _ = _recording(3, cold=False)
    timed = seen[3 * WARMUP_CALLS :]
    assert len({ident for _, ident, _ in seen}) == 1  # one set of buffers throughout
    # each timed call follows an untimed call of its own side on the round's values negated
    first_round = [(name, v) for name, _, v in timed[:6]]
    assert first_round == [("a", -1.0), ("a", 1.0), ("b", -1.0), ("b", 1.0), ("c", -1.0), ("c", 1.0)]
    assert [v for _, _, v in timed[1::2]] == [1.0] * 3 + [2.0] * 3 + [3.0] * 3
    assert [v for _, _, v in timed[::2]] == [-1.0] * 3 + [-2.0] * 3 + [-3.0] * 3


def test_hooks_run_outside_the_clock_around_every_timed_call():
    events: list[str] = []

    def draw() -> list[torch.Tensor]:
        return [torch.zeros(4)]

    def side(x: list[torch.Tensor]) -> str:
        events.append("call")
        return "out"

    def after(out: object) -> None:
        events.append(f"after {out}")

    time_sides(
        {"a": side, "b": side}, draw, 3, True, 1 << 16, before_call=lambda: events.append("before"), after_call=after
    )
    timed = events[2 * WARMUP_CALLS :]  # the warm-up calls have no hooks
    assert timed == ["before", "call", "after out"] * 6


def test_the_hooks_time_is_not_counted_and_after_call_gets_every_output():
    sizes: list[int] = []

    def draw() -> list[torch.Tensor]:
        return [torch.zeros(4)]

    times = time_sides(
        {"a": lambda x: x[0] + 1},
        draw,
        3,
        False,
        1 << 16,
        before_call=lambda: time.sleep(0.02),
        after_call=lambda out: time.sleep(0.02),
    )
    assert all(ns < 20_000_000 for ns in times["a"]), times
    kept = time_sides({"a": lambda x: x[0] + 1}, draw, 2, False, 1 << 16, after_call=lambda o: sizes.append(o.numel()))
    assert len(kept["a"]) == 2 and sizes == [4, 4]


def test_the_warm_call_before_leaves_integer_inputs_and_gives_way_when_it_raises():
    seen: list[tuple[float, int]] = []
    draws = iter(range(1, 1000))

    def draw() -> list[torch.Tensor]:
        k = next(draws)
        return [torch.full((4,), float(k)), torch.full((2,), k)]

    def positive_only(x: list[torch.Tensor]) -> None:
        if float(x[0][0]) < 0:  # an op defined for positive inputs: its call before raises
            raise ValueError("negative")
        seen.append((float(x[0][0]), int(x[1][0])))

    times = time_sides({"a": positive_only}, draw, 2, False, 1 << 16)
    assert len(times["a"]) == 2
    # the warm-up calls, then one timed call a round: the raised calls before left nothing behind
    assert seen[WARMUP_CALLS:] == [(2.0, 2), (3.0, 3)]
