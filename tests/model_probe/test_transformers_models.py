"""Models people have, from transformers (a test dependency; small configs, random weights, no
download): the hot classes a Llama and a BERT are built of are carved, whatever their
constructors take and however they are called, and an LLM-style kernel for Llama's attention
(its own forward signature, keyword arguments, a tuple with None returned) passes the real
verifier."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from forge.core.problem import load_problem
from forge.core.statuses import VerdictStatus
from forge.harness.model_run.carve import write_ops
from forge.harness.model_run.choose import choose_classes
from forge.harness.verify import verify_candidate
from forge.model_probe import profile_in_process

pytest.importorskip("transformers", reason="transformers is a test dependency: pip install -e '.[dev]'")

MODELS = Path(__file__).resolve().parents[2] / "benchmarks" / "models"  # the model-level benchmark's own

LLAMA_ATTENTION = """
import torch
from forge_reference import Model


class ModelNew(Model):
    def forward(self, hidden_states, position_embeddings, attention_mask=None, **kwargs):
        b, s, _ = hidden_states.shape
        d = self.head_dim
        q = self.q_proj(hidden_states).view(b, s, -1, d).transpose(1, 2)
        k = self.k_proj(hidden_states).view(b, s, -1, d).transpose(1, 2)
        v = self.v_proj(hidden_states).view(b, s, -1, d).transpose(1, 2)
        cos, sin = (t.unsqueeze(1) for t in position_embeddings)

        def rotated(x):
            return torch.cat((-x[..., d // 2 :], x[..., : d // 2]), dim=-1)

        q, k = q * cos + rotated(q) * sin, k * cos + rotated(k) * sin
        o = torch.nn.functional.scaled_dot_product_attention(
            q, k, v, attn_mask=attention_mask, is_causal=attention_mask is None, enable_gqa=True
        )
        return self.o_proj(o.transpose(1, 2).reshape(b, s, -1)), None
"""


def _carved(model: Path, folder: Path, include: set[str] | None = None) -> tuple[dict[str, str], dict[str, Path]]:
    profile = profile_in_process(str(model), "cpu", recorded=folder / ".recorded.pt")
    choices = choose_classes(profile, model.stem, include=include, min_share=0.0)
    groups = [g for c in choices if c.chosen for g in c.groups]
    paths = write_ops(groups, profile, folder, torch.load(folder / ".recorded.pt", weights_only=True))
    reasons = {c.cls.name.rsplit(".", 1)[-1]: ("yes" if c.chosen else c.reason) for c in choices}
    return reasons, {g.name: p for g, p in zip(groups, paths, strict=True)}


@pytest.mark.e2e  # a transformers model carved and an op verified end to end (~15 s on 2 cores)
def test_a_llama_is_carved_and_its_attention_kernel_verified(tmp_path, fast_settings):
    # named: which classes a profile chooses follows measured shares (a loaded machine read 87% of the
    # MLP's time in matmuls and left it out), and what is tested here is that each can be carved
    named = {"LlamaMLP", "LlamaAttention", "LlamaRMSNorm", "LlamaDecoderLayer"}
    reasons, ops = _carved(MODELS / "hf_llama.py", tmp_path, include=named)
    # built from a LlamaConfig, called with keyword arguments and (cos, sin): carved all the same
    assert {reasons[name] for name in named} == {"yes"}, reasons
    attention = ops["hf_llama_LlamaAttention"]
    problem = load_problem(attention)
    assert type(problem.init_inputs()[0]).__name__ == "LlamaConfig"
    candidate = tmp_path / "attention.py"
    candidate.write_text(LLAMA_ATTENTION)
    verdict = verify_candidate(attention, candidate, fast_settings).verdict
    assert verdict.status is VerdictStatus.PASSED, verdict.reason


@pytest.mark.alone  # the classes chosen follow measured shares: one test at a time (.ci/run's last step)
def test_a_bert_with_a_padding_mask_is_carved_with_its_mask_kept(tmp_path):
    reasons, ops = _carved(MODELS / "hf_bert.py", tmp_path)
    for name in ("BertIntermediate", "BertOutput", "BertSelfAttention"):
        assert reasons[name] == "yes", reasons
    problem = load_problem(ops["hf_bert_BertSelfAttention"])
    mask = next(x for x in problem.inputs() if x.dtype == torch.bool)
    assert not mask[1, 0, 0, -1] and mask[0, 0, 0, -1]  # the second sequence's padding, as the model masked it
