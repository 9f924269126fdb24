"""What a model says about its kernels under torch.compile. A kernel is judged against
torch.compile on its own op (``acceptance.beats_compile``); in a model, Inductor also fuses the
op with its neighbours, which an opaque kernel prevents. When the kernelized model compiled runs
slower than the original compiled, beyond what two compiled copies of the original read apart
(the null), the kernels used under compile there are set to eager only in the bank, with the
model's figure as the reason (measured on KernelBench's MiniGPTBlock: a NewGELU kernel 1.70x
torch.compile alone made the compiled block 0.84x)."""

from __future__ import annotations

from forge.core.acceptance import CompileStanding, null_bar
from forge.core.model_records import FourWay, ModelProof
from forge.core.paths import BankLocation
from forge.db import list_kernels, open_for_writing, set_compile_standing


def slowed_compile(t: FourWay) -> bool:
    """The kernelized model compiled ran slower than the original compiled, beyond the null."""
    r = t.kernelized_compiled_vs_compiled
    return r is not None and r.high < 1.0 / null_bar(t.compiled_null)


def demote_slowing_kernels(proof: ModelProof, ops: list[str], where: BankLocation, device: str) -> list[str]:
    """Set the kernels ``ops`` (the model's) use under compile, for its device, to eager only when
    the model shows they slow it there; returns what was set, as sentences. Every op of the model
    is judged, not only those whose kernels ran in eager: a class inside an eager-only class runs
    its kernel only under compile, where the outer class runs its reference (cnn_block's
    ConvBNReLU inside Residual: the compiled model ran 0.86-0.89x)."""
    slow = next((t for t in proof.timings if slowed_compile(t)), None)
    if slow is None or slow.kernelized_compiled_vs_compiled is None:
        return []
    r = slow.kernelized_compiled_vs_compiled
    why = (
        f"in a model, the compiled model ran {r.median:.2f}x ({r.low:.2f}-{r.high:.2f}, {slow.regime}) with it in "
        "place: Inductor fuses the op with its neighbours, which the kernel prevents"
    )
    engine = open_for_writing(where)
    said = []
    try:
        for op in ops:
            for k in list_kernels(engine, op):
                used_here = k.device == device and str(k.status) == "active"
                if used_here and k.compile_standing is not None and k.compile_standing.beats:
                    set_compile_standing(engine, k.id, CompileStanding(beats=False, why=why, by_model=True))
                    said.append(f"kernel {k.id} ({op}) is now eager only: {why}")
    finally:
        engine.dispose()
    return said
