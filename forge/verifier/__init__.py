"""The verifier: decides, in isolated workers, whether a candidate is correct and how fast it is.

``verify(op, candidate)`` runs one verification; ``VerifierService`` runs many for a session (in
parallel where asked, splitting the CPU's cores or giving each a GPU), keeps the op's reference
worker between them, and times a finalist again alone; ``Verifier`` is what a session needs of
it. Workers that are still running are ended by ``stop_all_workers`` (Ctrl-C). A finalist is also
timed as a user times it, in a plain loop in fresh processes (``measure_user_loop``, taking up to
``time_allowance`` more), and claims the lower figure (``with_user_loop``). ``measure_op_brief``
profiles the reference, eager and torch.compile for the agents' prompts.

The map:

- the parent: ``service`` (many verifications), ``verification`` (one: both workers, the
  verdict), ``reference_pool`` (reference workers kept between verifications), ``case_stream``
  (the cases as they arrive), ``checks``, ``compare``, ``gradient_checks`` and ``bound_check``
  (observations turned into named checks), ``case_verdicts`` (those checks written into the
  verdict), ``memory`` (each process's peak against the op's bound);
- the workers: ``worker`` (``python -m forge.verifier.worker``), ``reference_side`` with
  ``reference_cases`` and ``cases`` (the op, its drawn cases, the expected outputs),
  ``candidate_side`` with ``output_copies``, ``custom_op_checks`` and ``candidate_watch`` (its
  threads and errors), and for both ``call_form``, ``gradients`` and ``model_state``;
- ``machine``, ``roofline`` and ``passes``: the machine's facts, and the op's speed-of-light bound on it
  (``passes``: the second read its math forces where a reduction's result meets the data it reduced);
- ``messages``: what the parent and its workers say to each other, as typed records;
- ``processes``: how every worker process is started (forked from a pre-imported template), with
  what environment, in what sandbox, and how the parent talks to it;
- ``timing``: how a candidate is timed, in the workers and in the parent, and the user loop;
- ``briefing``: the op's brief for the agents' prompts, measured in a process of its own.
"""

from forge.verifier.briefing.measure import measure_op_brief
from forge.verifier.machine import resolve_device
from forge.verifier.service import Job, Verifier, VerifierService, stop_all_workers
from forge.verifier.timing.contention import wait_for_quiet_machine
from forge.verifier.timing.paired import ProgressNote
from forge.verifier.timing.user_loop import measure_user_loop, time_allowance, with_user_loop
from forge.verifier.verification import verify

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
    "verify",
    "wait_for_quiet_machine",
    "with_user_loop",
]
