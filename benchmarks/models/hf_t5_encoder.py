"""The encoder of an encoder-decoder (T5) from transformers: a small config, random weights."""

import torch
from transformers import T5Config, T5EncoderModel

LAYERS = 2  # decoder layers (benchmarks.model_runs --depths runs copies at other depths)
VOCAB, SEQ, BATCH = 1000, 128, 2


class Model(torch.nn.Module):
    def __init__(self):
        super().__init__()
        config = T5Config(vocab_size=VOCAB, d_model=256, d_kv=32, d_ff=1024, num_layers=LAYERS, num_heads=8)
        self.encoder = T5EncoderModel(config)

    def forward(self, ids):
        return self.encoder(input_ids=ids).last_hidden_state


def get_inputs():
    return [torch.randint(0, VOCAB, (BATCH, SEQ))]


def get_init_inputs():
    return []
