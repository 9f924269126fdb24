"""The slack the brief tells the agents is the slack the verifier applies: the brief's figures
for each kind of case are ``compare``'s on the same draw, and its prompt text carries them; a
summation order, an accumulator or a rounding the brief calls free passes the real verifier,
and a real error fails it."""

from __future__ import annotations

import math

import pytest
import torch

from forge.agents.llm.prompts import render
from forge.core.op_brief import OpBrief
from forge.core.slack_rules import CASE_NAMES
from forge.verifier import verify
from forge.verifier.briefing.slack_brief import output_slacks
from forge.verifier.parent.checks import input_elements
from forge.verifier.parent.compare import compare
from forge.verifier.worker.cases import stress_inputs
from forge.verifier.worker.op_work.reduction_lengths import reduction_lengths
from forge.verifier.worker.reference_cases import run_in_float64


class Attention(torch.nn.Module):
    def forward(self, q, k, v):
        s = (q @ k.transpose(-1, -2)) / math.sqrt(q.shape[-1])
        return torch.softmax(s, dim=-1) @ v


class RowSum(torch.nn.Module):
    def forward(self, x):
        return x.sum(-1)


def _inputs(model: torch.nn.Module) -> list[torch.Tensor]:
    torch.manual_seed(1)
    if isinstance(model, Attention):
        return [torch.randn(2, 256, 64) for _ in range(3)]
    return [torch.randn(16, 4096)]


def _drawn(model: torch.nn.Module, inputs: list[torch.Tensor], case: str):
    if case != "normal":
        inputs = stress_inputs(inputs, case, 0)  # the brief's draw (slack_brief._SEED)
    with torch.no_grad():
        expected = model(*inputs)
    return inputs, expected, run_in_float64(model, inputs)


@pytest.mark.parametrize("model", [Attention(), RowSum()], ids=["attention", "row_sum"])
def test_the_brief_states_the_slack_compare_applies_in_each_case(model):
    inputs = _inputs(model)
    (told,) = output_slacks(model, inputs, None, frozenset())
    assert [c.case for c in told.cases] == ["normal", "large", "heavy_tail", "mixed_sign", "specials"]
    behind = reduction_lengths(model, inputs)  # as the reference's worker finds them
    for c in told.cases:
        case_inputs, expected, exact = _drawn(model, inputs, c.case)
        if not bool(torch.isfinite(expected).any()):  # NaN everywhere (attention's rows): nothing to weigh
            assert c.own_largest is None and not c.beside_exact, c
            continue
        stress = c.case != "normal"
        reduced = input_elements(case_inputs)
        atol = c.reduction_atol if c.reduction_atol is not None else c.atol
        # off by a tenth of the told atol everywhere: within it
        inside = expected + 0.1 * c.atol * torch.sign(torch.randn_like(expected))
        told_as = {"scale_atol": stress, "reduced": reduced, "exact": exact, "behind": behind}
        assert compare([expected], [inside], None, "", None, **told_as) is None
        # off by 5% everywhere: outside, and the verdict's slack is the one the brief told
        wrong = expected * 1.05 + atol
        m = compare([expected], [wrong], None, "", None, **told_as)
        assert m is not None and m.kind == "values", (c, m)
        assert m.atol == pytest.approx(atol) and m.rtol == pytest.approx(c.rtol), (c, m)
        assert c.beside_exact == stress, c  # the float64 run stands for the truth here
    if isinstance(model, RowSum):  # 4096 elements a row: the widened atol is the one applied
        assert told.cases[0].per_element == 4096 and told.cases[0].reduction_atol > 5 * told.cases[0].atol
    else:  # attention's x * 100: its own rounding grows with the logits, and so does the slack
        normal, large = told.cases[0], told.cases[1]
        # its query's row, every key's, and the values' column it sums
        assert normal.per_element == 64 + 256 * 64 + 256, normal
        assert large.own_largest > 100 * normal.own_largest and large.atol > 100 * normal.atol, told.cases


