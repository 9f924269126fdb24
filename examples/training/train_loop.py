"""A small training loop with the user's layer twice, kernelized from a bank (run from this directory):

forge optimize rmsnorm_op.py --train --bank kernels.db
python train_loop.py kernels.db [--steps 30] [--warmup 5] [--device cuda] [--json]

Three copies of one network start from the same weights and see the same batches and the same SGD
steps: eager (the reference), kernelized (``bank.kernelize`` swaps the forward of both RMSNorm
instances; their training kernels run the forward and the backward) and ``torch.compile`` of the
reference. The three run step by step, interleaved in rotating order, so that load on the machine
lands on all of them. Every step's loss of the kernelized copy must equal eager's within 1e-4
(relative); a step's time covers zero_grad, forward, loss, backward and the optimizer's step, and
the medians (with quartiles) leave out the warm-up steps, where torch.compile compiles.
``bank.watch()`` counts the kernel's calls: each step makes two, and none may fall back. On a GPU
(``--device``, by default CUDA where there is one) each step's time waits for the GPU to finish it;
the bank must then hold a kernel optimized there (``forge optimize`` on the same machine).
"""

import argparse
import contextlib
import json
import statistics
import sys
import time

import rmsnorm_op
import torch
import torch.nn.functional as F
from layers import TwoNormNet

import forge.kernelbank as kb

TOLERANCE = 1e-4


def _step(model, opt, x, y):
    opt.zero_grad(set_to_none=True)
    loss = F.mse_loss(model(x), y)
    loss.backward()
    opt.step()
    return loss


def _finished(device):
    """Waits for the device's queued work, so that a step's time covers it."""
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def _largest_difference(got, want):
    return max(abs(a - b) / max(abs(b), 1e-12) for a, b in zip(got, want, strict=True))


def _spread(times):
    ms = sorted(t * 1e3 for t in times)
    q = statistics.quantiles(ms, n=4) if len(ms) > 1 else [ms[0]] * 3
    return {"median_ms": q[1], "q1_ms": q[0], "q3_ms": q[2]}


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("bank", help="the bank holding train_rmsnorm (forge optimize rmsnorm_op.py --train)")
    ap.add_argument("--steps", type=int, default=30)
    ap.add_argument("--warmup", type=int, default=5, help="steps left out of the times (compilation)")
    ap.add_argument("--json", action="store_true", help="print one JSON object instead of the table")
    ap.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu", help="cpu or cuda")
    args = ap.parse_args()
    device = torch.device(args.device)
    bank = kb.open(args.bank, strict=True)
    torch.manual_seed(0)
    hidden, rows = rmsnorm_op.hidden, rmsnorm_op.batch_size
    models = {"eager": TwoNormNet(hidden), "kernelized": TwoNormNet(hidden), "compiled": TwoNormNet(hidden)}
    for m in models.values():
        m.load_state_dict(models["eager"].state_dict())
        m.to(device)
    swapped = bank.kernelize(models["kernelized"])
    runs = {"eager": models["eager"], "kernelized": models["kernelized"], "compiled": torch.compile(models["compiled"])}
    opts = {k: torch.optim.SGD(m.parameters(), lr=0.05) for k, m in models.items()}
    g = torch.Generator().manual_seed(1)
    data = [(torch.randn(rows, hidden, generator=g), torch.randn(rows, hidden, generator=g)) for _ in range(4)]
    data = [(x.to(device), y.to(device)) for x, y in data]
    losses = {k: [] for k in runs}
    times = {k: [] for k in runs}
    names = list(runs)
    calls, fallbacks = 0, 0
    for step in range(args.steps):
        x, y = data[step % len(data)]
        for name in names[step % 3 :] + names[: step % 3]:  # rotating order
            # the kernelized steps alone are watched: the watch counts calls on every RMSNorm
            # instance, and a count changing under torch.compile would make it compile again
            with bank.watch() if name == "kernelized" else contextlib.nullcontext() as seen:
                _finished(device)
                t0 = time.perf_counter()
                loss = _step(runs[name], opts[name], x, y)
                _finished(device)
                took = time.perf_counter() - t0
            losses[name].append(loss.item())
            if step >= args.warmup:
                times[name].append(took)
            if name == "kernelized":
                usage = seen.usage("train_rmsnorm")
                calls, fallbacks = calls + usage.kernel_calls, fallbacks + usage.fallbacks
    worst, compiled_worst = (_largest_difference(losses[name], losses["eager"]) for name in ("kernelized", "compiled"))
    result = {
        "swapped": swapped,
        "device": str(device),
        "steps": args.steps,
        "timed_steps": len(times["eager"]),
        "kernel_calls": calls,
        "fallbacks": fallbacks,
        "loss_first": losses["eager"][0],
        "loss_last": losses["eager"][-1],
        "kernelized_max_rel_diff": worst,
        "compiled_max_rel_diff": compiled_worst,
        "times": {k: _spread(v) for k, v in times.items()},
    }
    ok = worst <= TOLERANCE and fallbacks == 0 and calls == 2 * args.steps
    if args.json:
        print(json.dumps({**result, "ok": ok}))
    else:
        print(f"kernelized {swapped} RMSNorm layers; {calls} kernel calls, {fallbacks} fell back to the reference")
        print(f"loss {losses['eager'][0]:.5f} -> {losses['eager'][-1]:.5f} over {args.steps} steps")
        print(f"kernelized losses vs eager's: largest relative difference {worst:.1e} (tolerance {TOLERANCE:g})")
        print(f"compiled losses vs eager's: largest relative difference {compiled_worst:.1e}")
        base = result["times"]["eager"]["median_ms"]
        for name, t in result["times"].items():
            print(
                f"{name:10s} {t['median_ms']:8.2f} ms a step (quartiles {t['q1_ms']:.2f}-{t['q3_ms']:.2f}), "
                f"{base / t['median_ms']:.2f}x eager"
            )
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
