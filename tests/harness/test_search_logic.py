"""Pure logic of the search: the tuner's coordinate descent, acceptance, limits, op collection."""

from __future__ import annotations

import os
import signal
import time

import pytest

from forge.agents.builtin.tuner import Trial, default_config, effective_config, next_configs
from forge.core.acceptance import beats_eager, null_bar
from forge.core.candidate_config import CandidateConfig
from forge.core.errors import UsageError
from forge.core.statuses import SessionStatus
from forge.core.verdict import Verdict
from forge.harness.runs.limits import Limits, ctrl_c_stops
from forge.harness.runs.options import resolve_backend
from forge.harness.runs.run import RunResult, collect_ops
from forge.harness.sessions.session import SessionResult
from tests.conftest import EXAMPLES

SPACE = {"acc": ["double", "float"], "stream": [False, True], "threads": [0, 1]}


def test_tuner_starts_from_defaults_and_moves_one_knob_at_a_time():
    assert next_configs(SPACE, []) == [default_config(SPACE)]
    base = default_config(SPACE)
    first = [Trial(base, True, 2.0)]
    got = next_configs(SPACE, first, n=5)
    assert got == [{**base, "acc": "float"}, {**base, "stream": True}, {**base, "threads": 1}]


def test_tuner_follows_the_fastest_and_bans_a_failing_change():
    base = default_config(SPACE)
    fl = {**base, "acc": "float"}
    st = {**base, "stream": True}
    trials = [Trial(base, True, 2.0), Trial(fl, False, None, base), Trial(st, True, 1.0, base)]
    got = next_configs(SPACE, trials, n=5)
    # from the best (stream=True): acc=float is banned (its single change failed), threads=1
    # remains; then the runner-up's (the default's) untried neighbour
    assert got == [{**st, "threads": 1}, {**base, "threads": 1}]
    trials.append(Trial({**st, "threads": 1}, True, 1.5, st))
    # the best's neighbourhood is exhausted: the search goes on from the next fastest
    assert next_configs(SPACE, trials) == [{**base, "threads": 1}]
    trials.append(Trial({**base, "threads": 1}, True, 3.0, {**st, "threads": 1}))
    assert next_configs(SPACE, trials) == []  # every neighbourhood exhausted: the judge says stop


def test_tuner_does_not_remeasure_a_config_that_renders_the_same_kernel():
    """With the library doing the matmul, the Triton tile and precision change nothing: after
    {library, tile A} has run, {library, tile B} is the same kernel and must not be proposed."""
    from forge.agents.builtin.pointwise import analyze as analyze_pointwise
    from forge.agents.builtin.triton_pointwise import triton_canonical, triton_space
    from forge.core.problem import load_problem

    p = load_problem(EXAMPLES / "ops" / "linear_gelu.py")
    recipe = analyze_pointwise(p.model_cls(*p.init_inputs()), p.inputs())
    space = triton_space(recipe)

    def canonical(config: dict) -> dict:
        return triton_canonical(recipe, config)

    base = default_config(space)
    lib = {**base, "matmul": "library"}
    trials = [Trial(base, True, 2.0), Trial(lib, True, 1.0, base)]  # the library is the best so far
    got = next_configs(space, trials, n=50, canonical=canonical)
    # from the library config only the warps of the epilogue kernel are left to vary; then the
    # Triton matmul's (the runner-up's) neighbours, none of them a library config again
    warps = [{**lib, "num_warps": w} for w in space["num_warps"] if w != lib["num_warps"]]
    assert got[: len(warps)] == warps and all(c["matmul"] == "triton" for c in got[len(warps) :])
    # without the map every tile, precision and stage count would come back as "new"
    plain = next_configs(space, trials, n=50)
    assert len(plain) > len(got)
    # on the Triton matmul every knob counts
    assert canonical({**base, "tile": "32x64x32"}) == {**base, "tile": "32x64x32"}


