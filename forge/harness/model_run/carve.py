"""Carving a chosen class out of a model as an op file.

The op file imports the user's class by the name the model's module has (a model file is imported
by path under that name, as forge imported it; a user's program importing it by that name shares
the module, so ``kernelize`` finds the model's own instances). Its ``get_init_inputs()`` gives the
arguments its instances were built with: literals where an op file can write them, otherwise
those the instance was built with in the model itself, built where the op runs
(``forge.model_probe.carved``): config objects, layer classes and partials are no obstacle.

Its ``forge_call`` makes the call as the model made it (keyword arguments, ``None``, flags, tuples
of tensors), and its ``get_inputs()`` draws the call's tensors anew where that keeps their meaning
(activations, token ids in their range) and gives the values the model passed where it does not
(masks, position ids, rotary tables: the same whatever the model's inputs), kept beside the op
file (``NAME.inputs.pt``, its hash in the op file) and named in ``FORGE_FIXED_INPUTS``. The first
signature is the op's own; the others are its shape variants (``FORGE_SHAPES``): through size
constants where every tensor is drawn, through ``_SIGNATURE`` where some are kept.
"""

from __future__ import annotations

import hashlib
from pathlib import Path

from forge.core.model_records import CallUse, ModelProfile, TensorUse
from forge.harness.model_run.choose import OpGroup
from forge.harness.model_run.kept import Recorded, has_kept, kept_bytes, literal_calls


def _shape_source(dims: list[str]) -> str:
    return "(" + ", ".join(dims) + ("," if len(dims) == 1 else "") + ")"


def _draw(use: TensorUse, dims: list[str]) -> str:
    shape = _shape_source(dims)
    if use.dtype == "bool":
        return f"torch.rand({shape}) < 0.5"
    if use.low is not None and use.high is not None:
        return f"torch.randint({use.low}, {use.high + 1}, {shape}, dtype=torch.{use.dtype})"
    return f"torch.randn({shape}, dtype=torch.{use.dtype})"


def _sizes(group: OpGroup) -> tuple[list[str], list[list[str]], list[dict[str, int]]]:
    """Module constants for the inputs' sizes, the names per input, and the variants' overrides
    (signatures whose ranks and dtypes differ from the first are left out)."""
    first = group.signatures[0].tensors
    names = [[f"in{i}_{d}" for d in range(len(u.shape))] for i, u in enumerate(first)]
    lines = [f"{n} = {size}" for i, u in enumerate(first) for n, size in zip(names[i], u.shape, strict=True)]
    variants = []
    for sig in group.signatures[1:]:
        alike = len(sig.tensors) == len(first) and all(
            len(a.shape) == len(b.shape) and a.dtype == b.dtype for a, b in zip(sig.tensors, first, strict=True)
        )
        if alike:
            variants.append({n: s for i, u in enumerate(sig.tensors) for n, s in zip(names[i], u.shape, strict=True)})
    return lines, names, variants


def _import_lines(module: str, qualname: str) -> list[str]:
    """The class imported as ``Model`` (a nested class through its outermost one)."""
    outer, _, rest = qualname.partition(".")
    if not rest:
        return [f"from {module} import {outer} as Model  # noqa: E402,F401"]
    return [f"from {module} import {outer}  # noqa: E402", "", f"Model = {qualname}"]


def _model_import(profile: ModelProfile) -> list[str]:
    """A model file imported by path under the name forge gave it, once per process."""
    if profile.model_file is None:
        return []
    name = profile.import_name
    return [
        "from forge.core.importing import import_file",
        "",
        f"_MODEL_FILE = {profile.model_file!r}",
        f"_held = sys.modules.get({name!r})",
        "if _held is None:",
        "    sys.path.insert(0, os.path.dirname(_MODEL_FILE))  # the model's own imports",
        f"    import_file({name!r}, _MODEL_FILE)",
        'elif os.path.realpath(getattr(_held, "__file__", None) or "") != os.path.realpath(_MODEL_FILE):',
        f'    raise ImportError(f"{name!r} is another module ({{_held}}), not the model file {{_MODEL_FILE}}")',
        "",
    ]


