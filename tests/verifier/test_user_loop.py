"""The confirmation's user loop: the finalist timed as a user times it, in fresh processes beside
the reference, and the banked claim the lower of that and the isolated measurement (its interval
spanning both). A kernel that changes the user's process, or runs the reference there, fails; one
slower than eager there is not accepted. The real verifier and the real loop process run here."""

from __future__ import annotations

import socket
import threading
from pathlib import Path

import pytest

from forge.core.acceptance import beats_eager
from forge.core.pairing import slowed
from forge.core.statuses import TimingRegime
from forge.core.timing_records import LoopProcess, PairedRatio, UserLoop
from forge.core.verdict import Verdict
from forge.verifier import Job, VerifierService
from forge.verifier.parent.timing import user_loop
from forge.verifier.parent.timing.user_loop import with_user_loop
from forge.verifier.processes.worker_env import candidate_folder
from forge.verifier.protocol import UserLoopRequest
from tests.conftest import CANDIDATES, OPS, sweep

AFFINE = OPS / "small_affine.py"


def _confirm(cand: str, settings) -> Verdict:  # type: ignore[no-untyped-def]
    on = settings.model_copy(update={"user_loop": True, "user_loop_processes": 2})
    with VerifierService(AFFINE, on, "cpu") as service:
        return service.verify_alone(Job("finalist", (CANDIDATES / cand).read_text()), 10, 120)


def test_an_honest_finalist_is_timed_in_a_users_loop_and_claims_the_lower_figure(fast_settings):
    v = _confirm("affine/honest.py", fast_settings)
    assert v.passed, v.reason
    loop = v.user_loop
    assert loop is not None and loop.failed is None and not loop.tampered and loop.fallbacks == 0
    assert len(loop.processes) == 2 and all(p.eager is not None and p.eager.pairs == 10 for p in loop.processes)
    assert loop.eager is not None and loop.eager.pairs == 20 and loop.null is not None
    assert loop.eager.low == min(p.eager.low for p in loop.processes if p.eager is not None)
    assert loop.regime == v.timing_stats.regime and loop.heap == "kept"
    isolated = v.timing_stats.headline_pairs()[0]
    claim = v.claim_pairs()[0]
    assert isolated is not None and claim is not None
    assert v.speedup_vs_eager == claim.median == min(isolated.median, loop.eager.median)
    if loop.eager.median <= isolated.median:  # what the user's processes read
        assert claim == loop.eager and claim.processes == 2
    else:  # the isolated figure, its interval reaching up to the user's processes' range
        assert (claim.low, claim.high) == (isolated.low, max(isolated.high, loop.eager.high))
    check = next(c for c in v.checks if c.name == "user_loop")
    assert check.passed and "in a plain loop in 2 fresh processes" in check.detail


def test_a_candidate_whose_import_loads_inductor_is_not_read_as_changing_torch(fast_settings):
    """Importing Dynamo wraps torch.manual_seed: the loop without a compiled side (the watch
    noted before anything imported Dynamo) must not blame the candidate for torch's own rebinding."""
    v = _confirm("affine/imports_inductor.py", fast_settings.model_copy(update={"compile_baseline": False}))
    assert v.passed, v.reason
    assert v.user_loop is not None and not v.user_loop.tampered, v.user_loop.tampered


def test_a_candidate_that_replaces_a_torch_function_in_the_users_process_fails(fast_settings):
    v = _confirm("affine/slows_reference.py", fast_settings)
    assert v.status == "failed_integrity", (v.status, v.reason)
    assert "torch.relu" in (v.reason or "") and (v.reason or "").startswith("user_loop: ")


@pytest.mark.parametrize(
    ("cand", "named"),
    sweep(
        [
            ("affine/patches_reference.py", "forge_reference.Model.forward"),
            ("affine/spins_beside.py", "cores while the loop slept"),
            ("affine/enters_a_mode.py", "changed torch function and dispatch modes"),
        ],
        marker=pytest.mark.variants,
    ),
)
def test_a_candidate_that_slows_only_the_reference_in_the_users_process_fails(fast_settings, cand, named):
    v = _confirm(cand, fast_settings)
    assert v.status == "failed_integrity", (v.status, v.reason)
    assert named in (v.reason or "") and (v.reason or "").startswith("user_loop: ")


def test_a_candidate_that_is_a_kernel_only_inside_the_verifier_fails_in_the_users_loop(fast_settings):
    v = _confirm("affine/grader_aware.py", fast_settings)
    assert v.status == "failed_integrity", (v.status, v.reason)
    assert "the reference's forward ran" in (v.reason or "")


def _timed(isolated: float, loop: float) -> Verdict:
    """A passed confirmation judged warm with the given medians (tight intervals)."""
    pair = PairedRatio(pairs=30, median=isolated, low=isolated * 0.95, high=isolated * 1.05)
    v = Verdict.from_json(
        {
            "status": "passed",
            "timings_ms": {"candidate": 1.0, "eager": isolated},
            "timing_stats": {
                "candidate": {"median_ms": 1.0, "lower_ms": 0.9, "upper_ms": 1.1},
                "eager": {"median_ms": isolated, "lower_ms": isolated * 0.9, "upper_ms": isolated * 1.1},
                "regime": "warm",
                "warm_paired_eager": pair.model_dump(),
            },
            "speedup_vs_eager": isolated,
        }
    )
    ratio = PairedRatio(pairs=30, median=loop, low=loop * 0.95, high=loop * 1.05)
    return with_user_loop(v, UserLoop(regime=TimingRegime.WARM, rounds=30, threads=2, eager=ratio))


