"""Where a model comes from, in the probe's process: a KernelBench-style model file (``Model``,
``get_inputs``, ``get_init_inputs``) or ``module:factory`` in the user's package (the factory
builds the model, the module's ``get_inputs()`` gives its inputs). Its classes are imported under
the module's own name, so the op files forge carves out import the very classes a user's program
uses, and ``kernelize`` finds their instances.

While the model is built, each module's constructor arguments are recorded (a profile hook on
``__init__`` calls), so a class can be carved out with the arguments its instances were built with.
"""

from __future__ import annotations

import hashlib
import importlib
import keyword
import re
import sys
import types
import weakref
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from forge.core.errors import ProblemError
from forge.core.importing import import_file
from forge.core.model_records import InitCall
from forge.core.module_call import python_literal
from forge.core.problem import build_user_model

_VARARGS, _VARKEYWORDS = 0x04, 0x08  # code object flags


@dataclass
class LoadedModel:
    """A model's module, how to build it, and how to draw its inputs."""

    spec: str
    module: types.ModuleType
    model_file: str | None  # absolute; None for module:factory
    build: Callable[[], torch.nn.Module]
    inputs: Callable[[], list[Any]]


def module_name(path: Path) -> str:
    """The name a model file's module is imported under: its stem, made an identifier that names
    no standard-library module (KernelBench's ``44_MiniGPTBlock.py`` is ``m_44_MiniGPTBlock``,
    ``code.py`` is ``m_code``)."""
    stem = re.sub(r"\W", "_", path.stem)
    taken = stem in sys.stdlib_module_names or keyword.iskeyword(stem)
    return stem if stem.isidentifier() and not stem[0].isdigit() and not taken else f"m_{stem}"


def import_model_file(path: Path) -> types.ModuleType:
    """Import a model file by path under ``module_name`` (once per process), its folder on
    sys.path for its own imports; the carved op files import it the same way."""
    name = module_name(path)
    held = sys.modules.get(name)
    if held is not None:
        origin = getattr(held, "__file__", None)
        if origin is None or Path(origin).resolve() != path:
            raise ProblemError(
                f"{path}: another module named {name!r} is already imported ({origin}); rename the model file "
                "(its classes are imported by that name)"
            )
        return held
    if str(path.parent) not in sys.path:
        sys.path.insert(0, str(path.parent))
    return import_file(name, path)


def load_model(spec: str) -> LoadedModel:
    """Import the model's module; raises ProblemError naming what is missing."""
    path = Path(spec).expanduser()
    if spec.endswith(".py") or path.exists():
        if not path.is_file():
            raise ProblemError(f"{spec!r}: no such model file; pass a KernelBench-style .py file or module:factory")
        module = _call_user(spec, lambda: import_model_file(path.resolve()))
        missing = [n for n in ("Model", "get_inputs", "get_init_inputs") if not hasattr(module, n)]
        if missing:
            raise ProblemError(f"{spec}: the model file does not define {', '.join(missing)}")
        return LoadedModel(
            spec,
            module,
            str(path.resolve()),
            lambda: build_user_model(module.Model, list(module.get_init_inputs()), path.resolve(), module),
            lambda: list(module.get_inputs()),
        )
    name, _, factory = spec.partition(":")
    if not name or not factory:
        raise ProblemError(f"{spec!r}: pass a model file (.py) or module:factory (e.g. mypkg.models:build)")
    if str(Path.cwd()) not in sys.path:
        sys.path.insert(0, str(Path.cwd()))
    module = _call_user(spec, lambda: importlib.import_module(name))
    build = getattr(module, factory, None)
    if not callable(build) or not callable(getattr(module, "get_inputs", None)):
        raise ProblemError(f"{spec}: {name} must define {factory}() building the model and get_inputs() for its inputs")
    return LoadedModel(spec, module, None, build, lambda: list(module.get_inputs()))


def _call_user(spec: str, fn: Callable[[], Any]) -> Any:
    try:
        return fn()
    except ProblemError:
        raise
    except Exception as exc:
        raise ProblemError(f"{spec}: importing the model raised {type(exc).__name__}: {exc}") from exc


