"""kernelize with kernels in both forms (a subclass of the user's class, KernelBench's standalone
ModelNew) on a model that holds the user's layer twice, each copy with weights of its own."""

from __future__ import annotations

import warnings
from pathlib import Path

import pytest
import torch
from mylayers.norm import Block, RMSNorm

import forge.kernelbank as kb
from forge.kernelbank import dispatcher
from tests.kernelbank.helpers import FIXTURES, KERNEL, OP, make_bank

CANDIDATES = Path(__file__).resolve().parents[1] / "candidates" / "user_rmsnorm"
FORMS = {
    "subclass": (KERNEL.read_text(), "direct"),
    "kernelbench": ((FIXTURES / "rmsnorm_kernelbench.py").read_text(), "direct"),
    "kernelbench_view": ((CANDIDATES / "view_helpers.py").read_text(), "view"),
}


def _model() -> Block:
    torch.manual_seed(0)
    m = Block(256).eval()
    with torch.no_grad():  # the two norms differ, so a kernel reading the wrong one is caught
        m.norm1.weight.normal_()
        m.norm2.weight.uniform_(0.5, 2.0)
    return m


def _bank(tmp_path: Path, source: str, mode: str | None) -> kb.KernelBank:
    path = tmp_path / "bank.db"
    over = {"binding": {"mode": mode, "reason": "recorded by the verifier"}} if mode else {}
    make_bank(path, [(OP, source, over)])
    return kb.open(path)


def _counting(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    calls: list[int] = []
    real = dispatcher._Handle.call

    def counting(self, *a, **k):
        calls.append(self.id)
        return real(self, *a, **k)

    monkeypatch.setattr(dispatcher._Handle, "call", counting)
    return calls


@pytest.mark.parametrize("form", sorted(FORMS))
def test_every_instance_runs_the_kernel_with_its_own_weights(form, tmp_path, monkeypatch):
    source, mode = FORMS[form]
    bank = _bank(tmp_path, source, mode)
    m = _model()
    x = torch.randn(32, 256)
    calls = _counting(monkeypatch)
    with torch.no_grad():
        ref = m(x)
        assert bank.kernelize(m) == 2
        out = m(x)
    assert len(set(calls)) == 2  # both instances ran their kernel, through two bindings
    torch.testing.assert_close(out, ref, atol=1e-5, rtol=1e-5)
    with torch.no_grad():  # the binding sees the instance's live state, not a copy
        m.norm2.weight.mul_(3.0)
        ref2 = RMSNorm.forward(m.norm2, m.proj(RMSNorm.forward(m.norm1, x)))
        torch.testing.assert_close(m(x), ref2, atol=1e-5, rtol=1e-5)
    assert bank.restore(m) == 2
    assert not any(k.startswith("_forge") or k == "forward" for k in m.norm1.__dict__)
    with torch.no_grad():
        torch.testing.assert_close(m(x), ref2)


@pytest.mark.parametrize("form", sorted(FORMS))
def test_training_and_compile_work_the_same_for_every_form(form, tmp_path):
    source, mode = FORMS[form]
    bank = _bank(tmp_path, source, mode)
    m = _model()
    bank.kernelize(m)
    m.train()
    m(torch.randn(8, 256)).sum().backward()  # grads needed: the reference's autograd runs
    assert m.norm1.weight.grad is not None and m.norm2.weight.grad is not None
    m.eval()
    x = torch.randn(16, 256)
    with torch.no_grad():
        ref = m(x)
        compiled = torch.compile(m, fullgraph=True, dynamic=False)
        torch.testing.assert_close(compiled(x), ref, atol=1e-5, rtol=1e-5)


def test_view_kernels_see_per_bucket_configs(tmp_path):
    from forge.db.engine import open_for_writing, session_factory
    from forge.db.models import KernelConfigRow

    src = FORMS["kernelbench_view"][0].replace(
        "        return x * self._scale(x) * self.weight",
        "        self.seen = dict(self._forge_config)\n        return x * self._scale(x) * self.weight",
    )
    path = tmp_path / "bank.db"
    (kid,) = make_bank(path, [(OP, src, {"binding": {"mode": "view", "reason": ""}})])
    engine = open_for_writing(path)
    with session_factory(engine).begin() as s:
        s.add(KernelConfigRow(kernel_id=kid, bucket=[[8, 256]], config={"tile": "small"}, timing_ms=0.01))
        s.add(KernelConfigRow(kernel_id=kid, bucket=[[4096, 256]], config={"tile": "large"}, timing_ms=1.0))
    engine.dispose()
    layer = RMSNorm(256)
    kb.open(path).kernelize(layer)
    with torch.no_grad():
        layer(torch.randn(3000, 256))
    assert layer._forge_config == {"tile": "large"}


def test_view_kernel_leaves_an_instance_configured_unlike_the_verified_one(tmp_path):
    bank = _bank(tmp_path, FORMS["kernelbench_view"][0], "view")
    with pytest.warns(kb.KernelBankWarning, match="hidden_size|weight is"):
        assert bank.kernelize(Block(512)) == 0  # its constant hidden_size was built for 256
    direct = _bank(tmp_path / "d", FORMS["kernelbench"][0], "direct")
    assert direct.kernelize(Block(512)) == 2  # reads only the instance: no constant to go stale


def test_entries_whose_bound_form_failed_or_was_never_checked_are_not_bound(tmp_path):
    (tmp_path / "a").mkdir()
    source = FORMS["kernelbench"][0]
    failed = _bank(tmp_path / "a", source, "none")
    with pytest.warns(kb.KernelBankWarning, match="bound form failed verification"):
        assert failed.kernelize(_model()) == 0
    (tmp_path / "b").mkdir()
    unchecked = _bank(tmp_path / "b", source, None)
    with pytest.warns(kb.KernelBankWarning, match="forge bank verify"):
        assert unchecked.kernelize(_model()) == 0
    with warnings.catch_warnings():  # bank.load still uses such a kernel
        warnings.simplefilter("error")
        assert type(unchecked.load("user_rmsnorm", 256)).__name__ == "ModelNew"


def test_tensor_state_kernel_is_refused_at_bind_time_even_if_recorded_as_binding(tmp_path):
    bank = _bank(tmp_path, (CANDIDATES / "tensor_state.py").read_text(), "view")
    with pytest.warns(kb.KernelBankWarning, match="buffer 'ones'"):
        assert bank.kernelize(_model()) == 0


def test_strict_bank_raises_when_a_kernel_cannot_bind(tmp_path):
    path = tmp_path / "bank.db"
    make_bank(path, [(OP, FORMS["kernelbench"][0], {"binding": {"mode": "none", "reason": "wrong outputs"}})])
    with pytest.raises(kb.KernelUnavailableError, match="cannot bind"):
        kb.open(path, strict=True).kernelize(_model())


def test_dropped_models_are_freed(tmp_path):
    import gc
    import weakref

    bank = _bank(tmp_path, FORMS["kernelbench_view"][0], "view")
    m = _model()
    bank.kernelize(m)
    alive = weakref.ref(m.norm1)
    del m
    gc.collect()
    assert alive() is None
