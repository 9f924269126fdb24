"""Loading KernelBench-format op files (plus forge's optional FORGE_* extensions).

An op file defines ``class Model(nn.Module)`` (or imports it from the user's code),
``get_inputs()`` and ``get_init_inputs()``, with sizes as module-level constants. Optionally,
``forge_call(model, *inputs)`` says how the model is called (keyword arguments, ``None``, tuples of
tensors, as a model calls its layers; default ``model(*inputs)``) and ``FORGE_FIXED_INPUTS`` which
inputs hold meaningful values (a mask, position ids) that stress distributions leave as drawn. An
op carved from a model (``forge optimize --modules``) lists the instances it stands for in
``FORGE_INSTANCES`` and builds the one ``FORGE_INSTANCE`` names. Loading executes the file, so
it happens in the process that is allowed to run the user's reference: a verifier's reference
worker, or the user's own program.
"""

from __future__ import annotations

import ast
import inspect
import sys
import traceback
import types
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, ValidationError

from forge.core import shapes
from forge.core.carved_ops import INSTANCE, INSTANCES
from forge.core.errors import ProblemError, first_said
from forge.core.identity import normalized_hash, op_identity
from forge.core.importing import import_file, parse_python

_REQUIRED = ("Model", "get_inputs", "get_init_inputs")
_FORGE_DIR = Path(__file__).resolve().parents[1]  # frames in here are forge's, not the user's
_CALL_WRAPPER = str(Path("torch", "nn", "modules", "module.py"))  # nn.Module.__call__'s frames: noise to a user


def _is_forge_frame(filename: str) -> bool:
    return Path(filename).resolve().is_relative_to(_FORGE_DIR)


def _installed(filename: str) -> bool:
    """A file of an installed package (torch, transformers), or of Python itself."""
    return "site-packages" in Path(filename).parts or filename.startswith(sys.base_prefix)


def _shown(filename: str) -> bool:
    return not _is_forge_frame(filename) and not filename.endswith(_CALL_WRAPPER)


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
    instances: list[str] = field(default_factory=list)  # FORGE_INSTANCES: a carved op's, by path in its model

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

    def build_model(self, init_args: list[Any] | None = None) -> Any:
        """``Model(*get_init_inputs())`` (or ``Model(*init_args)``), the one place forge builds the
        user's model: a constructor that raises, or arguments that do not fit it, is the op file's
        mistake and reads as one (``ProblemError`` naming the file and line), for every caller."""
        args = self.init_inputs() if init_args is None else init_args
        return build_user_model(self.model_cls, args, self.spec.path, self.module)

    def forward_failed(self, exc: BaseException) -> ProblemError:
        """The error for a reference model that raised on its own inputs: the op file's mistake."""
        return forward_error(self.spec.path, exc, f" with {shapes.describe(self.overrides)}" if self.overrides else "")

    def check_runs(self, forward: bool) -> None:
        """``ProblemError`` unless the model builds, its inputs draw and (``forward``) its forward
        runs on them once, without gradients, here: the check before any session starts."""
        import torch

        model, inputs = self.build_model(), self.inputs()
        if not forward:
            return
        call = getattr(self.module, "forge_call", None)
        try:
            with torch.no_grad():
                out = call(model.eval(), *inputs) if callable(call) else model.eval()(*inputs)
        except Exception as exc:
            raise self.forward_failed(exc) from exc
        self.check_outputs(out)

    def check_outputs(self, out: Any) -> None:
        """``ProblemError`` unless the forward's result is tensors forge can compare."""
        from forge.core.module_call import layout_refusal  # it imports torch: loading an op file's source does not

        why = layout_refusal(out)
        if why is not None:
            raise ProblemError(
                f"{self.spec.path}: Model.forward must return tensors (a tensor, or a tuple, list, dict or "
                f"ModelOutput of them, None allowed): {why}"
            )

    def inputs(self) -> list[Any]:
        return _call_user(self, "get_inputs", check_tensors=True)


def _loc(path: Path, tb: types.TracebackType | None) -> str:
    """'file:line' of the innermost frame that is in the op file, else the file alone."""
    frames = [f for f in traceback.extract_tb(tb) if Path(f.filename) == path]
    return f"{path}:{frames[-1].lineno}" if frames else str(path)


def user_trace(exc: BaseException) -> str:
    """The exception with only the frames from the user's files (not forge's)."""
    frames = [f for f in traceback.extract_tb(exc.__traceback__) if _shown(f.filename)]
    lines = traceback.format_list(frames[-6:])
    return ("".join(lines) + f"{type(exc).__name__}: {exc}").strip()