def _init_call(frame: types.FrameType, obj: torch.nn.Module) -> tuple[InitCall, list[Any]]:
    """The instance's constructor call as an op file can write it, and its positional arguments."""
    code = frame.f_code
    init = next(
        (c.__dict__["__init__"] for c in type(obj).__mro__ if _code_of(c.__dict__.get("__init__")) is code), None
    )
    defaults: dict[str, Any] = getattr(init, "__kwdefaults__", None) or {}
    names = code.co_varnames[: code.co_argcount]
    local = frame.f_locals
    named = [(n, local.get(n)) for n in names[1:]]
    rest = code.co_varnames[code.co_argcount :]
    keyword_only, rest = rest[: code.co_kwonlyargcount], rest[code.co_kwonlyargcount :]
    changed = [n for n in keyword_only if n not in defaults or local.get(n) != defaults[n]]
    if changed:
        return InitCall(refusal=f"it was built with keyword-only arguments ({', '.join(changed)})"), []
    if code.co_flags & _VARARGS:
        named += [(f"*{rest[0]}", v) for v in local.get(rest[0], ())]
        rest = rest[1:]
    # timm hands every layer **dd = {device: None, dtype: None}: None is what leaving them out gives
    given = [k for k, v in (local.get(rest[0]) or {}).items() if v is not None] if code.co_flags & _VARKEYWORDS else []
    if given:
        return InitCall(refusal=f"it was built with **{rest[0]} arguments ({', '.join(given)})"), []
    values = [v for _, v in named]
    same = _same_build(values)
    try:
        return InitCall(args=[python_literal(v) for v in values], same_build=same), values
    except TypeError:  # a config object, a layer class, a partial: the op takes them from the model
        return InitCall(from_model=True, digest=init_digest(values), same_build=same), values


def _same_build(values: list[Any]) -> str:
    """A key equal for two constructor calls only when each argument is the same literal or the
    very same object (the recorder keeps the arguments alive, so an id is never reused meanwhile)."""

    def part(v: Any) -> str:
        try:
            return python_literal(v)
        except TypeError:
            return f"<object {id(v)}>"

    return hashlib.sha256("\x00".join(part(v) for v in values).encode()).hexdigest()[:16]


def init_digest(values: list[Any]) -> str:
    """A hash of constructor arguments as their repr shows them (a config's every field), memory
    addresses left out: the op file holds it, so that a model whose layer is now built otherwise
    (another epsilon in its config) is another op, and an op file carved from the old one says so."""
    shown = re.sub(r" at 0x[0-9a-fA-F]+", "", repr(values))
    return hashlib.sha256(shown.encode()).hexdigest()[:16]


def _code_of(fn: Any) -> types.CodeType | None:
    return getattr(fn, "__code__", None)


class InitRecorder:
    """Records, while active, the outermost ``__init__`` call of each module built: how an op file
    can write it, and the arguments themselves."""

    def __init__(self) -> None:
        self._calls: dict[int, tuple[weakref.ref[torch.nn.Module], InitCall, list[Any]]] = {}

    def _seen(self, frame: types.FrameType, event: str, _arg: Any) -> None:
        if event != "call" or frame.f_code.co_name != "__init__" or not frame.f_code.co_argcount:
            return
        obj = frame.f_locals.get(frame.f_code.co_varnames[0])
        if isinstance(obj, torch.nn.Module) and self.of(obj) is None:
            self._calls[id(obj)] = (weakref.ref(obj), *_init_call(frame, obj))

    def of(self, module: torch.nn.Module) -> InitCall | None:
        held = self._calls.get(id(module))
        return held[1] if held is not None and held[0]() is module else None

    def args_of(self, module: torch.nn.Module) -> list[Any] | None:
        """The positional arguments ``module`` was built with (None: not built while recording)."""
        held = self._calls.get(id(module))
        return held[2] if held is not None and held[0]() is module and held[1].refusal is None else None

    def build(self, build: Callable[[], torch.nn.Module]) -> torch.nn.Module:
        previous = sys.getprofile()
        sys.setprofile(self._seen)
        try:
            model = build()
        finally:
            sys.setprofile(previous)
        if not isinstance(model, torch.nn.Module):
            raise ProblemError(f"building the model gave a {type(model).__name__}, not a torch.nn.Module")
        return model
