"""A small Llama from transformers, random weights (no download): a model as people have it."""

import torch
from transformers import LlamaConfig, LlamaForCausalLM

VOCAB, SEQ, BATCH = 512, 32, 2


class Model(torch.nn.Module):
    def __init__(self):
        super().__init__()
        config = LlamaConfig(
            vocab_size=VOCAB,
            hidden_size=128,
            intermediate_size=344,
            num_hidden_layers=2,
            num_attention_heads=4,
            num_key_value_heads=2,
            max_position_embeddings=128,
        )
        self.lm = LlamaForCausalLM(config)

    def forward(self, ids):
        return self.lm(input_ids=ids, use_cache=False).logits


def get_inputs():
    return [torch.randint(0, VOCAB, (BATCH, SEQ))]


def get_init_inputs():
    return []