def build_user_model(model_cls: type, args: list[Any], path: Path, module: types.ModuleType | None = None) -> Any:
    """``model_cls(*args)`` for the op (or model) file at ``path``; ``ProblemError`` when the
    arguments do not fit the constructor or it raises (``module``: the file's, for the line of its
    ``get_init_inputs``)."""
    unfit = _unfit_arguments(model_cls, args)
    if unfit is not None:
        where = _line_of(getattr(module, "get_init_inputs", None), path)
        name = model_cls.__qualname__
        raise ProblemError(
            f"{where}: get_init_inputs() returns {len(args)} value{'s' if len(args) != 1 else ''}, which "
            f"{name}{unfit[0]} does not take ({unfit[1]}); make get_init_inputs() return {name}'s "
            "constructor arguments, in order"
        )
    try:
        return model_cls(*args)
    except Exception as exc:
        raise ProblemError(
            f"{_user_loc(path, exc.__traceback__)}: building the model, {model_cls.__qualname__}(*get_init_inputs()), "
            f"raised {type(exc).__name__}: {first_said(exc) or '(no message)'}\n{user_trace(exc)}\n"
            f"fix its constructor, or what get_init_inputs() in {path.name} passes it"
        ) from exc


def forward_error(path: Path, exc: BaseException, where: str = "") -> ProblemError:
    """The error for a model (of the op or model file at ``path``) that raised on its own inputs
    (``where``: under which overrides), naming the line in the user's code."""
    return ProblemError(
        f"{_user_loc(path, exc.__traceback__)}: the reference Model fails on its own inputs{where}: "
        f"{type(exc).__name__}: {first_said(exc) or '(no message)'}\n{user_trace(exc)}\n"
        "fix its forward, or the inputs get_inputs() draws"
    )


def _unfit_arguments(model_cls: type, args: list[Any]) -> tuple[str, str] | None:
    """(the constructor's signature, why) when ``args`` cannot bind to it, else None."""
    import torch

    own = (
        model_cls.__mro__[: model_cls.__mro__.index(torch.nn.Module)] if issubclass(model_cls, torch.nn.Module) else ()
    )
    if own and not any("__init__" in vars(c) for c in own):  # nn.Module's (*args, **kwargs), which takes none
        return ("()", "it defines no __init__, so it takes no arguments") if args else None
    try:
        signature = inspect.signature(model_cls)
    except (TypeError, ValueError):  # no signature to read (a C class): the call itself says
        return None
    try:
        signature.bind(*args)
    except TypeError as exc:
        return str(signature), str(exc)
    return None


def _line_of(fn: Any, path: Path) -> str:
    """'file:line' of a function defined in the file at ``path``, else the file alone."""
    try:
        if fn is not None and Path(inspect.getsourcefile(fn) or "") == path:
            return f"{path}:{inspect.getsourcelines(fn)[1]}"
    except (OSError, TypeError):
        pass
    return str(path)


def _user_loc(path: Path, tb: types.TracebackType | None) -> str:
    """'file:line' of the innermost frame in the op file, else in the user's own code (outside
    forge and the installed packages: their package's layers), else the op file alone."""
    frames = traceback.extract_tb(tb)
    own = [f for f in frames if Path(f.filename) == path]
    theirs = [f for f in frames if not _is_forge_frame(f.filename) and not _installed(f.filename)]
    frame = own[-1] if own else theirs[-1] if theirs else None
    return f"{frame.filename}:{frame.lineno}" if frame is not None else str(path)


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
        raise ProblemError(f"{str(p)!r} cannot be read ({exc}); pass a KernelBench-format .py op file") from exc
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
            f"{_loc(spec.path, exc.__traceback__)}: the op file raised while being imported:\n{user_trace(exc)}"
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
    instances = _instances(spec, module, overrides or {})
    return Problem(
        spec=spec,
        module=module,
        model_cls=model_cls,
        tolerance=tol,
        declared_shapes=shapes,
        target_class_path=target,
        overrides=dict(overrides or {}),
        fixed_inputs=frozenset(fixed),
        instances=instances,
    )


def _instances(spec: ProblemSource, module: types.ModuleType, overrides: Mapping[str, Any]) -> list[str]:
    """``FORGE_INSTANCES`` (a carved op's instances, by path in its model) with ``FORGE_INSTANCE``
    among them (the one the op builds); [] for an op that declares none."""
    if not hasattr(module, INSTANCES):
        if INSTANCE in overrides:
            raise ProblemError(f"{spec.path}: not an op carved from a model (no FORGE_INSTANCES): drop --instance")
        return []
    listed = getattr(module, INSTANCES)
    if not isinstance(listed, list | tuple) or not listed or not all(isinstance(p, str) for p in listed):
        raise ProblemError(f"{spec.path}: FORGE_INSTANCES must be a list of module paths in the model (strings)")
    chosen = getattr(module, INSTANCE, None)
    if chosen not in listed:
        shown = ", ".join(map(repr, listed[:4])) + (", ..." if len(listed) > 4 else "")
        raise ProblemError(f"{spec.path}: FORGE_INSTANCE is {chosen!r}, not one of FORGE_INSTANCES ({shown})")
    return list(listed)


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
        raise ProblemError(f"{_loc(path, exc.__traceback__)}: {fn_name}() raised:\n{user_trace(exc)}") from exc
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
