"""The runtime: read-only open, load, kernelize/restore, every fallback path, torch.compile."""

from __future__ import annotations

import copy
import os
import sqlite3
import warnings

import pytest
import torch
from mylayers.norm import Block, RMSNorm

import forge.kernelbank as kb
from forge.core.errors import ForgeError
from tests.kernelbank.helpers import KERNEL, OP, make_bank

GOOD = KERNEL.read_text()


@pytest.fixture
def bank_path(tmp_path):
    path = tmp_path / "bank.db"
    make_bank(path, [(OP, GOOD, {})])
    return path


def _no_warnings():
    return warnings.catch_warnings(record=True)


def test_load_returns_the_kernel_and_matches_reference(bank_path):
    bank = kb.open(bank_path)
    assert bank.ops() == ["user_rmsnorm"]
    layer = bank.load("user_rmsnorm", 256)
    assert isinstance(layer, RMSNorm) and type(layer).__name__ == "ModelNew"
    ref = RMSNorm(256)
    with torch.no_grad():
        ref.weight.copy_(torch.randn(256))
        layer.weight.copy_(ref.weight)
        x = torch.randn(64, 256)
        assert torch.allclose(layer(x), ref(x), atol=1e-5)


def test_unknown_op_is_a_clear_forge_error(bank_path):
    bank = kb.open(bank_path)
    with pytest.raises(kb.UnknownOpError, match="'nope' is not in the kernel bank") as info:
        bank.load("nope")
    assert isinstance(info.value, ForgeError) and isinstance(info.value, KeyError)


def test_missing_and_newer_banks_are_refused(tmp_path, bank_path):
    with pytest.raises(kb.BankError, match="no kernel bank"):
        kb.open(tmp_path / "absent.db")
    with sqlite3.connect(bank_path) as conn:
        conn.execute("UPDATE alembic_version SET version_num = '9999'")
    with pytest.raises(kb.BankError, match="newer forge"):
        kb.open(bank_path)


def test_open_is_read_only(bank_path):
    before = bank_path.read_bytes()
    bank = kb.open(bank_path)
    m = Block(256)
    bank.kernelize(m)
    with torch.no_grad():
        m(torch.randn(4, 256))
    with pytest.raises(sqlite3.OperationalError, match="readonly"):
        bank._db._db.conn.execute("DELETE FROM kernels")  # type: ignore[attr-defined]
    assert bank_path.read_bytes() == before


def test_kernelize_swaps_instances_and_restore_undoes(bank_path):
    bank = kb.open(bank_path)
    torch.manual_seed(0)
    m = Block(256)
    x = torch.randn(32, 256)
    with torch.no_grad():
        ref = m(x)
        assert bank.kernelize(m) == 2
        assert "forward" in m.norm1.__dict__ and "forward" not in RMSNorm.__dict__.get("__dict__", {})
        assert RMSNorm.forward is not m.norm1.forward  # the class itself is untouched
        out = m(x)
        other = RMSNorm(256)  # a new instance keeps the reference forward
        assert "forward" not in other.__dict__
        assert torch.allclose(out, ref, atol=1e-5)
        assert bank.kernelize(m) == 0  # already patched
        assert bank.restore(m) == 2
        assert "forward" not in m.norm1.__dict__
        assert torch.equal(m(x), ref)


def test_kernel_actually_runs(bank_path, monkeypatch):
    bank = kb.open(bank_path)
    m = Block(256)
    bank.kernelize(m)
    calls = []
    from forge.kernelbank import dispatcher

    real = dispatcher._Handle.call

    def counting(self, *a, **k):
        calls.append(self.entry.id)
        return real(self, *a, **k)

    monkeypatch.setattr(dispatcher._Handle, "call", counting)
    with torch.no_grad():
        m(torch.randn(8, 256))
    assert len(calls) == 2


