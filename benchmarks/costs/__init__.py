"""What forge's own machinery costs. Run from the checkout's root:

- ``python -m benchmarks.costs.verify_cost``: a verification's seconds (from scratch and as a
  session does it) and each process's peak memory against its bound;
- ``python -m benchmarks.costs.harness_cost``: ``forge verify`` end to end on a trivial
  candidate, and ``forge.cpp`` compile times;
- ``python -m benchmarks.costs.sandbox_cost``: ``forge verify`` and ``forge optimize`` with and
  without the sandbox;
- ``python -m benchmarks.costs.kernelbank_overhead``: the runtime's dispatch overhead per call,
  and ``open()`` plus the first ``load()`` in a fresh process;
- ``python -m benchmarks.costs.tui_startup``: how fast ``forge tui`` draws its first screen and
  opens its screens, on an empty and on a large bank;
- ``python -m benchmarks.costs.bank_writes``: bank commits per second with and without lease
  checks, on SQLite and PostgreSQL;
- ``python -m benchmarks.costs.scale``: sessions per hour with the local and Ray executors;
- ``python -m benchmarks.costs.prompt_sizes OP CANDIDATE``: the LLM coder's and judge's prompts
  in tokens, round by round, against a scripted server.
"""
