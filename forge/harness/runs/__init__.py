"""A run of ``forge optimize``: its options and limits (time, budget, each op's share), the ops
run one after another here or side by side on a Ray cluster, the preflight checks, the report.
"""
