"""The bank's operations a front end calls: list, show, export, import, re-verify, remove
(kernels and plans), the stored sessions, and a long-lived reader for a UI that polls.
"""