def test_the_prompt_carries_the_told_figures():
    model = Attention()
    tolerances = output_slacks(model, _inputs(model), None, frozenset())
    text = render("brief.j2", brief=OpBrief(device="cpu", tolerances=tolerances))
    for c in tolerances[0].cases:
        row = next(line for line in text.splitlines() if line.startswith(f"| {CASE_NAMES[c.case]} |"))
        own = f"{c.own_largest:.2g} / {c.own_rms:.2g}" if c.own_largest is not None else "not measured"
        assert f"| {c.atol:.3g} | {c.rtol:.3g} |" in row and f"| {own} |" in row, row
    assert "at most 2x the reference's own" in text and "sum in any order" in text


OP = """
import math
import torch


class Model(torch.nn.Module):
    def forward(self, q, k, v):
        s = (q @ k.transpose(-1, -2)) / math.sqrt(q.shape[-1])
        mask = torch.ones(q.shape[-2], q.shape[-2], dtype=torch.bool).tril()
        return torch.softmax(s.masked_fill(~mask, float("-inf")), dim=-1) @ v


def get_inputs():
    return [torch.randn(2, 2, 96, 32) for _ in range(3)]


def get_init_inputs():
    return []
"""

# QK^T in blocks of 8 along d, the high block first, and P @ V in blocks of 16 keys: two other
# summation orders; the softmax written out
REORDERED = """
import math
import torch
from forge_reference import Model


class ModelNew(Model):
    def forward(self, q, k, v):
        d, n = q.shape[-1], q.shape[-2]
        s = torch.zeros(q.shape[:-1] + (n,), dtype=q.dtype)
        for j in reversed(range(0, d, 8)):
            s = s + q[..., j:j + 8] @ k[..., j:j + 8].transpose(-1, -2)
        s = (s / math.sqrt(d)).masked_fill(~torch.ones(n, n, dtype=torch.bool).tril(), float("-inf"))
        p = torch.exp(s - s.amax(-1, keepdim=True))
        p = p / p.sum(-1, keepdim=True)
        out = torch.zeros_like(q)
        for j in range(0, n, 16):
            out = out + p[..., j:j + 16] @ v[..., j:j + 16, :]
        return out
"""

WIDE = """
import math
import torch
from forge_reference import Model


class ModelNew(Model):
    def forward(self, q, k, v):
        n = q.shape[-2]
        s = (q.double() @ k.double().transpose(-1, -2)) / math.sqrt(q.shape[-1])
        s = s.masked_fill(~torch.ones(n, n, dtype=torch.bool).tril(), float("-inf"))
        return (torch.softmax(s, dim=-1) @ v.double()).float()
"""

# another exp: 2^(x * log2(e)), rounded otherwise than torch's exp
EXP2 = """
import math
import torch
from forge_reference import Model


class ModelNew(Model):
    def forward(self, q, k, v):
        n = q.shape[-2]
        s = (q @ k.transpose(-1, -2)) / math.sqrt(q.shape[-1])
        s = s.masked_fill(~torch.ones(n, n, dtype=torch.bool).tril(), float("-inf"))
        p = torch.exp2((s - s.amax(-1, keepdim=True)) * 1.4426950408889634)
        return (p / p.sum(-1, keepdim=True)) @ v
"""

# the logits' scale off by 0.3%: a real error, where the rounding of a reordered sum is ~1e-7
OFF = """
import math
import torch
from forge_reference import Model


class ModelNew(Model):
    def forward(self, q, k, v):
        n = q.shape[-2]
        s = (q @ k.transpose(-1, -2)) / math.sqrt(q.shape[-1]) * 1.003
        s = s.masked_fill(~torch.ones(n, n, dtype=torch.bool).tril(), float("-inf"))
        return torch.softmax(s, dim=-1) @ v
"""


def _assert_verified(tmp_path, settings, op_source: str, source: str, passes: bool) -> None:
    """``source`` verified (untimed) against the op ``op_source``: it passes, or fails on values
    outside the tolerance, as ``passes`` says."""
    op, candidate = tmp_path / "op.py", tmp_path / "candidate.py"
    op.write_text(op_source)
    candidate.write_text(source)
    v = verify(op, candidate, settings, timed=False)
    assert (v.status.value == "passed") == passes, v.reason
    if not passes:
        assert v.status.value == "failed_correctness" and "outside atol" in (v.reason or ""), v.reason


