"""A kernel session: opened (or resumed) on its op, driven round by round by a search
strategy, each candidate verified and judged (``steps``), finalists confirmed against the null
control and banked, every step recorded under the session's lease.
"""
