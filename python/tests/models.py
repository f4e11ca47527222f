"""Test models, built in test code with random weights (no downloads)."""

import math

import torch
import torch.nn as nn
import torch.nn.functional as F

from llama_block import LlamaBlock


class Mlp(nn.Module):
    def __init__(self, width=64, hidden=256):
        super().__init__()
        self.up = nn.Linear(width, hidden)
        self.down = nn.Linear(hidden, width)

    def forward(self, x):
        return self.down(F.gelu(self.up(x)))


class LinearMulLeakyRelu(nn.Module):
    def __init__(self, width=64):
        super().__init__()
        self.fc = nn.Linear(width, width)

    def forward(self, x):
        return F.leaky_relu(self.fc(x) * 2.0, 0.01)


class SwiGluMlp(nn.Module):
    """A Llama-3-style MLP in bfloat16: down(silu(gate(x)) * up(x)), no biases (the partitioner's
    gated-product task: gate, silu, up and mul as one GEMM task)."""

    def __init__(self, width=64, hidden=128):
        super().__init__()
        self.gate = nn.Linear(width, hidden, bias=False)
        self.up = nn.Linear(width, hidden, bias=False)
        self.down = nn.Linear(hidden, width, bias=False)
        self.to(torch.bfloat16)

    def forward(self, x):
        return self.down(F.silu(self.gate(x)) * self.up(x))


