"""A small decoder-only transformer in the op format, for `forge plan`.

Attention reshapes its heads from the width each rank holds (``view(b, s, -1, head_dim)``), so a
column-sharded q/k/v keeps whole heads on each rank; a model that hard-codes the head count there
fails tensor parallelism, and forge's real run says where.
"""

import torch
from torch import nn

vocab, hidden, heads, ffn, layers = 512, 256, 8, 1024, 4
batch, seq = 8, 64


class Attention(nn.Module):
    def __init__(self):
        super().__init__()
        self.num_heads, self.head_dim = heads, hidden // heads
        self.q, self.k, self.v = nn.Linear(hidden, hidden), nn.Linear(hidden, hidden), nn.Linear(hidden, hidden)
        self.proj = nn.Linear(hidden, hidden)

    def forward(self, x):
        b, s, _ = x.shape
        q, k, v = (t(x).view(b, s, -1, self.head_dim).transpose(1, 2) for t in (self.q, self.k, self.v))
        out = nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True)
        return self.proj(out.transpose(1, 2).reshape(b, s, -1))


class Mlp(nn.Module):
    def __init__(self):
        super().__init__()
        self.up, self.down = nn.Linear(hidden, ffn), nn.Linear(ffn, hidden)

    def forward(self, x):
        return self.down(nn.functional.gelu(self.up(x)))


class Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.norm1, self.attn, self.norm2, self.mlp = nn.LayerNorm(hidden), Attention(), nn.LayerNorm(hidden), Mlp()

    def forward(self, x):
        x = x + self.attn(self.norm1(x))
        return x + self.mlp(self.norm2(x))


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.embed = nn.Embedding(vocab, hidden)
        self.blocks = nn.ModuleList(Block() for _ in range(layers))
        self.norm, self.head = nn.LayerNorm(hidden), nn.Linear(hidden, vocab)

    def forward(self, tokens):
        x = self.embed(tokens)
        for block in self.blocks:
            x = block(x)
        return self.head(self.norm(x))


def get_inputs():
    return [torch.randint(0, vocab, (batch, seq))]


def get_init_inputs():
    return []
