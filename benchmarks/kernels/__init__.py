"""What the built-in agent's kernels achieve, and the measurements behind how it writes them. Run
from the checkout's root:

- ``python -m benchmarks.kernels.optimize_examples``: ``forge optimize`` over every shipped
  example: first candidate against the tuned kernel, speedups, the config chosen, geomeans;
- ``python -m benchmarks.kernels.verify_examples``: every shipped example candidate verified;
- ``python -m benchmarks.kernels.coverage DIR... [--optimize]``: whether the built-in agent takes
  each op on (and why not), and with ``--optimize`` whether a kernel was verified and accepted;
- ``python -m benchmarks.kernels.kernelbench_ops CHECKOUT --out DIR``: KernelBench problems shrunk
  to this machine, as op files for ``coverage`` and the claims study;
- ``python -m benchmarks.kernels.erf_rational [--fit]``: torch's erf against forge's rational
  form over every float;
- ``python -m benchmarks.kernels.row_sum_bandwidth``: torch.sum against the built-in C++ row
  reduction;
- ``python -m benchmarks.kernels.producer_share DIR...``: how much of an op's time is its library
  matmul or convolution;
- ``python -m benchmarks.kernels.triton_kernels`` (CUDA): the built-in Triton kernel of every
  shipped example at its default and sampled configs.
"""
