"""The floor a session does not bank below: where Inductor's own code for the op is a contender, a
finalist that holds up against eager but is slower than torch.compile gives way to it."""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from typing import Any

from forge.core.acceptance import slower_than_compile
from forge.core.candidate_config import CandidateConfig
from forge.core.settings import ForgeSettings
from forge.core.verdict import Verdict
from forge.harness.sessions.confirm import Contender, confirm_finalists, finalists
from forge.harness.sessions.search_state import SearchState


def _verdict(eager: float, compiled: tuple[float, float, float] | None, busy: bool = False) -> Verdict:
    """A passed verdict ``eager``x faster than eager (clear of the noise) and, vs torch.compile,
    the paired interval ``compiled`` (low, median, high)."""
    timing: dict[str, Any] = {
        "candidate": {"median_ms": 1.0, "iqr_ms": 0.02, "q1_ms": 0.99, "q3_ms": 1.01},
        "eager": {"median_ms": eager, "iqr_ms": 0.02, "q1_ms": eager - 0.01, "q3_ms": eager + 0.01},
        "paired_eager": {"pairs": 30, "low": eager * 0.95, "median": eager, "high": eager * 1.05},
        "regime": "cold",
    }
    if compiled is not None:
        low, median, high = compiled
        timing["paired_compile"] = {"pairs": 30, "low": low, "median": median, "high": high}
    if busy:
        timing["contention"] = {"cores": 2, "other_cores": 1.0, "busy": True, "enforced": True, "detail": "busy"}
    return Verdict.from_json(
        {"status": "passed", "timing_meaningful": True, "speedup_vs_eager": eager, "timing_stats": timing}
    )


def _contender(aid: int, eager: float, compiled: tuple[float, float, float], compiler_code: bool = False) -> Contender:
    return Contender(aid, f"source {aid}", _verdict(eager, compiled), CandidateConfig(compiler_code=compiler_code))


@dataclass
class _Recorder:
    confirmed_ids: list[int] = field(default_factory=list)

    def confirmed(self, round: int, attempt_id: int, verdict: Verdict) -> int:
        self.confirmed_ids.append(attempt_id)
        return 1000 + attempt_id


@dataclass
class _IO:
    recorder: _Recorder = field(default_factory=_Recorder)

    def events(self, kind: Any, **fields: Any) -> None:
        pass


class _Verifier:
    """Confirms each attempt with the verdict scripted for it."""

    def __init__(self, verdicts: dict[int, Verdict]) -> None:
        self.verdicts = verdicts

    def verify_alone(self, job: Any, trials: int, timeout: float) -> Verdict:
        return self.verdicts[int(job.name.removeprefix("attempt_"))]


def _confirm(finalists_: list[Contender], verdicts: dict[int, Verdict], floor: Contender | None) -> tuple[Any, _IO]:
    io = _IO()
    settings = ForgeSettings(null_control=False, confirm_trials=10)
    outcome = confirm_finalists(
        finalists_,
        _Verifier(verdicts),
        io,
        settings,
        1,
        threading.Event(),
        set(),
        floor,  # type: ignore[arg-type]
    )
    return outcome, io


def test_slower_than_compile_needs_the_whole_interval_below_the_floor():
    assert slower_than_compile(_verdict(1.5, (0.6, 0.7, 0.8))) is not None
    assert "0.70x torch.compile (95% CI 0.60-0.80x)" in (slower_than_compile(_verdict(1.5, (0.6, 0.7, 0.8))) or "")
    assert slower_than_compile(_verdict(1.5, (0.9, 0.97, 1.02))) is None  # within the noise
    assert slower_than_compile(_verdict(1.5, (1.1, 1.2, 1.3))) is None
    assert slower_than_compile(_verdict(1.5, None)) is None  # no compile baseline timed: nothing to say
    assert slower_than_compile(_verdict(1.5, (0.6, 0.7, 0.8), busy=True)) is None  # timed under load