def test_the_claim_is_the_lower_figure_and_a_kernel_slower_in_the_loop_is_not_accepted():
    higher_in_loop = _timed(2.0, 3.0)
    assert higher_in_loop.speedup_vs_eager == 2.0 and beats_eager(higher_in_loop)[0]
    claim = higher_in_loop.claim_pairs()[0]  # the isolated figure, reaching up to what the loop read
    assert claim is not None and (claim.median, claim.low, claim.high) == (2.0, 2.0 * 0.95, 3.0 * 1.05)
    lower_in_loop = _timed(3.0, 1.5)
    assert lower_in_loop.speedup_vs_eager == 1.5
    claim = lower_in_loop.claim_pairs()[0]  # the loop's figure alone: the workers' higher reading adds nothing
    assert claim is not None and (claim.median, claim.low, claim.high) == (1.5, 1.5 * 0.95, 1.5 * 1.05)
    ok, why = beats_eager(lower_in_loop)
    assert ok and "1.50x in a user's loop" in why
    slower_in_loop = _timed(3.0, 0.9)
    ok, why = beats_eager(slower_in_loop)
    assert not ok and "timed as a user times it" in why


def test_processes_combine_into_the_median_of_their_medians_and_a_range_spanning_them_all():
    parts = [PairedRatio(pairs=10, median=m, low=m - 0.1, high=m + 0.1) for m in (2.0, 2.4, 2.1)]
    combined = PairedRatio.across(parts)
    assert combined is not None and (combined.pairs, combined.median, combined.processes) == (30, 2.1, 3)
    assert (combined.low, combined.high) == (parts[0].low, parts[1].high)
    assert PairedRatio.across([]) is None
    compiled = PairedRatio(pairs=10, median=1.2, low=1.1, high=1.3)
    processes = [
        LoopProcess(eager=parts[0], null=parts[0], eager_ms=4.0, kernel_ms=1.0, compiled=compiled, compile_ms=2.0),
        LoopProcess(eager=parts[1], null=parts[1], eager_ms=5.0, kernel_ms=1.0, compiled=compiled, compile_ms=2.0),
        LoopProcess(eager=parts[2], null=parts[2], eager_ms=6.0, kernel_ms=1.0),
    ]
    loop = UserLoop.of_processes(UserLoop(regime=TimingRegime.COLD, rounds=10, threads=2), processes)
    assert loop.eager == combined and loop.eager_ms == 5.0 and loop.kernel_ms == 1.0 and len(loop.processes) == 3
    # a baseline one process did not time is neither a ratio nor a median of the others
    assert loop.compiled is None and loop.compile_ms is None


def test_a_later_process_that_finds_a_change_ends_the_loop_and_names_the_process(fast_settings, monkeypatch):
    figure = PairedRatio(pairs=10, median=2, low=1.9, high=2.1)
    ok = UserLoop(regime=TimingRegime.COLD, rounds=10, threads=2, eager=figure)
    bad = ok.model_copy(update={"tampered": ["replaced torch.relu"]})
    replies = iter([ok, bad, ok])
    monkeypatch.setattr(user_loop, "_one_process", lambda *args: next(replies))
    v = _timed(2.0, 2.0)
    settings = fast_settings.model_copy(update={"user_loop": True, "user_loop_processes": 3})
    loop = user_loop.measure_user_loop(AFFINE, AFFINE, v, settings, 10)
    assert loop.tampered == ["process 2 of 3: replaced torch.relu"] and len(loop.processes) == 1
    failed = with_user_loop(v, loop)
    assert failed.status == "failed_integrity" and "process 2 of 3" in (failed.reason or "")
    stop = threading.Event()
    stop.set()
    stopped = user_loop.measure_user_loop(AFFINE, AFFINE, v, settings, 10, stop)
    assert stopped.failed == "stopped before it was done" and not stopped.processes


def test_slowed_reads_every_quarter_of_eager_beyond_the_noise():
    before = [1_000_000 + 20_000 * k for k in range(12)]
    said = slowed(before, [int(1.7 * t) for t in before], "once loaded")
    assert said is not None and said.startswith("eager ran 1.70x slower") and said.endswith("once loaded")
    assert slowed(before, [*before[:4], *(int(3 * t) for t in before[4:])], "") is None  # a quarter as before
    assert slowed([], before, "") is None and slowed(before, [], "") is None


