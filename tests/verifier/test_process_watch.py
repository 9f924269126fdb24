"""What the user loop's watch notices a candidate change in a user's process: each way to slow
the reference beside a kernel (replacing or adding methods anywhere the reference's modules reach,
hooks, instance attributes, where its weights lie, child processes, a thread burning CPU), and
nothing when nothing changed."""

from __future__ import annotations

import subprocess
import sys
import threading
import types
from pathlib import Path

import pytest
import torch
from torch import nn
from torch.overrides import TorchFunctionMode

from forge.verifier.worker.timing.process_watch import ProcessWatch

ROOT = Path(__file__).resolve().parents[2]


def _reference() -> tuple[nn.Module, types.ModuleType]:
    op = types.ModuleType("forge_op_watch_test")

    class Model(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.lin = nn.Linear(4, 4)

        def forward(self, x):  # type: ignore[no-untyped-def]
            return torch.relu(self.lin(x))

    Model.__module__ = op.__name__
    op.Model = Model  # type: ignore[attr-defined]
    return Model(), op


_NOTHING_CHANGED = """
import torch
from forge.verifier.worker.timing.process_watch import ProcessWatch
from tests.verifier.test_process_watch import _reference
reference, op = _reference()
watch = ProcessWatch(reference, op)
reference(torch.randn(2, 4))
print(watch.changes())
"""


def test_nothing_changed_is_no_finding():
    """In a process of its own, as a user loop's is: a suite's worker process starts children of
    its own now and then (a verifier's template, torch's compile workers), which the watch rightly
    reports."""
    done = subprocess.run(
        [sys.executable, "-c", _NOTHING_CHANGED], capture_output=True, text=True, cwd=ROOT, timeout=120, check=True
    )
    assert done.stdout.strip() == "[]", done.stdout + done.stderr[-2000:]


def _redefine_forward(reference: nn.Module, op: types.ModuleType) -> None:
    cls = op.Model  # type: ignore[attr-defined]
    del cls.forward  # freed: a new function may land at the same address (an id alone would match)
    cls.forward = lambda self, x: torch.relu(self.lin(x))


@pytest.mark.parametrize(
    ("change", "said"),
    [
        (_redefine_forward, "replaced forge_reference."),
        (
            lambda r, op: setattr(nn.Linear, "forward", lambda self, x: x),
            "replaced torch.nn.modules.linear.Linear.forward",
        ),
        (lambda r, op: setattr(op.Model, "__call__", nn.Module.__call__), "added forge_reference."),
        (lambda r, op: r.lin.register_forward_hook(lambda *a: None), "changed lin: hooks"),
        (lambda r, op: setattr(r, "forward", lambda x: x), "changed the reference: attributes"),
        (
            lambda r, op: setattr(r.lin, "weight", nn.Parameter(r.lin.weight.detach().t().contiguous().t())),
            "changed lin: tensors",
        ),
        (lambda r, op: nn.modules.module.register_module_forward_hook(lambda *a: None), "changed module hooks"),
        (lambda r, op: setattr(r, "lin", nn.Linear(4, 4)), "changed the reference: submodules"),
    ],
)
def test_each_way_to_slow_the_reference_is_named(change, said, monkeypatch):
    reference, op = _reference()
    linear_forward = nn.Linear.forward
    hooks = dict(nn.modules.module._global_forward_hooks)
    watch = ProcessWatch(reference, op)
    try:
        change(reference, op)
        found = watch.changes()
    finally:
        nn.Linear.forward = linear_forward  # type: ignore[method-assign]
        nn.modules.module._global_forward_hooks.clear()
        nn.modules.module._global_forward_hooks.update(hooks)
    assert any(said in line for line in found), found


@pytest.mark.alone  # measures a thread's CPU use: one test at a time (.ci/run's last step)
def test_a_child_process_and_a_thread_burning_cpu_are_named():
    reference, op = _reference()
    watch = ProcessWatch(reference, op)
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    stop = threading.Event()

    def burn() -> None:
        while not stop.is_set():
            sum(range(10_000))

    spinner = threading.Thread(target=burn, daemon=True)
    spinner.start()
    try:
        found = watch.changes()
    finally:
        stop.set()
        child.kill()
        child.wait()
    assert any(line.startswith("started child processes") for line in found), found
    assert any("cores while the loop slept" in line for line in found), found


class _PassThrough(TorchFunctionMode):
    def __torch_function__(self, func, types, args=(), kwargs=None):  # type: ignore[no-untyped-def]
        return func(*args, **(kwargs or {}))


def test_a_mode_or_the_profiler_left_on_is_named():
    """A torch function mode entered for good runs Python around every op the reference calls;
    the profiler left on records each one."""
    reference, op = _reference()
    watch = ProcessWatch(reference, op)
    with _PassThrough():
        in_mode = watch.changes()
    assert any("torch function and dispatch modes" in line for line in in_mode), in_mode
    with torch.autograd.profiler.profile():
        profiled = watch.changes()
    assert any("torch profiler" in line for line in profiled), profiled
    # both left: neither is named (a child process the suite's worker started meanwhile may be)
    after = watch.changes()
    assert not [line for line in after if "modes" in line or "profiler" in line], after
