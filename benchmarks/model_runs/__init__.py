"""Whole models, their training steps, and their parallel plans. Run from the checkout's root:

- ``python -m benchmarks.model_runs [MODEL ...]``: ``forge optimize MODEL --modules`` in a fresh
  bank per model (default: the shipped ``examples/models/``; ``benchmarks/models/`` holds
  transformers and timm models), the classes chosen, and the model timed four ways;
- ``python -m benchmarks.model_runs.depths MODEL[:DEPTHS] ...``: a model-level run on one model at
  two depths (its ``LAYERS`` constant): the searches, the instance checks, the time, the model's
  figures side by side;
- ``python -m benchmarks.model_runs.training_steps``: ``forge optimize --train`` on the training
  example, then its training loop in fresh processes against eager and torch.compile;
- ``python -m benchmarks.model_runs.parallel_cost_model``: every plan the built-in search
  considers for a model, run on local ranks: predicted beside measured step time.
"""
