"""How the verifier times a candidate against its baselines: one place, in two measurements.

**The isolated verification** (every candidate). In the workers (``forge.verifier.worker.timing``;
each runs the same loop on its own side):

- ``worker_loop``: the clocks bound at worker start-up, the heap prefaulted, and the timed loop
  (flush, clock, one call on a fresh input set, sync) with the garbage collector paused.

In the parent:

- ``paired``: ``PairedTimer`` drives the batches: candidate and baselines (eager, torch.compile)
  called alternately, in both cache regimes (cold: flushed, fresh inputs; warm: repeated calls),
  batch after batch until the budget is spent, each batch's replies checked as they arrive;
- ``candidate_times``: the candidate's replies to those batches gathered, and its timed outputs checked;
- ``forge.core.pairing``: which side goes first in a pair, and the paired ratio with its 95%
  interval (the same rules in every process forge pairs calls in);
- ``statistics``: the figures written into the verdict: per-side statistics, speedups, the
  paired ratios per regime, the roofline fraction, the launch cost;
- ``training``: training steps (forward and backward) timed the same way (``forge verify --train``);
- ``contention``: the machine's load while a batch ran (other processes, the hypervisor's
  steal), which marks a measurement busy (never counted as a speedup), and the wait for quiet;
- ``sched_guard``: the reference worker's scheduling (affinity, priority) checked around the
  timed batches, so a candidate that slows the reference down is caught.

**The user loop** (a finalist's confirmation): the candidate timed as its user times it, in fresh
processes, and the claim never above either measurement:

- ``user_loop``: in the parent: the processes run one after another, their figure, the claim
  (``with_user_loop``) and the time it may take (``time_allowance``);
- ``user_loop_worker``, ``plain_loop`` and ``process_watch`` run in that process
  (``forge.verifier.worker.timing``);
- ``user_loop_worker``: one such process (``python -m forge.verifier.worker.timing.user_loop_worker``):
  the op and the candidate loaded as ``forge.kernelbank`` loads them, then the loop;
- ``plain_loop``: both sides timed in one process, as a user's loop would (the user loop's
  processes and the benchmarks);
- ``process_watch``: what the candidate changed in that process, noted before it is imported
  and compared after the loop;
- ``forge.core.pairing.slowed``: whether eager ran slower beside the candidate than without it;
- ``user_loop_turns``: when it did, two processes taking turns, one with the candidate and one
  without it.

Every process that times (the two workers, the user loop's) starts with the same environment
(``forge.verifier.processes.worker_env``). The null control (the op's reference timed against
itself) is a candidate like any other here: ``VerifierService.verify_null`` runs it;
``forge.harness.sessions.null_control`` judges a finalist against it.
"""
