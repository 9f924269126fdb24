"""Measuring an op's brief for the agents' prompts (the record is ``forge.core.op_brief``).

- ``measure``: ``measure_op_brief``, in the parent: runs the brief's process, bounded in time, and
  caches what it printed per op and machine;
- ``brief_worker``: that process (``python -m forge.verifier.briefing.brief_worker OP.py``): eager's
  profile, torch.compile's code and speed, the tolerances, the roofline and the runtime facts;
- ``inductor_code``: Inductor's output code trimmed to the kernels and the call that launches them.
"""
