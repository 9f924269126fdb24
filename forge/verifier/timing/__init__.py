"""How the verifier times a candidate against its baselines: one place, by side.

In the workers (each runs the same loop on its own side):

- ``worker_loop``: the clocks bound at worker start-up, the heap prefaulted, and the timed loop
  (flush, clock, one call on a fresh input set, sync) with the garbage collector paused.

In the parent:

- ``paired``: ``PairedTimer`` drives the batches: candidate and baselines (eager, torch.compile)
  called alternately, in both cache regimes (cold: flushed, fresh inputs; warm: repeated calls),
  batch after batch until the budget is spent, each batch's replies checked as they arrive;
- ``candidate_times``: the candidate's replies to those batches gathered, and its timed outputs checked;
- ``pairing``: which side goes first in a pair, and the paired ratio with its 95% interval;
- ``statistics``: the figures written into the verdict: per-side statistics, speedups, the
  paired ratios per regime, the roofline fraction, the launch cost;
- ``contention``: the machine's load while a batch ran (other processes, the hypervisor's
  steal), which marks a measurement busy (never counted as a speedup), and the wait for quiet;
- ``sched_guard``: the reference worker's scheduling (affinity, priority) checked around the
  timed batches, so a candidate that slows the reference down is caught;
- ``plain_loop``: both sides timed in one process, as a user's loop would (the user-loop
  confirmation and the benchmarks).
- ``slowdown``: whether eager ran slower beside the candidate than without it (the user loop).

The null control (the op's reference timed against itself) is a candidate like any other here:
``VerifierService.verify_null`` runs it; ``forge.harness.sessions.null_control`` judges a
finalist against it.
"""
