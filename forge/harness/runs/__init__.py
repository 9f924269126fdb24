"""A run of ``forge optimize``: its options and limits (``options``, ``limits``: time, budget, each
op's share), the ops run one after another here (``run``) or side by side on a Ray cluster
(``cluster``), a front end's hold on a run in a thread of its own (``control``), the checks before
it starts (``preflight_checks``), the report (``report``).
"""
