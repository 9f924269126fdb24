"""Verifying many candidates of one op: what a session (or any other caller) asks the verifier for.

``VerifierService`` writes each candidate's source to a file of its own, runs the verifications of
a batch in parallel threads when asked for several workers, and shares the machine between them:
on a CPU each parallel verification gets an equal share of the cores (timings of two on the same
cores would disturb each other), on CUDA each gets its own GPU from the visible ones (shared
round-robin only when there are more workers than GPUs). A finalist's confirmation runs alone,
on the whole machine, with more timed calls, and next to it the op's reference verified as a
candidate the same way (``verify_null``: the null control). When ``stop`` is set (Ctrl-C), the running workers
are ended and ``KeyboardInterrupt`` is raised: a verdict from a killed worker means nothing.
``end_workers`` ends this service's own workers (another run in the same process keeps its own).
The reference worker, which runs only the op, is kept from one verification to the next
(``ReferencePool``) until the service is closed.
"""

from __future__ import annotations

import queue
import tempfile
import threading
import weakref
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from forge.core.acceptance import timed_while_busy
from forge.core.errors import ForgeError
from forge.core.round_match import RoundMatch
from forge.core.settings import ForgeSettings
from forge.core.verdict import NodeSpec, Verdict
from forge.verifier.machine.facts import available_cores, gpu_slots, visible_gpus
from forge.verifier.parent.reference_pool import ReferencePool
from forge.verifier.parent.timing.user_loop import measure_user_loop, with_user_loop
from forge.verifier.parent.verification import time_together, verify
from forge.verifier.processes.worker_process import Killable, kill_all, worker_group


@dataclass(frozen=True)
class Job:
    """One candidate to verify: a name for its file (unique within the service) and its source."""

    name: str
    source: str


# The null control's candidate: the op's own reference, so whatever it measures is noise.
NULL_CONTROL = Job("null_control", "from forge_reference import Model\n\n\nclass ModelNew(Model):\n    pass\n")


class Verifier(Protocol):
    """What a session asks of its verifier: ``VerifierService`` on this machine, or a stand-in that
    runs one on a cluster node (``forge.cluster``)."""

    stop: threading.Event
    node: NodeSpec | None  # the cluster node it verifies on; None: this machine

    def verify(self, jobs: list[Job]) -> list[Verdict]: ...

    def verify_alone(self, job: Job, trials: int, timeout: float) -> Verdict: ...

    def verify_null(self, trials: int, timeout: float) -> Verdict: ...

    def time_together(self, jobs: list[Job]) -> RoundMatch: ...

    def end_workers(self) -> int: ...

    def close(self) -> None: ...


def timed_calls(verdict: Verdict) -> int:
    """The calls a side ``verdict``'s candidate was timed with (at least 5): what its user loop
    and its null control time when no count was asked for."""
    timed = verdict.timing_stats.candidate
    return max(5, timed.trials if timed is not None else 0)


def stop_all_workers() -> int:
    """End every verification worker still running in this process (returns how many)."""
    return kill_all()


