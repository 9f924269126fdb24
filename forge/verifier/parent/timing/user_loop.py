"""A finalist timed the way its user will time it, beside the isolated verification.

The verifier times the candidate and the reference in two isolated workers (what keeps its
verdict from being fooled), but a user runs the kernel in their own process, in a plain loop,
next to their own reference. The two can read apart (the workers wait on the parent between
calls, keep their collector paused, make room in the heap first), and a claim a user cannot
reproduce is worse than none. So a confirmation also runs ``user_loop_worker`` in fresh
processes, one after another (``user_loop_processes``: two processes running the same code read
apart by about as much as either's own interval, and a user's process is yet another), in the
regime the verdict is judged in and the workers' allocator regime. The banked claim is the lower
of the two measurements, with the range a user's process reads (``Verdict.claim_pairs``). A
kernel that runs the reference there (a fallback) or changes the loop's process (replaces torch
or clock functions, the reference's own module or class, the thread count, the affinity, keeps a
thread burning CPU, or slows the reference: in its process, and again in a fresh one taking turns
with a process without it) fails the verdict; one slower than eager there is not accepted
(``acceptance.beats_eager``)."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import tempfile
import threading
from pathlib import Path
from typing import Literal

from forge.core.pairing import slowed
from forge.core.redaction import redacted
from forge.core.sandbox import python_argv
from forge.core.settings import ForgeSettings
from forge.core.statuses import TimingRegime, VerdictStatus
from forge.core.timing_records import LoopProcess, PairedRatio, UserLoop
from forge.core.verdict import Verdict
from forge.verifier.machine.facts import available_cores
from forge.verifier.processes.sandboxing import op_reads, sandboxed
from forge.verifier.processes.template import worker_limits
from forge.verifier.processes.worker_env import candidate_folder, worker_env
from forge.verifier.processes.worker_process import track
from forge.verifier.protocol import Turns, TurnTimes, UserLoopRequest
from forge.verifier.protocol.turns import BLOCK_ROUNDS, OTHER_ENDED, turn_blocks

_START_S = 120.0  # a fresh process imports torch (and compiles the baseline) before its first call
_LAST_BLOCK_S = 60.0  # the control process's wait once the loaded one ended: its last block, and its exit
_RAN_PAST = "it ran past its time"


def measure_user_loop(
    op_path: Path,
    candidate_path: Path,
    verdict: Verdict,
    settings: ForgeSettings,
    rounds: int,
    stop: threading.Event | None = None,
) -> UserLoop:
    """The candidate at ``candidate_path`` timed in a user's loop, ``rounds`` calls a side in each
    of ``settings.user_loop_processes`` fresh processes, one after another, in the regime
    ``verdict`` (its isolated verification) is judged in. A process that fails, or finds a
    fallback or a change to its process, ends the measurement with that finding; a set ``stop``
    starts no further process (and ends a running one: it is tracked as the workers are)."""
    regime = verdict.timing_stats.regime or TimingRegime.COLD
    threads = settings.threads or available_cores()
    said = UserLoop(regime=regime, rounds=rounds, threads=threads)
    t = verdict.timings_ms
    per_round_s = sum(float(ms or 0.0) for ms in (t.candidate, t.eager, t.compile, t.eager)) / 1000 + 0.01
    limit = settings.timeout + _START_S + 3 * rounds * per_round_s
    reads = [*op_reads(op_path), candidate_path, candidate_path.resolve().parent, Path.cwd()]
    own = candidate_folder(candidate_path.read_text(errors="replace"))
    env = user_env(verdict.device or "cpu", threads, settings, reads, own)
    job = UserLoopRequest(
        op_path=str(op_path.resolve()),
        candidate_path=str(candidate_path.resolve()),
        regime=regime,
        rounds=rounds,
        compile=settings.compile_baseline,
        seed=verdict.seed % (1 << 31),
        device=verdict.device or "cpu",
    )
    count = settings.user_loop_processes
    processes: list[LoopProcess] = []
    remeasured: list[str] = []
    for k in range(1, count + 1):
        if stop is not None and stop.is_set():
            return said.model_copy(update={"processes": processes, "failed": "stopped before it was done"})
        one = _process_measured_twice_if_slowed(job, env, limit, settings.memory_limit_mb, said)
        # what it failed with may quote the candidate's text
        one, _ = redacted(one, os.environ, [p for p in reads if p.is_dir()])
        if one.failed or one.fallbacks or one.tampered or one.eager is None:
            where = f"process {k} of {count}: " if count > 1 else ""
            findings = {
                "failed": where + one.failed if one.failed else None,
                "processes": processes,
                "tampered": [where + t for t in one.tampered],
            }
            return one.model_copy(update=findings)
        processes.append(LoopProcess.model_validate(one.model_dump(include=set(LoopProcess.model_fields))))
        remeasured += [f"process {k}: {why}" for why in one.remeasured]
    return UserLoop.of_processes(said, processes).model_copy(update={"remeasured": remeasured})


def _process_measured_twice_if_slowed(
    job: UserLoopRequest, env: dict[str, str], limit: float, memory_mb: int, said: UserLoop
) -> UserLoop:
    """One process's measurement; when eager read slower once the candidate was loaded (and the
    process found nothing else), a fresh process's instead, beside a process without the
    candidate, the two taking turns (``user_loop_turns``). A neighbour on the machine that starts
    between a loop's halves reads the same as a candidate that slows the reference (an honest
    affine op read 2x slower in two fresh processes, one after the other, on a 2-core CI VM);
    taking turns, the neighbour lands on both. Measuring again gains a candidate nothing: each
    baseline keeps the lower of the two readings."""
    one = _one_process(job, env, limit, memory_mb, said)
    if one.slowed is None or one.failed or one.fallbacks or one.tampered:
        return one
    again = _beside_a_control(job, env, 2 * limit, memory_mb, said)
    if again.slowed is not None and not again.failed:
        both = f"{one.slowed}; in a fresh process beside one without it, the two taking turns: {again.slowed}"
        return again.model_copy(update={"tampered": [*again.tampered, both]})
    if again.failed or again.fallbacks or again.tampered:
        return again

    def lower(a: PairedRatio | None, b: PairedRatio | None) -> PairedRatio | None:
        return b if a is None or (b is not None and b.median <= a.median) else a

    update = {"eager": lower(one.eager, again.eager), "compiled": lower(one.compiled, again.compiled)}
    return again.model_copy(update={**update, "remeasured": [one.slowed]})


def _beside_a_control(
    job: UserLoopRequest, env: dict[str, str], limit: float, memory_mb: int, said: UserLoop
) -> UserLoop:
    """A fresh loaded process's measurement, its ``slowed`` read against a control process (the
    reference alone) taking turns with it: eager's calls beside the kernel against eager's calls
    beside the reference's twin, timed in alternating blocks."""
    with tempfile.TemporaryDirectory(prefix="forge-user-loop-", dir=env["TMPDIR"]) as tmp:
        pair = _spawn_pair(job, env, memory_mb, Path(tmp))
        (loaded_child, loaded_result, loaded_times), (control_child, _, control_times) = pair
        found = _collect(loaded_child, loaded_result, limit, said)
        # the loaded process has ended: the control has one block left at most (a child the
        # candidate forked could hold the pipe open; the loaded process's failure comes first then)
        control = _turn_times(control_times, control_child.output(_LAST_BLOCK_S), "the control process")
        loaded = _turn_times(loaded_times, "", "the loaded process")
    # the first failure is the one to name: a process whose other half ended fails after it
    if control.failed and control.failed != OTHER_ENDED and not (found.failed and control.failed == _RAN_PAST):
        return said.model_copy(
            update={"failed": f"measured again beside a control process, it failed: {control.failed}"}
        )
    if found.failed:
        return found
    if loaded.failed or control.failed:
        why = loaded.failed or control.failed
        return said.model_copy(update={"failed": f"measured again beside a control process: {why}"})
    where = "beside the candidate than in a process without it, the two taking turns"
    return found.model_copy(update={"slowed": slowed(control.eager_ns, loaded.eager_ns, where)})


