"""The end-to-end benchmark suite's problems: PyTorch modules with random weights and seeded input
factories, each tagged with its level, its roofline floor and the torch.compile modes to time.

A problem builds at full size (the timed one) or, with `small=True`, as a reduced variant of the
same computation that runs on a CPU in milliseconds (CI builds, runs and exports every one).

Levels: "anchor" (a row of DESIGN.md's anchor table), "L1" (one operator), "L2" (a GEMM or
convolution with 2-5 epilogue operators), "L3" (a small architecture), "llama" (Llama-3-8B
pieces) and "resnet" (ResNet-50). Llama and ResNet rows that are also anchor rows carry
`anchor=True`.

The floor is max(flops / matmul peak of the problem's dtype, min bytes / copy bandwidth), where
flops counts matrix products, convolutions and attention (torch.utils.flop_counter; elementwise
arithmetic is free next to memory traffic) and min bytes is every input, weight and output moved
once. Both are counted on the meta device, so nothing is allocated.
"""

from __future__ import annotations

import dataclasses
import functools
import math
from typing import Callable, Sequence

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.flop_counter import FlopCounterMode

F32, BF16, F16, I64 = torch.float32, torch.bfloat16, torch.float16, torch.int64

DEFAULT = "default"
MAX_AUTOTUNE = "max-autotune-no-cudagraphs"
REDUCE_OVERHEAD = "reduce-overhead"
POINTWISE_MODES = (DEFAULT,)
GEMM_MODES = (DEFAULT, MAX_AUTOTUNE)
DECODE_MODES = (DEFAULT, REDUCE_OVERHEAD)

LEVELS = ("anchor", "L1", "L2", "L3", "llama", "resnet")


@dataclasses.dataclass(frozen=True)
class Ceilings:
    """What the card can do: copy bandwidth (bytes read plus written per second) and matrix-product
    throughput per dtype (float32 without TF32)."""

    copy_bytes_per_s: float
    matmul_flops_per_s: dict[torch.dtype, float]

    def to_json(self) -> dict:
        return {"copy_bytes_per_s": self.copy_bytes_per_s,
                "matmul_flops_per_s": {str(d).removeprefix("torch."): v
                                       for d, v in self.matmul_flops_per_s.items()}}

    @staticmethod
    def from_json(data: dict) -> "Ceilings":
        return Ceilings(float(data["copy_bytes_per_s"]),
                        {getattr(torch, name): float(value)
                         for name, value in data["matmul_flops_per_s"].items()})


# Measured on the H200 (benchmarks/results/2026-11-30-h200-ceilings.md).
H200_CEILINGS = Ceilings(4.27e12, {BF16: 795.50e12, F16: 757.97e12, F32: 51.59e12})


@dataclasses.dataclass(frozen=True)
class Cost:
    flops: int      # matrix-product, convolution and attention flops
    min_bytes: int  # inputs, weights and outputs, each moved once

    def compute_ms(self, dtype: torch.dtype, ceilings: Ceilings) -> float:
        return self.flops / ceilings.matmul_flops_per_s[dtype] * 1e3

    def memory_ms(self, ceilings: Ceilings) -> float:
        return self.min_bytes / ceilings.copy_bytes_per_s * 1e3

    def floor_ms(self, dtype: torch.dtype, ceilings: Ceilings) -> float:
        return max(self.compute_ms(dtype, ceilings), self.memory_ms(ceilings))

    def bound(self, dtype: torch.dtype, ceilings: Ceilings) -> str:
        compute_bound = self.compute_ms(dtype, ceilings) > self.memory_ms(ceilings)
        return "compute" if compute_bound else "memory"


class Tensors:
    """Seeded input factory on one device (meta tensors carry shapes only)."""

    def __init__(self, device: str | torch.device, seed: int):
        self.device = torch.device(device)
        self.generator = None
        if self.device.type != "meta":
            self.generator = torch.Generator(self.device).manual_seed(seed)

    def randn(self, *shape: int, dtype: torch.dtype = F32) -> torch.Tensor:
        if self.generator is None:
            return torch.empty(shape, dtype=dtype, device=self.device)
        return torch.randn(shape, dtype=dtype, device=self.device, generator=self.generator)

    def randint(self, high: int, *shape: int) -> torch.Tensor:
        if self.generator is None:
            return torch.empty(shape, dtype=I64, device=self.device)
        return torch.randint(0, high, shape, dtype=I64, device=self.device,
                             generator=self.generator)


