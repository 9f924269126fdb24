"""kernelize by execution mode: a kernel that does not beat torch.compile beyond the noise stays
off while the model is compiled (the reference goes to Inductor), and the bank says so."""

from __future__ import annotations

import warnings

import pytest
import torch
from mylayers.norm import Block

import forge.kernelbank as kb
from forge.core.acceptance import beats_compile
from tests.kernelbank.helpers import KERNEL, OP, make_bank, passed_verdict

GOOD = KERNEL.read_text()
_PAIRS = {"pairs": 40, "median": 1.6, "low": 1.4, "high": 1.8}


def _timed(compile_low: float | None) -> dict:
    """Verdict overrides: 1.6x eager, and vs compile an interval starting at ``compile_low``."""
    stats: dict = {"paired_eager": _PAIRS}
    if compile_low is not None:
        stats["paired_compile"] = {"pairs": 40, "median": compile_low + 0.1, "low": compile_low, "high": 1.9}
    return {"timing_stats": stats, "speedup_vs_compile": None if compile_low is None else compile_low + 0.1}


def _graph_calls(module: torch.nn.Module, x: torch.Tensor) -> str:
    """The FX code torch.compile traced for ``module`` (a backend that only records it)."""
    seen: list[str] = []

    def record(gm: torch.fx.GraphModule, _inputs: list[torch.Tensor]):
        seen.append(gm.code)
        return gm.forward

    torch._dynamo.reset()
    with torch.no_grad():
        torch.compile(module, backend=record, fullgraph=True, dynamic=False)(x)
    return "\n".join(seen)


def test_the_rule_needs_an_interval_above_one():
    assert beats_compile(passed_verdict(OP, **_timed(1.2))).beats
    standing = beats_compile(passed_verdict(OP, **_timed(0.95)))
    assert not standing.beats and "does not clear 1.0x" in standing.why
    assert "no torch.compile baseline" in beats_compile(passed_verdict(OP, **_timed(None))).why


@pytest.mark.parametrize(
    ("compile_low", "mode", "traced"),
    [(0.8, "auto", False), (1.2, "auto", True), (0.8, "eager", True), (None, "auto", False)],
)
def test_compiled_graphs_hold_only_kernels_that_beat_compile(tmp_path, compile_low, mode, traced):
    path = tmp_path / "bank.db"
    make_bank(path, [(OP, GOOD, _timed(compile_low))])
    m = Block(256).eval()
    x = torch.randn(16, 256)
    with torch.no_grad():
        ref = m(x)
    bank = kb.open(path)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        assert bank.kernelize(m, mode=mode) == 2
    said = " ".join(str(w.message) for w in caught)
    assert ("stay off" in said) is (not traced), said
    assert ("forge_bank.call" in _graph_calls(m, x)) is traced
    with torch.no_grad(), bank.watch() as seen:  # in eager, every mode here runs the kernel
        torch.testing.assert_close(m(x), ref, atol=1e-5, rtol=1e-5)
    assert seen.ops["user_rmsnorm"].kernel_calls == 2


def test_compile_mode_leaves_eager_only_kernels_off_everywhere(tmp_path):
    path = tmp_path / "bank.db"
    make_bank(path, [(OP, GOOD, _timed(0.8))])
    with pytest.warns(kb.KernelBankWarning, match=r"mode='compile'.*does not clear 1.0x"):
        assert kb.open(path).kernelize(Block(256), mode="compile") == 0
    with pytest.raises(ValueError, match="use one of auto, eager, compile"):
        kb.open(path).kernelize(Block(256), mode="fast")


def test_a_class_with_two_configurations_gets_the_op_verified_for_each(tmp_path):
    wide = tmp_path / "wide_op.py"
    wide.write_text(
        OP.read_text().replace('"user_rmsnorm"', '"user_rmsnorm_wide"').replace("hidden = 256", "hidden = 512")
    )
    view = GOOD.replace("class ModelNew(Model):", "_COLS = None\n\n\nclass ModelNew(Model):")
    path = tmp_path / "bank.db"
    make_bank(path, [(OP, view, _timed(1.2)), (wide, view, _timed(1.2))])
    narrow_block, wide_block = Block(256), Block(512)
    bank = kb.open(path)
    assert bank.kernelize(narrow_block) == 2 and bank.kernelize(wide_block) == 2
    assert narrow_block.norm1._forge_kernel == "user_rmsnorm"
    assert wide_block.norm1._forge_kernel == "user_rmsnorm_wide"
