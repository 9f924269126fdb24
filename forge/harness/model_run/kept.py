"""What a carved op keeps of each instance it stands for: the model's own values its calls were
given (``NAME.inputs.pt`` beside the op file, each distinct tensor once, its hash in the op file),
the distinct literal constructor calls of a class built from literals, and which instances are
built and called exactly alike (``twins``: one check stands for them all)."""

from __future__ import annotations

import hashlib
import io

import torch

from forge.harness.model_run.choose import OpGroup

Recorded = dict[str, list[dict[int, torch.Tensor]]]  # per instance path, per signature: kept tensors


def has_kept(group: OpGroup) -> bool:
    """Some of the op's call tensors are the model's own values (a mask, a rotary table)."""
    return any(u.fixed for sig in group.signatures for u in sig.tensors)


def literal_calls(group: OpGroup) -> list[list[str]]:
    """The distinct literal constructor calls of a group built from literals, in first-seen order."""
    calls: list[list[str]] = []
    for m in group.members:
        if list(m.init.args) not in calls:
            calls.append(list(m.init.args))
    return calls


def _kept_index(group: OpGroup, recorded: Recorded) -> tuple[list[torch.Tensor], dict[str, list[dict[int, int]]]]:
    """The group's kept tensors, each distinct one once (a mask every layer is given), and per
    instance, per signature of the op, which of them it holds: the instance's own values where it
    made that call, else those of the instance the call was first seen on."""
    tensors: list[torch.Tensor] = []
    seen: dict[tuple[str, tuple[int, ...], tuple[int, ...], str], int] = {}

    def stored(t: torch.Tensor) -> int:
        raw = t.detach().cpu().contiguous().reshape(-1).view(torch.uint8).numpy().tobytes()
        key = (str(t.dtype), tuple(t.shape), tuple(t.stride()), hashlib.sha256(raw).hexdigest())  # layout too
        if key not in seen:
            seen[key] = len(tensors)
            tensors.append(t)
        return seen[key]

    def held(path: str, k: int) -> dict[int, torch.Tensor]:
        values = recorded.get(path, [])
        return values[k] if k < len(values) else {}

    instances: dict[str, list[dict[int, int]]] = {}
    for member in group.members:
        per_signature = []
        for sig, (origin, k) in zip(group.signatures, group.origins, strict=True):
            own = next((j for j, s in enumerate(member.signatures) if s == sig), None)
            values = held(member.path, own) if own is not None else held(origin, k)
            per_signature.append({i: stored(values[i]) for i, u in enumerate(sig.tensors) if u.fixed and i in values})
        instances[member.path] = per_signature
    return tensors, instances


def kept_bytes(group: OpGroup, recorded: Recorded) -> bytes:
    """The group's kept tensors as ``torch.save`` writes them (``instance_inputs`` reads them)."""
    tensors, instances = _kept_index(group, recorded)
    buffer = io.BytesIO()
    torch.save({"tensors": tensors, "instances": instances}, buffer)
    return buffer.getvalue()


def twins(group: OpGroup, recorded: Recorded | None = None) -> dict[str, str]:
    """Per instance of the group, the first instance built and called exactly as it is: the same
    constructor arguments (equal literals, the very same objects: ``InitCall.same_build``),
    configuration and recorded values (itself where none comes before it). The op file builds
    them alike, so one verification of a kernel on the first is the verification of it on each."""
    _, instances = _kept_index(group, recorded or {}) if has_kept(group) else ([], {})
    first: dict[str, str] = {}
    found: dict[str, str] = {}
    for member in group.members:
        if not member.init.same_build:  # how it was built is not known well enough to share a check
            found[member.path] = member.path
            continue
        key = "\n".join((member.init.same_build, member.config, repr(instances.get(member.path))))
        found[member.path] = first.setdefault(key, member.path)
    return found