def test_one_pass_layernorm_ignores_the_accumulator_knob():
    from forge.agents.builtin import RowRecipe
    from forge.agents.builtin.rowwise import canonical, space

    ln = RowRecipe("layernorm")
    base = default_config(space(ln))
    one = {**base, "moments": "one_pass"}
    trials = [Trial(base, True, 2.0), Trial(one, True, 1.0, base)]
    got = next_configs(space(ln), trials, n=50, canonical=lambda c: canonical(ln, c))
    assert all(not (c["moments"] == "one_pass" and c["acc"] == "float") for c in got)
    assert canonical(ln, {**base, "acc": "float"})["acc"] == "float"  # two passes: acc counts


def test_a_kernel_is_shown_and_banked_without_its_inert_knobs():
    """The one-pass layernorm's config must not claim float accumulation (it accumulates in
    double); under two passes ``acc`` counts and stays. Knobs outside the space are kept."""
    from forge.agents.builtin import RowRecipe
    from forge.agents.builtin.rowwise import canonical, space

    ln = RowRecipe("layernorm")
    knobs = space(ln)
    base = default_config(knobs)

    def shown(config: dict) -> dict:
        return effective_config(knobs, config, lambda c: canonical(ln, c))

    one = {**base, "moments": "one_pass", "acc": "float", "extra": 1}
    assert shown(one) == {k: v for k, v in one.items() if k != "acc"}
    two = {**base, "acc": "float"}
    assert shown(two) == two
    assert effective_config(knobs, one) == one  # no map: every knob counts


def _verdict(cand: float, cand_iqr: float, eager: float, eager_iqr: float, **kw) -> Verdict:
    return Verdict.from_json(
        {
            "status": "passed",
            "timing_meaningful": True,
            "timing_stats": {
                "candidate": {"median_ms": cand, "iqr_ms": cand_iqr},
                "eager": {"median_ms": eager, "iqr_ms": eager_iqr},
            },
            **kw,
        }
    )


def test_acceptance_needs_a_margin_beyond_the_noise():  # verdicts stored before pairing
    assert beats_eager(_verdict(1.0, 0.1, 2.0, 0.1))[0]
    ok, why = beats_eager(_verdict(1.0, 0.4, 1.3, 0.4))  # 1.3x on paper, but the IQRs overlap
    assert not ok and "noise" in why
    assert not beats_eager(_verdict(2.0, 0.0, 1.0, 0.0))[0]
    assert not beats_eager(_verdict(1.0, 0.0, 2.0, 0.0, status="failed_correctness"))[0]
    assert not beats_eager(_verdict(1.0, 0.0, 2.0, 0.0, timing_meaningful=False))[0]


def _quartiles(cand: tuple[float, float, float], eager: tuple[float, float, float]) -> Verdict:
    def stats(q1: float, med: float, q3: float) -> dict:
        return {"median_ms": med, "iqr_ms": q3 - q1, "q1_ms": q1, "q3_ms": q3}

    return Verdict.from_json({"status": "passed", "timing_stats": {"candidate": stats(*cand), "eager": stats(*eager)}})


def test_acceptance_reads_the_real_quartiles_of_skewed_timings():
    # Interference only ever slows a call: a slow tail on eager's side must not hide a clear win...
    assert beats_eager(_quartiles((0.98, 1.0, 1.05), (1.55, 1.6, 2.8)))[0]
    # ...and a slow tail on the candidate's side must not be averaged away by its median.
    ok, why = beats_eager(_quartiles((0.99, 1.0, 1.5), (1.3, 1.4, 1.5)))
    assert not ok and "quartiles overlap" in why


def _paired(low: float, median: float, high: float, pairs: int = 60) -> dict:
    return {"pairs": pairs, "low": low, "median": median, "high": high}


def _confirmed(paired: dict, null: dict | None = None, busy: bool = False) -> Verdict:
    def stats(med: float) -> dict:
        return {"median_ms": med, "iqr_ms": 0.02, "q1_ms": med - 0.01, "q3_ms": med + 0.01}

    timing = {"candidate": stats(1.0), "eager": stats(1.1), "paired_eager": paired}
    if null is not None:
        timing["null_eager"] = null
    if busy:
        timing["contention"] = {"cores": 2, "other_cores": 1.0, "busy": True, "detail": "1.0 cores used by others"}
    return Verdict.from_json({"status": "passed", "timing_meaningful": True, "timing_stats": timing})