class ConvBnRelu(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(3, 8, 3, padding=1)
        self.bn = nn.BatchNorm2d(8)
        with torch.no_grad():
            self.bn.running_mean.uniform_(-0.5, 0.5)
            self.bn.running_var.uniform_(0.5, 1.5)

    def forward(self, x):
        return F.relu(self.bn(self.conv(x)))


class Softmax(nn.Module):
    def forward(self, x):
        return torch.softmax(x, dim=-1)


class LayerNormGelu(nn.Module):
    def __init__(self, width=64):
        super().__init__()
        self.norm = nn.LayerNorm(width)

    def forward(self, x):
        return F.gelu(self.norm(x))


class MixedPrecisionSoftmax(nn.Module):
    """bf16 in, float32 softmax, bf16 out: Tensor.float() and .to() as users write them."""

    def forward(self, x):
        return torch.softmax(x.float() * 0.5, dim=-1).to(torch.bfloat16)


class CrossEntropy(nn.Module):
    def forward(self, logits, target):
        return F.cross_entropy(logits, target)


class LlamaStack(nn.Module):
    """Identical Llama-style blocks in a row: their tasks must collapse into one set."""

    def __init__(self, layers=3):
        super().__init__()
        self.layers = nn.ModuleList(LlamaBlock() for _ in range(layers))

    def forward(self, x):
        for layer in self.layers:
            x = layer(x)
        return x


class CausalMaskSoftmax(nn.Module):
    """Attention scores under a causal mask: the future filled with -inf (masked_fill), then
    softmax, as decoders write it. A .pt2 archive spells the -inf as the string "-Infinity"."""

    def __init__(self, length=16):
        super().__init__()
        self.register_buffer("mask", torch.ones(length, length, dtype=torch.bool).triu(1))

    def forward(self, scores):
        return torch.softmax(scores.masked_fill(self.mask, float("-inf")), dim=-1)


class NonFiniteConstants(nn.Module):
    """NaN, +inf and -inf as scalar arguments, with a finite result."""

    def forward(self, x):
        no_nan = torch.nan_to_num(x.masked_fill(x < -1, float("nan")), nan=0.5)
        decay = torch.exp(-x.masked_fill(x > 1, float("inf")))
        return no_nan + decay.clamp(min=float("-inf"), max=4.0)


class CumsumScale(nn.Module):
    """A prefix sum with an elementwise prologue and epilogue: one SCAN task."""

    def forward(self, x):
        return torch.cumsum(x * 2.0, dim=-1) / x.shape[-1]


def rotate_half(x):
    half = x.shape[-1] // 2
    return torch.cat((-x[..., half:], x[..., :half]), dim=-1)


class GlueAttention(nn.Module):
    """A Mistral-style attention head's glue around its GEMMs, in small odd sizes: token and
    position embeddings (embedding, arange), rotary embedding (the Llama form: slices, neg, cat),
    grouped-query attention (repeat_interleave of K and V feeding the matmuls) and a causal mask
    built in the graph (ones, triu, masked_fill; finite, so that every stage runs it)."""

    def __init__(self, vocab=37, positions=16, width=24, heads=4, kv_heads=2, head_dim=6):
        super().__init__()
        self.heads, self.kv_heads, self.head_dim = heads, kv_heads, head_dim
        self.tokens = nn.Embedding(vocab, width)
        self.positions = nn.Embedding(positions, width)
        self.q = nn.Linear(width, heads * head_dim, bias=False)
        self.k = nn.Linear(width, kv_heads * head_dim, bias=False)
        self.v = nn.Linear(width, kv_heads * head_dim, bias=False)
        self.o = nn.Linear(heads * head_dim, width, bias=False)
        inv_freq = 1.0 / (10000 ** (torch.arange(0, head_dim, 2).float() / head_dim))
        angles = torch.outer(torch.arange(positions).float(), inv_freq)
        angles = torch.cat((angles, angles), dim=-1)
        self.register_buffer("cos", angles.cos())
        self.register_buffer("sin", angles.sin())

    def forward(self, ids):
        batch, length = ids.shape
        x = self.tokens(ids) + self.positions(torch.arange(length, device=ids.device))
        q = self.q(x).view(batch, length, self.heads, self.head_dim).transpose(1, 2)
        k = self.k(x).view(batch, length, self.kv_heads, self.head_dim).transpose(1, 2)
        v = self.v(x).view(batch, length, self.kv_heads, self.head_dim).transpose(1, 2)
        cos, sin = self.cos[:length], self.sin[:length]
        q = q * cos + rotate_half(q) * sin
        k = k * cos + rotate_half(k) * sin
        k = k.repeat_interleave(self.heads // self.kv_heads, dim=1)
        v = v.repeat_interleave(self.heads // self.kv_heads, dim=1)
        scores = q @ k.transpose(-1, -2) * self.head_dim**-0.5
        mask = torch.triu(torch.ones(length, length, dtype=torch.bool, device=ids.device), 1)
        probabilities = torch.softmax(scores.masked_fill(mask, -1e4), dim=-1)
        out = (probabilities @ v).transpose(1, 2).reshape(batch, length, -1)
        return self.o(out)


class ExplicitAttention(nn.Module):
    """GPT-2-style causal self-attention written out: q @ k^T / sqrt(d), masked_fill of the
    future (~tril(ones)) with the dtype's lowest value (as Hugging Face's GPT-2), softmax, dropout (the identity in eval), @ v. The partitioner
    makes one ATTENTION task of the five steps (compiler/graph/attention_pattern.h)."""

    def __init__(self, width=32, heads=4):
        super().__init__()
        self.heads, self.head_dim = heads, width // heads
        self.qkv = nn.Linear(width, 3 * width)
        self.proj = nn.Linear(width, width)
        self.drop = nn.Dropout(0.1)

    def forward(self, x):
        batch, length, width = x.shape
        q, k, v = self.qkv(x).split(width, dim=2)
        q = q.view(batch, length, self.heads, self.head_dim).transpose(1, 2)
        k = k.view(batch, length, self.heads, self.head_dim).transpose(1, 2)
        v = v.view(batch, length, self.heads, self.head_dim).transpose(1, 2)
        scores = (q @ k.transpose(-2, -1)) / math.sqrt(self.head_dim)
        mask = torch.tril(torch.ones(length, length, dtype=torch.bool, device=x.device))
        scores = scores.masked_fill(~mask, torch.finfo(scores.dtype).min)
        out = self.drop(torch.softmax(scores, dim=-1)) @ v
        return self.proj(out.transpose(1, 2).contiguous().view(batch, length, width))


class SdpaGqa(nn.Module):
    """scaled_dot_product_attention, causal, with grouped-query heads (4 query heads, 2 KV)."""

    def forward(self, q, k, v):
        return F.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=True)


class ExpandGqaAttention(nn.Module):
    """Llama's repeat_kv (expand + reshape) on K and V, then explicit unmasked attention with
    a multiplied scale."""

    def forward(self, q, k, v):
        batch, kv_heads, length, dim = k.shape
        k = k[:, :, None].expand(batch, kv_heads, 2, length, dim).reshape(batch, 2 * kv_heads,
                                                                          length, dim)
        v = v[:, :, None].expand(batch, kv_heads, 2, length, dim).reshape(batch, 2 * kv_heads,
                                                                          length, dim)
        scores = torch.matmul(q, k.transpose(2, 3)) * dim**-0.5
        return torch.matmul(torch.softmax(scores, dim=-1), v)


class GlueOps(nn.Module):
    """Every glue op the pointwise family reads through, on small odd shapes and mixed dtypes:
    cat (float32 with bfloat16, promoted), stack, flip, roll (with and without dims), repeat,
    repeat_interleave (with and without dim), tril, arange, full_like, zeros_like, where with a
    scalar, index_select and gather."""

    def forward(self, x, h, rows, columns):
        joined = torch.cat((x, h), dim=1) + torch.stack((x, h.float()), dim=2).flatten(1)
        tiled = x.repeat(1, 2) * torch.repeat_interleave(x, 2, dim=1)
        moved = torch.flip(x, (0, 1)) + torch.roll(x, 2, 1) - torch.roll(x, -3)
        masked = torch.tril(x, -1) + torch.where(x > 0, 1.5, x)
        made = torch.arange(x.shape[1], device=x.device) * 0.5 + torch.full_like(x, 2.0)
        picked = torch.index_select(x, 0, rows) * 2.0
        gathered = torch.gather(x, 1, columns) + torch.zeros_like(columns, dtype=torch.float32)
        flat = torch.repeat_interleave(h, 3).float() + 1.0
        return joined + tiled, moved + masked + made, picked, gathered, flat


def resnet18():
    import torchvision

    return torchvision.models.resnet18(weights=None)


def all_models():
    """(name, module in eval mode, example inputs) for every test model."""
    torch.manual_seed(0)
    cases = [
        ("mlp", Mlp(), (torch.randn(8, 64),)),
        ("linear_mul_leaky_relu", LinearMulLeakyRelu(), (torch.randn(8, 64),)),
        ("llama_block", LlamaBlock(), (torch.randn(2, 16, 64),)),
        ("llama_stack", LlamaStack(), (torch.randn(2, 16, 64),)),
        ("conv_bn_relu", ConvBnRelu(), (torch.randn(2, 3, 16, 16),)),
        ("softmax", Softmax(), (torch.randn(8, 100),)),
        ("layer_norm_gelu", LayerNormGelu(), (torch.randn(8, 64),)),
        ("mixed_precision_softmax", MixedPrecisionSoftmax(), (torch.randn(8, 100).bfloat16(),)),
        ("cross_entropy", CrossEntropy(), (torch.randn(8, 10), torch.randint(0, 10, (8,)))),
        ("resnet18", resnet18(), (torch.randn(1, 3, 64, 64),)),
        ("glue_attention", GlueAttention(), (torch.randint(0, 37, (2, 11)),)),
        ("glue_ops", GlueOps(), (torch.randn(5, 6), torch.randn(5, 6).bfloat16(),
                                 torch.tensor([4, 0, 2]), torch.randint(0, 6, (5, 3)))),
        ("cumsum_scale", CumsumScale(), (torch.randn(8, 100),)),
        ("explicit_attention", ExplicitAttention(), (torch.randn(2, 7, 32),)),
        ("sdpa_gqa", SdpaGqa(), (torch.randn(2, 4, 7, 8), torch.randn(2, 2, 7, 8),
                                 torch.randn(2, 2, 7, 8))),
        ("expand_gqa_attention", ExpandGqaAttention(), (torch.randn(2, 4, 7, 8),
                                                        torch.randn(2, 2, 7, 8),
                                                        torch.randn(2, 2, 7, 8))),
        ("swiglu_mlp_bf16", SwiGluMlp(), (torch.randn(2, 16, 64).bfloat16(),)),
    ]
    return [(name, module.eval(), inputs) for name, module, inputs in cases]


def nonfinite_constant_models():
    """(name, module in eval mode, example inputs) for the models with non-finite float constants
    (the importer's tests; not in all_models, whose models every stage runs)."""
    torch.manual_seed(0)
    cases = [
        ("causal_mask_softmax", CausalMaskSoftmax(), (torch.randn(2, 4, 16, 16),)),
        ("nonfinite_constants", NonFiniteConstants(), (torch.randn(8, 32),)),
    ]
    return [(name, module.eval(), inputs) for name, module, inputs in cases]