def test_the_search_state_keeps_the_fastest_compiler_code_contender_as_the_floor():
    state = SearchState()
    state.consider(1, "a", _verdict(1.2, (0.9, 1.0, 1.1)), CandidateConfig(compiler_code=True))
    state.consider(2, "b", _verdict(1.6, (1.2, 1.3, 1.4)), CandidateConfig())
    state.consider(3, "c", _verdict(1.3, (0.9, 1.0, 1.1)), CandidateConfig(compiler_code=True))
    state.consider(4, "d", _verdict(0.9, (0.7, 0.8, 0.9)), CandidateConfig(compiler_code=True))  # slower than eager
    assert state.floor is not None and state.floor.attempt_id == 3
    assert [c.attempt_id for c in finalists(state.contenders, floor=state.floor)] == [2, 3]


def test_the_floor_joins_the_finalists_when_the_medians_left_it_out():
    pool = [_contender(1, 2.0, (0.6, 0.7, 0.8)), _contender(2, 1.9, (0.6, 0.7, 0.8))]
    floor = _contender(3, 1.4, (0.95, 1.0, 1.05), compiler_code=True)
    assert [f.attempt_id for f in finalists([*pool, floor], floor=floor)] == [1, 2, 3]
    assert [f.attempt_id for f in finalists([*pool, floor])] == [1, 2]  # no floor: as before


def test_a_finalist_slower_than_compile_gives_way_to_inductor_s_code():
    """Both hand-tuned finalists beat eager in their confirmations but run below torch.compile:
    Inductor's candidate, confirmed after them, is banked; each refusal says why."""
    slow_a, slow_b = _contender(1, 2.0, (0.6, 0.7, 0.8)), _contender(2, 1.9, (0.6, 0.7, 0.8))
    floor = _contender(3, 2.8, (0.95, 1.0, 1.05), compiler_code=True)
    verdicts = {1: slow_a.verdict, 2: slow_b.verdict, 3: floor.verdict}
    outcome, io = _confirm([slow_a, slow_b, floor], verdicts, floor)
    assert outcome.chosen is not None and outcome.chosen.attempt_id == 3
    assert outcome.chosen.verdict.confirm_attempt_id == 1003
    assert io.recorder.confirmed_ids == [1, 2, 3]
    assert len(outcome.why_not) == 2 and all("slower than it beyond the noise" in w for w in outcome.why_not)
    assert "Inductor's own code for the op (attempt 3) is a finalist and is timed instead" in outcome.why_not[0]


def test_a_finalist_at_compile_speed_or_faster_is_banked_before_the_floor():
    fast = _contender(1, 3.0, (1.1, 1.2, 1.3))
    tied = _contender(2, 2.6, (0.9, 0.98, 1.04))  # within the noise of torch.compile
    floor = _contender(3, 2.5, (0.95, 1.0, 1.05), compiler_code=True)
    outcome, io = _confirm([fast, floor], {1: fast.verdict, 3: floor.verdict}, floor)
    assert outcome.chosen.attempt_id == 1 and io.recorder.confirmed_ids == [1]
    outcome, io = _confirm([tied, floor], {2: tied.verdict, 3: floor.verdict}, floor)
    assert outcome.chosen.attempt_id == 2 and io.recorder.confirmed_ids == [2]


def test_without_a_floor_or_when_the_floor_fails_the_faster_than_eager_kernel_is_banked():
    slow = _contender(1, 2.0, (0.6, 0.7, 0.8))
    outcome, _ = _confirm([slow], {1: slow.verdict}, None)  # Inductor's code was not a contender
    assert outcome.chosen.attempt_id == 1
    floor = _contender(3, 1.2, (0.95, 1.0, 1.05), compiler_code=True)
    failed = Verdict.from_json({"status": "failed_correctness", "reason": "outputs differ"})
    outcome, io = _confirm([slow, floor], {1: slow.verdict, 3: failed}, floor)
    assert outcome.chosen.attempt_id == 1 and io.recorder.confirmed_ids == [1, 3]  # still the op's best


def test_a_floor_timed_under_load_banks_nothing_below_it():
    slow = _contender(1, 2.0, (0.6, 0.7, 0.8))
    floor = _contender(3, 1.2, (0.95, 1.0, 1.05), compiler_code=True)
    busy = _verdict(1.2, (0.95, 1.0, 1.05), busy=True)
    outcome, _ = _confirm([slow, floor], {1: slow.verdict, 3: busy}, floor)
    assert outcome.chosen is None and outcome.busy == "busy"
