"""A small decoder-only transformer, written the way many are: RMSNorm computed in float32 from
its pieces, rotary position embeddings applied in eager, a SwiGLU feed-forward, causal attention.

`forge optimize examples/models/decoder.py --modules` profiles it, optimizes its hot classes and
proves the kernelized model against the original, in eager and under torch.compile.
"""

import torch
from torch import nn

vocab, hidden, heads, ffn, layers = 512, 256, 4, 704, 2
batch, seq = 4, 128


class RMSNorm(nn.Module):
    def __init__(self, dim, eps=1e-6):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(dim))

    def forward(self, x):
        h = x.float()
        h = h * torch.rsqrt(h.pow(2).mean(-1, keepdim=True) + self.eps)
        return self.weight * h.to(x.dtype)


class SwiGLU(nn.Module):
    def __init__(self, dim, inner):
        super().__init__()
        self.gate = nn.Linear(dim, inner, bias=False)
        self.up = nn.Linear(dim, inner, bias=False)
        self.down = nn.Linear(inner, dim, bias=False)

    def forward(self, x):
        return self.down(nn.functional.silu(self.gate(x)) * self.up(x))


class Rotary(nn.Module):
    """Rotates each head's query and key pairs by a position-dependent angle."""

    def __init__(self, head_dim, max_seq, base=10000.0):
        super().__init__()
        inv = 1.0 / base ** (torch.arange(0, head_dim, 2).float() / head_dim)
        angles = torch.outer(torch.arange(max_seq).float(), inv)
        self.register_buffer("cos", angles.cos(), persistent=False)
        self.register_buffer("sin", angles.sin(), persistent=False)

    def forward(self, x):
        s = x.shape[-2]
        x1, x2 = x[..., 0::2], x[..., 1::2]
        cos, sin = self.cos[:s], self.sin[:s]
        return torch.stack((x1 * cos - x2 * sin, x1 * sin + x2 * cos), dim=-1).flatten(-2)


class Attention(nn.Module):
    def __init__(self, dim, n_heads, max_seq):
        super().__init__()
        self.n_heads, self.head_dim = n_heads, dim // n_heads
        self.qkv = nn.Linear(dim, 3 * dim, bias=False)
        self.out = nn.Linear(dim, dim, bias=False)
        self.rotary = Rotary(self.head_dim, max_seq)

    def forward(self, x):
        b, s, _ = x.shape
        q, k, v = self.qkv(x).view(b, s, 3, self.n_heads, self.head_dim).permute(2, 0, 3, 1, 4)
        q, k = self.rotary(q), self.rotary(k)
        y = nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True)
        return self.out(y.transpose(1, 2).reshape(b, s, -1))


class Block(nn.Module):
    def __init__(self, dim, n_heads, inner, max_seq):
        super().__init__()
        self.attn_norm, self.attn = RMSNorm(dim), Attention(dim, n_heads, max_seq)
        self.mlp_norm, self.mlp = RMSNorm(dim), SwiGLU(dim, inner)

    def forward(self, x):
        x = x + self.attn(self.attn_norm(x))
        return x + self.mlp(self.mlp_norm(x))


class Model(nn.Module):
    def __init__(self, n_vocab, dim, n_heads, inner, n_layers, max_seq):
        super().__init__()
        self.embed = nn.Embedding(n_vocab, dim)
        self.blocks = nn.ModuleList(Block(dim, n_heads, inner, max_seq) for _ in range(n_layers))
        self.norm = RMSNorm(dim)
        self.head = nn.Linear(dim, n_vocab, bias=False)

    def forward(self, tokens):
        x = self.embed(tokens)
        for block in self.blocks:
            x = block(x)
        return self.head(self.norm(x))


def get_inputs():
    return [torch.randint(0, vocab, (batch, seq))]


def get_init_inputs():
    return [vocab, hidden, heads, ffn, layers, seq]