def test_the_null_control_sets_the_bar_from_its_upper_end_and_mirrored_median():
    from forge.core.timing_records import PairedRatio

    assert null_bar(None) == 1.0
    assert null_bar(PairedRatio(pairs=60, low=0.97, median=1.0, high=1.02)) == 1.02
    assert null_bar(PairedRatio(pairs=60, low=1.05, median=1.1, high=1.14)) == 1.14  # the candidate's side won
    assert null_bar(PairedRatio(pairs=60, low=0.88, median=0.9, high=0.95)) == pytest.approx(1 / 0.9)  # mirrored
    assert null_bar(PairedRatio(pairs=60, low=0.73, median=1.0, high=1.22)) == 1.22  # per-call noise: not twice
    assert null_bar(PairedRatio(pairs=60, low=1.01, median=1.01, high=1.01)) == 1.01
    assert null_bar(PairedRatio(pairs=5, low=0.0, median=0.0, high=1.0)) == float("inf")


def test_a_finalist_must_clear_its_null_control():
    clear = _confirmed(_paired(1.06, 1.1, 1.15))
    assert beats_eager(clear)[0]  # without a null control: above 1.0x is enough
    ok, why = beats_eager(_confirmed(_paired(1.06, 1.1, 1.15), null=_paired(0.88, 0.91, 0.95)))
    assert not ok and "does not clear 1.10x" in why and "0.91x, 0.88-0.95" in why
    ok, why = beats_eager(_confirmed(_paired(1.06, 1.1, 1.15), null=_paired(1.02, 1.05, 1.08)))
    assert not ok and "1.08x" in why  # an offset favouring the candidate's worker
    ok, why = beats_eager(_confirmed(_paired(1.2, 1.3, 1.4), null=_paired(0.9, 0.95, 1.02)))
    assert ok and "null control's 1.05x" in why
    ok, why = beats_eager(_confirmed(_paired(1.2, 1.3, 1.4), null=_paired(0.9, 0.95, 1.02), busy=True))
    assert not ok and "busy" in why


def test_a_null_control_that_failed_or_was_busy_sets_no_bar():
    from forge.harness.sessions.null_control import null_blocked, with_null_control

    finalist = _confirmed(_paired(1.2, 1.3, 1.4))
    null = _confirmed(_paired(0.9, 0.95, 1.02))
    assert null_blocked(null) is None
    judged = with_null_control(finalist, null)
    assert judged.timing_stats.null_eager == null.timing_stats.paired_eager
    assert judged.timing_stats.paired_eager == finalist.timing_stats.paired_eager
    busy = null_blocked(_confirmed(_paired(0.9, 0.95, 1.02), busy=True))
    assert busy is not None and busy.busy == "1.0 cores used by others" and "busy" in busy.why
    failed = null_blocked(Verdict.from_json({"status": "failed_correctness", "reason": "outputs differ"}))
    assert failed is not None and failed.busy is None
    assert failed.why.endswith("did not pass (failed_correctness: outputs differ)")
    timeout = null_blocked(Verdict.from_json({"status": "timeout"}))
    assert timeout is not None and timeout.why.endswith("did not pass (timeout)")
    unpaired = null_blocked(Verdict.from_json({"status": "passed"}))
    assert unpaired is not None and "no paired calls" in unpaired.why


def test_a_finalist_inside_its_null_controls_spread_is_refused():
    """A session's judgement (``judged_against``): 1.06-1.15x clears 1.0x but not a null control
    that read the reference 0.88-1.14x against itself, so it is refused; 1.2-1.4x clears it."""
    from forge.harness.sessions.null_control import judged_against

    null = _confirmed(_paired(0.88, 1.0, 1.14))
    judged, ok, why, blocked = judged_against(_confirmed(_paired(1.06, 1.1, 1.15)), null)
    assert blocked is None and not ok and "does not clear 1.14x" in why, why
    assert judged.timing_stats.null_eager == null.timing_stats.paired_eager
    judged, ok, why, blocked = judged_against(_confirmed(_paired(1.2, 1.3, 1.4)), null)
    assert blocked is None and ok and judged.timing_stats.null_eager is not None, why
    busy = _confirmed(_paired(0.88, 1.0, 1.14), busy=True)
    _, ok, why, blocked = judged_against(_confirmed(_paired(1.2, 1.3, 1.4)), busy)
    assert blocked is not None and not ok and "nothing is banked without its null control" in why


