"""Carving a chosen class out of a model as an op file: the user's class imported by the name the
model's module has (a model file is imported by path under that name, as forge imported it; a
user's program importing it by that name shares the module, so ``kernelize`` finds the model's
own instances), built with the arguments
its instances were built with, and called on inputs of the shapes they were called with (the
first signature the op's own, the others its shape variants, ``FORGE_SHAPES``)."""

from __future__ import annotations

from pathlib import Path

from forge.core.model_records import ModelProfile, TensorUse
from forge.harness.model_run.choose import OpGroup


def _draw(i: int, use: TensorUse, dims: list[str]) -> str:
    shape = "(" + ", ".join(dims) + ("," if len(dims) == 1 else "") + ")"
    if use.low is not None and use.high is not None:
        return f"torch.randint({use.low}, {use.high + 1}, {shape}, dtype=torch.{use.dtype})"
    return f"torch.randn({shape}, dtype=torch.{use.dtype})"


def _sizes(group: OpGroup) -> tuple[list[str], list[list[str]], list[dict[str, int]]]:
    """Module constants for the inputs' sizes, the names per input, and the variants' overrides
    (signatures whose ranks and dtypes differ from the first are left out)."""
    first = group.signatures[0]
    names = [[f"in{i}_{d}" for d in range(len(u.shape))] for i, u in enumerate(first)]
    lines = [f"{n} = {size}" for i, u in enumerate(first) for n, size in zip(names[i], u.shape, strict=True)]
    variants = []
    for sig in group.signatures[1:]:
        alike = len(sig) == len(first) and all(
            len(a.shape) == len(b.shape) and a.dtype == b.dtype for a, b in zip(sig, first, strict=True)
        )
        if alike:
            variants.append({n: s for i, u in enumerate(sig) for n, s in zip(names[i], u.shape, strict=True)})
    return lines, names, variants


def _import_lines(module: str, qualname: str) -> list[str]:
    """The class imported as ``Model`` (a nested class through its outermost one)."""
    outer, _, rest = qualname.partition(".")
    if not rest:
        return [f"from {module} import {outer} as Model  # noqa: E402,F401"]
    return [f"from {module} import {outer}  # noqa: E402", "", f"Model = {qualname}"]


def op_source(group: OpGroup, profile: ModelProfile) -> str:
    """The op file's text."""
    cls = group.cls
    module = profile.import_name if cls.module == profile.import_name else cls.module
    sizes, names, variants = _sizes(group)
    draws = ",\n        ".join(_draw(i, u, names[i]) for i, u in enumerate(group.signatures[0]))
    shown = ", ".join(group.paths[:6]) + (f", ... ({len(group.paths)} in all)" if len(group.paths) > 6 else "")
    path_lines = []
    if profile.model_file is not None:  # imported by path under the name forge gave it, once per process
        name = profile.import_name
        path_lines = [
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
    init = ", ".join(group.init_args)
    variant_line = [f"FORGE_SHAPES = {variants!r}"] if variants else []
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
            *path_lines,
            *_import_lines(module, cls.name),
            "",
            f"FORGE_NAME = {group.name!r}",
            *sizes,
            *variant_line,
            "",
            "",
            "def get_inputs():",
            f"    return [\n        {draws},\n    ]",
            "",
            "",
            "def get_init_inputs():",
            f"    return [{init}]",
            "",
        ]
    )


def write_ops(groups: list[OpGroup], profile: ModelProfile, folder: Path) -> list[Path]:
    """Write each group's op file into ``folder``; returns the paths (in the groups' order)."""
    folder.mkdir(parents=True, exist_ok=True)
    paths = []
    for group in groups:
        path = folder / f"{group.name}.py"
        text = op_source(group, profile)
        if not path.exists() or path.read_text() != text:  # unchanged files keep their times
            path.write_text(text)
        paths.append(path)
    return paths
