"""A captured Inductor module written as a candidate file (``ModelNew``).

The file carries Inductor's output module as text and runs it in a namespace of its own when it
is imported (its kernels are built then, from Inductor's on-disk cache where the coder built
them already). ``forward`` gathers the arguments ``call`` takes in the order the capture
recorded (the module's own tensors, read on every call so that new weights are used, and the op's
inputs) and returns the outputs in the reference's structure. In training mode it runs the same
code where the op is the same there, code captured in training mode where the op is another
(BatchNorm), and the reference where it is random (dropout). On inputs or module state of other
shapes, strides, dtypes or device than compiled for, the reference runs, as for every built-in
kernel."""

from __future__ import annotations

from typing import Any

import torch

from forge.agents.builtin.inductor.capture import Captured, InputArg, OpCall, StateArg, TrainMode
from forge.agents.builtin.py_snippets import ATTR_SOURCE


def _code_literal(code: str) -> str:
    """``code`` as a Python string literal: raw and triple-quoted where it can be, to stay readable."""
    if '"""' not in code and not code.endswith("\\"):
        return 'r"""' + code + '"""'
    return repr(code)


def _argument(arg: StateArg | InputArg, state_slot: dict[str, int]) -> str:
    return f"xs[{arg.index}]" if isinstance(arg, InputArg) else f"s[{state_slot[arg.path]}]"


def _direct(arg: StateArg) -> str:
    """``arg``'s tensor read from its owner's tables as ``nn.Module.__getattr__`` finds it, with
    no Python call per step of its path (a model's hundred-odd weights through ``getattr`` took a
    millisecond a call, an eighth of ConvNeXt-atto's time)."""
    *owners, leaf = arg.path.split(".")
    where = "self" + "".join(f"._modules[{part!r}]" for part in owners)
    return f"{where}.{arg.table or '__dict__'}[{leaf!r}]"


def _kernel_method(name: str, captured: Captured, code: str, state: str) -> str:
    """A method returning the op's outputs flat, from ``code`` (the module holding Inductor's
    code) called on the module's tensors (``state``: the name of their table of shapes) and the
    inputs; None where the module's tensors are not what the code was compiled for."""
    held = [arg for arg, _ in captured.state]
    slot = {arg.path: k for k, arg in enumerate(held)}
    args = ", ".join(_argument(a, slot) for a in captured.args)
    computed = iter(range(sum(1 for o in captured.outputs if o is None)))
    outs = [f"xs[{o}]" if o is not None else f"outs[{next(computed)}]" for o in captured.outputs]
    lines = []
    if held:
        lines += [
            "try:",
            f"    s = [{', '.join(_direct(a) for a in held)}]",
            "except KeyError:  # a tensor held another way now (a parametrization): found as the model finds it",
            f"    s = [_attr(self, p) for p in {[a.path for a in held]!r}]",
            f"if [(t.shape, t.stride(), t.dtype) for t in s] != {state}:  # other weights' shapes: the reference",
            "    return None",
        ]
    lines += ["with torch.no_grad():", f"    outs = {code}.call([{args}])", f"return ({', '.join(outs)},)"]
    return f"\n    def {name}(self, xs):\n" + "".join(f"        {line}\n" for line in lines)


def _chosen(train: TrainMode) -> str:
    """The kernel of the module's mode, as an expression (None: the reference runs)."""
    if train is TrainMode.OTHER:
        return "self._kernel_train(xs) if self.training else self._kernel(xs)"
    if train is TrainMode.RANDOM:  # dropout draws random numbers in training mode: the reference there
        return "None if self.training else self._kernel(xs)"
    return "self._kernel(xs)"  # the same op in both modes


def _code_module(name: str, captured: Captured) -> str:
    """Source that runs Inductor's output module as the module ``name``, its kernels built in
    the importing thread: with more compile threads, Inductor starts a pool whose threads and
    processes outlive the import (a timer thread is born when the pool's first job ends, seconds
    later, in the middle of timed calls) and sit in the user's program for nothing."""
    return (
        f"{name}_CODE = {_code_literal(captured.code)}\n"
        f'{name} = types.ModuleType("forge{name}")\n'
        f"with _inductor_config.patch(compile_threads=1):\n"
        f'    exec(compile({name}_CODE, "<forge: Inductor\'s code{name}>", "exec"), {name}.__dict__)\n'
    )


def _state_table(name: str, captured: Captured) -> str:
    specs = ", ".join(f"(torch.Size({list(s.shape)!r}), {tuple(s.stride)!r}, {s.dtype})" for _, s in captured.state)
    return f"{name} = [{specs}]\n"


def _model_new(call: str | None, train: TrainMode) -> str:
    if call is None:
        head = "    def forward(self, *xs):\n        if not _built_for(xs):"
        reference = "super().forward(*xs)"
    else:
        head = (
            "    def forward(self, *args, **kwargs):\n"
            "        xs = match_call(_CALL, args, kwargs)\n"
            "        if xs is None or not _built_for(xs):"
        )
        reference = "super().forward(*args, **kwargs)"
    return f"""class ModelNew(Model):
{head}  # another call, or other shapes, dtypes or device: the reference
            return {reference}
        outs = {_chosen(train)}
        if outs is None:
            return {reference}
        return rebuild_output(_LAYOUT, outs)
"""


def render(
    eval_code: Captured, train_code: Captured | None, train: TrainMode, op: OpCall, shown: dict[str, Any]
) -> str:
    """The candidate file: Inductor's code for eval mode (``eval_code``) and, where training mode
    is another op, for training mode (``train_code``); ``shown``: the Inductor options."""
    inputs = [(list(s.shape), list(s.stride), s.dtype) for s in eval_code.inputs]
    on_gpu = eval_code.device.startswith("cuda")
    kind = "Triton kernels" if on_gpu else "C++/OpenMP kernels"
    # Inductor's Triton kernels assume the 16-byte alignment their inputs had when compiled
    aligned = " and x.storage_offset() * x.element_size() % 16 == 0" if on_gpu else ""
    modules = _code_module("_eval", eval_code) + _state_table("_EVAL_STATE", eval_code)
    methods = _kernel_method("_kernel", eval_code, "_eval", "_EVAL_STATE")
    if train_code is not None:
        modules += _code_module("_train", train_code) + _state_table("_TRAIN_STATE", train_code)
        methods += _kernel_method("_kernel_train", train_code, "_train", "_TRAIN_STATE")
    imports = "match_call, rebuild_output" if op.call is not None else "rebuild_output"
    return f'''"""forge built-in coder: Inductor's own code for the op ({kind} generated by torch {torch.__version__}),
run without torch.compile: the kernels and the call that launches them, captured once.

Inductor options: {shown!r}
"""

import types

import torch
import torch._inductor.config as _inductor_config

from forge_reference import Model
from forge.core.module_call import {imports}

{modules}
_CALL = {op.call!r}
_LAYOUT = {op.layout!r}
_INPUTS = {inputs!r}
_DEVICE = torch.device({eval_code.device!r})


def _built_for(xs):
    return len(xs) == len(_INPUTS) and all(
        isinstance(x, torch.Tensor) and list(x.shape) == s and list(x.stride()) == st and str(x.dtype) == d
        and x.device == _DEVICE{aligned}
        for x, (s, st, d) in zip(xs, _INPUTS)
    )


{ATTR_SOURCE}{_model_new(op.call, train)}{methods}'''