def test_one_judgement_of_a_finalist_measures_its_null_only_where_it_decides():
    """``confirm_finalist``, for sessions and ``forge verify --null-control``: a session measures a
    null only for a finalist that beats eager; ``forge verify`` for any that passed with meaningful
    timing; with the null control off, none, and the bar is 1.0x."""
    from forge.harness.sessions.confirm import confirm_finalist

    measured: list[Verdict] = []

    def null_of(finalist: Verdict) -> Verdict:
        measured.append(finalist)
        return _confirmed(_paired(0.88, 1.0, 1.14))

    slow, fast = _confirmed(_paired(0.8, 0.9, 1.0)), _confirmed(_paired(1.06, 1.1, 1.15))
    judged = confirm_finalist(lambda: slow, null_of)
    assert not judged.accepted and measured == [] and judged.verdict.timing_stats.null_eager is None
    judged = confirm_finalist(lambda: slow, null_of, null_for_any_timing=True)
    assert not judged.accepted and measured == [slow] and judged.verdict.timing_stats.null_eager is not None
    judged = confirm_finalist(lambda: fast, null_of)
    assert not judged.accepted and "does not clear 1.14x" in judged.why and measured[-1] is fast
    assert confirm_finalist(lambda: fast, None).accepted  # null control off: 1.0x is the bar
    busy = confirm_finalist(lambda: fast, lambda _: _confirmed(_paired(0.9, 1.0, 1.1), busy=True))
    assert not busy.accepted and busy.blocked is not None and busy.blocked.busy == "1.0 cores used by others"


def test_ctrl_c_sets_the_stop_flag_even_if_the_exception_is_swallowed():
    limits = Limits()
    before = signal.getsignal(signal.SIGINT)
    with ctrl_c_stops(limits):
        try:
            os.kill(os.getpid(), signal.SIGINT)
            time.sleep(1)  # the handler runs here
        except KeyboardInterrupt:
            swallowed = False
        else:
            swallowed = True
    assert not swallowed and limits.stop_requested.is_set()
    assert signal.getsignal(signal.SIGINT) is before  # restored for whoever runs next


def test_limits():
    lim = Limits(budget_usd=0.01)
    assert lim.exceeded() is None
    lim.charge(100, 0.004)
    lim.charge(100, None, known=False)
    assert lim.exceeded() is None and lim.cost_unknown and lim.cost_reported == 0.004
    lim.charge(100, 0.007)
    assert lim.exceeded() == "budget" and lim.tokens == 300
    t = Limits(time_limit_s=0.01)
    time.sleep(0.02)
    assert t.exceeded() == "time_limit"
    assert Limits(cost_unknown=True).cost_reported is None


def test_each_op_gets_a_fair_share_of_what_is_left_of_the_limits():
    from forge.harness.runs.limits import OpShare

    limits = Limits(budget_usd=1.0, time_limit_s=300.0)
    first = limits.share(8)
    assert first.ops_left == 8 and first.budget_usd == pytest.approx(1.0 / 8)
    assert first.time_s is not None and 36.0 < first.time_s <= 300.0 / 8
    assert first.exceeded(limits) is None
    limits.charge(100, 0.125)  # the first op spent exactly its share
    status, why = first.exceeded(limits) or (None, "")
    assert status == "budget" and why == "its share of the budget ($0.1250 of what was left for 8 ops)"
    limits.release(first)
    second = limits.share(7)  # what is left goes to the seven still to do
    assert second.budget_usd == pytest.approx(0.875 / 7) and second.spent_before == 0.125
    assert second.exceeded(limits) is None
    limits.release(second)
    limits.started -= 250  # 250 s of the run gone
    last = limits.share(2)
    assert last.time_s == pytest.approx(25.0, abs=0.5)
    spent = OpShare(time_s=10.0, budget_usd=None, ops_left=1, started=time.monotonic() - 11)
    assert spent.exceeded(limits) == (SessionStatus.TIME_LIMIT, "its share of the time limit (10 s)")
    tiny = OpShare(time_s=0.4, budget_usd=None, ops_left=2, started=time.monotonic() - 1)
    assert tiny.exceeded(limits) == (
        SessionStatus.TIME_LIMIT,
        "its share of the time limit (0.4 s of what was left for 2 ops)",
    )
    unlimited = Limits().share(3)
    assert unlimited.time_s is None and unlimited.budget_usd is None and unlimited.exceeded(Limits()) is None
    limits.release(last)
    limits.started -= 100  # the run's limit is spent: shares are 0, never negative
    assert limits.share(3).time_s == 0.0


