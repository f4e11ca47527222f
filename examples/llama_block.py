"""The bundled example model: a Llama-style decoder block (RMSNorm, rotary embedding,
grouped-query attention through scaled_dot_product_attention, SwiGLU), with random weights.

`scripts/demo` exports it with forge.export. EXAMPLE builds the module and its example inputs.
"""

import torch
import torch.nn as nn
import torch.nn.functional as F


class RmsNorm(nn.Module):
    def __init__(self, width, eps=1e-6):
        super().__init__()
        self.weight = nn.Parameter(torch.rand(width) + 0.5)
        self.eps = eps

    def forward(self, x):
        variance = x.pow(2).mean(-1, keepdim=True)
        return x * torch.rsqrt(variance + self.eps) * self.weight


def rotate_half(x):
    first, second = x.chunk(2, dim=-1)
    return torch.cat((-second, first), dim=-1)


class LlamaBlock(nn.Module):
    """A Llama-style decoder block: RMSNorm, rotary embedding, grouped-query attention through
    scaled_dot_product_attention, SwiGLU."""

    def __init__(self, width=64, heads=4, kv_heads=2, hidden=128, max_positions=64):
        super().__init__()
        self.heads, self.kv_heads, self.head_dim = heads, kv_heads, width // heads
        self.attn_norm = RmsNorm(width)
        self.q_proj = nn.Linear(width, heads * self.head_dim, bias=False)
        self.k_proj = nn.Linear(width, kv_heads * self.head_dim, bias=False)
        self.v_proj = nn.Linear(width, kv_heads * self.head_dim, bias=False)
        self.o_proj = nn.Linear(width, width, bias=False)
        self.mlp_norm = RmsNorm(width)
        self.gate = nn.Linear(width, hidden, bias=False)
        self.up = nn.Linear(width, hidden, bias=False)
        self.down = nn.Linear(hidden, width, bias=False)
        inv_freq = 1.0 / (10000 ** (torch.arange(0, self.head_dim, 2).float() / self.head_dim))
        angles = torch.outer(torch.arange(max_positions).float(), inv_freq)
        angles = torch.cat((angles, angles), dim=-1)
        self.register_buffer("cos", angles.cos(), persistent=False)
        self.register_buffer("sin", angles.sin(), persistent=False)

    def forward(self, x):
        batch, tokens, width = x.shape
        h = self.attn_norm(x)
        q = self.q_proj(h).view(batch, tokens, self.heads, self.head_dim).transpose(1, 2)
        k = self.k_proj(h).view(batch, tokens, self.kv_heads, self.head_dim).transpose(1, 2)
        v = self.v_proj(h).view(batch, tokens, self.kv_heads, self.head_dim).transpose(1, 2)
        cos, sin = self.cos[:tokens], self.sin[:tokens]
        q = q * cos + rotate_half(q) * sin
        k = k * cos + rotate_half(k) * sin
        repeat = self.heads // self.kv_heads
        k = k.repeat_interleave(repeat, dim=1)
        v = v.repeat_interleave(repeat, dim=1)
        attn = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        x = x + self.o_proj(attn.transpose(1, 2).reshape(batch, tokens, width))
        h = self.mlp_norm(x)
        return x + self.down(F.silu(self.gate(h)) * self.up(h))


def example():
    """The module (eval mode, seeded random weights) and example inputs: 2 sequences of 64 tokens."""
    torch.manual_seed(0)
    width = 256
    module = LlamaBlock(width=width, heads=8, kv_heads=2, hidden=688, max_positions=64).eval()
    return module, (torch.randn(2, 64, width),)
