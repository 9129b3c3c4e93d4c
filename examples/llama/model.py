"""A LLaMA-style decoder, small enough to train on a CPU in a test.

RMSNorm written out as LLaMA's reference code does (x / sqrt(mean(x^2) +
eps), which torch exports as Pow / ReduceMean / Add / Sqrt / Div), causal
self-attention without biases, and a SiLU-gated MLP (silu(gate(x)) * up(x),
then down). Token embedding and LM head are separate, as in LLaMA.
"""
import math

import torch
from torch import nn
from torch.nn import functional as F


class RMSNorm(nn.Module):
    def __init__(self, dim, eps=1e-6):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(dim))

    def forward(self, x):
        return x / torch.sqrt(x.pow(2).mean(-1, keepdim=True) + self.eps) * self.weight


class Attention(nn.Module):
    def __init__(self, dim, heads, context):
        super().__init__()
        self.heads = heads
        self.wq = nn.Linear(dim, dim, bias=False)
        self.wk = nn.Linear(dim, dim, bias=False)
        self.wv = nn.Linear(dim, dim, bias=False)
        self.wo = nn.Linear(dim, dim, bias=False)
        self.register_buffer("mask", torch.full((1, 1, context, context), float("-inf")).triu(1))

    def forward(self, x):
        b, t, c = x.shape
        shape = (b, t, self.heads, c // self.heads)
        q = self.wq(x).view(shape).transpose(1, 2)
        k = self.wk(x).view(shape).transpose(1, 2)
        v = self.wv(x).view(shape).transpose(1, 2)
        scores = q @ k.transpose(-2, -1) / math.sqrt(c // self.heads) + self.mask[:, :, :t, :t]
        y = (F.softmax(scores, dim=-1) @ v).transpose(1, 2).reshape(b, t, c)
        return self.wo(y)


class FeedForward(nn.Module):
    def __init__(self, dim, hidden):
        super().__init__()
        self.gate = nn.Linear(dim, hidden, bias=False)
        self.up = nn.Linear(dim, hidden, bias=False)
        self.down = nn.Linear(hidden, dim, bias=False)

    def forward(self, x):
        return self.down(F.silu(self.gate(x)) * self.up(x))


class Block(nn.Module):
    def __init__(self, dim, heads, context, hidden):
        super().__init__()
        self.attn_norm = RMSNorm(dim)
        self.attn = Attention(dim, heads, context)
        self.ffn_norm = RMSNorm(dim)
        self.ffn = FeedForward(dim, hidden)

    def forward(self, x):
        x = x + self.attn(self.attn_norm(x))
        return x + self.ffn(self.ffn_norm(x))


class Llama(nn.Module):
    def __init__(self, vocab, context=32, dim=48, heads=4, layers=2, hidden=128):
        super().__init__()
        self.embed = nn.Embedding(vocab, dim)
        self.blocks = nn.ModuleList([Block(dim, heads, context, hidden) for _ in range(layers)])
        self.norm = RMSNorm(dim)
        self.head = nn.Linear(dim, vocab, bias=False)
        for module in self.modules():
            if isinstance(module, (nn.Linear, nn.Embedding)):
                nn.init.normal_(module.weight, mean=0.0, std=0.02)

    def forward(self, input_ids):
        x = self.embed(input_ids)
        for block in self.blocks:
            x = block(x)
        return self.head(self.norm(x))


def build(vocab, context=32, dim=48, heads=4, layers=2, hidden=128):
    return Llama(vocab, context, dim, heads, layers, hidden)