def test_sessions_side_by_side_share_the_time_left_together():
    """8 ops, 2 at a time, 300 s: 75 s each, whenever each opens (each pair uses its shares whole)."""
    limits = Limits(budget_usd=1.0, time_limit_s=300.0)
    shares = []
    for pair in range(4):
        a = limits.share(8 - 2 * pair, at_once=2)
        b = limits.share(7 - 2 * pair, at_once=2)  # opens beside a, whose share is still all there
        shares += [a.time_s, b.time_s]
        limits.started -= 75  # the pair runs its 75 s
        limits.release(a)
        limits.release(b)
    assert shares == pytest.approx([75.0] * 8, abs=0.1)
    fresh = Limits(budget_usd=1.0, time_limit_s=300.0)
    assert fresh.share(8, at_once=2).budget_usd == pytest.approx(1.0 / 8)  # money is spent by all: equal parts
    wider = fresh.share(2, at_once=8)  # more room than ops: never more than what is left
    assert wider.time_s is not None and 299.0 < wider.time_s <= 300.0


def test_a_session_s_budget_share_counts_only_its_own_spending():
    limits = Limits(budget_usd=1.0)
    mine = limits.share(4, at_once=4, spent_before=0.0)  # $0.25
    limits.charge(10, 0.6)  # the other three sessions spent $0.60 meanwhile
    assert mine.exceeded(limits, spent_now=0.1) is None  # it spent $0.10 of its own
    assert mine.exceeded(limits, spent_now=0.25) is not None


def test_a_search_stops_at_its_ops_share():
    from types import SimpleNamespace

    from forge.harness.runs.limits import OpShare, RoundClock, Spend
    from forge.harness.sessions.search import _start_round

    seen: list[object] = []
    limits = Limits(time_limit_s=300.0)

    def session(share: OpShare) -> SimpleNamespace:
        io = SimpleNamespace(limits=limits, share=share, events=lambda cls, **kw: seen.append(kw), spend=Spend())
        clock = RoundClock(began=2)  # two rounds already ran in this run
        options = SimpleNamespace(round_limit=8)
        return SimpleNamespace(io=io, state=SimpleNamespace(round=2), id=7, options=options, clock=clock)

    spent = OpShare(time_s=30.0, budget_usd=None, ops_left=4, started=time.monotonic() - 31)
    assert _start_round(session(spent), "round") == (
        SessionStatus.TIME_LIMIT,
        "its share of the time limit (30 s of what was left for 4 ops) reached after 2 round(s)",
    )
    assert not seen  # no round was started
    fresh = session(limits.share(4))
    assert _start_round(fresh, "round") is None and fresh.state.round == 3 and seen == [{"round": 3, "rounds": 8}]


