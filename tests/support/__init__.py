"""Helpers the tests share that are not fixtures: nvcc over the CUDA sources forge writes (``nvcc``).
The helper servers (a scripted OpenAI-compatible LLM, a PostgreSQL server) live in
``benchmarks.support``, which the benchmarks use too."""