def test_training_uses_the_reference_autograd(bank_path):
    """A kernel not verified for training: where autograd needs gradients both norms run the
    reference (watch() says so), and the gradients are the reference model's own."""
    bank = kb.open(bank_path)
    torch.manual_seed(0)
    m = Block(256)
    original = copy.deepcopy(m)
    assert bank.kernelize(m) == 2
    x = torch.randn(8, 256)
    with bank.watch() as seen:
        m(x).square().sum().backward()
    original(x).square().sum().backward()
    usage = seen.usage("user_rmsnorm")
    assert (usage.calls, usage.fallbacks, usage.kernel_calls) == (2, 2, 0), seen.report()
    for (name, got), want in zip(m.named_parameters(), original.parameters(), strict=True):
        torch.testing.assert_close(got.grad, want.grad, msg=name)


def test_stale_reference_falls_back_with_one_warning(tmp_path, monkeypatch):
    path = tmp_path / "bank.db"
    make_bank(path, [(OP, GOOD, {"op_hash": "0" * 64})])  # saved against another version of the class
    bank = kb.open(path)
    m = Block(256)
    with pytest.warns(kb.KernelBankWarning, match="no longer matches"):
        assert bank.kernelize(m) == 0
        layer = bank.load("user_rmsnorm", 256)
    assert type(layer) is RMSNorm


def test_broken_source_falls_back(tmp_path):
    path = tmp_path / "bank.db"
    make_bank(path, [(OP, "raise ImportError('kernel library missing')\n", {})])
    bank = kb.open(path)
    with pytest.warns(kb.KernelBankWarning, match="failed to import"):
        layer = bank.load("user_rmsnorm", 256)
    assert type(layer) is RMSNorm


def test_kernel_that_raises_is_marked_bad_once(tmp_path):
    src = GOOD.replace("        x = x.contiguous()", "        raise RuntimeError('launch failed')")
    path = tmp_path / "bank.db"
    make_bank(path, [(OP, src, {})])
    bank = kb.open(path)
    layer = bank.load("user_rmsnorm", 256)
    x = torch.randn(4, 256)
    with torch.no_grad():
        with pytest.warns(kb.KernelBankWarning, match="launch failed"):
            out = layer(x)
        assert torch.allclose(out, RMSNorm.forward(layer, x))
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            layer(x)  # no second warning


def test_wrong_device_or_dtype_uses_reference(tmp_path):
    path = tmp_path / "bank.db"
    make_bank(path, [(OP, GOOD, {"device": "cuda", "capability": "0.0"})])
    layer = kb.open(path).load("user_rmsnorm", 256)  # verified for CUDA only
    x = torch.randn(4, 256)
    with torch.no_grad(), pytest.warns(kb.KernelBankWarning, match="verified for cpu"):
        out = layer(x)
    assert torch.allclose(out, RMSNorm.forward(layer, x))
    path2 = tmp_path / "bank2.db"
    make_bank(path2, [(OP, GOOD, {})])
    layer = kb.open(path2).load("user_rmsnorm", 256)
    with torch.no_grad(), pytest.warns(kb.KernelBankWarning, match="float64"):
        out = layer(torch.randn(4, 256, dtype=torch.float64))
    assert out.dtype == torch.float64


def test_env_switch_disables_the_bank(bank_path, monkeypatch):
    monkeypatch.setenv("FORGE_KERNELBANK", "off")
    bank = kb.open(bank_path)
    assert bank.kernelize(Block(256)) == 0
    with pytest.warns(kb.KernelBankWarning, match="FORGE_KERNELBANK=off"):
        assert type(bank.load("user_rmsnorm", 256)) is RMSNorm


def test_strict_raises_instead_of_falling_back(tmp_path):
    path = tmp_path / "bank.db"
    make_bank(path, [(OP, GOOD, {"op_hash": "0" * 64})])
    with pytest.raises(kb.KernelUnavailableError, match="no longer matches"):
        kb.open(path, strict=True).load("user_rmsnorm", 256)


