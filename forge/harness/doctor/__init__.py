"""``forge doctor``: what this machine gives forge (checks) and the report's records (kept
apart so a front end can show a report without loading torch).
"""
