"""A model-level run (``run.optimize_model``; the package's names are on ``forge.harness``):

- ``choose``: which module classes to optimize, and their ops (one per state and call the
  instances share, whatever their plain attributes);
- ``carve``: each op's file (the instances it stands for, each one's arguments and kept values)
  and which instances are built and called exactly alike (``twins``);
- ``searches``: the ops searched in waves, each banked kernel checked on its op's instances, the
  instances it failed on split off as ops of their own;
- ``instances``: one kernel checked on every instance of its op (``kernel_instances`` in the bank);
- ``run``: profile, choose, carve, search, prove; ``report``, ``compile_evidence`` and
  ``training_evidence``: what the proof writes back.
"""
