"""What ``forge doctor`` reports: the machine's health for forge (``checks``: devices, compilers,
the bank, LLM keys by name) and the report's records (``report``, kept apart so a front end can
show a report without loading torch).
"""
