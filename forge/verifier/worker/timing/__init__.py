"""The timing that runs in a worker or a user-loop process: the timed loop both workers run
(``worker_loop``), the heap shaped before it (``heap_room``), and the user loop's process
(``user_loop_worker``, ``plain_loop``, ``process_watch``). The map of timing as a whole, parent
side included, is ``forge.verifier.parent.timing``."""