def test_ops_share_the_limits_by_their_weight_and_each_gets_its_first_round():
    """A model run's ops share its time limit and budget by their share of the model's time; an
    op whose share is spent (the one before it ran over) still gets its first round, and after it
    the search stops early enough to leave its confirmation room."""
    from types import SimpleNamespace

    from forge.harness.runs.limits import CONFIRM_ROUNDS, OpShare, RoundClock, Spend
    from forge.harness.sessions.search import _start_round

    limits = Limits(budget_usd=1.0, time_limit_s=100.0)
    big = limits.share(3, weight=0.6, weight_left=1.0)  # 60% of what is left for the three
    assert big.time_s == pytest.approx(60.0, abs=0.5) and big.budget_usd == pytest.approx(0.6)
    limits.release(big)
    limits.started -= 60
    small = limits.share(2, weight=0.1, weight_left=0.4)  # a quarter of the 40 s left
    assert small.time_s == pytest.approx(10.0, abs=0.5) and small.budget_usd == pytest.approx(0.25)
    limits.release(small)
    assert limits.share(2).time_s == pytest.approx(20.0, abs=0.5)  # no weights: an equal part

    seen: list[object] = []

    def session(share: OpShare, clock: RoundClock) -> SimpleNamespace:
        io = SimpleNamespace(limits=limits, share=share, events=lambda cls, **kw: seen.append(kw), spend=Spend())
        return SimpleNamespace(
            io=io, state=SimpleNamespace(round=0), id=7, options=SimpleNamespace(round_limit=8), clock=clock
        )

    starved = OpShare(time_s=0.0, budget_usd=None, ops_left=2)
    limits.started -= 100  # the run's whole limit is gone too
    first = session(starved, RoundClock())
    assert _start_round(first, "round") is None and first.state.round == 1  # its first round all the same
    status, why = _start_round(first, "round") or (None, "")  # but not a second
    assert status is SessionStatus.TIME_LIMIT and "after 1 round(s)" in why
    limits.started += 200  # the run's limit has time again: the op's share alone decides
    clock = RoundClock(began=1, longest_s=10.0)
    roomy = OpShare(time_s=60.0, budget_usd=None, ops_left=1, started=time.monotonic() - 35)
    assert _start_round(session(roomy, clock), "round") is None  # 35 s + 2 x 10 s kept < 60 s
    tight = OpShare(time_s=60.0, budget_usd=None, ops_left=1, started=time.monotonic() - 45)
    status, why = _start_round(session(tight, clock), "round") or (None, "")
    assert status is SessionStatus.TIME_LIMIT and f"{CONFIRM_ROUNDS * 10:.0f} s of it kept to confirm" in why
    spender = session(OpShare(time_s=None, budget_usd=0.1, ops_left=1, spent_before=0.0), RoundClock())
    spender.io.spend.add(10, 0.2, True)  # what its opening (a brief, say) already cost
    status, _ = _start_round(spender, "round") or (None, "")
    assert status is SessionStatus.BUDGET  # a budget spent is spent, first round or not


def test_a_round_clock_keeps_its_longest_round():
    from forge.harness.runs.limits import CONFIRM_ROUNDS, RoundClock

    clock = RoundClock()
    assert clock.reserve_s() == 0.0
    clock.round_began()
    time.sleep(0.05)
    clock.round_began()
    assert clock.began == 2 and clock.longest_s >= 0.05
    assert clock.reserve_s() >= CONFIRM_ROUNDS * 0.05


def test_a_stop_asked_for_during_the_last_round_ends_the_session_interrupted():
    """The rounds' loop looks for a stop only as a round starts: a stop pressed while the last
    round (or the coder's last idea) runs must still end the session interrupted, resumable."""
    from types import SimpleNamespace

    from forge.harness.runs.limits import RoundClock, Spend
    from forge.harness.sessions.search import refine

    limits = Limits()
    state = SimpleNamespace(round=0, history=[])

    def evaluate(candidates: list[object], review_best: bool = False) -> list[object]:
        limits.stop_requested.set()  # the user presses stop while the round verifies
        return []

    io = SimpleNamespace(limits=limits, share=None, events=lambda cls, **kw: None, spend=Spend())
    session = SimpleNamespace(
        io=io,
        state=state,
        id=7,
        options=SimpleNamespace(round_limit=1),
        propose=lambda parent: SimpleNamespace(fatal=None, candidates=["one"]),
        evaluate=evaluate,
        clock=RoundClock(),
    )
    assert refine(session) == (  # type: ignore[arg-type]
        SessionStatus.INTERRUPTED,
        "stopped after 1 round(s); `--resume 7` continues the session",
    )
    limits.stop_requested.clear()
    state.round, session.clock = 0, RoundClock()  # no stop: it finished
    session.evaluate = lambda candidates, review_best=False: []
    assert refine(session) == (SessionStatus.FINISHED, None)  # type: ignore[arg-type]


