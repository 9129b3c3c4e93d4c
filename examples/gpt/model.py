"""A GPT-2-style decoder, small enough to train on a CPU in a demo.

Token and position embeddings, pre-LayerNorm blocks of causal self-attention
and a GELU MLP, a final LayerNorm, and an LM head tied to the token
embedding. Module names (`blocks.0.attn.qkv`, ...) are what fsdpc's
`--wrap 'module:blocks\\.[0-9]+'` groups by.
"""
import math

import torch
from torch import nn
from torch.nn import functional as F


class CausalSelfAttention(nn.Module):
    def __init__(self, dim, heads, context, dropout, sdpa=False):
        super().__init__()
        self.heads = heads
        # sdpa: torch 2's fused scaled_dot_product_attention (the same
        # function; what a torch baseline on a GPU runs). The ONNX export
        # keeps the explicit masked softmax that exporters write.
        self.sdpa = sdpa
        self.qkv = nn.Linear(dim, 3 * dim)
        self.proj = nn.Linear(dim, dim)
        self.dropout = nn.Dropout(dropout)
        self.register_buffer("mask", torch.tril(torch.ones(context, context, dtype=torch.bool)).view(1, 1, context, context))

    def forward(self, x):
        b, t, c = x.shape
        q, k, v = self.qkv(x).split(c, dim=2)
        q = q.view(b, t, self.heads, c // self.heads).transpose(1, 2)
        k = k.view(b, t, self.heads, c // self.heads).transpose(1, 2)
        v = v.view(b, t, self.heads, c // self.heads).transpose(1, 2)
        if self.sdpa:
            y = F.scaled_dot_product_attention(q, k, v, is_causal=True, dropout_p=self.dropout.p if self.training else 0.0)
            return self.proj(y.transpose(1, 2).contiguous().view(b, t, c))
        scores = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(k.size(-1)))
        scores = scores.masked_fill(~self.mask[:, :, :t, :t], float("-inf"))
        weights = self.dropout(F.softmax(scores, dim=-1))
        y = (weights @ v).transpose(1, 2).contiguous().view(b, t, c)
        return self.proj(y)


class Block(nn.Module):
    def __init__(self, dim, heads, context, dropout, sdpa=False):
        super().__init__()
        self.ln1 = nn.LayerNorm(dim)
        self.attn = CausalSelfAttention(dim, heads, context, dropout, sdpa)
        self.ln2 = nn.LayerNorm(dim)
        self.fc = nn.Linear(dim, 4 * dim)
        self.out = nn.Linear(4 * dim, dim)
        self.dropout = nn.Dropout(dropout)

    def forward(self, x):
        x = x + self.attn(self.ln1(x))
        return x + self.dropout(self.out(F.gelu(self.fc(self.ln2(x)))))


class GPT(nn.Module):
    def __init__(self, vocab=67, context=32, dim=48, heads=4, layers=2, dropout=0.0, sdpa=False):
        super().__init__()
        self.wte = nn.Embedding(vocab, dim)
        self.wpe = nn.Embedding(context, dim)
        self.blocks = nn.ModuleList([Block(dim, heads, context, dropout, sdpa) for _ in range(layers)])
        self.ln_f = nn.LayerNorm(dim)
        self.head = nn.Linear(dim, vocab, bias=False)
        self.head.weight = self.wte.weight  # tied, as GPT-2 does
        self.apply(self._init_weights)

    @staticmethod
    def _init_weights(module):
        # GPT-2's initialisation: small normal weights, zero biases.
        if isinstance(module, (nn.Linear, nn.Embedding)):
            nn.init.normal_(module.weight, mean=0.0, std=0.02)
        if isinstance(module, nn.Linear) and module.bias is not None:
            nn.init.zeros_(module.bias)

    def forward(self, input_ids):
        t = input_ids.shape[1]
        positions = torch.arange(0, t, dtype=torch.long, device=input_ids.device).unsqueeze(0)
        x = self.wte(input_ids) + self.wpe(positions)
        for block in self.blocks:
            x = block(x)
        return self.head(self.ln_f(x))


def build(vocab, context=32, dim=48, heads=4, layers=2):
    """The example configuration (dropout 0, so runs are comparable)."""
    return GPT(vocab, context, dim, heads, layers)