def _request(cand: str, settings) -> tuple[UserLoopRequest, dict[str, str], UserLoop]:  # type: ignore[no-untyped-def]
    job = UserLoopRequest(
        op_path=str(AFFINE),
        candidate_path=str(cand),
        regime=TimingRegime.WARM,
        rounds=10,
        compile=False,
        seed=0,
        device="cpu",
    )
    own = candidate_folder(Path(cand).read_text())
    env = user_loop.user_env("cpu", 2, settings, [Path(cand).parent], own)  # the sandbox reads the candidate's folder
    return job, env, UserLoop(regime=TimingRegime.WARM, rounds=10, threads=2)


def test_a_process_taking_turns_with_one_without_the_candidate_reads_eager_slowed_only_by_the_candidate(
    fast_settings,
):
    """The pair's protocol, in real processes: the loaded process measures as a lone one does,
    then both time eager in turns; the honest kernel leaves eager as fast as it is without it."""
    job, env, said = _request(str(CANDIDATES / "affine/honest.py"), fast_settings)
    found = user_loop._beside_a_control(job, env, 120, 3072, said)
    assert found.failed is None and found.slowed is None and not found.tampered, found
    assert found.eager is not None and found.eager.pairs == 10 and found.null is not None
    # a kernel whose process runs every torch call through a slow mode: eager reads slower there
    job, env, said = _request(str(CANDIDATES / "affine/enters_a_mode.py"), fast_settings)
    found = user_loop._beside_a_control(job, env, 120, 3072, said)
    assert found.slowed is not None, found
    assert found.slowed.endswith("beside the candidate than in a process without it, the two taking turns")


def test_a_pair_whose_loaded_process_fails_names_that_failure_and_the_control_process_ends(fast_settings, tmp_path):
    broken = tmp_path / "broken.py"
    broken.write_text("raise RuntimeError('broken at import')\n")
    job, env, said = _request(str(broken), fast_settings)
    found = user_loop._beside_a_control(job, env, 120, 3072, said)
    assert found.failed is not None and "broken at import" in found.failed, found.failed


def test_eager_read_slower_once_is_measured_again_and_twice_is_a_change(fast_settings, monkeypatch):
    """A neighbour starting between the loop's halves reads as a candidate that slows eager: a
    fresh process measures again beside one without the candidate, and only a second slowed
    reading fails the loop."""
    figure = PairedRatio(pairs=10, median=2, low=1.9, high=2.1)
    ok = UserLoop(regime=TimingRegime.COLD, rounds=10, threads=2, eager=figure)
    slower = ok.model_copy(
        update={"slowed": "eager ran 2.45x slower", "eager": PairedRatio(pairs=10, median=5, low=4, high=6)}
    )
    v = _timed(2.0, 2.0)
    settings = fast_settings.model_copy(update={"user_loop": True, "user_loop_processes": 2})
    replies = iter([ok, slower, ok])
    monkeypatch.setattr(user_loop, "_one_process", lambda *args: next(replies))
    monkeypatch.setattr(user_loop, "_beside_a_control", lambda *args: next(replies))
    loop = user_loop.measure_user_loop(AFFINE, AFFINE, v, settings, 10)
    assert not loop.tampered and len(loop.processes) == 2 and loop.eager is not None and loop.eager.high == 2.1
    assert loop.remeasured == ["process 2: eager ran 2.45x slower"]
    # measuring again never raises a claim: each baseline keeps the lower of the two readings
    low = slower.model_copy(update={"eager": PairedRatio(pairs=10, median=1.5, low=1.4, high=1.6)})
    replies = iter([low, ok, ok])
    loop = user_loop.measure_user_loop(AFFINE, AFFINE, v, settings, 10)
    assert loop.processes[0].eager is not None and loop.processes[0].eager.median == 1.5
    replies = iter([ok, slower, slower])
    loop = user_loop.measure_user_loop(AFFINE, AFFINE, v, settings, 10)
    twice = (
        "eager ran 2.45x slower; in a fresh process beside one without it, the two taking turns: eager ran 2.45x slower"
    )
    assert loop.tampered == [f"process 2 of 2: {twice}"]
    assert with_user_loop(v, loop).status == "failed_integrity"


@pytest.mark.e2e  # a confirmation with two user-loop processes (20 s on 2 cores): .ci/run's heavy run
def test_the_users_loop_processes_are_confined_as_the_worker_is(fast_settings):
    """A finalist that tries a datagram in every process it runs in (and stays correct): nothing
    arrives, from the worker or from either of the user's processes."""
    listener = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    listener.bind(("127.0.0.1", 0))
    listener.settimeout(0.5)
    port = listener.getsockname()[1]
    source = (CANDIDATES / "affine" / "honest.py").read_text() + (
        "\nimport socket\ntry:\n"
        f"    socket.socket(socket.AF_INET, socket.SOCK_DGRAM).sendto(b'leak', ('127.0.0.1', {port}))\n"
        "except OSError as exc:\n    print('refused:', exc)\n"
    )
    on = fast_settings.model_copy(update={"user_loop": True, "user_loop_processes": 2})
    with VerifierService(AFFINE, on, "cpu") as service:
        v = service.verify_alone(Job("finalist", source), 10, 120)
    try:
        got = listener.recv(64)
    except TimeoutError:
        got = None
    listener.close()
    assert v.passed and v.user_loop is not None and len(v.user_loop.processes) == 2, v.reason
    assert got is None, got
