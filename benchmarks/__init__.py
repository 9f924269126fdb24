"""The scripts behind every figure in forge's docs, grouped by what they measure. Each runs as a
module from the checkout's root (``python -m benchmarks.PACKAGE.SCRIPT --help``), prints its
figures and, with ``--page docs/benchmarks/NAME.md``, writes them as a page headed by its command
(``support.page``); docs/benchmarks/index.md lists them with what each measures.

Packages:

- ``claims``: whether banked speedups hold where a user measures them (the claims study, their
  reproduction in a plain loop, the verdicts' stability, the workers' conditions, process spread);
- ``kernels``: what the built-in agent's kernels achieve and why it writes them as it does (the
  shipped examples optimized and verified, coverage of op sets, the erf form, the row-sum
  bandwidth, the Triton kernels, the library producers' share);
- ``model_runs``: whole models (``forge optimize MODEL --modules``), training steps with a banked
  kernel, and the parallel-plan cost model;
- ``costs``: what forge's own machinery costs (a verification, the harness, the sandbox, the
  runtime's dispatch, the TUI's start, bank writes and leases, throughput on Ray, prompt sizes);
- ``gpu_suite``: everything forge does on a CUDA GPU, in resumable parts for a short loan;
- ``support``: what the scripts share (the page writer, the checkout's paths, how a script was
  started, a user's code imported from its folder) and the servers the tests use too (a scripted
  OpenAI-protocol server, a PostgreSQL server).

Data, not code (op files and model files the scripts run; never imported as modules):
``claims_ops/`` (ops written for the claims study, never tuned on), ``floor_ops/set_a`` and
``set_b`` (the check against torch.compile), ``op_catalog/`` (one op of each kind users bring), and
``models/`` (transformers and timm models at small configs).
"""
