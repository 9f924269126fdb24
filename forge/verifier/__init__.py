"""The verifier: decides, in isolated workers, whether a candidate is correct and how fast it is.

``verify(op, candidate)`` runs one verification; ``VerifierService`` runs many for a session (in
parallel where asked, splitting the CPU's cores or giving each a GPU), keeps the op's reference
worker between them, and times a finalist again alone; ``Verifier`` is what a session needs of
it. Workers that are still running are ended by ``stop_all_workers`` (Ctrl-C). A finalist is also
timed as a user times it, in a plain loop in fresh processes (``measure_user_loop``, taking up to
``time_allowance`` more), and claims the lower figure (``with_user_loop``). ``measure_op_brief``
profiles the reference, eager and torch.compile for the agents' prompts.

The map, by the side each package runs on:

- ``parent``: forge's own process, trusted: ``service`` (many verifications), ``verification``
  (one: both workers driven, step by step), ``steps`` (each step's typed record; the verdict
  built from them once), ``reference_pool``, ``case_stream``, the checks
  (``checks``, ``compare``, ``gradient_checks``, ``bound_check``, ``case_verdicts``), ``rivals``,
  and the parent's side of timing (``parent.timing``, whose docstring maps timing as a whole);
- ``worker``: what runs beside candidate code: ``main`` (``python -m forge.verifier.worker.main``),
  the reference's side and the candidate's, and the workers' side of timing (``worker.timing``);
- ``protocol``: what the two say to each other, as typed records (``requests``, ``replies``,
  ``records``), their wire format (``codec``) and the frames that carry it (``channel``);
- ``processes``: how every worker process is started (forked from a pre-imported template), with
  what environment and in what sandbox;
- ``machine``: the machine's facts, measured figures and memory bounds, read on both sides;
- ``op_work``: the work the op cannot avoid, for its speed-of-light bound and its slack;
- ``briefing``: the op's brief for the agents' prompts, measured in a process of its own.
"""

from forge.verifier.briefing.measure import measure_op_brief
from forge.verifier.machine.contention import wait_for_quiet_machine
from forge.verifier.machine.facts import resolve_device
from forge.verifier.parent.service import Job, Verifier, VerifierService, stop_all_workers, timed_calls
from forge.verifier.parent.timing.paired import ProgressNote
from forge.verifier.parent.timing.user_loop import measure_user_loop, time_allowance, with_user_loop
from forge.verifier.parent.verification import verify

__all__ = [
    "Job",
    "ProgressNote",
    "Verifier",
    "VerifierService",
    "measure_op_brief",
    "measure_user_loop",
    "resolve_device",
    "stop_all_workers",
    "time_allowance",
    "timed_calls",
    "verify",
    "wait_for_quiet_machine",
    "with_user_loop",
]
