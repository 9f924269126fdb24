"""Loading KernelBench-format op files (plus forge's optional FORGE_* extensions).

An op file defines ``class Model(nn.Module)`` (or imports it from the user's code),
``get_inputs()`` and ``get_init_inputs()``, with sizes as module-level constants. Optionally,
``forge_call(model, *inputs)`` says how the model is called (keyword arguments, ``None``, tuples of
tensors, as a model calls its layers; default ``model(*inputs)``) and ``FORGE_FIXED_INPUTS`` which
inputs hold meaningful values (a mask, position ids) that stress distributions leave as drawn. Loading executes
the file, so it happens in the process that is allowed to run the user's reference: a verifier's
reference worker, or the user's own program.
"""

from __future__ import annotations

import ast
import sys
import traceback
import types
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, ValidationError

from forge.core.errors import ProblemError
from forge.core.identity import normalized_hash, op_identity
from forge.core.importing import import_file, parse_python

_REQUIRED = ("Model", "get_inputs", "get_init_inputs")


class Tolerance(BaseModel):
    """``FORGE_TOLERANCE``: absolute and relative tolerance applied to every output."""

    model_config = ConfigDict(extra="forbid")
    atol: float
    rtol: float


@dataclass(frozen=True)
class ProblemSource:
    """What can be known about an op file without running it."""

    path: Path
    source: str
    name: str
    op_hash: str


@dataclass
class Problem:
    """A loaded op file: the module and the pieces forge uses."""

    spec: ProblemSource
    module: types.ModuleType
    model_cls: type
    tolerance: Tolerance | None
    declared_shapes: list[dict[str, Any]] | None
    target_class_path: str | None
    overrides: dict[str, Any] = field(default_factory=dict)
    fixed_inputs: frozenset[int] = frozenset()  # FORGE_FIXED_INPUTS: indices into get_inputs()

    @property
    def name(self) -> str:
        return self.spec.name

    def size_constants(self) -> dict[str, int]:
        """Module-level integer constants: the sizes a shape variant may change."""
        return {
            k: v
            for k, v in vars(self.module).items()
            if type(v) is int and not k.startswith("_") and not k.startswith("FORGE_")
        }

    def init_inputs(self) -> list[Any]:
        return _call_user(self, "get_init_inputs", check_tensors=False)

    def inputs(self) -> list[Any]:
        return _call_user(self, "get_inputs", check_tensors=True)


def _loc(path: Path, tb: types.TracebackType | None) -> str:
    """'file:line' of the innermost frame that is in the op file, else the file alone."""
    frames = [f for f in traceback.extract_tb(tb) if Path(f.filename) == path]
    return f"{path}:{frames[-1].lineno}" if frames else str(path)


def _user_trace(exc: BaseException, path: Path) -> str:
    """The exception with only the frames from the user's files (not forge's)."""
    frames = [f for f in traceback.extract_tb(exc.__traceback__) if "/forge/" not in f.filename]
    lines = traceback.format_list(frames[-6:])
    return ("".join(lines) + f"{type(exc).__name__}: {exc}").strip()


def read_problem_source(path: str | Path) -> ProblemSource:
    """Read and syntax-check an op file; raises ProblemError naming the file and line."""
    p = Path(path).expanduser()
    if not p.exists():
        raise ProblemError(f"{str(p)!r}: no such op file; pass the path of a KernelBench-format .py file")
    if not p.is_file():
        raise ProblemError(f"{str(p)!r} is not a file; pass the path of a KernelBench-format .py file")
    try:
        source = p.read_text()
    except (OSError, UnicodeDecodeError) as exc:
        raise ProblemError(f"{str(p)!r} cannot be read: {exc}") from exc
    try:
        tree = parse_python(source, filename=str(p))
    except SyntaxError as exc:
        raise ProblemError(
            f"{p}:{exc.lineno}:{exc.offset or 0}: syntax error in op file: {exc.msg}; fix the file and retry"
        ) from exc
    name = p.stem
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == "FORGE_NAME" for t in node.targets):
            try:
                value = ast.literal_eval(node.value)
            except ValueError:
                value = None
            if not isinstance(value, str) or not value.strip():
                raise ProblemError(f"{p}:{node.lineno}: FORGE_NAME must be a non-empty string literal")
            name = value.strip()
    return ProblemSource(path=p.resolve(), source=source, name=name, op_hash=normalized_hash(source))


def _exec_module(spec: ProblemSource) -> types.ModuleType:
    # A unique module name per load: two op files with the same stem must not collide, and the
    # candidate worker registers the reference module under its own alias.
    mod_name = f"forge_op_{spec.path.stem}_{spec.op_hash[:10]}"
    for d in (str(spec.path.parent), str(Path.cwd())):
        if d not in sys.path:
            sys.path.insert(0, d)
    try:
        module = import_file(mod_name, spec.path)
    except Exception as exc:
        raise ProblemError(
            f"{_loc(spec.path, exc.__traceback__)}: the op file raised while being imported:\n"
            f"{_user_trace(exc, spec.path)}"
        ) from exc
    return module


