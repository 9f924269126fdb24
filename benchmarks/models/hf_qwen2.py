"""A Qwen2 decoder from transformers (grouped-query attention, biased projections): a small
config, random weights."""

import torch
from transformers import Qwen2Config, Qwen2ForCausalLM

LAYERS = 2  # decoder layers (benchmarks.model_runs --depths runs copies at other depths)
VOCAB, SEQ, BATCH = 1000, 128, 2


class Model(torch.nn.Module):
    def __init__(self):
        super().__init__()
        config = Qwen2Config(
            vocab_size=VOCAB,
            hidden_size=256,
            intermediate_size=704,
            num_hidden_layers=LAYERS,
            num_attention_heads=8,
            num_key_value_heads=2,
            max_position_embeddings=256,
        )
        self.lm = Qwen2ForCausalLM(config)

    def forward(self, ids):
        return self.lm(input_ids=ids, use_cache=False).logits


def get_inputs():
    return [torch.randint(0, VOCAB, (BATCH, SEQ))]


def get_init_inputs():
    return []
