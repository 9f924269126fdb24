"""Use verified kernels from a bank in your own model (run from this directory).

forge verify rmsnorm_op.py rmsnorm_kernel.py --save --bank kernels.db
python use_bank.py kernels.db

Either form of kernel works: rmsnorm_kernel.py subclasses the user's RMSNorm, rmsnorm_kernelbench.py
is KernelBench's standalone ``ModelNew(nn.Module)``; kernelize runs either on the model's own layers.
"""

import sys
import time

import torch
from mylayers.norm import Block

import forge.kernelbank as kb

bank = kb.open(sys.argv[1] if len(sys.argv) > 1 else None)  # read-only; default: $FORGE_BANK or the user bank
torch.manual_seed(0)
model = Block(1024).eval()
x = torch.randn(2048, 1024)


def bench(fn, n=20):
    fn()
    t0 = time.perf_counter()
    for _ in range(n):
        fn()
    return (time.perf_counter() - t0) / n * 1e3


with torch.no_grad():
    reference = model(x)
    t_ref = bench(lambda: model(x))
    swapped = bank.kernelize(model)  # patches the RMSNorm *instances*, never the class
    out = model(x)
    t_bank = bench(lambda: model(x))
    print(
        f"kernelized {swapped} layers; max difference {float((out - reference).abs().max()):.2e}; "
        f"{t_ref:.2f} ms -> {t_bank:.2f} ms per forward"
    )
    bank.restore(model)
    assert torch.equal(model(x), reference)
