"""The worker template: ``python -m forge.verifier.processes.template_process FD``.

A clean interpreter that imports what every worker needs (the worker module, which binds the
clocks first, then torch and both sides of the verifier) and then only forks: each request from
the parent becomes a child that is set up exactly as an exec'd worker would be (its own session,
the memory and file-size limits, death with its parent, its output captured, the verification's
environment and working directory) and runs ``worker.main``. The template never loads an op or a
candidate, never runs a torch operator (a fork after the OpenMP pool started would hang), and
never initialises CUDA, so every child starts from the same state a fresh interpreter would
reach after its imports, about a second sooner.

The parent asks over a Unix socket of packets (SOCK_SEQPACKET: a message is never split): one
JSON request and two file descriptors (the worker's end of its channel, its capture file); the
template answers ``{"pid": N}``, and ``{"exit": N, "status": S}`` when a child ends (S as
``Popen.returncode``: negative for a signal).
"""

from __future__ import annotations

import gc
import json
import os
import select
import socket
import sys
import tempfile
from typing import Any

import forge.verifier.worker.main as worker  # first: binds the clocks before torch is imported
from forge.verifier.processes.preload import PRELOAD, preload, thread_count
from forge.verifier.processes.template import worker_limits
from forge.verifier.processes.worker_env import CPU_ISA


def _preload() -> None:
    import torch  # noqa: F401

    import forge.verifier.worker.candidate_side
    import forge.verifier.worker.reference_side  # noqa: F401


def _child(request: dict[str, Any], chan_fd: int, out_fd: int, control: socket.socket) -> None:
    """In the forked child: become the worker an exec would have started, then run it."""
    try:
        control.close()
        os.setsid()
        worker_limits(int(request["memory_limit_mb"]))
        null = os.open(os.devnull, os.O_RDONLY)
        os.dup2(null, 0)
        os.dup2(out_fd, 1)
        os.dup2(out_fd, 2)
        os.close(null)
        os.close(out_fd)
        os.chdir(request["cwd"])
        # the user's modules beside the op, after the installation's (the template runs with -P:
        # a project's secrets.py must not be imported for the standard library's)
        sys.path.append(request["cwd"])
        os.environ.clear()
        os.environ.update(request["env"])
        tempfile.tempdir = None  # read again from this worker's TMPDIR, not the template's
        _own_header_folder()
        sys.argv = ["-m", str(request["role"]), str(chan_fd)]
        code = worker.main([str(request["role"]), str(chan_fd)])
    except BaseException:  # the child must never return into the template's loop
        import traceback

        traceback.print_exc()
        code = 70
    sys.stdout.flush()
    os._exit(code)


_cpu_isa_found = False


def _find_cpu_isa(request: dict[str, Any]) -> None:
    """Before forking a worker that will compile for the CPU (``worker_env.compiles_for_cpu``), once
    per template: Inductor's vector instruction sets, found with its probes compiled into forge's
    folder the request names; the children inherit the cached answer. It runs no torch operator and
    starts no thread (tests/verifier/test_preload.py). The import waits for the first such worker:
    a template whose workers never compile does not pay its second."""
    global _cpu_isa_found
    folder = request["env"].get(CPU_ISA)
    if _cpu_isa_found or not folder:
        return
    _cpu_isa_found = True
    before = os.environ.get("TORCHINDUCTOR_CACHE_DIR")
    os.environ["TORCHINDUCTOR_CACHE_DIR"] = folder
    try:
        from torch._inductor.cpu_vec_isa import pick_vec_isa

        pick_vec_isa()
    except Exception:  # the worker finds them itself, as it would have
        pass
    finally:
        if before is None:
            os.environ.pop("TORCHINDUCTOR_CACHE_DIR", None)
        else:
            os.environ["TORCHINDUCTOR_CACHE_DIR"] = before


def _own_header_folder() -> None:
    """Inductor's codecache names its precompiled headers' folder when it is imported, from the
    temporary folder of the moment: imported in the template (``_find_cpu_isa``), it named the
    template's, where a confined worker may not write. The worker's own, as an exec'd worker's
    (the one path of that import that depends on the environment, tests/verifier/test_preload.py)."""
    codecache = sys.modules.get("torch._inductor.codecache")
    if codecache is None or not hasattr(codecache, "_HEADER_DIR"):
        return
    from torch._inductor.runtime.cache_dir_utils import default_cache_dir

    header = os.path.join(default_cache_dir(), "precompiled_headers")
    vars(codecache).update(_HEADER_DIR=header, _HEADER_LOCK_DIR=os.path.join(header, "locks"))


def _reap(control: socket.socket) -> None:
    while True:
        try:
            pid, status = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return
        code = -os.WTERMSIG(status) if os.WIFSIGNALED(status) else os.WEXITSTATUS(status)
        control.send(json.dumps({"exit": pid, "status": code}).encode())


def _preload_libraries(argv: list[str]) -> None:
    """The op's installed libraries (``preload``); one that started a thread makes forking
    unsafe, so the template then starts again without them (the same socket, a clean process)."""
    extras = os.environ.get(PRELOAD, "")
    if not extras:
        return
    before = thread_count()
    preload(extras)
    if thread_count() > before:
        env = {k: v for k, v in os.environ.items() if k != PRELOAD}
        command = [sys.executable, "-s", "-P", "-m", "forge.verifier.processes.template_process", *argv]
        os.execve(sys.executable, command, env)


def main(argv: list[str]) -> int:
    control = socket.socket(fileno=int(argv[0]))
    _preload()
    _preload_libraries(argv)
    gc.collect()
    gc.freeze()  # what the template holds is never scanned again in a child (nor copied for it)
    control.send(b'{"ready": true}')
    while True:
        ready, _, _ = select.select([control], [], [], 0.05)
        _reap(control)
        if not ready:
            continue
        data, fds, _flags, _addr = socket.recv_fds(control, 1 << 20, 2)
        if not data:
            return 0
        if len(fds) != 2:
            for fd in fds:
                os.close(fd)
            control.send(b'{"error": "a request needs two file descriptors"}')
            continue
        request = json.loads(data)
        _find_cpu_isa(request)
        sys.stdout.flush()
        sys.stderr.flush()
        pid = os.fork()
        if pid == 0:
            _child(request, fds[0], fds[1], control)
        for fd in fds:
            os.close(fd)
        control.send(json.dumps({"pid": pid, "seq": request.get("seq")}).encode())


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
