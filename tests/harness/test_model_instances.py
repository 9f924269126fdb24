"""A carved op stands for every instance of its class that shares its state and call, and its
kernel runs only on the instances it was verified on: the real probe carves a stack of layers
built with their index (``models/stacked.py``), a kernel is verified and banked on the first, the
real verifier checks it on each other layer (``check_instances``), and ``kernelize`` binds it
where it passed, falling back, with the reason, where it failed or where the model differs."""

from __future__ import annotations

import shutil
import sys
import warnings
from pathlib import Path

import torch

from forge.core.carved_ops import InstanceOutcome
from forge.core.paths import BankLocation
from forge.core.problem import load_problem
from forge.db import kernel_instances, open_for_writing
from forge.harness.model_run.carve import write_ops
from forge.harness.model_run.choose import choose_classes
from forge.harness.model_run.instances import InstanceRun, InstanceScope, check_instances
from forge.harness.model_run.kept import twins
from forge.harness.verify import verify_candidate
from forge.model_probe import profile_in_process

MODELS = Path(__file__).resolve().parents[1] / "model_probe" / "models"

# the layer's forward with its factor baked in as the first layer's 1.0: wrong on the last layer
BAKED = """
import torch
from forge_reference import Model


class ModelNew(Model):
    def forward(self, x):
        y = x * self.weight
        for _ in range(12):
            y = y * 0.75 + 0.25
        return torch.tanh(y) * 1.0 + x
"""
# the layer's forward reading the instance's own factor: right on every layer
READS = BAKED.replace("* 1.0 + x", "* self.factor + x")


def _model_file(folder: Path, depth: int, name: str = "stacked", after_building: str = "") -> Path:
    """The stacked model at ``depth`` layers, under a name of its own (one module per depth);
    ``after_building``: a statement its constructor runs last."""
    path = folder / f"{name}{depth}.py"
    shutil.copyfile(MODELS / "stacked.py", path)
    # small: these tests verify and kernelize, they time nothing (the end-to-end run uses its sizes)
    source = path.read_text().replace("LAYERS = 2", f"LAYERS = {depth}").replace("= 512, 1024", "= 64, 128")
    built = "        self.norms = nn.ModuleList(Norm(dim) for _ in range(depth))\n"
    path.write_text(source.replace(built, built + (f"        {after_building}\n" if after_building else "")))
    return path


def _carved(folder: Path, depth: int, name: str = "stacked", after_building: str = ""):
    model = _model_file(folder, depth, name, after_building)
    kept = folder / ".recorded.pt"
    profile = profile_in_process(str(model), "cpu", recorded=kept)
    choices = {c.cls.name: c for c in choose_classes(profile, model.stem, min_share=0.0)}
    recorded = torch.load(kept, weights_only=True)
    groups = [g for c in choices.values() if c.chosen for g in c.groups]
    paths = dict(zip((g.name for g in groups), write_ops(groups, profile, folder, recorded), strict=True))
    return model, {g.cls.name: g for g in groups}, paths, recorded


def _model_module(op: Path, model_file: Path):
    """The model's module as the op file imports it (its classes are the ones kernelize patches)."""
    load_problem(op)
    return sys.modules[model_file.stem]


def _checked(group, ops, recorded, kernel_id, engine, settings, said=lambda _m: None) -> InstanceRun:
    run = InstanceRun()
    scope = InstanceScope(ops[group.name], engine, settings, "cpu", said=said)
    check_instances(group, twins(group, recorded), kernel_id, scope, run)
    return run


def _banked(op: Path, source: str, folder: Path, settings, bank: Path) -> int:
    kernel = folder / "kernel.py"
    kernel.write_text(source)
    verification = verify_candidate(op, kernel, settings, save=True, bank=BankLocation(path=bank))
    assert verification.kernel_id is not None, verification.verdict.reason
    return verification.kernel_id


def test_a_kernel_runs_only_on_the_instances_it_was_verified_on(tmp_path, fast_settings):
    depth = 4  # the first layer searched, two verified, the last (scaled otherwise) failed
    model_file, groups, ops, recorded = _carved(tmp_path, depth)
    layers = groups["Scaled"]
    assert layers.paths == [f"layers.{i}" for i in range(depth)]  # one op, however deep the model
    bank = tmp_path / "bank.db"
    kernel_id = _banked(ops[layers.name], BAKED, tmp_path, fast_settings, bank)
    engine = open_for_writing(BankLocation(path=bank))
    said: list[str] = []
    run = _checked(layers, ops, recorded, kernel_id, engine, fast_settings, said.append)
    outcomes = [c.outcome for c in kernel_instances(engine, kernel_id)]
    engine.dispose()
    # the layers that scale by 1.0 compute what the first does, whatever their index; the last does not
    expected = [InstanceOutcome.SEARCHED] + [InstanceOutcome.VERIFIED] * (depth - 2) + [InstanceOutcome.FAILED]
    assert outcomes == expected and run.failed == [f"layers.{depth - 1}"] and run.verifications == depth - 1
    assert "correctness" in run.checks[-1].detail and said[-1].startswith(f"{layers.name}: FAILED on layers.")

    import forge.kernelbank as kb

    module = _model_module(ops[layers.name], model_file)
    torch.manual_seed(0)
    model, original = module.Model(module.width, depth).eval(), module.Model(module.width, depth).eval()
    original.load_state_dict(model.state_dict())
    opened = kb.open(bank)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        assert opened.kernelize(model) == depth - 1  # every layer but the last
    assert any("it failed on this instance" in str(w.message) for w in caught)
    x = torch.randn(module.rows, module.width)
    with torch.no_grad(), opened.watch() as seen:
        got = model(x)
    used = seen.ops[layers.name]  # the last layer is not patched: its reference runs, unwatched
    assert used.kernel_calls == used.calls == depth - 1 and used.fallbacks == 0
    torch.testing.assert_close(got, original(x), atol=1e-5, rtol=1e-5)


