"""Runs the general lowering's Triton candidates against their references and prints one JSON
line: case id -> "ok" or the error. Like ``triton_check``, run it on CPU with TRITON_INTERPRET=1 in
a fresh process (Triton reads the variable when it is imported); ``run_cases("cuda")`` runs the
same cases on a GPU.

Every case is an op no hand-tuned family takes (or one they do, taken here by the lowering
directly), rendered with the default config and with small tiles, so that the reduction loops and
the ragged last tiles run. Outputs and module buffers after the call must match the reference.
"""

from __future__ import annotations

import atexit
import json
import shutil
import sys
import tempfile
import textwrap
import traceback
from pathlib import Path

import torch

from forge.agents.builtin.lowering import triton_program
from forge.core.importing import import_file

TMP = Path(tempfile.mkdtemp(prefix="forge-triton-lowered-"))
atexit.register(shutil.rmtree, TMP, True)
# name: (forward's return expression, __init__ lines, get_inputs' list items)
CASES: dict[str, tuple[str, str, str]] = {
    "pointwise_chain": (
        "torch.sigmoid(x * 1.5 + 0.25).tanh() * x.abs().sqrt() + torch.sinh(x)",
        "",
        "torch.randn(5, 37)",
    ),
    "activations": (
        "F.gelu(x, approximate='tanh') + F.elu(x) + F.softplus(x) + F.leaky_relu(x, 0.1) + F.hardtanh(x)",
        "",
        "torch.randn(9, 33)",
    ),
    "transpose_broadcast": ("x.transpose(0, 1) + y * z", "", "torch.randn(6, 5), torch.randn(5, 6), torch.randn(6)"),
    "sum_middle_dim": ("x.sum(dim=1)", "", "torch.randn(4, 33, 7)"),
    "softmax_middle_dim": ("torch.softmax(x, dim=1)", "", "torch.randn(4, 33, 7)"),
    "var_last_dim": ("x.var(dim=-1, keepdim=True)", "", "torch.randn(6, 301)"),
    "amax_everything": ("x.amax()", "", "torch.randn(6, 301)"),
    "amax_nan": ("x.amax(dim=1)", "", "torch.where(torch.arange(40) == 7, float('nan'), torch.randn(5, 40))"),
    "prod_first_dim": ("x.prod(dim=0)", "", "torch.rand(5, 9) + 0.5"),
    "count_positive": ("(x > 0).sum(dim=1)", "", "torch.randn(6, 50)"),
    "float64_mean": ("x.mean(dim=(0, 2))", "", "torch.randn(3, 10, 17, dtype=torch.float64)"),
    "argmax_by_torch": ("torch.argmax(x * 2, dim=1)", "", "torch.randn(6, 40)"),
    "cumsum_by_torch": ("torch.cumsum(x.exp(), dim=1)", "", "torch.randn(6, 40)"),
    "maxpool_then_add": ("F.max_pool2d(x, 2) + 1", "", "torch.randn(2, 3, 8, 8)"),
    "batchnorm_training": ("self.bn(x)", "self.bn = torch.nn.BatchNorm2d(3)", "torch.randn(4, 3, 5, 6)"),
    "conv_epilogue": ("torch.relu(self.c(x)) * 2", "self.c = torch.nn.Conv2d(3, 4, 3)", "torch.randn(2, 3, 8, 8)"),
    "groupnorm": ("self.n(x)", "self.n = torch.nn.GroupNorm(2, 4)", "torch.randn(3, 4, 6, 5)"),
    "mse_loss": ("F.mse_loss(x, y)", "", "torch.randn(8, 20), torch.randn(8, 20)"),
    "plain_attribute": (
        "(x * self.mask).sum(dim=-1)",
        "self.mask = torch.tril(torch.ones(6, 6))",
        "torch.randn(3, 6, 6)",
    ),
    "rotary_stack": (
        "torch.stack((x[..., 0::2] * y - x[..., 1::2] * z, x[..., 0::2] * z + x[..., 1::2] * y), -1).flatten(-2)",
        "",
        "torch.randn(2, 3, 8, 16), torch.randn(8, 8), torch.randn(8, 8)",
    ),
    "heads_rotated": (  # a head split's permute, then even/odd slices: as_strided of the projection
        "torch.stack((x.view(2, 5, 2, 8).permute(0, 2, 1, 3)[..., 0::2] * y,"
        " x.view(2, 5, 2, 8).permute(0, 2, 1, 3)[..., 1::2] * z), -1).flatten(-2)",
        "",
        "torch.randn(2, 5, 16), torch.randn(5, 4), torch.randn(5, 4)",
    ),
    "cat_three_parts": (
        "torch.cat((x.exp(), y, x[:, :1] * 2), dim=1).sum(-1)",
        "",
        "torch.randn(5, 7), torch.randn(5, 3)",
    ),
    "made_in_forward": ("x * torch.tensor([1.0, float('nan'), -2.0, 4.0])", "", "torch.randn(5, 4)"),
}
CONFIGS = [None, {"block": 64, "rblock": 16, "num_warps": 2}]


def _source(forward: str, init: str, inputs: str) -> str:
    count = len(eval(f"[{inputs}]", {"torch": torch}))  # the cases' own literals, not user input
    args = ", ".join(["x", "y", "z"][:count])
    return textwrap.dedent(f"""
        import torch
        import torch.nn.functional as F
        class Model(torch.nn.Module):
            def __init__(self):
                super().__init__()
                {init or "pass"}
            def forward(self, {args}):
                return {forward}
        def get_inputs():
            return [{inputs}]
        def get_init_inputs():
            return []
        """)


def check(name: str, device: str) -> None:
    path = TMP / f"ref_{name}.py"
    path.write_text(_source(*CASES[name]))
    ref = import_file("forge_reference", path)
    sys.modules["forge_reference"] = ref
    torch.manual_seed(0)
    model = ref.Model()
    lowered = triton_program.analyze(model, ref.get_inputs())
    assert not isinstance(lowered, str), lowered
    for k, config in enumerate(CONFIGS):
        cand_path = TMP / f"cand_{name}_{k}.py"  # Triton reads a kernel's source from its file
        cand_path.write_text(triton_program.render(lowered, config))
        # built and called on the device, as an op written for it is: a plain tensor attribute and
        # a tensor made in forward land there too
        with torch.device(device):
            torch.manual_seed(1)
            want_model = ref.Model()
            cand = import_file(f"cand_{name}_{k}", cand_path).ModelNew()
            cand.load_state_dict(want_model.state_dict())
            torch.manual_seed(2)
            xs = ref.get_inputs()
            torch.testing.assert_close(cand(*xs), want_model(*xs), rtol=1e-4, atol=1e-4, equal_nan=True)
        for (key, want), got in zip(want_model.state_dict().items(), cand.state_dict().values(), strict=True):
            torch.testing.assert_close(got, want, rtol=1e-4, atol=1e-4, msg=f"buffer {key} after the call")


def run_cases(device: str = "cpu") -> dict[str, str]:
    results = {}
    for name in CASES:
        try:
            check(name, device)
            results[name] = "ok"
        except Exception:
            results[name] = traceback.format_exc()[-1500:]
    return results


if __name__ == "__main__":
    print(json.dumps(run_cases(sys.argv[sys.argv.index("--device") + 1] if "--device" in sys.argv else "cpu")))
