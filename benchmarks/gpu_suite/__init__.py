"""Everything forge does on a CUDA GPU, in resumable parts that fit a short loan (docs/gpu-suite.md).
Run from the checkout's root:

- ``python -m benchmarks.gpu_suite --out DIR [--dry-run]``: the suite (``__main__``); its parts
  are in ``checks`` (env, gpu_tests, hacks), ``optimize`` (optimize, runtime, catalog),
  ``llm_cuda``, ``training`` and ``model``; what they share is in ``part``, and the archive a loan
  brings back (``--copy-to``, ``--resume-from``) in ``archive``;
- ``python -m benchmarks.gpu_suite.wheels``: the wheels of what forge needs and a lent machine
  lacks, downloaded into ``.whl/`` on a machine that reaches a package index.
"""