def test_instances_built_alike_share_one_check_and_a_changed_model_falls_back(tmp_path, fast_settings):
    """Norms built alike are twins: one verification stands for each. A kernel reading the
    layer's own attributes passes everywhere; where the model is no longer built as it was
    verified (another width at a path, an instance at another path), the instance keeps its
    reference and the warning says why."""
    model_file, groups, ops, recorded = _carved(tmp_path, 3)
    norms, layers = groups["Norm"], groups["Scaled"]
    assert twins(norms, recorded) == {f"norms.{i}": "norms.0" for i in range(3)}
    bank = tmp_path / "bank.db"
    engine = open_for_writing(BankLocation(path=bank))
    layer_kernel = _banked(ops[layers.name], READS, tmp_path, fast_settings, bank)
    run = _checked(layers, ops, recorded, layer_kernel, engine, fast_settings)
    assert [c.outcome for c in run.checks] == [InstanceOutcome.SEARCHED] + [InstanceOutcome.VERIFIED] * 2
    norm_source = (
        "import torch\nfrom forge_reference import Model\n\n\nclass ModelNew(Model):\n    def forward(self, x):\n"
        "        return self.weight * x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps)\n"
    )
    norm_kernel = _banked(ops[norms.name], norm_source, tmp_path, fast_settings, bank)
    run = _checked(norms, ops, recorded, norm_kernel, engine, fast_settings)
    engine.dispose()
    assert [c.outcome for c in run.checks] == [InstanceOutcome.SEARCHED] + [InstanceOutcome.SAME] * 2
    assert run.verifications == 0 and "built and called exactly as 'norms.0'" in run.checks[1].detail

    import forge.kernelbank as kb

    module = _model_module(ops[layers.name], model_file)
    opened = kb.open(bank)
    assert opened.kernelize(module.Model(module.width, 3).eval()) == 6
    # a deeper model: its fourth layer and norm sit at paths no kernel was verified on, and its
    # third layer is no longer the last (it scales by 1.0 where the verified one scaled by 2.0)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        assert kb.open(bank).kernelize(module.Model(module.width, 4).eval()) == 5
    said = [str(w.message) for w in caught]
    assert any("not on one at 'layers.3'" in m for m in said) and any("not on one at 'norms.3'" in m for m in said)
    assert any("factor is 1.0 here, 2.0 where the kernel was verified" in m for m in said)
    # a layer of another width where a verified one was: its weights' shapes changed
    wide = module.Model(module.width, 3).eval()
    wide.layers[1] = module.Scaled(module.width // 2, 1, 1.0)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        assert kb.open(bank).kernelize(wide) == 5
    assert any("configured unlike the one it was verified on" in str(w.message) for w in caught)


def test_an_instance_the_model_changes_after_building_it_is_refused(tmp_path, fast_settings):
    """The model sets its last layer's factor after building it: the op file, which builds each
    layer from its constructor call, cannot build that layer as the model holds it, so no kernel
    of the op runs on it, whatever a verification would say, and it gets no op of its own."""
    model_file, groups, ops, recorded = _carved(tmp_path, 2, "changed", "self.layers[-1].factor = 3.0")
    layers = groups["Scaled"]
    bank = tmp_path / "bank.db"
    kernel_id = _banked(ops[layers.name], READS, tmp_path, fast_settings, bank)
    engine = open_for_writing(BankLocation(path=bank))
    run = _checked(layers, ops, recorded, kernel_id, engine, fast_settings)
    engine.dispose()
    assert [c.outcome for c in run.checks] == [InstanceOutcome.SEARCHED, InstanceOutcome.REFUSED]
    assert "factor is 2.0 built from its arguments, 3.0 in the model" in run.checks[1].detail
    assert run.failed == [] and run.verifications == 0

    import forge.kernelbank as kb

    module = _model_module(ops[layers.name], model_file)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        assert kb.open(bank).kernelize(module.Model(module.width, 2).eval()) == 1
    assert any("it refused on this instance (the model holds it otherwise" in str(w.message) for w in caught)
