"""What an op file carved from a model calls where it runs (a verifier's worker, the user's
program when ``kernelize`` resolves the op): the constructor arguments of the instance it was
carved from, and the tensor values the model passed it that new draws would lose their meaning.

A class built from a config object, layer classes or partials (transformers' and timm's layers)
has constructor arguments no literal can write. The op file then builds the model here, the way
the model file builds it (seeded, recording each module's constructor call), and takes the
arguments the instance at its path was built with: ``Model(*get_init_inputs())`` builds the same
layer, configuration included, and so does a candidate's ``ModelNew(*get_init_inputs())``.
"""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any

import torch

from forge.core.errors import ProblemError
from forge.modelrun.source import InitRecorder, load_model

_BUILT: dict[str, tuple[torch.nn.Module, InitRecorder]] = {}


def _built(spec: str) -> tuple[torch.nn.Module, InitRecorder]:
    """The model, built once per process as the probe built it (seed 0), with its recorder."""
    if spec not in _BUILT:
        loaded = load_model(spec)
        recorder = InitRecorder()
        with torch.random.fork_rng(devices=[]):  # the caller's random state is left as it was
            torch.manual_seed(0)
            model = recorder.build(loaded.build)
        _BUILT[spec] = (model, recorder)
    return _BUILT[spec]


def instance_init_args(spec: str, path: str) -> list[Any]:
    """The positional arguments the model's module at ``path`` was built with (ProblemError when
    the model no longer has it, or it was not built while the model was)."""
    model, recorder = _built(spec)
    try:
        module = model.get_submodule(path)
    except AttributeError as exc:
        raise ProblemError(f"{spec}: the model has no module {path!r} any more; carve it again (--modules)") from exc
    args = recorder.args_of(module)
    if args is None:
        raise ProblemError(f"{spec}: {path} ({type(module).__name__}) was not built while the model was built")
    return list(args)


def recorded_inputs(path: str | Path, sha256: str) -> list[dict[int, torch.Tensor]]:
    """The tensor values kept beside an op file, per call signature (ProblemError when the file
    is missing or is not the one the op file was carved with)."""
    file = Path(path)
    try:
        raw = file.read_bytes()
    except OSError as exc:
        raise ProblemError(f"{file}: the op's recorded inputs cannot be read ({exc}); carve it again") from exc
    if hashlib.sha256(raw).hexdigest() != sha256:
        raise ProblemError(f"{file}: not the recorded inputs this op was carved with; carve it again (--modules)")
    held = torch.load(file, weights_only=True)
    return [{int(k): v for k, v in sig.items()} for sig in held]


__all__ = ["instance_init_args", "recorded_inputs"]