@dataclasses.dataclass(frozen=True)
class Problem:
    name: str
    level: str
    dtype: torch.dtype  # the compute dtype: weights are cast to it; picks the matmul ceiling
    # (small) -> the module; called under torch.device(target), so weights are made in place.
    build: Callable[[bool], nn.Module]
    # (tensors, small) -> the forward's inputs.
    inputs: Callable[[Tensors, bool], Sequence[torch.Tensor]]
    modes: tuple[str, ...]
    description: str
    anchor: bool = False
    seed: int = 0
    # Inputs that keep one address from call to call in real use (a KV cache): torch.compile may
    # treat them as static (no copy into a CUDA graph's input buffers), as a static cache does.
    static_inputs: tuple[int, ...] = ()

    def make(self, device: str | torch.device = "cpu", small: bool = False):
        """(module in eval mode with weights in self.dtype, tuple of inputs)."""
        torch.manual_seed(self.seed)
        with torch.device(device):
            module = self.build(small)
        module = module.to(self.dtype).eval().requires_grad_(False)
        return module, tuple(self.inputs(Tensors(device, self.seed), small))

    def cost(self, small: bool = False) -> Cost:
        return _cost(self, small)

    def floor_ms(self, ceilings: Ceilings = H200_CEILINGS, small: bool = False) -> float:
        return self.cost(small).floor_ms(self.dtype, ceilings)

    def bound(self, ceilings: Ceilings = H200_CEILINGS, small: bool = False) -> str:
        return self.cost(small).bound(self.dtype, ceilings)


def _unique_bytes(tensors) -> int:
    unique = {id(tensor): tensor for tensor in tensors}
    return sum(tensor.numel() * tensor.element_size() for tensor in unique.values())


def output_tensors(output) -> list[torch.Tensor]:
    """The tensors of a forward's result (a tensor or a tuple/list of them), in order."""
    if isinstance(output, torch.Tensor):
        return [output]
    return [tensor for item in output for tensor in output_tensors(item)]


@functools.cache
def _cost(problem: Problem, small: bool) -> Cost:
    module, inputs = problem.make("meta", small)
    with FlopCounterMode(display=False) as counter, torch.no_grad():
        outputs = output_tensors(module(*inputs))
    weights = [*module.parameters(), *module.buffers()]
    return Cost(flops=int(counter.get_total_flops()),
                min_bytes=_unique_bytes([*inputs, *weights]) + _unique_bytes(outputs))


# ---------------------------------------------------------------------------------------------
# Modules
# ---------------------------------------------------------------------------------------------

class Lambda(nn.Module):
    """A parameter-free computation."""

    def __init__(self, fn: Callable):
        super().__init__()
        self.fn = fn

    def forward(self, *inputs):
        return self.fn(*inputs)


def elementwise_chain(x):
    return torch.clamp(x * torch.sigmoid(x) + torch.tanh(x) / 2, -1.0, 1.0)


def attention(q, k, v):
    """softmax(Q K^T / sqrt(d)) V written out, as in a model that predates SDPA."""
    return torch.softmax(q @ k.transpose(-2, -1) * q.shape[-1] ** -0.5, dim=-1) @ v


class ChannelRmsNorm(nn.Module):
    """RMS norm over dim 1 of (N, C, H, W)."""

    def __init__(self, channels: int):
        super().__init__()
        self.weight = nn.Parameter(torch.rand(channels, 1, 1) + 0.5)

    def forward(self, x):
        return x * torch.rsqrt(x.pow(2).mean(dim=1, keepdim=True) + 1e-6) * self.weight


class LayerNormGelu(nn.Module):
    def __init__(self, width: int):
        super().__init__()
        self.norm = nn.LayerNorm(width)

    def forward(self, x):
        return F.gelu(self.norm(x))


class LinearEpilogue(nn.Module):
    """A linear layer followed by `epilogue(module, y, *extra inputs)`; `extra_parameters` names
    per-feature parameters the epilogue uses."""

    def __init__(self, width_in: int, width_out: int, epilogue: Callable, bias: bool = True,
                 extra_parameters: Sequence[str] = ()):
        super().__init__()
        self.linear = nn.Linear(width_in, width_out, bias=bias)
        self.epilogue = epilogue
        for name in extra_parameters:
            self.register_parameter(name, nn.Parameter(torch.randn(width_out) * 0.5))

    def forward(self, x, *extra):
        return self.epilogue(self, self.linear(x), x, *extra)


