"""Small models the parallel-plan tests use: a transformer block stack and an MLP stack."""

from __future__ import annotations

import torch
from torch import nn


class Attention(nn.Module):
    def __init__(self, hidden: int, num_heads: int) -> None:
        super().__init__()
        self.num_heads, self.head_dim = num_heads, hidden // num_heads
        self.q, self.k, self.v = (nn.Linear(hidden, hidden) for _ in range(3))
        self.proj = nn.Linear(hidden, hidden)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, s, _ = x.shape
        # heads from the width each rank holds: under tensor parallelism q/k/v are column shards
        q, k, v = (t(x).view(b, s, -1, self.head_dim).transpose(1, 2) for t in (self.q, self.k, self.v))
        out = torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True)
        return self.proj(out.transpose(1, 2).reshape(b, s, -1))


class Mlp(nn.Module):
    def __init__(self, hidden: int, ffn: int) -> None:
        super().__init__()
        self.up, self.down = nn.Linear(hidden, ffn), nn.Linear(ffn, hidden)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.down(torch.nn.functional.gelu(self.up(x)))


class Block(nn.Module):
    def __init__(self, hidden: int, num_heads: int, ffn: int) -> None:
        super().__init__()
        self.norm1, self.attn = nn.LayerNorm(hidden), Attention(hidden, num_heads)
        self.norm2, self.mlp = nn.LayerNorm(hidden), Mlp(hidden, ffn)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x + self.attn(self.norm1(x))
        return x + self.mlp(self.norm2(x))


class TinyTransformer(nn.Module):
    def __init__(self, vocab: int = 128, hidden: int = 64, num_heads: int = 4, ffn: int = 128, layers: int = 2) -> None:
        super().__init__()
        self.embed = nn.Embedding(vocab, hidden)
        self.blocks = nn.ModuleList(Block(hidden, num_heads, ffn) for _ in range(layers))
        self.norm, self.head = nn.LayerNorm(hidden), nn.Linear(hidden, vocab)

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        x = self.embed(tokens)
        for block in self.blocks:
            x = block(x)
        return self.head(self.norm(x))
