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

import copy
import hashlib
import io
from pathlib import Path
from typing import Any

import torch

from forge.core.errors import ProblemError
from forge.model_probe.source import InitRecorder, init_digest, load_model

_BUILT: dict[str, tuple[torch.nn.Module, InitRecorder] | None] = {}  # None: being built
_RECORDED: dict[tuple[str, str], Any] = {}  # the kept inputs' files read, by path and hash


def _built(spec: str) -> tuple[torch.nn.Module, InitRecorder]:
    """The model, built once per process as the probe built it (seed 0), with its recorder."""
    if spec in _BUILT:
        held = _BUILT[spec]
        if held is None:  # the model's own build reached an op of its own (a factory that kernelizes)
            raise ProblemError(f"{spec}: building the model needs one of its own carved ops, which needs the model")
        return held
    _BUILT[spec] = None
    try:
        loaded = load_model(spec)
        recorder = InitRecorder()
        with torch.random.fork_rng(devices=[]):  # the caller's random state is left as it was
            torch.manual_seed(0)
            model = recorder.build(loaded.build)
    except BaseException:
        del _BUILT[spec]
        raise
    _BUILT[spec] = (model, recorder)
    return model, recorder


def instance_init_args(spec: str, path: str, digest: str | None = None) -> list[Any]:
    """Copies of the positional arguments the model's module at ``path`` was built with
    (ProblemError when the model no longer has it, was not built while the model was, or is now
    built with other arguments than the op was carved from: ``digest``)."""
    model, recorder = _built(spec)
    try:
        module = model.get_submodule(path)
    except AttributeError as exc:
        raise ProblemError(f"{spec}: the model has no module {path!r} any more; carve it again (--modules)") from exc
    args = recorder.args_of(module)
    if args is None:
        raise ProblemError(f"{spec}: {path} ({type(module).__name__}) was not built while the model was built")
    if digest is not None and init_digest(args) != digest:
        raise ProblemError(
            f"{spec}: {path} ({type(module).__name__}) is now built with other arguments than this op was "
            "carved from; carve it again (--modules)"
        )
    # copies: a module or a config an argument holds is the model's, and every layer built from
    # the op (the reference, each candidate) would otherwise share and change it
    return copy.deepcopy(list(args))


def recorded_inputs(path: str | Path, sha256: str) -> list[dict[int, torch.Tensor]]:
    """The tensor values kept beside an op file carved for one instance (before ops stood for
    several: ``instance_inputs``), per call signature, as copies (ProblemError when the file is
    missing or is not the one the op file was carved with)."""
    held = _kept(path, sha256)
    if not isinstance(held, list):
        raise ProblemError(f"{path}: recorded inputs of an op carved for several instances; carve it again")
    return [{int(k): v.clone() for k, v in sig.items()} for sig in held]


def instance_inputs(path: str | Path, sha256: str, instance: str) -> list[dict[int, torch.Tensor]]:
    """The tensor values the model passed the instance at ``instance``, per call signature of the
    op, as copies, from the file kept beside an op file that stands for several instances
    (ProblemError when it is missing, is not the one the op file was carved with, or does not
    hold that instance)."""
    held = _kept(path, sha256)
    if not isinstance(held, dict) or "instances" not in held:
        raise ProblemError(f"{path}: not the recorded inputs of an op carved for several instances; carve it again")
    per_signature = held["instances"].get(instance)
    if per_signature is None:
        raise ProblemError(
            f"{path}: holds no recorded inputs for the instance {instance!r}; carve it again (--modules)"
        )
    tensors = held["tensors"]
    return [{int(i): tensors[j].clone() for i, j in sig.items()} for sig in per_signature]


def _kept(path: str | Path, sha256: str) -> Any:
    """The kept inputs' file as ``torch.load`` reads it, checked against its hash (once a process)."""
    key = (str(path), sha256)
    if key not in _RECORDED:
        file = Path(path)
        try:
            raw = file.read_bytes()
        except OSError as exc:
            raise ProblemError(f"{file}: the op's recorded inputs cannot be read ({exc}); carve it again") from exc
        if hashlib.sha256(raw).hexdigest() != sha256:
            raise ProblemError(f"{file}: not the recorded inputs this op was carved with; carve it again (--modules)")
        _RECORDED[key] = torch.load(io.BytesIO(raw), weights_only=True)  # the bytes just checked, not the file again
    return _RECORDED[key]


__all__ = ["instance_init_args", "instance_inputs", "recorded_inputs"]