class VerifierService:
    """Verifications of candidate sources against the op file at ``op_path``. Close it (or use it
    as a context manager) to remove the candidates' files."""

    def __init__(
        self,
        op_path: Path,
        settings: ForgeSettings,
        device: str,
        workers: int = 1,
        stop: threading.Event | None = None,
    ) -> None:
        self.op_path, self.settings, self.device = op_path, settings, device
        self.workers = max(1, workers)
        self.stop = stop or threading.Event()
        self.node: NodeSpec | None = None  # this machine
        self._dir = tempfile.TemporaryDirectory(prefix="forge-session-")
        self._workers: weakref.WeakSet[Killable] = weakref.WeakSet()
        self._references = ReferencePool()

    def end_workers(self) -> int:
        """Kill the workers this service's verifications are running now (returns how many)."""
        running = list(self._workers)
        for w in running:
            w.kill()
        return len(running)

    def __enter__(self) -> VerifierService:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        self._references.close()
        self._dir.cleanup()

    def verify(self, jobs: list[Job]) -> list[Verdict]:
        """Verdicts for ``jobs``, in their order; up to ``workers`` of them at a time."""
        workers = min(self.workers, len(jobs))
        settings = self.settings
        if workers > 1 and self.device == "cpu":  # parallel timing on one CPU: split the cores
            # The sibling verifications are known load: recorded, not retried; a finalist is
            # confirmed alone, with the load check on, before anything is banked.
            # (of the cores this service was given: a cluster session's, or the machine's)
            update = {"threads": max(1, (settings.threads or available_cores()) // workers), "load_check": False}
            settings = settings.model_copy(update=update)
        gpus: queue.SimpleQueue[str] = queue.SimpleQueue()
        if workers > 1 and self.device == "cuda" and settings.gpu is None:  # one GPU per worker
            for gpu in gpu_slots(workers, visible_gpus()):
                gpus.put(gpu)
        pinned = not gpus.empty()

        def one(job: Job) -> Verdict:
            gpu = gpus.get() if pinned else None  # as many slots as threads: never waits long
            try:
                return self._run(job, settings if gpu is None else settings.model_copy(update={"gpu": gpu}))
            finally:
                if gpu is not None:
                    gpus.put(gpu)

        if workers <= 1:
            return [one(j) for j in jobs]
        pool = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="forge-verify")
        try:
            return list(pool.map(one, jobs))
        except KeyboardInterrupt:  # do not wait for the running verifications: end their workers
            self.end_workers()
            raise
        finally:
            pool.shutdown(wait=False, cancel_futures=True)

    def verify_alone(self, job: Job, trials: int, timeout: float) -> Verdict:
        """One verdict with ``trials`` timed calls a side, on the whole machine, within ``timeout``
        seconds (a finalist's confirmation), and timed in a user's loop too (``confirm_file``)."""
        return self.confirm_file(self._write(job), trials, timeout)

    def confirm_file(self, path: Path, trials: int | None, timeout: float) -> Verdict:
        """A candidate file confirmed where it lies (its sibling modules importable): verified
        with ``trials`` timed calls a side (None: as many as the timing budget gives), within
        ``timeout`` seconds; a passing one is also timed in a user's loop, in fresh processes
        (``user_loop``, unless the setting is off), with as many rounds, and claims the lower
        figure. One timed under load is not: nothing timed under load is banked, and the loop
        would only add minutes."""
        update: dict[str, float | int] = {"timeout": timeout} | ({"timing_trials": trials} if trials else {})
        settings = self.settings.model_copy(update=update)
        verdict = self._verify(path, settings)
        timed = verdict.passed and verdict.timing_meaningful and not timed_while_busy(verdict)
        if not (self.settings.user_loop and timed and verdict.speedup_vs_eager):
            return verdict
        token = worker_group.set(self._workers)  # a stop ends the loop's process too
        try:
            loop = measure_user_loop(self.op_path, path, verdict, settings, trials or timed_calls(verdict), self.stop)
        finally:
            worker_group.reset(token)
        if self.stop.is_set():
            raise KeyboardInterrupt
        return with_user_loop(verdict, loop)

    def verify_null(self, trials: int, timeout: float) -> Verdict:
        """The null control: the op's reference verified as a candidate, alone, with ``trials`` timed
        calls a side, in a worker like any candidate's (forked clean; the reference worker is the
        same kept one). Its paired ratio is how far two workers running the same code read apart."""
        # The same settings as a finalist's confirmation (torch.compile's calls beside eager's too):
        # what the reference worker does between eager calls is part of the offset measured.
        update = {"timing_trials": trials, "timeout": timeout}
        return self._verify(self._write(NULL_CONTROL), self.settings.model_copy(update=update), is_reference=True)

    def time_together(self, jobs: list[Job]) -> RoundMatch:
        """A round's passing candidates timed in one verification, on the whole machine (the
        first verified again as the candidate, the others as its rivals, call by call in the same
        batches): what the round's choice reads, within one noise. One timed while the machine
        was busy decides nothing."""
        paths = [self._write(j) for j in jobs]
        token = worker_group.set(self._workers)
        try:
            refs = self._references
            verdict, match = time_together(self.op_path, paths[0], paths[1:], self.settings, references=refs)
        except ForgeError as exc:  # the round's verdicts stand: the match only decides nothing
            if self.stop.is_set():
                raise KeyboardInterrupt from None
            return RoundMatch(failed=f"the match could not run: {exc}"[:600])
        finally:
            worker_group.reset(token)
        if self.stop.is_set():
            raise KeyboardInterrupt
        if match.failed is None and timed_while_busy(verdict):
            return match.model_copy(update={"failed": "timed while the machine was busy"})
        return match

    def verify_instance(self, job: Job, instance: str) -> Verdict:
        """``job`` verified on another instance of a carved op (``FORGE_INSTANCES``: its own
        constructor arguments and recorded calls): correctness, gradients and the bound form, not
        timed. The reference worker is the kept one, set up for that instance."""
        return self._verify(self._write(job), self.settings, instance=instance, timed=False)

    def verify_file(self, path: Path) -> Verdict:
        """A candidate file verified where it lies (its sibling modules importable), with the
        service's settings and its kept reference worker."""
        return self._verify(path, self.settings)

    def _run(self, job: Job, settings: ForgeSettings) -> Verdict:
        return self._verify(self._write(job), settings)

    def _write(self, job: Job) -> Path:
        path = Path(self._dir.name) / f"{job.name}.py"
        path.write_text(job.source)
        return path

    def _verify(
        self,
        path: Path,
        settings: ForgeSettings,
        is_reference: bool = False,
        instance: str | None = None,
        timed: bool = True,
    ) -> Verdict:
        token = worker_group.set(self._workers)
        try:
            verdict = verify(
                self.op_path,
                path,
                settings,
                references=self._references,
                is_reference=is_reference,
                instance=instance,
                timed=timed,
            )
        except ForgeError:
            if self.stop.is_set():  # the stop killed a worker while it started: not the op's fault
                raise KeyboardInterrupt from None
            raise
        finally:
            worker_group.reset(token)
        if self.stop.is_set():  # its workers were ended: the verdict means nothing
            raise KeyboardInterrupt
        return verdict