def _spawn_pair(
    job: UserLoopRequest, env: dict[str, str], memory_mb: int, folder: Path
) -> tuple[tuple[_LoopChild, Path, Path], tuple[_LoopChild, Path, Path]]:
    """The loaded process and the control process, started on two pipes that hand the turn over;
    each with its result file and its turns' file."""
    to_loaded, to_control = os.pipe(), os.pipe()  # (read end, write end)
    ends: dict[Literal["loaded", "control"], tuple[int, int]] = {
        "loaded": (to_loaded[0], to_control[1]),
        "control": (to_control[0], to_loaded[1]),
    }
    started: list[tuple[_LoopChild, Path, Path]] = []
    try:
        for role, (read_fd, write_fd) in ends.items():
            times = folder / f"{role}-turns.json"
            turns = Turns(
                role=role,
                read_fd=read_fd,
                write_fd=write_fd,
                blocks=turn_blocks(job.rounds),
                block_rounds=BLOCK_ROUNDS,
                times_path=str(times),
            )
            request = job.model_copy(update={"turns": turns})
            child, result = _spawn(request, env, memory_mb, folder / role, (read_fd, write_fd))
            started.append((child, result, times))
    finally:  # the children hold them now: a child that ends closes its ends, and the other reads that
        for fd in (*to_loaded, *to_control):
            os.close(fd)
    return started[0], started[1]


