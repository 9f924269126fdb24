"""A parallel-plan session (``forge plan``): its options (``options``), the session that walks
plans up the ladder (``session``: static rules, cost model, real runs), and the run that
opens or resumes it and banks the fastest plan (``run``: ``optimize_plan``).
"""
