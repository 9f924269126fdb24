"""What the benchmark scripts share, and the helper servers the tests use too (tests import them
from here; nothing here imports ``tests``):

- ``page``: ``add_page_option`` and ``run_with_page``, a script's printout as a docs page headed
  by its command, machine, versions, date and commit;
- ``paths``: the checkout's root and the benchmarks' folder;
- ``command``: how the running script was started (``python -m ...``), to name it and restart it;
- ``user_code``: a module of a user's code imported from its folder, ``sys.path`` left alone;
- ``llm_server``: a local OpenAI-protocol server replaying scripted replies;
- ``pg_server``: a real PostgreSQL server in a temporary directory.

Nothing here is run as a script.
"""
