"""Test models, built in test code with random weights (no downloads)."""

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
        ("cumsum_scale", CumsumScale(), (torch.randn(8, 100),)),
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