def _turn_times(path: Path, printed: str | None, who: str) -> TurnTimes:
    """A process's turns read back (untrusted bytes: any failure to read them is a failure)."""
    if printed is None:
        return TurnTimes(failed=_RAN_PAST)
    try:
        return TurnTimes.model_validate_json(path.read_bytes())
    except (OSError, ValueError) as exc:
        return TurnTimes(failed=f"{who} wrote no turns ({str(exc)[:200]}): {printed.strip()[-600:]}")


def time_allowance(settings: ForgeSettings, timeout: float) -> float:
    """Seconds the user loop may add to a confirmation whose verification may take ``timeout``
    (a caller's deadline for the whole: each process imports torch and compiles the baseline, and
    each may be measured again, beside a control process, after a slowed reading)."""
    return 4 * settings.user_loop_processes * (timeout + _START_S) if settings.user_loop else 0.0


class _LoopChild:
    """A user loop's process, in a session of its own, as a stop ends it (``process.track``). What
    it prints goes to a file: a pipe nobody reads while it runs (the control process's, while the
    parent waits on the loaded one) would block it once full."""

    def __init__(
        self, argv: list[str], env: dict[str, str], memory_mb: int, printed: Path, pass_fds: tuple[int, ...] = ()
    ) -> None:
        self.printed = printed
        with printed.open("wb") as out:
            self.proc = subprocess.Popen(
                argv,
                env=env,
                cwd=Path.cwd(),
                pass_fds=pass_fds,
                stdout=out,
                stderr=subprocess.STDOUT,
                start_new_session=True,
                preexec_fn=lambda: worker_limits(2 * memory_mb),
            )
        track(self)

    def kill(self) -> None:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self.proc.pid, signal.SIGKILL)

    def output(self, limit: float) -> str | None:
        """What it printed, once it ended within ``limit`` seconds (None: it was killed then)."""
        try:
            self.proc.wait(timeout=limit)
        except subprocess.TimeoutExpired:
            self.kill()
            self.proc.wait()
            return None
        return self.printed.read_bytes()[-20_000:].decode(errors="replace")


def _one_process(job: UserLoopRequest, env: dict[str, str], limit: float, memory_mb: int, said: UserLoop) -> UserLoop:
    """One fresh process of the user loop, its report read back as a ``UserLoop``."""
    with tempfile.TemporaryDirectory(prefix="forge-user-loop-", dir=env["TMPDIR"]) as tmp:
        child, result = _spawn(job, env, memory_mb, Path(tmp))
        return _collect(child, result, limit, said)


def _spawn(
    job: UserLoopRequest, env: dict[str, str], memory_mb: int, folder: Path, pass_fds: tuple[int, ...] = ()
) -> tuple[_LoopChild, Path]:
    """A user loop's process started on ``job`` (its request and result files in ``folder``)."""
    folder.mkdir(exist_ok=True)
    request, result = folder / "request.json", folder / "result.json"
    request.write_text(job.model_dump_json())
    argv = python_argv("forge.verifier.worker.timing.user_loop_worker", str(request), str(result))  # confined at once
    return _LoopChild(argv, env, memory_mb, folder / "printed.txt", pass_fds), result