def _validate_extensions(
    spec: ProblemSource, module: types.ModuleType
) -> tuple[Tolerance | None, list[dict[str, Any]] | None]:
    tol = None
    if hasattr(module, "FORGE_TOLERANCE"):
        try:
            tol = Tolerance.model_validate(module.FORGE_TOLERANCE)
        except ValidationError as exc:
            raise ProblemError(
                f"{spec.path}: FORGE_TOLERANCE must be a dict like {{'atol': 1e-4, 'rtol': 1e-4}} "
                f"({exc.errors()[0]['msg']})"
            ) from exc
    shapes = None
    if hasattr(module, "FORGE_SHAPES"):
        raw = module.FORGE_SHAPES
        if not isinstance(raw, list | tuple) or not all(isinstance(d, Mapping) for d in raw):
            raise ProblemError(f"{spec.path}: FORGE_SHAPES must be a list of dicts of module constants to override")
        shapes = []
        for i, d in enumerate(raw):
            unknown = [k for k in d if not hasattr(module, k)]
            if unknown:
                raise ProblemError(
                    f"{spec.path}: FORGE_SHAPES[{i}] names {unknown!r}, which the op file does not define; "
                    "use the names of its module-level constants"
                )
            shapes.append(dict(d))
    return tol, shapes


def load_problem(path: str | Path | ProblemSource, overrides: Mapping[str, Any] | None = None) -> Problem:
    """Execute an op file and check its KernelBench interface. Raises ProblemError."""
    spec = path if isinstance(path, ProblemSource) else read_problem_source(path)
    module = _exec_module(spec)
    missing = [n for n in _REQUIRED if not hasattr(module, n)]
    if missing:
        raise ProblemError(
            f"{spec.path}: the op file does not define {', '.join(missing)}; a KernelBench op file needs "
            "class Model(nn.Module), get_inputs() and get_init_inputs()"
        )
    import torch

    model_cls = module.Model
    if not (isinstance(model_cls, type) and issubclass(model_cls, torch.nn.Module)):
        raise ProblemError(f"{spec.path}: Model must be a torch.nn.Module subclass, got {model_cls!r}")
    for fn in ("get_inputs", "get_init_inputs"):
        if not callable(getattr(module, fn)):
            raise ProblemError(f"{spec.path}: {fn} must be a function")
    if hasattr(module, "forge_call") and not callable(module.forge_call):
        raise ProblemError(f"{spec.path}: forge_call must be a function (model, *inputs) that calls the model")
    tol, shapes = _validate_extensions(spec, module)
    fixed = getattr(module, "FORGE_FIXED_INPUTS", [])
    if not isinstance(fixed, list | tuple) or not all(type(i) is int and i >= 0 for i in fixed):
        raise ProblemError(f"{spec.path}: FORGE_FIXED_INPUTS must be a list of indices into get_inputs()")
    target = None
    if model_cls.__module__ != module.__name__:
        target = f"{model_cls.__module__}:{model_cls.__qualname__}"
    for k, v in (overrides or {}).items():
        setattr(module, k, v)
    return Problem(
        spec=spec,
        module=module,
        model_cls=model_cls,
        tolerance=tol,
        declared_shapes=shapes,
        target_class_path=target,
        overrides=dict(overrides or {}),
        fixed_inputs=frozenset(fixed),
    )


def reference_hash(problem: Problem) -> str:
    """The op's identity hash: its source, plus the source of an imported Model class."""
    return op_identity(problem.spec.op_hash, problem.model_cls if problem.target_class_path else None)


def _call_user(problem: Problem, fn_name: str, check_tensors: bool) -> list[Any]:
    import torch

    path = problem.spec.path
    fn: Callable[[], Any] = getattr(problem.module, fn_name)
    try:
        result = fn()
    except Exception as exc:
        raise ProblemError(f"{_loc(path, exc.__traceback__)}: {fn_name}() raised:\n{_user_trace(exc, path)}") from exc
    if not isinstance(result, list | tuple):
        raise ProblemError(f"{path}: {fn_name}() must return a list, got {type(result).__name__}")
    if check_tensors:
        for i, item in enumerate(result):
            if not isinstance(item, torch.Tensor):
                raise ProblemError(
                    f"{path}: get_inputs() element {i} is a {type(item).__name__}, not a torch.Tensor; "
                    "make every input a tensor (put fixed scalars in get_init_inputs)"
                )
    return list(result)