@pytest.mark.parametrize(
    ("source", "passes"),
    [(REORDERED, True), (WIDE, True), (EXP2, True), (OFF, False)],
    ids=["reordered", "float64", "exp2", "off"],
)
def test_an_attention_summed_otherwise_passes_and_one_off_by_a_real_error_fails(
    tmp_path, fast_settings, source, passes
):
    _assert_verified(tmp_path, fast_settings, OP, source, passes)


def test_an_op_of_many_outputs_shows_the_first_three_tables():
    """Five rows an output is a page for an op of many outputs: the first three are shown whole,
    the rest named with their tolerance."""
    model = Attention()
    (told,) = output_slacks(model, _inputs(model), None, frozenset())
    many = [told.model_copy(update={"output": i}) for i in range(5)]
    text = render("brief.j2", brief=OpBrief(device="cpu", tolerances=many))
    assert text.count("| case | atol | rtol |") == 3 and text.count("as the outputs above, at its own magnitude") == 2


SCAN_OP = """
import torch


class Model(torch.nn.Module):
    def forward(self, x):
        return torch.cumsum(x, dim=1)


def get_inputs():
    return [torch.randn(32, 8192)]


def get_init_inputs():
    return []
"""

# torch's CPU cumsum accumulates a float32 row in float64; numpy's accumulates in float32, one
# element after another: an honest kernel's rounding, up to 8192 additions deep
FLOAT32_SCAN = """
import numpy as np
import torch


class ModelNew(torch.nn.Module):
    def forward(self, x):
        return torch.from_numpy(np.cumsum(x.numpy(), axis=1))
"""

# the same, with the element in the middle of each row counted twice from there on
COUNTED_TWICE = """
import numpy as np
import torch


class ModelNew(torch.nn.Module):
    def forward(self, x):
        out = torch.from_numpy(np.cumsum(x.numpy(), axis=1))
        middle = x.shape[1] // 2
        out[:, middle:] += x[:, middle:middle + 1]
        return out
"""


def test_a_scan_is_a_reduction_as_long_as_its_row():
    """Elements read over elements written is 1 for a cumsum; the brief's n is the row's length
    (its last element sums all of it), and a reversed scan's the same (its first does)."""

    class Reversed(torch.nn.Module):
        def forward(self, x):
            return x.flip(1).cumsum(1).flip(1)

    x = torch.randn(8, 2048)
    for model in (Reversed(), torch.nn.Linear(2048, 2048)):
        assert reduction_lengths(model, [x]) == [2048], model
        (told,) = output_slacks(model, [x], None, frozenset())
        assert told.cases[0].per_element == 2048, told.cases[0]


def test_a_scan_compare_passes_only_with_its_length():
    """The float32 scan 8192 additions deep is off by more than the elementwise 1e-4 near the
    row's zero crossings: it fails without the scan's length and passes with it; one term counted
    twice fails with it."""
    np = pytest.importorskip("numpy")
    torch.manual_seed(0)
    x = torch.randn(32, 8192)
    expected = torch.cumsum(x, 1)
    honest = torch.from_numpy(np.cumsum(x.numpy(), axis=1))
    wrong = honest.clone()
    wrong[:, 4096:] += x[:, 4096:4097]
    reduced = x.numel()
    assert compare([expected], [honest], None, "", None, reduced=reduced) is not None
    assert compare([expected], [honest], None, "", None, reduced=reduced, behind=[8192]) is None
    m = compare([expected], [wrong], None, "", None, reduced=reduced, behind=[8192])
    assert m is not None and m.kind == "values", m


@pytest.mark.parametrize(("source", "passes"), [(FLOAT32_SCAN, True), (COUNTED_TWICE, False)], ids=["float32", "off"])
def test_a_float32_scan_passes_the_verifier_and_one_off_by_a_term_fails(tmp_path, fast_settings, source, passes):
    _assert_verified(tmp_path, fast_settings, SCAN_OP, source, passes)


