"""Do banked claims hold where a user measures them? Run from the checkout's root:

- ``python -m benchmarks.claims [OPS ...] --out PAGE.md``: ``forge optimize`` over a set of ops
  (default: ``benchmarks/claims_ops/`` and the shipped examples) into a fresh bank, then
  ``reproduce`` on it with the heap kept and returned; one page: each claim against a user's loop,
  and per folder of ops the geomean against torch.compile;
- ``python -m benchmarks.claims.reproduce BANK``: every active kernel of a bank loaded as a user
  loads it, checked to run, and timed in a plain loop beside eager and torch.compile; each claim
  judged by the strict rule;
- ``python -m benchmarks.claims.timing_stability [--null] [--control] [--load]``: each example
  candidate verified several times: the spread of its speedup and how often it passed;
- ``python -m benchmarks.claims.loop_conditions BANK``: the verifier workers' conditions added
  one at a time to a plain loop;
- ``python -m benchmarks.claims.process_spread BANK``: one kernel reproduced in several fresh
  processes.
"""
