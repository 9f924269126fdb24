"""The sandbox of a verification's candidate worker: its policy, from what the parent knows."""

from __future__ import annotations

from pathlib import Path

from forge.core import sandbox
from forge.core.errors import UsageError
from forge.verifier.processes.preload import model_file

NO_LANDLOCK = (
    "this kernel offers no Landlock (Linux 5.13 or later, enabled at boot), so forge cannot confine the "
    "candidate code it runs to its own files, away from your environment, network and processes. "
    "Run on a kernel that offers it, or pass --unsandboxed (setting sandbox = false) to run candidates "
    "unconfined, with your keys, files and network"
)


def sandboxed(env: dict[str, str], enabled: bool, reads: list[Path], device: str) -> dict[str, str]:
    """``env`` with the sandbox's policy for a worker that reads ``reads`` (besides the system and
    Python) and writes its own cache alone; ``env`` itself where the sandbox is off."""
    if not enabled:
        return env
    if sandbox.abi_version() == 0:
        raise UsageError(NO_LANDLOCK)
    policy = sandbox.policy_for(reads, [Path(env["FORGE_CACHE_DIR"])], gpu=device != "cpu")
    return {**env, sandbox.POLICY_ENV: policy.to_env()}


def op_reads(op_path: Path) -> list[Path]:
    """What a worker reads of the op: its file and folder and, for an op carved from a model, the
    model's file and folder (the worker builds the model from it)."""
    op = op_path.resolve()
    reads = [op, op.parent]
    try:
        model = model_file(op.read_text(errors="replace"))
    except (OSError, SyntaxError, ValueError):
        model = None
    if model is not None:
        model = (op.parent / model).resolve() if not model.is_absolute() else model.resolve()
        reads += [model, model.parent]
    return reads
