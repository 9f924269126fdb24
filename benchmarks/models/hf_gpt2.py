"""GPT-2 from transformers: a small config, random weights."""

import torch
from transformers import GPT2Config, GPT2LMHeadModel

VOCAB, SEQ, BATCH = 1000, 128, 2


class Model(torch.nn.Module):
    def __init__(self):
        super().__init__()
        config = GPT2Config(
            vocab_size=VOCAB, n_positions=256, n_embd=256, n_layer=2, n_head=4, bos_token_id=0, eos_token_id=0
        )
        self.lm = GPT2LMHeadModel(config)

    def forward(self, ids):
        return self.lm(ids, use_cache=False).logits


def get_inputs():
    return [torch.randint(0, VOCAB, (BATCH, SEQ))]


def get_init_inputs():
    return []