def _plain_call(sig: CallUse) -> bool:
    return sig.call == ", ".join(f"x{i}" for i in range(len(sig.tensors)))


def _inputs_drawn(group: OpGroup) -> list[str]:
    """Size constants, FORGE_SHAPES and get_inputs() for an op whose tensors are all drawn."""
    sizes, names, variants = _sizes(group)
    draws = ",\n        ".join(_draw(u, names[i]) for i, u in enumerate(group.signatures[0].tensors))
    return [
        *sizes,
        *([f"FORGE_SHAPES = {variants!r}"] if variants else []),
        "",
        "",
        "def get_inputs():",
        f"    return [\n        {draws},\n    ]",
    ]


def _inputs_kept(group: OpGroup, sha256: str) -> list[str]:
    """_SIGNATURE, FORGE_SHAPES, FORGE_FIXED_INPUTS and get_inputs() for an op some of whose
    tensors are the model's own values (each instance's own: ``FORGE_INSTANCE`` picks them)."""
    fixed = [i for i, u in enumerate(group.signatures[0].tensors) if u.fixed]
    body = ["    kept = instance_inputs(_RECORDED, _RECORDED_SHA256, FORGE_INSTANCE)[_SIGNATURE]"]
    for k, sig in enumerate(group.signatures):
        parts = [f"kept[{i}]" if u.fixed else _draw(u, [str(s) for s in u.shape]) for i, u in enumerate(sig.tensors)]
        test = f"    if _SIGNATURE == {k}:" if k < len(group.signatures) - 1 else None
        indent = "        " if test else "    "
        body += [*([test] if test else []), f"{indent}return [", *(f"{indent}    {p}," for p in parts), f"{indent}]"]
    variants = [{"_SIGNATURE": k} for k in range(1, len(group.signatures))]
    return [
        "_SIGNATURE = 0  # which of the calls the model made (FORGE_SHAPES picks the others)",
        *([f"FORGE_SHAPES = {variants!r}"] if variants else []),
        f"FORGE_FIXED_INPUTS = {fixed!r}  # the model's own values (masks, positions, tables): not stressed",
        f"_RECORDED = os.path.join(os.path.dirname(os.path.abspath(__file__)), {group.name + '.inputs.pt'!r})",
        f"_RECORDED_SHA256 = {sha256!r}",
        "",
        "",
        "def get_inputs():",
        *body,
    ]


def _call_lines(group: OpGroup) -> list[str]:
    sig = group.signatures[0]
    if _plain_call(sig):
        return []
    params = ", ".join(f"x{i}" for i in range(len(sig.tensors)))
    return [
        "",
        "",
        f"def forge_call(model, {params}):",
        '    """The call as the model makes it (get_inputs() gives the tensors in this order)."""',
        f"    return model({sig.call})",
    ]


def _instance_lines(group: OpGroup) -> list[str]:
    """``_BUILT_WITH`` (per instance, by its path: the hash of the arguments the model built it
    with, or which of ``_CALLS`` built it), FORGE_INSTANCES (its keys) and FORGE_INSTANCE (the
    instance the op builds). The table is in the op file, which the bank keeps: the runtime builds
    each instance's kernel from it, wherever the op file went (the prompts show it cut short)."""
    if group.init_from_model:
        said = "a hash of the arguments it was built with"
        entries = [(m.path, repr(m.init.digest)) for m in group.members]
    else:
        said, calls = "its call in _CALLS", literal_calls(group)
        entries = [(m.path, str(calls.index(list(m.init.args)))) for m in group.members]
    n = len(group.members)
    built = "".join(f"\n    {path!r}: {value}," for path, value in entries)
    return [
        f"# This op stands for {n} instance{'s' if n != 1 else ''} of the model (FORGE_INSTANCES, by path).",
        "# Its kernel is searched on FORGE_INSTANCE; forge then verifies it on each other instance,",
        "# built with that instance's own arguments, and kernelize runs it on those it passed on: a",
        "# kernel that reads the layer's attributes from self holds on all of them, one that bakes them",
        "# in may not.",
        f"_BUILT_WITH = {{{built}\n}}  # per instance, {said}",
        "FORGE_INSTANCES = list(_BUILT_WITH)",
        f"FORGE_INSTANCE = {group.paths[0]!r}  # the one get_init_inputs() and get_inputs() build",
    ]


