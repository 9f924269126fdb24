"""A BERT encoder from transformers, with a padding mask: a small config, random weights."""

import torch
from transformers import BertConfig, BertModel

LAYERS = 2  # decoder layers (benchmarks.model_runs --depths runs copies at other depths)
VOCAB, SEQ, BATCH = 1000, 128, 2


class Model(torch.nn.Module):
    def __init__(self):
        super().__init__()
        config = BertConfig(
            vocab_size=VOCAB, hidden_size=256, num_hidden_layers=LAYERS, num_attention_heads=4, intermediate_size=1024
        )
        self.bert = BertModel(config, add_pooling_layer=False)

    def forward(self, ids, mask):
        return self.bert(input_ids=ids, attention_mask=mask).last_hidden_state


def get_inputs():
    mask = torch.ones(BATCH, SEQ, dtype=torch.long)
    mask[1, SEQ // 2 :] = 0
    return [torch.randint(0, VOCAB, (BATCH, SEQ)), mask]


def get_init_inputs():
    return []
