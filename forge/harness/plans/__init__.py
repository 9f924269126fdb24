"""A parallel-plan session (``forge plan``): its options, the session that walks plans up the
ladder (static rules, cost model, real runs), and the run that opens, resumes and banks it.
"""