class ConvReluBias(nn.Module):
    """conv -> ReLU -> + per-channel bias (KernelBench level 2, problem 1)."""

    def __init__(self, channels_in: int, channels_out: int):
        super().__init__()
        self.conv = nn.Conv2d(channels_in, channels_out, 3, padding=1)
        self.bias = nn.Parameter(torch.randn(channels_out, 1, 1) * 0.1)

    def forward(self, x):
        return torch.relu(self.conv(x)) + self.bias


def batch_norm(channels: int) -> nn.BatchNorm2d:
    """Eval-mode batch norm with non-trivial running statistics."""
    norm = nn.BatchNorm2d(channels)
    with torch.no_grad():
        norm.running_mean.uniform_(-0.2, 0.2)
        norm.running_var.uniform_(0.5, 1.5)
        norm.weight.uniform_(0.5, 1.5)
        norm.bias.uniform_(-0.2, 0.2)
    return norm


class ConvBnRelu(nn.Module):
    def __init__(self, channels: int):
        super().__init__()
        self.conv = nn.Conv2d(channels, channels, 3, padding=1, bias=False)
        self.norm = batch_norm(channels)

    def forward(self, x):
        return torch.relu(self.norm(self.conv(x)))


class ConvGeluAvgPool(nn.Module):
    """conv -> GELU -> global average pool (KernelBench level 2, problem 67)."""

    def __init__(self, channels_in: int, channels_out: int):
        super().__init__()
        self.conv = nn.Conv2d(channels_in, channels_out, 3, padding=1)

    def forward(self, x):
        return F.gelu(self.conv(x)).mean(dim=(2, 3))


class LinearGroupNormSwish(nn.Module):
    """GEMM -> GroupNorm -> swish -> * weight -> swish (KernelBench level 2, problem 88)."""

    def __init__(self, width_in: int, width_out: int, groups: int):
        super().__init__()
        self.linear = nn.Linear(width_in, width_out)
        self.norm = nn.GroupNorm(groups, width_out)
        self.scale = nn.Parameter(torch.randn(width_out) * 0.5 + 1.0)

    def forward(self, x):
        y = self.norm(self.linear(x))
        y = y * torch.sigmoid(y) * self.scale
        return y * torch.sigmoid(y)


class Mlp(nn.Module):
    """Linear-ReLU stack (KernelBench level 3, problem 1)."""

    def __init__(self, widths: Sequence[int]):
        super().__init__()
        layers = []
        for width_in, width_out in zip(widths[:-2], widths[1:-1]):
            layers += [nn.Linear(width_in, width_out), nn.ReLU()]
        layers.append(nn.Linear(widths[-2], widths[-1]))
        self.layers = nn.Sequential(*layers)

    def forward(self, x):
        return self.layers(x)


