"""The verifier: decides, in isolated workers, whether a candidate is correct and how fast it is.

``verify(op, candidate)`` runs one verification; ``VerifierService`` runs many for a session (in
parallel where asked, splitting the CPU's cores or giving each a GPU), keeps the op's reference
worker between them, and times a finalist again alone; ``Verifier`` is what a session needs of
it. Workers are forked from a pre-imported
template that never runs an op or a candidate (``template``); each process's peak memory is
reported against the op's bound (``memory``). Workers that are still running are ended by
``stop_all_workers`` (Ctrl-C). A finalist is also timed as a user times it, in a plain loop in
fresh processes (``measure_user_loop``, taking up to ``time_allowance`` more), and claims the
lower figure (``with_user_loop``). ``measure_op_brief`` profiles the reference, eager and
torch.compile for the agents' prompts.
"""

from forge.verifier.machine import resolve_device
from forge.verifier.op_brief import measure_op_brief
from forge.verifier.service import Job, Verifier, VerifierService, stop_all_workers
from forge.verifier.timing.contention import wait_for_quiet_machine
from forge.verifier.timing.paired import ProgressNote
from forge.verifier.user_loop import measure_user_loop, time_allowance, with_user_loop
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