def test_shape_buckets_pick_the_nearest_config(tmp_path):
    from forge.db.engine import open_for_writing, session_factory
    from forge.db.models import KernelConfigRow

    path = tmp_path / "bank.db"
    (kid,) = make_bank(path, [(OP, GOOD, {})])
    engine = open_for_writing(path)
    with session_factory(engine).begin() as s:
        s.add(KernelConfigRow(kernel_id=kid, bucket=[[8, 256]], config={"tile": "small"}, timing_ms=0.01))
        s.add(KernelConfigRow(kernel_id=kid, bucket=[[4096, 256]], config={"tile": "large"}, timing_ms=1.0))
    engine.dispose()
    layer = kb.open(path).load("user_rmsnorm", 256)
    with torch.no_grad():
        layer(torch.randn(6, 256))
        assert layer._forge_config == {"tile": "small"}
        layer(torch.randn(3000, 256))
        assert layer._forge_config == {"tile": "large"}


def test_compiles_fullgraph_through_the_custom_op(bank_path):
    """Kept under torch.compile (mode="eager": this kernel has no compile baseline), both norms
    are the bank's custom op in one graph, and the compiled model gives the reference's output."""
    bank = kb.open(bank_path)
    torch.manual_seed(0)
    m = Block(256)
    x = torch.randn(16, 256)
    with torch.no_grad():
        ref = m(x)
    assert bank.kernelize(m, mode="eager") == 2
    graphs: list[str] = []

    def record(gm: torch.fx.GraphModule, _inputs: list[torch.Tensor]):  # type: ignore[no-untyped-def]
        graphs.append(gm.code)
        return gm.forward

    torch._dynamo.reset()
    with torch.no_grad():
        torch.testing.assert_close(torch.compile(m, backend=record, fullgraph=True, dynamic=False)(x), ref)
        assert torch.allclose(torch.compile(m, fullgraph=True, dynamic=False)(x), ref, atol=1e-5)
    assert len(graphs) == 1 and graphs[0].count("forge_bank.call") == 2, graphs


def test_exported_bank_opens_without_side_files(bank_path, tmp_path):
    from forge.db.engine import open_for_writing
    from forge.db.kernels import export_bank

    out = tmp_path / "ship" / "kernels.db"
    out.parent.mkdir()
    assert export_bank(open_for_writing(bank_path), out, ["user_rmsnorm"]) == 1
    before = sorted(os.listdir(out.parent))
    bank = kb.open(out)
    m = Block(256)
    assert bank.kernelize(m) == 2
    assert sorted(os.listdir(out.parent)) == before == ["kernels.db"]


EMBED_OP = """import torch


class Model(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.table = torch.nn.Embedding(50, 8)

    def forward(self, ids, scale):
        return self.table(ids) * scale


def get_inputs():
    return [torch.randint(0, 50, (4, 6)), torch.rand(8)]


def get_init_inputs():
    return []
"""
EMBED_KERNEL = """import torch
from forge_reference import Model


class ModelNew(Model):
    def forward(self, ids, scale):
        return torch.nn.functional.embedding(ids, self.table.weight) * scale
"""


def test_a_kernel_whose_first_input_is_token_ids_runs(tmp_path):
    """The bank files a kernel by its first floating-point input's dtype (float32 where none is):
    a call whose first tensor is int64 token ids picks it by the same rule, not by int64."""
    op = tmp_path / "embed_op.py"
    op.write_text(EMBED_OP)
    inputs = [{"shape": [4, 6], "dtype": "int64"}, {"shape": [8], "dtype": "float32"}]
    make_bank(tmp_path / "bank.db", [(op, EMBED_KERNEL, {"inputs": [{"variant": "as declared", "inputs": inputs}]})])
    layer = kb.open(tmp_path / "bank.db").load("embed_op")
    with torch.no_grad(), kb.open(tmp_path / "bank.db").watch() as seen:
        layer(torch.randint(0, 50, (4, 6)), scale=torch.rand(8))
    assert str(seen.usage("embed_op")) == "embed_op: 1 calls, the kernel ran on every one"
