"""Worker processes, parent side and child side: how each is started, with what environment,
confined how, and how the parent talks to it. What a worker does once it runs is the verifier's
(``forge.verifier.worker``); the brief's and the user loop's processes
start the same way.

- ``worker_env``: the environment every process that runs an op or a candidate starts with (the
  verification's two workers, the brief's process, the user loop's processes): the allowlist of
  ``sandbox.scrubbed``, the workers' own caches, the thread count and the allocator and OpenMP
  settings both sides of a timing share;
- ``sandboxing``: the sandbox policy of a process that runs candidate code, from what the parent knows;
- ``template``, ``template_process``: pre-imported interpreters that fork the verification workers;
- ``worker_process``: one worker spawned and policed (its memory, its deadline, how it ended);
  the frames it exchanges with the parent are ``forge.verifier.protocol``'s.
"""