def test_a_normalization_over_a_whole_tensor_is_widened_no_further_than_the_longest_counted():
    """Each output of a LayerNorm over a whole 4M-element tensor depends on all of it; widened by
    sqrt(4M) its atol let an eps 30x too large through (an error the size of the widening, not of
    a summation order). Counted up to LONGEST_WIDENED, it fails; summed in float64 it passes."""
    torch.manual_seed(0)
    shape = (64, 256, 256)
    model = torch.nn.LayerNorm(shape, elementwise_affine=False)
    x = torch.randn(shape)
    behind = reduction_lengths(model, [x])
    assert behind == [x.numel()]
    expected = model(x).detach()
    wrong_eps = torch.nn.functional.layer_norm(x, shape, eps=3e-4)
    in_float64 = torch.nn.functional.layer_norm(x.double(), shape, eps=1e-5).float()
    reduced = x.numel()
    assert compare([expected], [wrong_eps], None, "", None, reduced=reduced, behind=behind) is not None
    assert compare([expected], [in_float64], None, "", None, reduced=reduced, behind=behind) is None


def test_the_brief_says_where_the_references_nan_and_inf_went():
    """The NaN and inf case's counts are the reference's own on the brief's draw: a row-wise
    softmax turns each planted NaN into a row of them; the prompt states them."""

    class RowSoftmax(torch.nn.Module):
        def forward(self, x):
            return torch.softmax(x, dim=-1)

    x = torch.randn(64, 512)
    (told,) = output_slacks(RowSoftmax(), [x], None, frozenset())
    (specials,) = [c for c in told.cases if c.case == "specials"]
    assert [c.nonfinite for c in told.cases if c.case != "specials"] == [None] * 4
    found = specials.nonfinite
    assert found is not None and found.elements == x.numel() and found.inputs >= 3
    planted = stress_inputs([x], "specials", 0)[0]  # the brief's draw
    expected = torch.softmax(planted, dim=-1)
    assert found.nan == int(torch.isnan(expected).sum()) and found.nan % 512 == 0 and found.nan > 0
    text = render("brief.j2", brief=OpBrief(device="cpu", tolerances=[told]))
    assert f"non-finite input elements made {found.nan} NaN" in text


def test_the_judge_of_a_passing_candidate_is_told_the_freedoms_and_not_the_slack_table():
    """The judge reads passing candidates: the per-case slack and how it is applied (a failure's
    business) are the coder's; what the slack leaves free stays, so its advice keeps within it.
    A failed candidate's judge (a resumed session's) gets the table."""
    from forge.agents.llm.agents import LLMJudge
    from forge.agents.llm.client import Completion
    from forge.agents.roles import CoderContext, HistoryItem
    from forge.core.statuses import AttemptStatus
    from forge.core.verdict import Verdict

    class Client:
        model = "fake/model"

        def __init__(self) -> None:
            self.seen: list[str] = []

        def complete(self, messages, max_tokens=None, retries=4, on_text=None):  # type: ignore[no-untyped-def]
            self.seen.append(messages[-1]["content"])
            return Completion('{"next_step": "fuse", "continue": true}', 10, None, True)

    model = RowSum()
    brief = OpBrief(device="cpu", tolerances=output_slacks(model, _inputs(model), None, frozenset()))
    prompts = []
    for status in ("passed", "failed_correctness"):
        item = HistoryItem(round=1, source="a = 1\n", status=AttemptStatus(status), attempt_id=1)
        ctx = CoderContext("rowsum", "x = 1\n", "cpu", "cpp", None, [item], brief=brief, parent=item)
        verdict = Verdict.from_json({"status": status, "reason": None, "checks": [], "timings_ms": {}})
        client = Client()
        LLMJudge(client).review(ctx, verdict)  # type: ignore[arg-type]
        prompts.append(client.seen[-1])
    passed, failed = prompts
    assert "| case | atol |" not in passed and "how those columns are applied" not in passed
    assert "sum in any order" in passed and "widened for reductions and stress cases" in passed
    assert "| case | atol |" in failed and "how those columns are applied" in failed and "sum in any order" in failed