def test_exit_codes():
    ok = SessionResult("a", 1, SessionStatus.FINISHED, accepted=True)
    none = SessionResult("b", 2, SessionStatus.FINISHED)
    budget = SessionResult("c", 3, SessionStatus.BUDGET)
    assert RunResult([ok]).exit_code == 0
    assert RunResult([ok, none]).exit_code == 1
    assert RunResult([budget]).exit_code == 4
    assert RunResult([ok, budget]).exit_code == 1
    assert RunResult([SessionResult("d", 4, SessionStatus.PROVIDER_ERROR)]).exit_code == 3
    assert RunResult([ok], interrupted=True).exit_code == 130
    summary = none.to_json()
    assert set(summary) >= {"problem", "accepted", "kernel_id", "backend", "speedup_vs_eager", "speedup_vs_compile"}
    assert set(summary) >= {"attempts", "session_id", "reason"}


def test_collect_ops_and_backends(tmp_path):
    ops = collect_ops([EXAMPLES / "ops"])
    assert [p.stem for p in ops] == sorted(p.stem for p in ops) and len(ops) >= 6
    with pytest.raises(UsageError, match="no such op file"):
        collect_ops([tmp_path / "missing.py"])
    with pytest.raises(UsageError, match=r"holds no \.py"):
        collect_ops([tmp_path])
    assert resolve_backend("auto", "cpu") == "cpp" and resolve_backend("auto", "cuda") == "triton"
    with pytest.raises(UsageError, match="needs a CUDA device"):
        resolve_backend("triton", "cpu")
    with pytest.raises(UsageError, match="choose one of"):
        resolve_backend("rust", "cpu")


def test_parallel_verifications_get_a_gpu_each(monkeypatch, tmp_path):
    from forge.verifier.machine.facts import gpu_slots, visible_gpus
    from forge.verifier.processes.worker_env import worker_env

    assert gpu_slots(2, ["0", "1", "2"]) == ["0", "1"]
    assert gpu_slots(3, ["4", "5"]) == ["4", "5", "4"]  # more workers than GPUs: shared
    assert gpu_slots(2, []) == []
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "2, 3")
    assert visible_gpus() == ["2", "3"]  # entries of the user's own list
    assert worker_env("cuda", 4, tmp_path, "3")["CUDA_VISIBLE_DEVICES"] == "3"
    assert worker_env("cuda", 4, tmp_path)["CUDA_VISIBLE_DEVICES"] == "2, 3"
    assert worker_env("cpu", 4, tmp_path, "3")["CUDA_VISIBLE_DEVICES"] == ""


def test_a_candidate_worker_on_a_cluster_node_gets_no_ray_variables(monkeypatch, tmp_path):
    from forge.verifier.processes.worker_env import worker_env

    monkeypatch.setenv("RAY_ADDRESS", "10.0.0.1:6379")
    monkeypatch.setenv("RAY_JOB_ID", "01000000")
    env = worker_env("cpu", 1, tmp_path)
    assert not [k for k in env if k.startswith("RAY_")] and env["OMP_NUM_THREADS"] == "1"


def test_finalists_are_the_fastest_distinct_kernels():
    from forge.harness.sessions.confirm import Contender, finalists

    def c(aid: int, source: str, speedup: float) -> Contender:
        verdict = Verdict.from_json({"status": "passed", "speedup_vs_eager": speedup})
        return Contender(aid, source, verdict, CandidateConfig())

    pool = [c(1, "a", 1.1), c(2, "b", 1.4), c(3, "a", 1.6), c(4, "c", 1.3), c(5, "b", 1.2)]
    # two configs that render one source are one kernel: its faster attempt stands for it
    assert [f.attempt_id for f in finalists(pool)] == [3, 2]
    assert [f.attempt_id for f in finalists(pool, n=5)] == [3, 2, 4]
    assert finalists([]) == []
    # the attempt that beat eager beyond the noise in its round keeps a place among the finalists
    clear = c(6, "d", 1.15)
    assert [f.attempt_id for f in finalists([*pool, clear], keep=clear)] == [3, 6]
    assert [f.attempt_id for f in finalists(pool, keep=pool[2])] == [3, 2]  # already in: no change
