"""What runs beside candidate code, in a worker process: ``main`` (its entry point, ``python -m
forge.verifier.worker.main (reference|candidate) FD``), the reference's side (``reference_side``,
``reference_cases``, ``cases``) and the candidate's (``candidate_side``, ``candidate_watch``,
``output_copies``, ``custom_op_checks``), what both sides run alike (``call_form``,
``gradients``, ``model_state``, ``call_profile``), and the workers' side of timing (``timing``).
Everything a worker reports is an observation the parent checks (``forge.verifier.parent``)."""
