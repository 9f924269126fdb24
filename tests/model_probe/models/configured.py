"""A test model built and called the way transformers' models are: layers built from a config
object, called with keyword arguments, None, flags and a tuple of tensors (rotary tables), with an
attention mask computed from the inputs, returning a tuple with None in it; two blocks built from
configs that differ (another epsilon); and a layer handed a KV-cache object."""

import torch
from torch import nn

BATCH, SEQ, WIDTH, HEADS = 2, 16, 32, 4


class ToyConfig:
    def __init__(self, width, heads, eps):
        self.width, self.heads, self.eps = width, heads, eps


class ToyCache:
    """State carried from call to call (what a KV cache is)."""

    def __init__(self):
        self.seen = 0


class Norm(nn.Module):
    def __init__(self, config):
        super().__init__()
        self.eps = config.eps
        self.weight = nn.Parameter(torch.ones(config.width))

    def forward(self, x):
        return self.weight * x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps)


def rotate(x, cos, sin):
    return x * cos + x.flip(-1) * sin


class Attention(nn.Module):
    def __init__(self, config):
        super().__init__()
        self.heads = config.heads
        self.qkv = nn.Linear(config.width, 3 * config.width)
        self.out = nn.Linear(config.width, config.width)

    def forward(self, hidden_states, position_embeddings, attention_mask=None, cache=None, output_weights=False):
        b, s, w = hidden_states.shape
        q, k, v = self.qkv(hidden_states).view(b, s, 3, self.heads, w // self.heads).permute(2, 0, 3, 1, 4)
        cos, sin = position_embeddings
        q, k = rotate(q, cos, sin), rotate(k, cos, sin)
        weights = (q @ k.transpose(-1, -2)) / (w // self.heads) ** 0.5 + attention_mask
        o = (weights.softmax(-1) @ v).transpose(1, 2).reshape(b, s, w)
        return self.out(o), (weights if output_weights else None)


class Counter(nn.Module):
    """A layer handed a cache object: refused, with how to run without one."""

    def forward(self, x, cache):
        cache.seen += 1
        return x * 2


class Block(nn.Module):
    def __init__(self, config):
        super().__init__()
        self.norm = Norm(config)
        self.attn = Attention(config)

    def forward(self, x, mask, rotary):
        h, _ = self.attn(hidden_states=self.norm(x), attention_mask=mask, position_embeddings=rotary, cache=None)
        return x + h


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.blocks = nn.ModuleList([Block(ToyConfig(WIDTH, HEADS, 1e-6)), Block(ToyConfig(WIDTH, HEADS, 1e-5))])
        self.counter = Counter()

    def forward(self, x):
        s, d = x.shape[1], WIDTH // HEADS
        angles = torch.arange(s, dtype=torch.float32)[:, None] * torch.arange(d, dtype=torch.float32)[None] / d
        rotary = (angles.cos(), angles.sin())
        mask = torch.full((s, s), float("-inf")).triu(1)
        for block in self.blocks:
            x = block(x, mask, rotary)
        return self.counter(x, ToyCache())


def get_inputs():
    return [torch.randn(BATCH, SEQ, WIDTH)]


def get_init_inputs():
    return []