def _init_lines(group: OpGroup, profile: ModelProfile) -> list[str]:
    """The ``get_init_inputs()`` that builds the instance ``FORGE_INSTANCE`` names: with the
    arguments the model built it with (``_BUILT_WITH``: their hash), or its literal call."""
    if group.init_from_model:
        spec = profile.model_file or profile.source
        return [
            "def get_init_inputs():",
            "    # as the model built the instance (config objects, layer classes and all)",
            f"    return instance_init_args({spec!r}, FORGE_INSTANCE, _BUILT_WITH[FORGE_INSTANCE])",
        ]
    calls = ", ".join(f"lambda: [{', '.join(args)}]" for args in literal_calls(group))
    return [
        f"_CALLS = [{calls}]  # the instances' constructor calls",
        "",
        "",
        "def get_init_inputs():",
        "    return _CALLS[_BUILT_WITH[FORGE_INSTANCE]]()",
    ]


def op_source(group: OpGroup, profile: ModelProfile, recorded_sha256: str | None = None) -> str:
    """The op file's text (``recorded_sha256``: the hash of its kept inputs' file, where it has one)."""
    cls = group.cls
    module = profile.import_name if cls.module == profile.import_name else cls.module
    paths = [p or "the model itself" for p in group.paths]  # the root's path is ""
    shown = ", ".join(paths[:6]) + (f", ... ({len(paths)} in all)" if len(paths) > 6 else "")
    wanted = (("instance_init_args", group.init_from_model), ("instance_inputs", has_kept(group)))
    helper_names = [name for name, used in wanted if used]
    inputs = _inputs_kept(group, recorded_sha256 or "") if has_kept(group) else _inputs_drawn(group)
    return "\n".join(
        [
            f'"""{cls.name} as {Path(profile.source).name} runs it, carved out by `forge optimize --modules`.',
            "",
            f"Instances: {shown}; {group.share:.1%} of the model's time.",
            '"""',
            "",
            "import os",
            "import sys",
            "",
            "import torch",
            "",
            *_model_import(profile),
            *_import_lines(module, cls.name),
            *(
                [f"from forge.model_probe.carved import {', '.join(helper_names)}  # noqa: E402"]
                if helper_names
                else []
            ),
            "",
            f"FORGE_NAME = {group.name!r}",
            *_instance_lines(group),
            *inputs,
            *_call_lines(group),
            "",
            "",
            *_init_lines(group, profile),
            "",
        ]
    )


def _write_if_changed(path: Path, data: bytes) -> None:
    if not path.exists() or path.read_bytes() != data:  # unchanged files keep their times
        path.write_bytes(data)


def write_ops(
    groups: list[OpGroup], profile: ModelProfile, folder: Path, recorded: Recorded | None = None
) -> list[Path]:
    """Write each group's op file (and its kept inputs) into ``folder``; returns the op files'
    paths (in the groups' order)."""
    folder.mkdir(parents=True, exist_ok=True)
    paths = []
    for group in groups:
        path = folder / f"{group.name}.py"
        sha256 = None
        if has_kept(group):
            data = kept_bytes(group, recorded or {})
            sha256 = hashlib.sha256(data).hexdigest()
            _write_if_changed(folder / f"{group.name}.inputs.pt", data)
        _write_if_changed(path, op_source(group, profile, sha256).encode())
        paths.append(path)
    return paths
