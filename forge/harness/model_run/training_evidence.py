"""What a model says about its kernels in training (``--modules --train``). A kernel is used under
autograd when its backward passed and its own training step is not slower than eager's
(``acceptance.training_standing``); in a model its step runs among the others, where a kernel can
still cost the step what it saves alone. When the kernelized model's training step runs slower
than the original's, beyond what two copies of the original read apart (the null), the kernels
used under autograd there are set to run the reference where gradients are needed, with the
model's figure as the reason (the inference kernels stay; measured on examples/models/decoder.py:
its SwiGLU, Rotary and RMSNorm training kernels made its step 0.92x eager)."""

from __future__ import annotations

from forge.core.acceptance import TrainingStanding, null_bar
from forge.core.model_records import FourWay, ModelProof
from forge.core.paths import BankLocation
from forge.db import list_kernels, open_for_writing, set_training_standing


def slowed_training(t: FourWay) -> bool:
    """The kernelized model's training step ran slower than the original's, beyond the null."""
    r = t.kernelized_vs_eager
    return r is not None and r.high < 1.0 / null_bar(t.eager_null)


def demote_slowing_training_kernels(proof: ModelProof, ops: list[str], where: BankLocation, device: str) -> list[str]:
    """Set the kernels of ``ops`` (the model's) that ran in its training step, for its device, to
    run the reference under autograd when that step shows they slow it; returns what was set, as
    sentences."""
    timings = proof.training.timings if proof.training is not None else []
    slow = next((t for t in timings if slowed_training(t)), None)
    if slow is None or slow.kernelized_vs_eager is None:
        return []
    r = slow.kernelized_vs_eager
    why = (
        f"in a model, the training step ran {r.median:.2f}x eager ({r.low:.2f}-{r.high:.2f}, {slow.regime}) with it "
        "in place: where gradients are needed the reference runs"
    )
    ran = {u.op for u in proof.training.ops if u.kernel_calls} if proof.training is not None else set()
    engine = open_for_writing(where)
    said = []
    try:
        for op in (o for o in ops if o in ran):  # the kernels that ran in the step it timed
            for k in list_kernels(engine, op):
                if k.device == device and str(k.status) == "active" and k.trains:
                    set_training_standing(engine, k.id, TrainingStanding(used=False, why=why, by_model=True))
                    said.append(f"kernel {k.id} ({op}) is no longer used under autograd: {why}")
    finally:
        engine.dispose()
    return said
