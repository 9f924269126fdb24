"""What ``forge doctor`` reports: the machine's health for forge (``machine_checks``: devices, compilers,
the bank, LLM keys by name) and the report's records (``findings``, kept apart so a front end can
show a report without loading torch).
"""