def _collect(child: _LoopChild, result: Path, limit: float, said: UserLoop) -> UserLoop:
    """A process's report read back (untrusted: any value of the wrong type is a failure; what it
    reports can lower the claim's figure, never raise it)."""
    printed = child.output(limit)
    if printed is None:
        return said.model_copy(update={"failed": f"the loop's process ran past {limit:.0f} s"})
    if not result.is_file():
        failed = f"the loop's process ended ({child.proc.returncode}) with no result: {printed.strip()[-600:]}"
        return said.model_copy(update={"failed": failed})
    try:
        found = UserLoop.model_validate_json(result.read_bytes())
    except (OSError, ValueError) as exc:  # ValidationError is a ValueError: any bytes at all
        return said.model_copy(update={"failed": f"the loop's process wrote no valid result: {str(exc)[:300]}"})
    # What the process was asked, not what it says it did, names the measurement.
    return found.model_copy(update={"threads": said.threads, "regime": said.regime, "rounds": said.rounds})


def user_env(device: str, threads: int, settings: ForgeSettings, reads: list[Path], own: str) -> dict[str, str]:
    """A user's process: the workers' threads and allocator regime (heap kept), but libgomp's own
    spinning (the workers' short spin keeps two of them from taking each other's cores; one user
    process has no such neighbour, and ``reproduce.py`` runs with the default too). It runs the
    candidate: sandboxed as its worker is, reading ``reads`` (its files and folders) and writing
    its ``own`` folder of the workers' cache (``worker_env.candidate_folder``)."""
    env = worker_env(device, threads, settings.cache_path(), settings.gpu, own)
    env = sandboxed(env, settings.sandbox, reads, device)
    if "GOMP_SPINCOUNT" in os.environ:
        env["GOMP_SPINCOUNT"] = os.environ["GOMP_SPINCOUNT"]
    else:
        env.pop("GOMP_SPINCOUNT", None)
    return env


def with_user_loop(verdict: Verdict, loop: UserLoop) -> Verdict:
    """``verdict`` carrying the user loop, its check, and the claim (the lower of the two
    measurements, ``Verdict.claim_pairs``); a fallback, a change to the loop's process or a loop
    that failed fails it."""
    v = verdict.model_copy(deep=True)
    v.user_loop = loop
    failure = _failure(loop)
    if failure is not None:
        status = VerdictStatus.RUNTIME_ERROR if loop.failed else VerdictStatus.FAILED_INTEGRITY
        v.add("user_loop", False, failure)
        v.fail(status, f"user_loop: {failure}")
        return v
    eager, compiled = v.claim_pairs()
    v.speedup_vs_eager = eager.median if eager is not None else v.speedup_vs_eager
    v.speedup_vs_compile = compiled.median if compiled is not None else v.speedup_vs_compile
    v.add("user_loop", True, describe(loop))
    return v


def _failure(loop: UserLoop) -> str | None:
    if loop.failed:
        return f"timed in a user's loop, it failed: {loop.failed}"
    if loop.fallbacks:
        return (
            f"in a user's loop (eval mode, loaded as forge.kernelbank loads it), the reference's forward ran on "
            f"{loop.fallbacks} of its calls (a fallback): the bank would hand out the reference"
        )
    if loop.tampered:
        return "loaded in a user's process, the candidate changed it: " + "; ".join(loop.tampered)
    if loop.eager is None:
        return "the user loop timed no calls"
    return None


def describe(loop: UserLoop) -> str:
    """One line: the loop's figures and its own noise."""
    count = len(loop.processes) or 1
    where = "one process" if count == 1 else f"{count} fresh processes (the median of their medians, and a range)"
    said = f"in a plain loop in {where} ({loop.regime}, {loop.rounds} rounds each, heap {loop.heap}): "
    if loop.eager is not None:
        said += f"{loop.eager.median:.2f}x eager ({loop.eager.low:.2f}-{loop.eager.high:.2f})"
    if loop.compiled is not None:
        said += f", {loop.compiled.median:.2f}x torch.compile ({loop.compiled.low:.2f}-{loop.compiled.high:.2f})"
    if (null := loop.null) is not None:
        said += f"; the reference against itself there {null.median:.2f}x ({null.low:.2f}-{null.high:.2f})"
    if loop.remeasured:
        said += f"; measured again in a fresh process after eager read slower ({'; '.join(loop.remeasured)})"
    return said + "; the claim is the lower of this and the isolated measurement"


__all__ = ["describe", "measure_user_loop", "time_allowance", "with_user_loop"]