class VitBlock(nn.Module):
    """A pre-norm transformer encoder block (ViT-B/16 shapes at full size)."""

    def __init__(self, width: int, heads: int, hidden: int):
        super().__init__()
        self.heads = heads
        self.norm1, self.norm2 = nn.LayerNorm(width), nn.LayerNorm(width)
        self.qkv = nn.Linear(width, 3 * width)
        self.proj = nn.Linear(width, width)
        self.fc1, self.fc2 = nn.Linear(width, hidden), nn.Linear(hidden, width)

    def forward(self, x):
        batch, tokens, width = x.shape
        qkv = self.qkv(self.norm1(x)).view(batch, tokens, 3, self.heads, width // self.heads)
        q, k, v = qkv.permute(2, 0, 3, 1, 4).unbind(0)
        attended = F.scaled_dot_product_attention(q, k, v)
        x = x + self.proj(attended.transpose(1, 2).reshape(batch, tokens, width))
        return x + self.fc2(F.gelu(self.fc1(self.norm2(x))))


class ConvNextBlock(nn.Module):
    """depthwise 7x7 conv -> LayerNorm (channels last) -> Linear 4x -> GELU -> Linear -> layer
    scale -> residual (ConvNeXt-T stage-1 shapes at full size)."""

    def __init__(self, channels: int):
        super().__init__()
        self.depthwise = nn.Conv2d(channels, channels, 7, padding=3, groups=channels)
        self.norm = nn.LayerNorm(channels, eps=1e-6)
        self.expand = nn.Linear(channels, 4 * channels)
        self.project = nn.Linear(4 * channels, channels)
        self.gamma = nn.Parameter(torch.rand(channels) * 0.5 + 0.25)

    def forward(self, x):
        y = self.norm(self.depthwise(x).permute(0, 2, 3, 1))
        y = self.project(F.gelu(self.expand(y))) * self.gamma
        return x + y.permute(0, 3, 1, 2)


class InvertedResidual(nn.Module):
    """MobileNetV2's block: 1x1 expand, BN, ReLU6, depthwise 3x3, BN, ReLU6, 1x1 project, BN,
    residual."""

    def __init__(self, channels: int, expansion: int):
        super().__init__()
        hidden = channels * expansion
        self.expand = nn.Conv2d(channels, hidden, 1, bias=False)
        self.norm1 = batch_norm(hidden)
        self.depthwise = nn.Conv2d(hidden, hidden, 3, padding=1, groups=hidden, bias=False)
        self.norm2 = batch_norm(hidden)
        self.project = nn.Conv2d(hidden, channels, 1, bias=False)
        self.norm3 = batch_norm(channels)

    def forward(self, x):
        y = F.relu6(self.norm1(self.expand(x)))
        y = F.relu6(self.norm2(self.depthwise(y)))
        return x + self.norm3(self.project(y))


# ---- Llama-3-8B ----

@dataclasses.dataclass(frozen=True)
class LlamaConfig:
    width: int = 4096
    heads: int = 32
    kv_heads: int = 8
    hidden: int = 14336
    rope_theta: float = 500000.0
    eps: float = 1e-5


LLAMA3_8B = LlamaConfig()
LLAMA_SMALL = LlamaConfig(width=64, heads=4, kv_heads=2, hidden=128)


class LlamaRmsNorm(nn.Module):
    def __init__(self, width: int, eps: float):
        super().__init__()
        self.weight = nn.Parameter(torch.rand(width) + 0.5)
        self.eps = eps

    def forward(self, x):
        h = x.float()
        h = h * torch.rsqrt(h.pow(2).mean(-1, keepdim=True) + self.eps)
        return self.weight * h.to(x.dtype)


class LlamaMlp(nn.Module):
    def __init__(self, config: LlamaConfig):
        super().__init__()
        self.gate = nn.Linear(config.width, config.hidden, bias=False)
        self.up = nn.Linear(config.width, config.hidden, bias=False)
        self.down = nn.Linear(config.hidden, config.width, bias=False)

    def forward(self, x):
        return self.down(F.silu(self.gate(x)) * self.up(x))


def rotate_half(x):
    first, second = x.chunk(2, dim=-1)
    return torch.cat((-second, first), dim=-1)


def repeat_kv(x, times: int):
    batch, kv_heads, tokens, head_dim = x.shape
    return (x[:, :, None].expand(batch, kv_heads, times, tokens, head_dim)
            .reshape(batch, kv_heads * times, tokens, head_dim))


class LlamaDecoderLayer(nn.Module):
    """One Llama-3 decoder layer (RMSNorm, rotary embedding, grouped-query attention, SwiGLU).

    forward(x, k_cache=None, v_cache=None) -> (hidden, k_new, v_new). With caches (decode), the
    new tokens sit at positions cache_len.. and attend to the whole cache plus themselves; the
    caller appends k_new / v_new to its cache (no input is mutated, so CUDA graphs apply). Without
    caches (prefill), attention is causal over the tokens. Rope scaling is left out: it changes no
    shape or cost.
    """

    def __init__(self, config: LlamaConfig, max_positions: int):
        super().__init__()
        self.config = config
        self.head_dim = config.width // config.heads
        self.attn_norm = LlamaRmsNorm(config.width, config.eps)
        self.q_proj = nn.Linear(config.width, config.heads * self.head_dim, bias=False)
        self.k_proj = nn.Linear(config.width, config.kv_heads * self.head_dim, bias=False)
        self.v_proj = nn.Linear(config.width, config.kv_heads * self.head_dim, bias=False)
        self.o_proj = nn.Linear(config.heads * self.head_dim, config.width, bias=False)
        self.mlp_norm = LlamaRmsNorm(config.width, config.eps)
        self.mlp = LlamaMlp(config)
        inv_freq = 1.0 / (config.rope_theta ** (torch.arange(0, self.head_dim, 2).float()
                                                 / self.head_dim))
        angles = torch.outer(torch.arange(max_positions).float(), inv_freq)
        angles = torch.cat((angles, angles), dim=-1)
        self.register_buffer("cos", angles.cos(), persistent=False)
        self.register_buffer("sin", angles.sin(), persistent=False)

    def forward(self, x, k_cache=None, v_cache=None):
        config = self.config
        batch, tokens, width = x.shape
        start = 0 if k_cache is None else k_cache.shape[2]
        h = self.attn_norm(x)
        q = self.q_proj(h).view(batch, tokens, config.heads, self.head_dim).transpose(1, 2)
        k = self.k_proj(h).view(batch, tokens, config.kv_heads, self.head_dim).transpose(1, 2)
        v = self.v_proj(h).view(batch, tokens, config.kv_heads, self.head_dim).transpose(1, 2)
        cos, sin = self.cos[start:start + tokens], self.sin[start:start + tokens]
        q = q * cos + rotate_half(q) * sin
        k = k * cos + rotate_half(k) * sin
        keys, values = k, v
        if k_cache is not None:
            keys, values = torch.cat((k_cache, k), dim=2), torch.cat((v_cache, v), dim=2)
        repeat = config.heads // config.kv_heads
        attended = F.scaled_dot_product_attention(
            q, repeat_kv(keys, repeat), repeat_kv(values, repeat),
            is_causal=k_cache is None and tokens > 1)
        x = x + self.o_proj(attended.transpose(1, 2).reshape(batch, tokens, width))
        return x + self.mlp(self.mlp_norm(x)), k, v


def llama_decode_inputs(batch: int, cache_len: int):
    def make(t: Tensors, small: bool):
        config = LLAMA_SMALL if small else LLAMA3_8B
        length = 16 if small else cache_len
        head_dim = config.width // config.heads
        cache = (batch, config.kv_heads, length, head_dim)
        return [t.randn(batch, 1, config.width, dtype=BF16), t.randn(*cache, dtype=BF16),
                t.randn(*cache, dtype=BF16)]
    return make


def llama_layer(cache_len: int, tokens: int):
    def build(small: bool):
        config = LLAMA_SMALL if small else LLAMA3_8B
        positions = (16 + tokens if cache_len else 32) if small else cache_len + tokens
        return LlamaDecoderLayer(config, positions)
    return build


# ---- ResNet-50 ----

class Bottleneck(nn.Module):
    def __init__(self, channels_in: int, width: int, stride: int):
        super().__init__()
        channels_out = 4 * width
        self.conv1 = nn.Conv2d(channels_in, width, 1, bias=False)
        self.norm1 = batch_norm(width)
        self.conv2 = nn.Conv2d(width, width, 3, stride=stride, padding=1, bias=False)
        self.norm2 = batch_norm(width)
        self.conv3 = nn.Conv2d(width, channels_out, 1, bias=False)
        self.norm3 = batch_norm(channels_out)
        self.shortcut = None
        if stride != 1 or channels_in != channels_out:
            self.shortcut = nn.Sequential(
                nn.Conv2d(channels_in, channels_out, 1, stride=stride, bias=False),
                batch_norm(channels_out))

    def forward(self, x):
        y = torch.relu(self.norm1(self.conv1(x)))
        y = torch.relu(self.norm2(self.conv2(y)))
        y = self.norm3(self.conv3(y))
        return torch.relu(y + (x if self.shortcut is None else self.shortcut(x)))


class ResNet(nn.Module):
    """ResNet with bottleneck blocks; ResNet-50 is base 64, blocks (3, 4, 6, 3), 1000 classes."""

    def __init__(self, base: int = 64, blocks: Sequence[int] = (3, 4, 6, 3), classes: int = 1000):
        super().__init__()
        self.stem = nn.Sequential(nn.Conv2d(3, base, 7, stride=2, padding=3, bias=False),
                                  batch_norm(base), nn.ReLU(), nn.MaxPool2d(3, 2, 1))
        stages, channels = [], base
        for index, count in enumerate(blocks):
            width = base * 2 ** index
            for block in range(count):
                stages.append(Bottleneck(channels, width, 2 if block == 0 and index > 0 else 1))
                channels = 4 * width
        self.stages = nn.Sequential(*stages)
        self.fc = nn.Linear(channels, classes)

    def forward(self, x):
        return self.fc(self.stages(self.stem(x)).mean(dim=(2, 3)))


# ---------------------------------------------------------------------------------------------
# The problems
# ---------------------------------------------------------------------------------------------

def op(fn: Callable) -> Callable[[bool], nn.Module]:
    return lambda small: Lambda(fn)


def shape(full: tuple, small: tuple, dtype: torch.dtype = F32):
    """Inputs of one random tensor: `full` at full size, `small` in the reduced variant."""
    return lambda t, is_small: [t.randn(*(small if is_small else full), dtype=dtype)]


def shapes(full: Sequence[tuple], small: Sequence[tuple], dtype: torch.dtype = F32):
    return lambda t, is_small: [t.randn(*s, dtype=dtype) for s in (small if is_small else full)]


def residual_scale(m, y, x):
    return y * 0.5 + x


def sigmoid_scale_residual(m, y, x):
    return torch.sigmoid(y) * 2.0 + y


def swish_bias_clamp(m, y, x):
    return torch.clamp(y * torch.sigmoid(y) + m.shift, -1.0, 1.0)


def add_relu_layer_norm(m, y, x, residual):
    return F.layer_norm(torch.relu(y + residual), (y.shape[-1],), m.norm_weight, m.norm_bias)


def linear_problem(name, level, dtype, rows, width_in, width_out, epilogue, description,
                   small_rows=8, small_in=32, small_out=32, extra_parameters=(), bias=True,
                   residual=False, anchor=False):
    def build(small):
        return LinearEpilogue(small_in if small else width_in, small_out if small else width_out,
                              epilogue, bias=bias, extra_parameters=extra_parameters)

    def inputs(t, small):
        n, k, m = (small_rows, small_in, small_out) if small else (rows, width_in, width_out)
        return [t.randn(n, k, dtype=dtype)] + ([t.randn(n, m, dtype=dtype)] if residual else [])
    return Problem(name, level, dtype, build, inputs, GEMM_MODES, description, anchor=anchor)


PROBLEMS: list[Problem] = [
    # ---- anchors: DESIGN.md's anchor table ----
    Problem("softmax_4096x393216_f32", "anchor", F32, op(lambda x: torch.softmax(x, -1)),
            shape((4096, 393216), (8, 384)), POINTWISE_MODES,
            "softmax over the last dim", anchor=True),
    Problem("rms_norm_dim1_112x64x512x512_f32", "anchor", F32, lambda s: ChannelRmsNorm(64),
            shape((112, 64, 512, 512), (2, 64, 8, 8)), POINTWISE_MODES,
            "RMS norm over dim 1 (channels) of NCHW, per-channel weight", anchor=True),
    Problem("cross_entropy_32768x4096_f32", "anchor", F32,
            op(lambda logits, target: F.cross_entropy(logits, target)),
            lambda t, s: [t.randn(*((16, 40) if s else (32768, 4096))),
                          t.randint(40 if s else 4096, 16 if s else 32768)],
            POINTWISE_MODES, "cross-entropy with class-index targets, mean", anchor=True),
    Problem("relu_4096x393216_f32", "anchor", F32, op(torch.relu),
            shape((4096, 393216), (8, 384)), POINTWISE_MODES, "relu", anchor=True),
    Problem("elementwise_chain_2p28_f32", "anchor", F32, op(elementwise_chain),
            shape((2 ** 28,), (4099,)), POINTWISE_MODES,
            "clamp(x*sigmoid(x) + tanh(x)/2, -1, 1)", anchor=True),
    Problem("layer_norm_gelu_16384x4096_bf16", "anchor", BF16,
            lambda s: LayerNormGelu(64 if s else 4096),
            shape((16384, 4096), (8, 64), BF16), POINTWISE_MODES, "layer norm + GELU",
            anchor=True),
    Problem("matmul_4096_f32", "anchor", F32, op(torch.matmul),
            shapes([(4096, 4096)] * 2, [(32, 48), (48, 40)]), GEMM_MODES,
            "A @ B, 4096^3, no TF32", anchor=True),
    linear_problem("linear8192_mul2_leaky_relu_b1024_f32", "anchor", F32, 1024, 8192, 8192,
                   lambda m, y, x: F.leaky_relu(y * 2.0, 0.01),
                   "linear 8192->8192, *2, leaky relu", anchor=True),
    linear_problem("linear4096_scale_residual_b16384_f32", "anchor", F32, 16384, 4096, 4096,
                   residual_scale, "linear 4096->4096, *0.5 + input", anchor=True),
    linear_problem("linear_gelu_8192x4096x4096_bf16", "anchor", BF16, 8192, 4096, 4096,
                   lambda m, y, x: F.gelu(y), "linear 4096->4096 + GELU", anchor=True),
    Problem("conv3x3_relu_bias_128x64x128x128_f32", "anchor", F32,
            lambda s: ConvReluBias(4 if s else 64, 8 if s else 128),
            shape((128, 64, 128, 128), (2, 4, 9, 9)), GEMM_MODES,
            "conv3x3 64->128 + relu + bias (cuDNN may use TF32: PyTorch's default)", anchor=True),
    Problem("attention_16x16x1024x64_f32", "anchor", F32, op(attention),
            shapes([(16, 16, 1024, 64)] * 3, [(2, 2, 16, 8)] * 3), GEMM_MODES,
            "softmax(Q K^T / sqrt(d)) V written out", anchor=True),
    Problem("llama3_8b_mlp_4096tok_bf16", "llama", BF16,
            lambda s: LlamaMlp(LLAMA_SMALL if s else LLAMA3_8B),
            shape((4096, 4096), (8, 64), BF16), GEMM_MODES,
            "Llama-3-8B SwiGLU MLP, 4096 tokens", anchor=True),
    Problem("llama3_8b_layer_decode_b1_kv2048_bf16", "llama", BF16, llama_layer(2048, 1),
            llama_decode_inputs(1, 2048), DECODE_MODES,
            "Llama-3-8B decoder layer, batch 1, one token, KV cache of 2048", anchor=True,
            static_inputs=(1, 2)),
    Problem("llama3_8b_layer_decode_b8_kv2048_bf16", "llama", BF16, llama_layer(2048, 1),
            llama_decode_inputs(8, 2048), DECODE_MODES,
            "Llama-3-8B decoder layer, batch 8, one token, KV cache of 2048", anchor=True,
            static_inputs=(1, 2)),
    Problem("llama3_8b_layer_prefill_2048_bf16", "llama", BF16, llama_layer(0, 2048),
            lambda t, s: [t.randn(1, 16 if s else 2048, 64 if s else 4096, dtype=BF16)],
            GEMM_MODES, "Llama-3-8B decoder layer, batch 1, 2048 tokens, causal", anchor=True),
    Problem("resnet50_b32_bf16", "resnet", BF16,
            lambda s: ResNet(8, (1, 1, 1, 1), 10) if s else ResNet(),
            shape((32, 3, 224, 224), (2, 3, 32, 32), BF16), GEMM_MODES,
            "ResNet-50 inference, batch 32, 224x224 (small: one block per stage)", anchor=True),
    # ---- level 1: one operator ----
    Problem("l1_matmul_8192_f16", "L1", F16, op(torch.matmul),
            shapes([(8192, 8192)] * 2, [(32, 48), (48, 40)], F16), GEMM_MODES, "A @ B, 8192^3"),
    Problem("l1_bmm_128x1024x1024x128_bf16", "L1", BF16,
            op(lambda a, b: torch.bmm(a, b.transpose(1, 2))),
            shapes([(128, 1024, 128)] * 2, [(2, 16, 8)] * 2, BF16), GEMM_MODES,
            "batched A @ B^T with K=128: a GEMM whose output traffic bounds it"),
    Problem("l1_gelu_tanh_16384x16384_bf16", "L1", BF16,
            op(lambda x: F.gelu(x, approximate="tanh")),
            shape((16384, 16384), (8, 100), BF16), POINTWISE_MODES, "tanh GELU"),
    Problem("l1_layer_norm_3d_16x64x256x256_f32", "L1", F32,
            lambda s: nn.LayerNorm((4, 8, 8) if s else (64, 256, 256)),
            shape((16, 64, 256, 256), (2, 4, 8, 8)), POINTWISE_MODES,
            "layer norm over the last three dims (4M elements a row)"),
    Problem("l1_group_norm_16x64x256x256_f32", "L1", F32,
            lambda s: nn.GroupNorm(2 if s else 8, 8 if s else 64),
            shape((16, 64, 256, 256), (2, 8, 8, 8)), POINTWISE_MODES, "group norm, 8 groups"),
    Problem("l1_sum_dim1_32x4096x4096_f32", "L1", F32, op(lambda x: x.sum(1)),
            shape((32, 4096, 4096), (2, 33, 17)), POINTWISE_MODES, "sum over a middle dim"),
    Problem("l1_cumsum_32768x4096_f32", "L1", F32, op(lambda x: torch.cumsum(x, 1)),
            shape((32768, 4096), (8, 100)), POINTWISE_MODES, "prefix sum along rows"),
    Problem("l1_depthwise_conv3x3_64x256x112x112_f32", "L1", F32,
            lambda s: nn.Conv2d(*((8, 8) if s else (256, 256)), 3, padding=1,
                                groups=8 if s else 256),
            shape((64, 256, 112, 112), (2, 8, 10, 10)), GEMM_MODES, "depthwise 3x3 convolution"),
    Problem("l1_log_softmax_8192x128256_bf16", "L1", BF16,
            op(lambda x: torch.log_softmax(x, -1)),
            shape((8192, 128256), (8, 1000), BF16), POINTWISE_MODES,
            "log-softmax over Llama-3's vocabulary"),
    # ---- level 2: GEMM / convolution + 2-5 epilogue operators ----
    linear_problem("l2_linear_sigmoid_scale_residual_8192x4096x4096_bf16", "L2", BF16,
                   8192, 4096, 4096, sigmoid_scale_residual,
                   "linear, sigmoid, *2, + linear output (KernelBench L2 70)"),
    linear_problem("l2_linear_swish_bias_clamp_4096x2048x2048_f32", "L2", F32,
                   4096, 2048, 2048, swish_bias_clamp, "linear, swish, + bias, clamp",
                   extra_parameters=("shift",)),
    linear_problem("l2_linear_add_relu_layer_norm_8192x4096x4096_f16", "L2", F16,
                   8192, 4096, 4096, add_relu_layer_norm,
                   "linear, + residual, relu, layer norm (a row reduction in the epilogue)",
                   extra_parameters=("norm_weight", "norm_bias"), residual=True),
    Problem("l2_linear_group_norm_swish_mul_swish_8192x4096x4096_bf16", "L2", BF16,
            lambda s: LinearGroupNormSwish(*((32, 32, 4) if s else (4096, 4096, 32))),
            shape((8192, 4096), (8, 32), BF16), GEMM_MODES,
            "linear, group norm, swish, * weight, swish (KernelBench L2 88)"),
    Problem("l2_conv_bn_relu_32x128x56x56_bf16", "L2", BF16,
            lambda s: ConvBnRelu(8 if s else 128),
            shape((32, 128, 56, 56), (2, 8, 10, 10), BF16), GEMM_MODES,
            "conv3x3, batch norm (eval), relu"),
    Problem("l2_conv_gelu_avgpool_64x64x64x64_f32", "L2", F32,
            lambda s: ConvGeluAvgPool(*((4, 8) if s else (64, 128))),
            shape((64, 64, 64, 64), (2, 4, 9, 9)), GEMM_MODES,
            "conv3x3 64->128, GELU, global average pool (KernelBench L2 67)"),
    # ---- level 3: small architectures ----
    Problem("l3_mlp_2048x4096x4096x4096x1024_bf16", "L3", BF16,
            lambda s: Mlp((32, 48, 48, 16) if s else (4096, 4096, 4096, 1024)),
            shape((2048, 4096), (8, 32), BF16), GEMM_MODES,
            "3-layer ReLU MLP (KernelBench L3 1 at transformer widths)"),
    Problem("l3_vit_block_64x197x768_bf16", "L3", BF16,
            lambda s: VitBlock(*((32, 4, 64) if s else (768, 12, 3072))),
            shape((64, 197, 768), (2, 9, 32), BF16), GEMM_MODES,
            "ViT-B/16 encoder block: LN, MHA (SDPA), LN, GELU MLP"),
    Problem("l3_convnext_block_32x96x56x56_bf16", "L3", BF16,
            lambda s: ConvNextBlock(8 if s else 96),
            shape((32, 96, 56, 56), (2, 8, 10, 10), BF16), GEMM_MODES,
            "ConvNeXt block: depthwise 7x7, LN, 4x MLP, layer scale, residual"),
    Problem("l3_inverted_residual_64x24x112x112_f32", "L3", F32,
            lambda s: InvertedResidual(8 if s else 24, 6),
            shape((64, 24, 112, 112), (2, 8, 10, 10)), GEMM_MODES,
            "MobileNetV2 inverted residual block, expansion 6"),
]

BY_NAME = {problem.name: problem for problem in PROBLEMS}


def get(name: str) -> Problem:
    if name not in BY_NAME:
        raise KeyError(f"no suite problem named '{name}' (known: {', '.join(BY_NAME)})")
    return BY_NAME[name]


def describe(problem: Problem, ceilings: Ceilings = H200_CEILINGS) -> str:
    cost = problem.cost()
    return (f"{problem.name:58s} {problem.level:6s} {problem.bound(ceilings):7s} "
            f"floor {problem.floor_ms(ceilings):8.3f} ms  {cost.flops / 1e9:10.1f} GFLOP  "
            f"{cost.min_bytes / 1e6:10.1f} MB  {'+'.join(problem.modes)}")


if __name__ == "__main__":
    for problem in PROBLEMS:
        print(describe(problem))
    print(f"{len(PROBLEMS)} problems; {math.fsum(p.floor_ms() for p in PROBLEMS):.1f} ms of floors")
