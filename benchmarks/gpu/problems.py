"""The problems of the generator benchmark (README.md beside this file), and their baselines.

  problems.py export DIR          every problem -> DIR/<name>/graph.pb, DIR/manifest.tsv
  problems.py baselines OUT.json  eager and torch.compile times of the anchor problems on the GPU
  problems.py report OUT_DIR      merges validate.jsonl, anchors.jsonl, baselines.json into
                                  summary.json and table.md
  problems.py names FAMILY MODE   the names of the problems of one family and mode, for ONLY=

Validation problems are small (a few million elements at most) so the judge's float64 CPU
reference stays quick; they cover odd sizes, size-1 dims, broadcasting, non-contiguous inputs and
fp32 / bf16 / fp16. Anchor problems are the memory-bound rows of DESIGN.md's anchor table.

Baselines use the timer's protocol (worker/timer/timer.h): before every rep a buffer of at least
twice the L2 is written, then the call is timed between two CUDA events; warm-up first, the median
of the reps.
"""

import dataclasses
import json
import os
import pathlib
import statistics
import sys
import warnings
from typing import Callable

ROOT = pathlib.Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "python"))
warnings.filterwarnings("ignore")

import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402

F32, BF16, F16, I64 = torch.float32, torch.bfloat16, torch.float16, torch.int64
TIMED_REPS = 30
WARMUP_REPS = 5


@dataclasses.dataclass
class Problem:
    name: str
    family: str  # "pointwise", "reduction", "gemm", "scan", "stencil" or "attention": the family
    # exercised
    mode: str  # "validate" or "anchor"
    forward: Callable  # the computation, on tensors
    # (make) -> example inputs; make(shape, dtype) builds one tensor, make(shape, I64, high=n)
    # one of integers in [0, n) (class targets: the judge draws its own in that range).
    inputs: Callable
    parameters: Callable | None = None  # () -> dict of name -> tensor (module weights)
    # Anchors too large for the judge's single-threaded CPU reference: the same computation with
    # fewer rows, on which the fastest schedule point is judged (exported as judge_graph.pb).
    judge_inputs: Callable | None = None


class Module(torch.nn.Module):
    def __init__(self, problem: Problem):
        super().__init__()
        self.forward_fn = problem.forward
        for name, value in (problem.parameters() if problem.parameters else {}).items():
            self.register_parameter(name, torch.nn.Parameter(value, requires_grad=False))

    def forward(self, *inputs):
        return self.forward_fn(self, *inputs)


def chain(x):
    return torch.clamp(x * torch.sigmoid(x) + torch.tanh(x) / 2, -1.0, 1.0)


def rms_norm(m, x):
    return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-6) * m.weight


def cast(x, dtype):
    # Tensor.to / .float() export with an aten._assert_tensor_metadata node (no tensor result),
    # which forge.export rejects; the cast alone is aten._to_copy.
    return torch.ops.aten._to_copy(x, dtype=dtype)


def rms_norm_upcast(m, x):
    h = cast(x, F32)
    return cast(h * torch.rsqrt(h.pow(2).mean(-1, keepdim=True) + 1e-5), x.dtype) * m.weight


def channel_rms_norm(m, x):
    # RMS norm over the channels of (N, C, H, W): the reduced dim has H*W inner elements.
    return x * torch.rsqrt(x.pow(2).mean(dim=1, keepdim=True) + 1e-6) * m.weight


def channel_rms_norm_upcast(m, x):
    h = cast(x, F32)
    return cast(h * torch.rsqrt(h.pow(2).mean(dim=1, keepdim=True) + 1e-6), x.dtype) * m.weight


def channel_weight(c, dtype):
    return lambda: {"weight": torch.randn(c, 1, 1).to(dtype)}


def affine(n, dtype):
    return lambda: {"weight": torch.randn(n).to(dtype), "bias": torch.randn(n).to(dtype)}


def layer_norm(m, x):
    return F.layer_norm(x, m.weight.shape, m.weight, m.bias, 1e-5)


def group_norm(groups, eps=1e-5):
    return lambda m, x: F.group_norm(x, groups, m.weight, m.bias, eps)


def depthwise_weights(c, k, dtype, bias=True):
    """A depthwise convolution's weight [c, 1, k, k] (scaled so outputs stay O(1)) and bias [c]."""
    def make():
        weights = {"weight": torch.randn(c, 1, k, k).div(k).to(dtype)}
        if bias:
            weights["bias"] = torch.randn(c).to(dtype)
        return weights
    return make


def depthwise(stride=1, padding=0, dilation=1):
    return lambda m, x: F.conv2d(x, m.weight, getattr(m, "bias", None), stride, padding, dilation,
                                 groups=m.weight.shape[0])


def channels_last(tensor):
    return tensor.contiguous(memory_format=torch.channels_last)


def channel_affine(c, dtype):
    """Batch norm's eval affine as a per-channel scale and shift (C, 1, 1)."""
    return lambda: {"scale": torch.rand(c, 1, 1).add(0.5).to(dtype),
                    "shift": torch.randn(c, 1, 1).to(dtype)}


def affine_relu_max_pool(m, x):
    return F.max_pool2d(torch.relu(x * m.scale + m.shift), 3, 2, 1)


def linear_weights(n, k, dtype, bias=True, extra=()):
    """A linear layer's weight [n, k] (scaled so outputs stay O(1)), its bias [n] if `bias`, and
    more weights of the same shape named in `extra` (SwiGLU's up projection)."""
    def make():
        weights = {name: torch.randn(n, k).div(k ** 0.5).to(dtype) for name in ("weight", *extra)}
        if bias:
            weights["bias"] = torch.randn(n).to(dtype)
        return weights
    return make


def linear(m, x):
    return F.linear(x, m.weight, getattr(m, "bias", None))


def swiglu(m, x):
    return F.silu(F.linear(x, m.weight)) * F.linear(x, m.up)


def cross_entropy(**options):
    return lambda m, x, target: F.cross_entropy(x, target, **options)


def weighted_cross_entropy(**options):
    return lambda m, x, target: F.cross_entropy(x, target, weight=m.weight, **options)


def class_weights(c, dtype):
    return lambda: {"weight": torch.rand(c).to(dtype) + 0.5}


def logits_targets(n, c, dtype):
    return lambda t: [t((n, c), dtype), t((n,), I64, high=c)]


def rotate_half(x):
    half = x.shape[-1] // 2
    return torch.cat((-x[..., half:], x[..., :half]), dim=-1)


def rope_of_projection(m, x, cos, sin):
    # Llama's RoPE on a projection's heads: linear, view, transpose, then the rotation.
    q = F.linear(x, m.weight).view(x.shape[0], x.shape[1], 4, 6).transpose(1, 2)
    return q * cos + rotate_half(q) * sin


def causal_mask_softmax(m, scores):
    length = scores.shape[-1]
    mask = torch.triu(torch.ones(length, length, dtype=torch.bool, device=scores.device), 1)
    return torch.softmax(scores.masked_fill(mask, -1e4), dim=-1)


def gqa_attention(m, q, k, v):
    return F.scaled_dot_product_attention(q, k, v, enable_gqa=k.shape[1] != q.shape[1])


def decode_inputs(batch, kv_len, heads=32, kv_heads=8, q_len=1, head_dim=128, dtype=BF16):
    """q[batch, heads, q_len, D], k and v[batch, kv_heads, kv_len, D]: a decode step's attention
    over its KV cache (Llama-3-8B's heads by default)."""
    return lambda t: [t((batch, heads, q_len, head_dim), dtype),
                      t((batch, kv_heads, kv_len, head_dim), dtype),
                      t((batch, kv_heads, kv_len, head_dim), dtype)]


P, R, G, S, T, A = "pointwise", "reduction", "gemm", "scan", "stencil", "attention"
PROBLEMS = [
    # ---- pointwise ----
    Problem("relu_f32_1000x1003", P, "validate", lambda m, x: torch.relu(x),
            lambda t: [t((1000, 1003), F32)]),
    Problem("add_bcast_row_f32", P, "validate", lambda m, x, y: x + y,
            lambda t: [t((257, 129), F32), t((129,), F32)]),
    Problem("mul_bcast_size1_f32", P, "validate", lambda m, x, y: x * y,
            lambda t: [t((64, 1, 33), F32), t((1, 17, 33), F32)]),
    Problem("add_transposed_input_f32", P, "validate", lambda m, x, y: x + y,
            lambda t: [t((257, 513), F32).t(), t((513, 257), F32)]),
    Problem("transpose_in_module_f32", P, "validate",
            lambda m, x: x.transpose(0, 1) * 2.0 + 1.0, lambda t: [t((129, 67), F32)]),
    Problem("gelu_bf16_4096x1001", P, "validate", lambda m, x: F.gelu(x),
            lambda t: [t((4096, 1001), BF16)]),
    Problem("gelu_tanh_f32", P, "validate", lambda m, x: F.gelu(x, approximate="tanh"),
            lambda t: [t((999, 1001), F32)]),
    Problem("silu_f16_3x5x7x11", P, "validate", lambda m, x: F.silu(x),
            lambda t: [t((3, 5, 7, 11), F16)]),
    Problem("chain_f32_1000003", P, "validate", lambda m, x: chain(x),
            lambda t: [t((1000003,), F32)]),
    Problem("chain_bf16_1x1048577", P, "validate", lambda m, x: chain(x),
            lambda t: [t((1, 1048577), BF16)]),
    Problem("leaky_where_f32", P, "validate", lambda m, x: torch.where(x > 0, x, 0.1 * x),
            lambda t: [t((777, 333), F32)]),
    Problem("scalar_tensor_mul_f32", P, "validate", lambda m, x, s: x * s + s,
            lambda t: [t((100, 257), F32), t((), F32)]),
    Problem("cast_mix_bf16_f32", P, "validate", lambda m, x, y: cast(cast(x, F32) * y, BF16),
            lambda t: [t((301, 517), BF16), t((301, 517), F32)]),
    Problem("clamp_abs_size1_f32", P, "validate", lambda m, x: torch.clamp(x.abs(), 0.1, 1.5),
            lambda t: [t((1, 1000, 1), F32)]),
    Problem("exp_log_f32", P, "validate", lambda m, x: torch.exp(x) + torch.log(x.abs() + 1.0),
            lambda t: [t((513, 511), F32)]),
    Problem("two_outputs_f32", P, "validate", lambda m, x, y: (x + y, x * y),
            lambda t: [t((300, 301), F32), t((300, 301), F32)]),
    Problem("outer_bcast_f16", P, "validate", lambda m, x, y: x * y + x,
            lambda t: [t((513, 1), F16), t((1, 255), F16)]),
    Problem("slice_view_f32", P, "validate", lambda m, x: x[:, 1:-1] * 3.0 - 1.0,
            lambda t: [t((100, 130), F32)]),
    Problem("permute_add_f32", P, "validate", lambda m, x, y: x.permute(2, 0, 1) + y,
            lambda t: [t((7, 9, 11), F32), t((11, 7, 9), F32)]),
    # pointwise_tile: a value contiguous along channels read back as NCHW (ConvNeXt's layer scale
    # and residual after its second linear; an NHWC -> NCHW copy), odd tile remainders.
    Problem("permute_back_residual_bf16_2x40x6x7", P, "validate",
            lambda m, x, y, g: x + (g * y).permute(0, 3, 1, 2),
            lambda t: [t((2, 40, 6, 7), BF16), t((2, 6, 7, 40), BF16), t((40,), BF16)]),
    Problem("nhwc_to_nchw_f32_3x50x33x35", P, "validate",
            lambda m, x: (x.permute(0, 3, 1, 2) * 2.0).contiguous(),
            lambda t: [t((3, 33, 35, 50), F32)]),
    Problem("rsqrt_bf16_2048x3", P, "validate", lambda m, x: torch.rsqrt(x * x + 1.0),
            lambda t: [t((2048, 3), BF16)]),
    Problem("hardtanh_bf16_33x65", P, "validate", lambda m, x: F.hardtanh(x) + F.relu6(x),
            lambda t: [t((33, 65), BF16)]),
    Problem("expand_mul_f32", P, "validate", lambda m, x, y: x.expand(100, 17) * y,
            lambda t: [t((1, 17), F32), t((100, 17), F32)]),
    Problem("min_max_f16_999", P, "validate",
            lambda m, x, y: torch.maximum(x, y) - torch.minimum(x, y),
            lambda t: [t((999,), F16), t((999,), F16)]),
    Problem("pow_sub_f32", P, "validate", lambda m, x, y: x.pow(2) - y / 3.0,
            lambda t: [t((64, 4099), F32), t((64, 4099), F32)]),
    # ---- glue read through by index arithmetic (cat, stack, flip, roll, repeat, masks, sources,
    # lookups), fused with their producers and consumers ----
    Problem("glue_rope_llama_bf16", P, "validate",
            lambda m, x, cos, sin: x * cos + rotate_half(x) * sin,
            lambda t: [t((2, 3, 7, 10), BF16), t((7, 10), BF16), t((7, 10), BF16)]),
    Problem("glue_rope_of_projection_f16", G, "validate", rope_of_projection,
            lambda t: [t((3, 11, 24), F16), t((11, 6), F16), t((11, 6), F16)],
            linear_weights(24, 24, F16, bias=False)),
    Problem("glue_gqa_repeat_interleave_f32", G, "validate",
            lambda m, q, k: q @ k.repeat_interleave(2, dim=1).transpose(-1, -2),
            lambda t: [t((1, 4, 5, 6), F32), t((1, 2, 9, 6), F32)]),
    Problem("glue_causal_mask_softmax_f32", R, "validate", causal_mask_softmax,
            lambda t: [t((2, 3, 9, 9), F32)]),
    Problem("glue_embedding_add_f16", P, "validate",
            lambda m, ids, positions: F.embedding(ids, m.weight) + positions,
            lambda t: [t((2, 7), I64, high=37), t((7, 16), F16)],
            lambda: {"weight": torch.randn(37, 16).to(F16)}),
    Problem("glue_cat_mixed_dtypes", P, "validate",
            lambda m, x, h, b: torch.cat((x, h, b), dim=1) * 2.0,
            lambda t: [t((5, 3), F32), t((5, 4), F16), t((5, 2), BF16)]),
    Problem("glue_cat_dim0_relu_f32", P, "validate",
            lambda m, a, b, c: torch.relu(torch.cat((a, b, c))),
            lambda t: [t((3, 7), F32), t((1, 7), F32), t((4, 7), F32)]),
    Problem("glue_stack_f16", P, "validate",
            lambda m, x, y: torch.stack((x, y, x), dim=1).flatten(1) + 1.0,
            lambda t: [t((4, 5), F16), t((4, 5), F16)]),
    Problem("glue_flip_roll_bf16", P, "validate",
            lambda m, x: torch.flip(x, (0, 2)) + torch.roll(x, (1, -2), (0, 1)) - torch.roll(x, 5),
            lambda t: [t((3, 5, 7), BF16)]),
    Problem("glue_repeat_f32", P, "validate", lambda m, x, y: x.repeat(2, 1, 3) * y,
            lambda t: [t((4, 5), F32), t((15,), F32)]),
    Problem("glue_repeat_interleave_flat_f16", P, "validate",
            lambda m, x: torch.repeat_interleave(x, 3) + 1.0, lambda t: [t((5, 7), F16)]),
    Problem("glue_tril_where_masked_fill_f32", P, "validate",
            lambda m, x, s: torch.tril(x, -1) + torch.where(x > 0, 1.5, x) + x.masked_fill(x < -1, s),
            lambda t: [t((3, 5, 6), F32), t((), F32)]),
    Problem("glue_sources_f32", P, "validate",
            lambda m, x: x + torch.arange(9, device=x.device) * 0.5 + torch.full_like(x, 2.0)
            + torch.arange(1.5, 3.75, 0.25, device=x.device) + torch.zeros_like(x),
            lambda t: [t((4, 9), F32)]),
    Problem("glue_index_select_bf16", P, "validate",
            lambda m, x, rows: torch.index_select(x, 0, rows) * 2.0,
            lambda t: [t((7, 9), BF16), t((4,), I64, high=7)]),
    Problem("glue_gather_f32", P, "validate",
            lambda m, x, columns: torch.gather(x, 1, columns) + 1.0,
            lambda t: [t((5, 8), F32), t((5, 3), I64, high=8)]),
    Problem("glue_narrow_contiguous_cast_f32", P, "validate",
            lambda m, x: cast(x.narrow(1, 2, 5).contiguous(), F16) * 3.0,
            lambda t: [t((6, 10), F32)]),
    # ---- reduction ----
    Problem("softmax_f32_1000x1003", R, "validate", lambda m, x: torch.softmax(x, -1),
            lambda t: [t((1000, 1003), F32)]),
    Problem("softmax_bf16_512x4096", R, "validate", lambda m, x: torch.softmax(x, -1),
            lambda t: [t((512, 4096), BF16)]),
    Problem("softmax_f16_37x1", R, "validate", lambda m, x: torch.softmax(x, -1),
            lambda t: [t((37, 1), F16)]),
    Problem("softmax_f32_16x32768", R, "validate", lambda m, x: torch.softmax(x, -1),
            lambda t: [t((16, 32768), F32)]),
    Problem("softmax_transposed_f32", R, "validate",
            lambda m, x: torch.softmax(x.transpose(0, 1), -1), lambda t: [t((300, 129), F32)]),
    Problem("sum_dim1_of_permute_bf16", R, "validate",
            lambda m, x: x.permute(0, 2, 1).sum(1, keepdim=True), lambda t: [t((4, 7, 33), BF16)]),
    Problem("layer_norm_of_view_f32", R, "validate",
            lambda m, x: F.layer_norm(x.view(32, 64), (64,)), lambda t: [t((8, 4, 64), F32)]),
    Problem("softmax_scale_mask_f32", R, "validate",
            lambda m, x, mask: torch.softmax(x * 0.125 + mask, -1),
            lambda t: [t((8, 64, 65), F32), t((64, 65), F32)]),
    Problem("softmax_bf16_4x100x333", R, "validate", lambda m, x: torch.softmax(x, -1),
            lambda t: [t((4, 100, 333), BF16)]),
    Problem("log_softmax_f32_333x77", R, "validate", lambda m, x: torch.log_softmax(x, -1),
            lambda t: [t((333, 77), F32)]),
    Problem("log_softmax_bf16_64x50257", R, "validate", lambda m, x: torch.log_softmax(x, -1),
            lambda t: [t((64, 50257), BF16)]),
    # rows longer than one block's registers: a thread block cluster shares each (cluster_blocks)
    Problem("softmax_cluster_f32_8x393216", R, "validate", lambda m, x: torch.softmax(x, -1),
            lambda t: [t((8, 393216), F32)]),
    Problem("softmax_cluster_odd_f32_5x100003", R, "validate", lambda m, x: torch.softmax(x, -1),
            lambda t: [t((5, 100003), F32)]),
    Problem("log_softmax_cluster_bf16_16x128256", R, "validate",
            lambda m, x: torch.log_softmax(x, -1), lambda t: [t((16, 128256), BF16)]),
    Problem("layer_norm_cluster_f32_4x262144", R, "validate", layer_norm,
            lambda t: [t((4, 262144), F32)], affine(262144, F32)),
    Problem("rms_norm_cluster_bf16_3x200000", R, "validate", rms_norm,
            lambda t: [t((3, 200000), BF16)], lambda: {"weight": torch.randn(200000).to(BF16)}),
    Problem("sum_cluster_f32_6x300001", R, "validate", lambda m, x: x.sum(-1, keepdim=True) * x,
            lambda t: [t((6, 300001), F32)]),
    Problem("layer_norm_f32_1024x768", R, "validate", layer_norm,
            lambda t: [t((1024, 768), F32)], affine(768, F32)),
    Problem("layer_norm_bf16_257x1000", R, "validate", layer_norm,
            lambda t: [t((257, 1000), BF16)], affine(1000, BF16)),
    Problem("layer_norm_f16_100x4097", R, "validate", layer_norm,
            lambda t: [t((100, 4097), F16)], affine(4097, F16)),
    Problem("layer_norm_noaffine_f32", R, "validate",
            lambda m, x: F.layer_norm(x, (7,)), lambda t: [t((3, 5, 7), F32)]),
    Problem("layer_norm_gelu_bf16", R, "validate", lambda m, x: F.gelu(layer_norm(m, x)),
            lambda t: [t((128, 1024), BF16)], affine(1024, BF16)),
    # nn.LayerNorm over several trailing dims: one row of their product when contiguous
    Problem("layer_norm_3d_f32_3x5x7x9", R, "validate", layer_norm,
            lambda t: [t((3, 5, 7, 9), F32)], affine((5, 7, 9), F32)),
    Problem("layer_norm_2d_gelu_bf16_6x33x129", R, "validate",
            lambda m, x: F.gelu(layer_norm(m, x)), lambda t: [t((6, 33, 129), BF16)],
            affine((33, 129), BF16)),
    Problem("layer_norm_3d_cluster_f32_4x16x128x128", R, "validate", layer_norm,
            lambda t: [t((4, 16, 128, 128), F32)], affine((16, 128, 128), F32)),
    Problem("layer_norm_3d_of_permute_f32", R, "validate",
            lambda m, x: F.layer_norm(x.permute(0, 3, 1, 2), (4, 8, 8)),
            lambda t: [t((2, 8, 8, 4), F32)]),
    Problem("layer_norm_residual_f32", R, "validate", lambda m, x, r: layer_norm(m, x) + r,
            lambda t: [t((100, 512), F32), t((100, 512), F32)], affine(512, F32)),
    # logsumexp: softmax's statistics, one value per row
    Problem("logsumexp_f32_333x1001", R, "validate", lambda m, x: torch.logsumexp(x, -1),
            lambda t: [t((333, 1001), F32)]),
    Problem("logsumexp_dim1_keepdim_bf16_4x77x9", R, "validate",
            lambda m, x: torch.logsumexp(x * 3, 1, keepdim=True), lambda t: [t((4, 77, 9), BF16)]),
    Problem("logsumexp_residual_f16_100x4096", R, "validate",
            lambda m, x: torch.logsumexp(x, -1, keepdim=True) - x, lambda t: [t((100, 4096), F16)]),
    # reductions over the trailing dims with keepdim: one row of their product
    Problem("squeeze_excite_mean_hw_f32_4x6x7x9", R, "validate",
            lambda m, x: x * torch.sigmoid(x.mean((2, 3), keepdim=True)),
            lambda t: [t((4, 6, 7, 9), F32)]),
    Problem("var_chw_keepdim_bf16_3x5x6x7", R, "validate",
            lambda m, x: torch.var(x, (1, 2, 3), keepdim=True), lambda t: [t((3, 5, 6, 7), BF16)]),
    # group norm: a row per (sample, group) of the task as (N, G, C/G * spatial), the affine
    # read per channel, epilogues fused; instance norm is a group per channel
    Problem("group_norm_silu_f16_2x32x5x7", R, "validate",
            lambda m, x: F.silu(group_norm(8)(m, x)), lambda t: [t((2, 32, 5, 7), F16)],
            affine(32, F16)),
    Problem("group_norm_bf16_3x12x7", R, "validate", group_norm(4, 1e-3),
            lambda t: [t((3, 12, 7), BF16)], affine(12, BF16)),
    Problem("group_norm_f32_2x6x3x5x7", R, "validate", group_norm(3),
            lambda t: [t((2, 6, 3, 5, 7), F32)], affine(6, F32)),
    Problem("group_norm_noaffine_f32_5x9x11x13", R, "validate",
            lambda m, x: F.group_norm(x, 3), lambda t: [t((5, 9, 11, 13), F32)]),
    Problem("group_norm_residual_relu_f32_33x96", R, "validate",
            lambda m, x, r: torch.relu(group_norm(8)(m, x) + r),
            lambda t: [t((33, 96), F32), t((33, 96), F32)], affine(96, F32)),
    Problem("group_norm_silu_cluster_f16_2x64x48x48", R, "validate",
            lambda m, x: F.silu(group_norm(4)(m, x)), lambda t: [t((2, 64, 48, 48), F16)],
            affine(64, F16)),
    Problem("instance_norm_f32_3x5x9x11", R, "validate",
            lambda m, x: F.instance_norm(x, weight=m.weight, bias=m.bias),
            lambda t: [t((3, 5, 9, 11), F32)], affine(5, F32)),
    Problem("instance_norm_gelu_bf16_2x16x33", R, "validate",
            lambda m, x: F.gelu(F.instance_norm(x)), lambda t: [t((2, 16, 33), BF16)]),
    Problem("sum_f32_1000x1003", R, "validate", lambda m, x: x.sum(-1),
            lambda t: [t((1000, 1003), F32)]),
    Problem("sum_f32_1x1000003", R, "validate", lambda m, x: x.sum(-1),
            lambda t: [t((1, 1000003), F32)]),
    Problem("mean_keepdim_f32", R, "validate", lambda m, x: x.mean(-1, keepdim=True),
            lambda t: [t((64, 7, 129), F32)]),
    Problem("mean_epilogue_f32", R, "validate", lambda m, x: x.mean(-1) * 2.0 + 1.0,
            lambda t: [t((1000, 99), F32)]),
    Problem("amax_f32_513x31", R, "validate", lambda m, x: x.amax(-1),
            lambda t: [t((513, 31), F32)]),
    Problem("amax_abs_f32", R, "validate", lambda m, x: x.abs().amax(-1),
            lambda t: [t((77, 1025), F32)]),
    Problem("amin_f16_100x2049", R, "validate", lambda m, x: x.amin(-1),
            lambda t: [t((100, 2049), F16)]),
    Problem("rms_norm_f32_512x4096", R, "validate", rms_norm,
            lambda t: [t((512, 4096), F32)], lambda: {"weight": torch.randn(4096)}),
    Problem("rms_norm_upcast_bf16", R, "validate", rms_norm_upcast,
            lambda t: [t((256, 2048), BF16)], lambda: {"weight": torch.randn(2048).to(BF16)}),
    # ---- reductions over a middle dimension (col_reduce), var, var_mean ----
    Problem("sum_dim1_f32_6x100x17", R, "validate", lambda m, x: x.sum(1),
            lambda t: [t((6, 100, 17), F32)]),
    Problem("mean_dim1_keepdim_f32_8x4097x5", R, "validate", lambda m, x: x.mean(1, keepdim=True),
            lambda t: [t((8, 4097, 5), F32)]),
    Problem("mean_dim1_epilogue_f32", R, "validate", lambda m, x: x.mean(1) * 2.0 + 1.0,
            lambda t: [t((64, 129, 31), F32)]),
    Problem("amax_dim0_f32_5000x3", R, "validate", lambda m, x: x.amax(0),
            lambda t: [t((5000, 3), F32)]),
    Problem("amax_dim1_bf16_16x3x1000", R, "validate", lambda m, x: x.amax(1),
            lambda t: [t((16, 3, 1000), BF16)]),
    Problem("amin_dim1_f16_3x257x129", R, "validate", lambda m, x: x.amin(1, keepdim=True),
            lambda t: [t((3, 257, 129), F16)]),
    Problem("sum_dim2_f32_3x4x50x64", R, "validate", lambda m, x: x.sum(2, keepdim=True),
            lambda t: [t((3, 4, 50, 64), F32)]),
    Problem("sum_dim1_size1_f32_1x513x1x7", R, "validate", lambda m, x: x.sum(1),
            lambda t: [t((1, 513, 1, 7), F32)]),
    Problem("mean_dim1_trailing1_f32_5x300x1", R, "validate", lambda m, x: x.mean(1),
            lambda t: [t((5, 300, 1), F32)]),
    Problem("var_dim1_f32_16x256x49", R, "validate", lambda m, x: x.var(1, keepdim=True),
            lambda t: [t((16, 256, 49), F32)]),
    Problem("var_dim1_corr0_bf16_4x64x33x33", R, "validate",
            lambda m, x: torch.var(x, 1, correction=0), lambda t: [t((4, 64, 33, 33), BF16)]),
    Problem("var_last_f32_333x1001", R, "validate", lambda m, x: x.var(-1),
            lambda t: [t((333, 1001), F32)]),
    Problem("var_last_biased_f16_7x4096", R, "validate", lambda m, x: x.var(-1, unbiased=False),
            lambda t: [t((7, 4096), F16)]),
    Problem("var_mean_dim1_f32_9x300x7", R, "validate",
            lambda m, x: torch.var_mean(x, 1, correction=0, keepdim=True),
            lambda t: [t((9, 300, 7), F32)]),
    Problem("var_mean_last_f32_99x513", R, "validate", lambda m, x: torch.var_mean(x, -1),
            lambda t: [t((99, 513), F32)]),
    Problem("channel_rms_norm_f32_4x64x32x32", R, "validate", channel_rms_norm,
            lambda t: [t((4, 64, 32, 32), F32)], channel_weight(64, F32)),
    Problem("channel_rms_norm_bf16_2x96x7x9", R, "validate", channel_rms_norm,
            lambda t: [t((2, 96, 7, 9), BF16)], channel_weight(96, BF16)),
    Problem("channel_rms_norm_upcast_bf16", R, "validate", channel_rms_norm_upcast,
            lambda t: [t((2, 64, 16, 16), BF16)], channel_weight(64, BF16)),
    Problem("channel_rms_norm_f32_1x3x1x1", R, "validate", channel_rms_norm,
            lambda t: [t((1, 3, 1, 1), F32)], channel_weight(3, F32)),
    Problem("softmax_dim1_f32_8x1000x33", R, "validate", lambda m, x: torch.softmax(x, 1),
            lambda t: [t((8, 1000, 33), F32)]),
    Problem("log_softmax_dim1_f32_4x77x129", R, "validate", lambda m, x: torch.log_softmax(x, 1),
            lambda t: [t((4, 77, 129), F32)]),
    Problem("softmax_dim0_f16_300x129", R, "validate", lambda m, x: torch.softmax(x, 0),
            lambda t: [t((300, 129), F16)]),
    Problem("softmax_dim1_split_f32_4x100000x2", R, "validate", lambda m, x: torch.softmax(x, 1),
            lambda t: [t((4, 100000, 2), F32)]),
    # ---- cross-entropy (aten::cross_entropy_loss, class-index targets) ----
    Problem("cross_entropy_f32_1000x1003", R, "validate", cross_entropy(),
            logits_targets(1000, 1003, F32)),
    Problem("cross_entropy_sum_f32_333x77", R, "validate", cross_entropy(reduction="sum"),
            logits_targets(333, 77, F32)),
    Problem("cross_entropy_bf16_512x4096", R, "validate", cross_entropy(),
            logits_targets(512, 4096, BF16)),
    Problem("cross_entropy_sum_bf16_257x1001", R, "validate", cross_entropy(reduction="sum"),
            logits_targets(257, 1001, BF16)),
    Problem("cross_entropy_f32_37x1", R, "validate", cross_entropy(),
            logits_targets(37, 1, F32)),
    Problem("cross_entropy_f32_1x50257", R, "validate", cross_entropy(),
            logits_targets(1, 50257, F32)),
    Problem("cross_entropy_f16_100x333", R, "validate", cross_entropy(),
            logits_targets(100, 333, F16)),
    Problem("cross_entropy_f32_64x32768", R, "validate", cross_entropy(),
            logits_targets(64, 32768, F32)),
    Problem("cross_entropy_bf16_4x128256", R, "validate", cross_entropy(),
            logits_targets(4, 128256, BF16)),
    # ignore_index inside [0, C): the judge's targets hit it on about 1 row in C.
    Problem("cross_entropy_ignore3_f32_999x7", R, "validate", cross_entropy(ignore_index=3),
            logits_targets(999, 7, F32)),
    Problem("cross_entropy_ignore0_sum_bf16_129x5", R, "validate",
            cross_entropy(ignore_index=0, reduction="sum"), logits_targets(129, 5, BF16)),
    Problem("cross_entropy_none_bf16_257x1001", R, "validate", cross_entropy(reduction="none"),
            logits_targets(257, 1001, BF16)),
    Problem("cross_entropy_none_ignore4_smoothed_f32_100x33", R, "validate",
            cross_entropy(reduction="none", ignore_index=4, label_smoothing=0.2),
            logits_targets(100, 33, F32)),
    Problem("cross_entropy_weighted_f32_333x1001", R, "validate", weighted_cross_entropy(),
            logits_targets(333, 1001, F32), class_weights(1001, F32)),
    Problem("cross_entropy_weighted_sum_ignore2_bf16_129x77", R, "validate",
            weighted_cross_entropy(reduction="sum", ignore_index=2),
            logits_targets(129, 77, BF16), class_weights(77, BF16)),
    Problem("cross_entropy_weighted_none_f16_64x512", R, "validate",
            weighted_cross_entropy(reduction="none"), logits_targets(64, 512, F16),
            class_weights(512, F16)),
    # nll_loss on log-probabilities (aten::nll_loss_nd): the cross_entropy template without its
    # pass over the row; after log_softmax it is a second task
    Problem("nll_loss_of_log_softmax_f32_333x1001", R, "validate",
            lambda m, x, target: F.nll_loss(F.log_softmax(x, -1), target),
            logits_targets(333, 1001, F32)),
    Problem("nll_loss_weighted_none_ignore1_bf16_129x77", R, "validate",
            lambda m, x, target: F.nll_loss(x, target, weight=m.weight, reduction="none",
                                            ignore_index=1),
            logits_targets(129, 77, BF16), class_weights(77, BF16)),
    Problem("cross_entropy_smoothed_f32_333x1001", R, "validate",
            cross_entropy(label_smoothing=0.1), logits_targets(333, 1001, F32)),
    Problem("cross_entropy_smoothed_sum_ignore2_bf16_257x77", R, "validate",
            cross_entropy(label_smoothing=0.3, reduction="sum", ignore_index=2),
            logits_targets(257, 77, BF16)),
    Problem("cross_entropy_smoothed_f16_64x32000", R, "validate",
            cross_entropy(label_smoothing=0.05), logits_targets(64, 32000, F16)),
    # ---- GEMM (gemm_library family: cuBLASLt, its native epilogues, then a pointwise kernel) ----
    Problem("linear_bias_f32_1000x999x257", G, "validate", linear,
            lambda t: [t((1000, 257), F32)], linear_weights(999, 257, F32)),
    Problem("linear_nobias_f32_256x512x384", G, "validate", linear,
            lambda t: [t((256, 384), F32)], linear_weights(512, 384, F32, bias=False)),
    Problem("linear_bias_bf16_512x1024x768", G, "validate", linear,
            lambda t: [t((512, 768), BF16)], linear_weights(1024, 768, BF16)),
    Problem("linear_nobias_f16_333x257x129", G, "validate", linear,
            lambda t: [t((333, 129), F16)], linear_weights(257, 129, F16, bias=False)),
    Problem("linear_bias_f16_3d_4x100x256x128", G, "validate", linear,
            lambda t: [t((4, 100, 128), F16)], linear_weights(256, 128, F16)),
    Problem("linear_relu_f32_512x512x256", G, "validate", lambda m, x: torch.relu(linear(m, x)),
            lambda t: [t((512, 256), F32)], linear_weights(512, 256, F32)),
    Problem("linear_relu_bf16_1000x999x257", G, "validate", lambda m, x: torch.relu(linear(m, x)),
            lambda t: [t((1000, 257), BF16)], linear_weights(999, 257, BF16)),
    Problem("linear_gelu_tanh_f32_256x1024x512", G, "validate",
            lambda m, x: F.gelu(linear(m, x), approximate="tanh"),
            lambda t: [t((256, 512), F32)], linear_weights(1024, 512, F32)),
    Problem("linear_gelu_tanh_nobias_bf16_128x768x768", G, "validate",
            lambda m, x: F.gelu(linear(m, x), approximate="tanh"),
            lambda t: [t((128, 768), BF16)], linear_weights(768, 768, BF16, bias=False)),
    Problem("linear_gelu_erf_f32_256x512x256", G, "validate", lambda m, x: F.gelu(linear(m, x)),
            lambda t: [t((256, 256), F32)], linear_weights(512, 256, F32)),
    Problem("linear_gelu_erf_f16_100x300x200", G, "validate", lambda m, x: F.gelu(linear(m, x)),
            lambda t: [t((100, 200), F16)], linear_weights(300, 200, F16)),
    Problem("linear_residual_f32_512x512x512", G, "validate", lambda m, x, r: linear(m, x) + r,
            lambda t: [t((512, 512), F32), t((512, 512), F32)], linear_weights(512, 512, F32)),
    Problem("linear_residual_bf16_3x100x256", G, "validate", lambda m, x, r: linear(m, x) + r,
            lambda t: [t((3, 100, 256), BF16), t((3, 100, 256), BF16)],
            linear_weights(256, 256, BF16)),
    Problem("swiglu_f32_256x512x256", G, "validate", swiglu,
            lambda t: [t((256, 256), F32)], linear_weights(512, 256, F32, False, ("up",))),
    Problem("swiglu_bf16_128x1024x512", G, "validate", swiglu,
            lambda t: [t((128, 512), BF16)], linear_weights(1024, 512, BF16, False, ("up",))),
    Problem("addmm_f32_1000x999x257", G, "validate", lambda m, b, x, w: torch.addmm(b, x, w),
            lambda t: [t((999,), F32), t((1000, 257), F32), t((257, 999), F32)]),
    Problem("addmm_f16_64x128x96", G, "validate", lambda m, b, x, w: torch.addmm(b, x, w),
            lambda t: [t((128,), F16), t((64, 96), F16), t((96, 128), F16)]),
    Problem("mm_f32_1000x999x257", G, "validate", lambda m, x, w: x @ w,
            lambda t: [t((1000, 257), F32), t((257, 999), F32)]),
    Problem("mm_bf16_512x512x512", G, "validate", lambda m, x, w: torch.mm(x, w),
            lambda t: [t((512, 512), BF16), t((512, 512), BF16)]),
    Problem("bmm_f32_8x128x96x64", G, "validate", lambda m, x, w: torch.bmm(x, w),
            lambda t: [t((8, 128, 64), F32), t((8, 64, 96), F32)]),
    Problem("bmm_bf16_4x257x129x65", G, "validate", lambda m, x, w: torch.bmm(x, w),
            lambda t: [t((4, 257, 65), BF16), t((4, 65, 129), BF16)]),
    Problem("matmul_3d2d_f32_4x100x128x256", G, "validate", lambda m, x, w: torch.matmul(x, w),
            lambda t: [t((4, 100, 256), F32), t((256, 128), F32)]),
    Problem("linear_m1_f32_1x1024x512", G, "validate", linear,
            lambda t: [t((1, 512), F32)], linear_weights(1024, 512, F32)),
    Problem("mm_k1_f32_333x257x1", G, "validate", lambda m, x, w: x @ w,
            lambda t: [t((333, 1), F32), t((1, 257), F32)]),
    Problem("mm_transposed_a_f32_1000x999x257", G, "validate", lambda m, x, w: x.t() @ w,
            lambda t: [t((257, 1000), F32), t((257, 999), F32)]),
    # Skinny products (M <= 16: the gemv family competes): both weight layouts, odd sizes, a
    # batch, epilogues.
    Problem("linear_silu_bf16_8x1000x1024", G, "validate", lambda m, x: F.silu(linear(m, x)),
            lambda t: [t((8, 1024), BF16)], linear_weights(1000, 1024, BF16)),
    Problem("linear_f16_3d_2x3x257x1001", G, "validate", linear,
            lambda t: [t((2, 3, 1001), F16)], linear_weights(257, 1001, F16)),
    Problem("mm_residual_f32_16x768x512", G, "validate", lambda m, x, w, r: x @ w * 0.5 + r,
            lambda t: [t((16, 512), F32), t((512, 768), F32), t((16, 768), F32)]),
    Problem("bmm_bf16_4x2x129x333", G, "validate", lambda m, x, w: torch.bmm(x, w),
            lambda t: [t((4, 2, 333), BF16), t((4, 333, 129), BF16)]),
    Problem("mm_transposed_b_bf16_300x200x128", G, "validate", lambda m, x, w: x @ w.t(),
            lambda t: [t((300, 128), BF16), t((200, 128), BF16)]),
    Problem("mm_transposed_input_f16_256x384x192", G, "validate", lambda m, x, w: x @ w,
            lambda t: [t((192, 256), F16).t(), t((192, 384), F16)]),
    # ---- decode attention (flash_attention's split_kv_decode beside sdpa_library's backends):
    # odd KV lengths, GQA 4:1 and 1:1, head dims 64 / 80 / 128, a few queries, causal ----
    Problem("decode_gqa4_kv1001_d64_f16", A, "validate", gqa_attention,
            decode_inputs(2, 1001, heads=8, kv_heads=2, head_dim=64, dtype=F16)),
    Problem("decode_mha_kv2047_d128_bf16", A, "validate", gqa_attention,
            decode_inputs(1, 2047, heads=4, kv_heads=4)),
    Problem("decode_q4_kv777_d80_f32", A, "validate", gqa_attention,
            decode_inputs(1, 777, heads=4, kv_heads=1, q_len=4, head_dim=80, dtype=F32)),
    # Written-out decode attention (the explicit pattern): scale, a bool mask filled with -inf or
    # a large negative number, softmax, @ v.
    Problem("decode_explicit_kv1000_d64_f32", A, "validate",
            lambda m, q, k, v: torch.softmax(q @ k.transpose(-2, -1) / 8.0, dim=-1) @ v,
            decode_inputs(2, 1000, heads=4, kv_heads=4, head_dim=64, dtype=F32)),
    Problem("decode_explicit_masked_kv999_d64_f16", A, "validate",
            lambda m, q, k, v, mask: torch.softmax(
                (q @ k.transpose(-2, -1) * 0.125).masked_fill(mask, -1e4), dim=-1) @ v,
            lambda t: decode_inputs(1, 999, heads=4, kv_heads=4, q_len=2, head_dim=64,
                                    dtype=F16)(t) + [t((1, 1, 2, 999), I64, high=2).bool()]),
    Problem("decode_explicit_finfo_min_kv300_d64_f32", A, "validate",
            lambda m, q, k, v, mask: torch.softmax(
                (q @ k.transpose(-2, -1) * 0.125).masked_fill(mask, torch.finfo(F32).min),
                dim=-1) @ v,
            lambda t: decode_inputs(1, 300, heads=4, kv_heads=4, head_dim=64, dtype=F32)(t)
            + [t((1, 1, 1, 300), I64, high=2).bool()]),
    Problem("decode_causal_q3_kv500_d64_bf16", A, "validate",
            lambda m, q, k, v: F.scaled_dot_product_attention(q, k, v, is_causal=True),
            decode_inputs(1, 500, heads=4, kv_heads=4, q_len=3, head_dim=64)),
    # ---- scan (cumsum, cumprod, cummax / cummin with indices, logcumsumexp; row_scan over the
    # last dim, col_scan over an inner one, chained_scan over few long rows) ----
    Problem("cumsum_f32_1000x1003", S, "validate", lambda m, x: torch.cumsum(x, 1),
            lambda t: [t((1000, 1003), F32)]),
    Problem("cumsum_div_bf16_257x4096", S, "validate",
            lambda m, x: torch.cumsum(x * 2.0, -1) / 4096, lambda t: [t((257, 4096), BF16)]),
    Problem("cumsum_inner_f32_8x333x65", S, "validate", lambda m, x: torch.cumsum(x, 1),
            lambda t: [t((8, 333, 65), F32)]),
    Problem("cumsum_int32_to_int64_64x1000", S, "validate", lambda m, x: torch.cumsum(x, 1),
            lambda t: [t((64, 1000), torch.int32, high=100)]),
    Problem("cumsum_to_f64_f32_33x777", S, "validate",
            lambda m, x: torch.cumsum(x, 1, dtype=torch.float64), lambda t: [t((33, 777), F32)]),
    Problem("cumprod_f32_300x64", S, "validate", lambda m, x: torch.cumprod(x, 1),
            lambda t: [t((300, 64), F32)]),
    Problem("cumprod_inner_f16_4x37x50", S, "validate", lambda m, x: torch.cumprod(x, 1),
            lambda t: [t((4, 37, 50), F16)]),
    Problem("cummax_f32_1000x1003", S, "validate", lambda m, x: torch.cummax(x, 1),
            lambda t: [t((1000, 1003), F32)]),
    Problem("cummin_inner_bf16_16x100x33", S, "validate", lambda m, x: torch.cummin(x, 1),
            lambda t: [t((16, 100, 33), BF16)]),
    Problem("logcumsumexp_f32_512x2048", S, "validate", lambda m, x: torch.logcumsumexp(x, -1),
            lambda t: [t((512, 2048), F32)]),
    Problem("exp_logcumsumexp_inner_f16_8x129x31", S, "validate",
            lambda m, x: torch.exp(torch.logcumsumexp(x, 1)), lambda t: [t((8, 129, 31), F16)]),
    Problem("cumsum_long_f32_1x1048576", S, "validate", lambda m, x: torch.cumsum(x, -1),
            lambda t: [t((1, 1048576), F32)]),
    Problem("cummax_long_odd_f32_3x1000003", S, "validate", lambda m, x: torch.cummax(x, -1),
            lambda t: [t((3, 1000003), F32)]),
    # ---- stencil (depthwise convolution, max / avg / adaptive pooling; NCHW and channels-last;
    # fused prologues and epilogues) ----
    Problem("dwconv7_bias_gelu_bf16_2x96x28x28", T, "validate",
            lambda m, x: F.gelu(depthwise(1, 3)(m, x)), lambda t: [t((2, 96, 28, 28), BF16)],
            depthwise_weights(96, 7, BF16)),
    Problem("dwconv7_f32_2x192x14x14", T, "validate", depthwise(1, 3),
            lambda t: [t((2, 192, 14, 14), F32)], depthwise_weights(192, 7, F32)),
    Problem("dwconv7_channels_last_bf16_2x96x28x28", T, "validate", depthwise(1, 3),
            lambda t: [channels_last(t((2, 96, 28, 28), BF16))], depthwise_weights(96, 7, BF16)),
    Problem("dwconv3_s2_relu6_f16_4x144x29x29", T, "validate",
            lambda m, x: F.relu6(depthwise(2, 1)(m, x)), lambda t: [t((4, 144, 29, 29), F16)],
            depthwise_weights(144, 3, F16, bias=False)),
    Problem("dwconv3_dilated_f32_2x32x30x30", T, "validate", depthwise(1, 2, 2),
            lambda t: [t((2, 32, 30, 30), F32)], depthwise_weights(32, 3, F32)),
    Problem("affine_relu_maxpool3s2_f32_2x64x56x56", T, "validate", affine_relu_max_pool,
            lambda t: [t((2, 64, 56, 56), F32)], channel_affine(64, F32)),
    Problem("maxpool2_channels_last_bf16_2x64x30x30", T, "validate",
            lambda m, x: F.max_pool2d(x, 2), lambda t: [channels_last(t((2, 64, 30, 30), BF16))]),
    Problem("avgpool3s2_ceil_nopad_f32_2x32x15x15", T, "validate",
            lambda m, x: F.avg_pool2d(x, 3, 2, 1, ceil_mode=True, count_include_pad=False),
            lambda t: [t((2, 32, 15, 15), F32)]),
    Problem("avgpool2_f16_4x48x33x32", T, "validate", lambda m, x: F.avg_pool2d(x, 2),
            lambda t: [t((4, 48, 33, 32), F16)]),
    Problem("adaptive_avgpool_7_f32_2x64x14x14", T, "validate",
            lambda m, x: F.adaptive_avg_pool2d(x, 7), lambda t: [t((2, 64, 14, 14), F32)]),
    # Windows as reductions (window_reduce, the default of large NCHW windows): a global average
    # pool, a global max pool, and a channels-last 8x8 pool (where it is offered beside the rest)
    Problem("global_avgpool_bf16_4x64x28x28", T, "validate",
            lambda m, x: F.adaptive_avg_pool2d(x, 1), lambda t: [t((4, 64, 28, 28), BF16)]),
    Problem("global_maxpool_relu_f32_3x16x20x20", T, "validate",
            lambda m, x: torch.relu(F.max_pool2d(x, 20)), lambda t: [t((3, 16, 20, 20), F32)]),
    Problem("avgpool8_channels_last_f16_2x32x32x32", T, "validate",
            lambda m, x: F.avg_pool2d(x, 8), lambda t: [channels_last(t((2, 32, 32, 32), F16))]),
    # ---- anchors (DESIGN.md's anchor table) ----
    Problem("softmax_4096x393216_f32", R, "anchor", lambda m, x: torch.softmax(x, -1),
            lambda t: [t((4096, 393216), F32)], judge_inputs=lambda t: [t((40, 393216), F32)]),
    Problem("log_softmax_8192x128256_bf16", R, "anchor", lambda m, x: torch.log_softmax(x, -1),
            lambda t: [t((8192, 128256), BF16)], judge_inputs=lambda t: [t((64, 128256), BF16)]),
    # Few long rows (decode logits of a 128256-token vocabulary, batch 8; a short batch of long
    # softmax rows): a block per row leaves most SMs idle; a cluster per row does not.
    Problem("log_softmax_logits_8x128256_bf16", R, "anchor", lambda m, x: torch.log_softmax(x, -1),
            lambda t: [t((8, 128256), BF16)]),
    Problem("softmax_32x393216_f32", R, "anchor", lambda m, x: torch.softmax(x, -1),
            lambda t: [t((32, 393216), F32)]),
    Problem("permute_back_residual_bf16_32x192x28x28", P, "anchor",
            lambda m, x, y, g: x + (g * y).permute(0, 3, 1, 2),
            lambda t: [t((32, 192, 28, 28), BF16), t((32, 28, 28, 192), BF16), t((192,), BF16)]),
    Problem("relu_4096x393216_f32", P, "anchor", lambda m, x: torch.relu(x),
            lambda t: [t((4096, 393216), F32)], judge_inputs=lambda t: [t((40, 393216), F32)]),
    Problem("chain_2p28_f32", P, "anchor", lambda m, x: chain(x),
            lambda t: [t((2 ** 28,), F32)], judge_inputs=lambda t: [t((2 ** 24,), F32)]),
    Problem("layer_norm_gelu_16384x4096_bf16", R, "anchor",
            lambda m, x: F.gelu(layer_norm(m, x)),
            lambda t: [t((16384, 4096), BF16)], affine(4096, BF16)),
    Problem("layer_norm_3d_16x64x256x256_f32", R, "anchor", layer_norm,
            lambda t: [t((16, 64, 256, 256), F32)], affine((64, 256, 256), F32),
            judge_inputs=lambda t: [t((2, 64, 256, 256), F32)]),
    Problem("channel_rms_norm_112x64x512x512_f32", R, "anchor", channel_rms_norm,
            lambda t: [t((112, 64, 512, 512), F32)], channel_weight(64, F32),
            judge_inputs=lambda t: [t((1, 64, 512, 512), F32)]),
    # Issue 24's unseen GroupNorm(32, 320) + SiLU (16 samples: 512 rows of 40960) and the few-row
    # case of two samples (64 rows: a cluster per row fills the GPU)
    Problem("group_norm_silu_16x320x64x64_f16", R, "anchor",
            lambda m, x: F.silu(group_norm(32)(m, x)), lambda t: [t((16, 320, 64, 64), F16)],
            affine(320, F16)),
    Problem("group_norm_silu_2x320x64x64_f16", R, "anchor",
            lambda m, x: F.silu(group_norm(32)(m, x)), lambda t: [t((2, 320, 64, 64), F16)],
            affine(320, F16)),
    Problem("cross_entropy_32768x4096_f32", R, "anchor", cross_entropy(),
            logits_targets(32768, 4096, F32), judge_inputs=logits_targets(2048, 4096, F32)),
    # Issue 24's unseen label-smoothed cross-entropy: its floor is one read of the logits
    Problem("cross_entropy_smoothed_8192x32000_bf16", R, "anchor",
            cross_entropy(label_smoothing=0.1), logits_targets(8192, 32000, BF16)),
    # The suite's cumsum (benchmarks/suite: l1_cumsum_32768x4096_f32): a row of 4096 per block;
    # and few long rows, whose tiles the chained scan spreads over every SM.
    Problem("cumsum_32768x4096_f32", S, "anchor", lambda m, x: torch.cumsum(x, 1),
            lambda t: [t((32768, 4096), F32)], judge_inputs=lambda t: [t((2048, 4096), F32)]),
    Problem("cumsum_8x4194304_f32", S, "anchor", lambda m, x: torch.cumsum(x, 1),
            lambda t: [t((8, 4194304), F32)], judge_inputs=lambda t: [t((2, 4194304), F32)]),
    # Issue 24's stencils: ConvNeXt's depthwise 7x7 (stage 2, batch 32) and ResNet's stem max pool
    Problem("dwconv7_32x384x56x56_bf16", T, "anchor", depthwise(1, 3),
            lambda t: [t((32, 384, 56, 56), BF16)], depthwise_weights(384, 7, BF16),
            judge_inputs=lambda t: [t((1, 384, 56, 56), BF16)]),
    Problem("maxpool3s2_32x64x112x112_bf16", T, "anchor", lambda m, x: F.max_pool2d(x, 3, 2, 1),
            lambda t: [t((32, 64, 112, 112), BF16)],
            judge_inputs=lambda t: [t((2, 64, 112, 112), BF16)]),
    # A global average pool over 56 x 56 (a squeeze-and-excitation block's squeeze): a window
    # per 128 threads (window_reduce) where planar gives a thread each
    Problem("global_avgpool_32x256x56x56_bf16", T, "anchor",
            lambda m, x: F.adaptive_avg_pool2d(x, 1), lambda t: [t((32, 256, 56, 56), BF16)],
            judge_inputs=lambda t: [t((2, 256, 56, 56), BF16)]),
    # ConvNeXt's depthwise 7x7 on a channels-last input (tiled templates along C)
    Problem("dwconv7_channels_last_32x384x56x56_bf16", T, "anchor", depthwise(1, 3),
            lambda t: [channels_last(t((32, 384, 56, 56), BF16))], depthwise_weights(384, 7, BF16),
            judge_inputs=lambda t: [channels_last(t((1, 384, 56, 56), BF16))]),
    # GEMM + epilogue rows of the anchor table: cuBLASLt with a native epilogue, or followed by a
    # generated epilogue kernel (GELU's erf form and the residual have no native epilogue). Judged
    # at full size: cuBLASLt's algorithm list, which the schedule point indexes, depends on the
    # shape.
    Problem("linear_gelu_8192x4096x4096_bf16", G, "anchor", lambda m, x: F.gelu(linear(m, x)),
            lambda t: [t((8192, 4096), BF16)], linear_weights(4096, 4096, BF16)),
    Problem("linear_scale_residual_16384x4096x4096_f32", G, "anchor",
            lambda m, x: linear(m, x) * 0.5 + x,
            lambda t: [t((16384, 4096), F32)], linear_weights(4096, 4096, F32)),
    Problem("linear_leaky_relu_1024x8192x8192_f32", G, "anchor",
            lambda m, x: F.leaky_relu(linear(m, x) * 2),
            lambda t: [t((1024, 8192), F32)], linear_weights(8192, 8192, F32)),
    # Llama-3-8B's MLP at prefill (issue 26), its gate and up half: silu(x Wg^T) * (x Wu^T) with
    # x[4096 tokens, 4096], Wg and Wu [14336, 4096], bf16 (the partitioner's gated task:
    # cutlass_gemm's sm90_gated runs it as one kernel; the down projection is a plain GEMM task).
    # Floor: 2 x 4096 x 4096 x 28672 flops at the measured 790 TFLOP/s, about 1.22 ms. Judged
    # on 512 tokens (the same configuration: shapes are run-time arguments), which keeps the CPU
    # float64 reference to a fraction of a second.
    Problem("swiglu_mlp_bf16", G, "anchor", swiglu,
            lambda t: [t((4096, 4096), BF16)],
            linear_weights(14336, 4096, BF16, False, ("up",)),
            judge_inputs=lambda t: [t((512, 4096), BF16)]),
    # Decode attention (issue 22): Llama-3-8B's heads (32 over 8 K/V heads, D 128), bf16, one
    # query over a KV cache of 2048-32768; the floor is Q, K, V and the output read or written
    # once (target >= 85% of the measured copy bandwidth). The long ones are judged on one batch
    # of 4100 keys (more than twice every split length, so every point stays valid there).
    Problem("decode_b1_h32_kv2048_d128_bf16", A, "anchor", gqa_attention, decode_inputs(1, 2048)),
    Problem("decode_b1_h32_kv8192_d128_bf16", A, "anchor", gqa_attention, decode_inputs(1, 8192)),
    Problem("decode_b1_h32_kv32768_d128_bf16", A, "anchor", gqa_attention,
            decode_inputs(1, 32768), judge_inputs=decode_inputs(1, 4100)),
    Problem("decode_b8_h32_kv2048_d128_bf16", A, "anchor", gqa_attention, decode_inputs(8, 2048)),
    Problem("decode_b8_h32_kv8192_d128_bf16", A, "anchor", gqa_attention,
            decode_inputs(8, 8192), judge_inputs=decode_inputs(1, 4100)),
    Problem("decode_b8_h32_kv32768_d128_bf16", A, "anchor", gqa_attention,
            decode_inputs(8, 32768), judge_inputs=decode_inputs(1, 4100)),
    # Decode's skinny GEMM (issue 26): x[M, 4096] W[14336, 4096] bf16, the 117 MB weight read
    # once; target >= 88% of the measured copy bandwidth (the gemv family).
    Problem("gemv_1x4096x14336_bf16", G, "anchor", linear,
            lambda t: [t((1, 4096), BF16)], linear_weights(14336, 4096, BF16, bias=False)),
    Problem("gemv_8x4096x14336_bf16", G, "anchor", linear,
            lambda t: [t((8, 4096), BF16)], linear_weights(14336, 4096, BF16, bias=False)),
]


def contiguous_maker(device, random):
    def make(shape, dtype, high=None):
        if high is not None:
            return torch.randint(0, high, shape, device=device, dtype=dtype)
        if random:
            return torch.randn(shape, device=device).to(dtype)
        return torch.empty(shape, device=device, dtype=dtype)  # export reads no values
    return make


def export_all(out: pathlib.Path) -> None:
    import forge

    out.mkdir(parents=True, exist_ok=True)
    manifest = []
    for problem in PROBLEMS:
        torch.manual_seed(0)
        module = Module(problem)
        exported = forge.export(module, problem.inputs(contiguous_maker("cpu", random=False)),
                                name=problem.name)
        (out / problem.name).mkdir(exist_ok=True)
        (out / problem.name / "graph.pb").write_bytes(
            exported.graph.SerializeToString(deterministic=True))
        if problem.judge_inputs:
            exported = forge.export(module, problem.judge_inputs(contiguous_maker("cpu", False)),
                                    name=problem.name + "_judge")
            (out / problem.name / "judge_graph.pb").write_bytes(
                exported.graph.SerializeToString(deterministic=True))
        manifest.append(f"{problem.name}\t{problem.family}\t{problem.mode}")
    (out / "manifest.tsv").write_text("\n".join(manifest) + "\n")
    print(f"exported {len(PROBLEMS)} problems to {out}")


def bench(fn, flush: torch.Tensor) -> list[float]:
    """Milliseconds of each rep: the timer's protocol (L2 flush write, events, after warm-up)."""
    for _ in range(WARMUP_REPS):
        fn()
    times = []
    for _ in range(TIMED_REPS):
        flush.zero_()
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        fn()
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end))
    return times


def baselines(out: pathlib.Path) -> None:
    properties = torch.cuda.get_device_properties(0)
    l2_bytes = getattr(properties, "L2_cache_size", 50 << 20)
    flush = torch.empty(max(2 * l2_bytes, 256 << 20) // 4, dtype=torch.int32, device="cuda")
    results = {"device": torch.cuda.get_device_name(0), "torch": torch.__version__,
               "l2_bytes": l2_bytes, "flush_bytes": flush.numel() * 4, "reps": TIMED_REPS,
               "problems": {}}
    only = set(os.environ.get("ONLY", "").split())  # as run_generators.sh's ONLY
    for problem in PROBLEMS:
        if problem.mode != "anchor" or (only and problem.name not in only):
            continue
        torch.manual_seed(0)
        module = Module(problem).cuda()
        inputs = problem.inputs(contiguous_maker("cuda", random=True))
        compiled = torch.compile(module)
        with torch.no_grad():
            eager = bench(lambda: module(*inputs), flush)
            fast = bench(lambda: compiled(*inputs), flush)
        row = {"eager_ms": statistics.median(eager), "compile_ms": statistics.median(fast),
               "eager_reps_ms": eager, "compile_reps_ms": fast}
        results["problems"][problem.name] = row
        print(f"{problem.name:34s} eager {row['eager_ms']:.4f} ms  "
              f"torch.compile {row['compile_ms']:.4f} ms", flush=True)
        del module, inputs, compiled
        torch._dynamo.reset()
        torch.cuda.empty_cache()
    out.write_text(json.dumps(results, indent=1))


def read_jsonl(path: pathlib.Path) -> list[dict]:
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def report(out_dir: pathlib.Path) -> None:
    validate = read_jsonl(out_dir / "validate.jsonl")
    anchors = read_jsonl(out_dir / "anchors.jsonl")
    base_path = out_dir / "baselines.json"
    base = json.loads(base_path.read_text()) if base_path.exists() else {"problems": {}}
    lines = ["## Validation sweep", "",
             "| problem | family | tasks | points | pass | fail | other | first failure |",
             "|---|---|---|---|---|---|---|---|"]
    totals = {"pass": 0, "fail": 0, "other": 0}
    by_family = {}  # the candidate's family (the ATen fallback apart) -> counts
    for record in validate:
        counts = {"pass": 0, "fail": 0, "other": 0}
        first = record.get("error", "")
        for task in record["tasks"]:
            if task["not_applicable"]:
                counts["other"] += 1
                first = first or f"n/a: {task['not_applicable']}"
            for point in task["points"]:
                key = point["status"] if point["status"] in ("pass", "fail") else "other"
                counts[key] += 1
                family = by_family.setdefault(point.get("family", record["family"]),
                                              {"pass": 0, "fail": 0, "other": 0, "tasks": set()})
                family[key] += 1
                family["tasks"].add(task["digest"])
                if key != "pass" and not first:
                    first = f"{point['status']}: {point['detail']}"
        for key in totals:
            totals[key] += counts[key]
        first = first.replace("|", "/").replace("\n", " ")[:160]
        lines.append(f"| {record['problem']} | {record['family']} | {len(record['tasks'])} | "
                     f"{sum(counts.values())} | {counts['pass']} | {counts['fail']} | "
                     f"{counts['other']} | {first} |")
    lines += ["", f"Totals: {totals['pass']} pass, {totals['fail']} fail, "
              f"{totals['other']} other (compile error, judge error, unsupported, "
              "not applicable).", ""]
    lines += ["| candidate family | tasks | pass | fail | other |", "|---|---|---|---|---|"]
    lines += [f"| {name} | {len(c['tasks'])} | {c['pass']} | {c['fail']} | {c['other']} |"
              for name, c in sorted(by_family.items())] + [""]
    lines += ["## Anchors", "",
              "| problem | forge ms | eager ms | torch.compile ms | floor ms (table / measured bw) "
              "| % of floor | vs eager | vs compile | best point |",
              "|---|---|---|---|---|---|---|---|---|"]
    summary_anchors = []
    for record in anchors:
        row = base["problems"].get(record["problem"], {})
        best = record.get("best") or {}
        forge_ms = best["median_us"] / 1e3 if best else None
        eager, fast = row.get("eager_ms"), row.get("compile_ms")
        floor_t = best.get("floor_table_us", 0) / 1e3 if best else None
        floor_m = best.get("floor_measured_bw_us", 0) / 1e3 if best else None

        def fmt(value, spec=".4f"):
            return "—" if value is None else format(value, spec)

        def ratio(a, b):
            return None if a is None or b is None or not b else a / b

        summary_anchors.append({"problem": record["problem"], "forge_ms": forge_ms,
                                "eager_ms": eager, "compile_ms": fast,
                                "floor_table_ms": floor_t, "floor_measured_bw_ms": floor_m,
                                "best": best, "error": record.get("error")})
        params = " ".join(f"{k}={v}" for k, v in best.get("parameters", {}).items())
        lines.append(f"| {record['problem']} | {fmt(forge_ms)} | {fmt(eager)} | {fmt(fast)} | "
                     f"{fmt(floor_t)} / {fmt(floor_m)} | {fmt(ratio(floor_m, forge_ms), '.0%')} | "
                     f"{fmt(ratio(eager, forge_ms), '.2f')}x | {fmt(ratio(fast, forge_ms), '.2f')}x "
                     f"| {params or record.get('error', 'no judged candidate')} |")
    table = "\n".join(lines) + "\n"
    (out_dir / "table.md").write_text(table)
    (out_dir / "summary.json").write_text(json.dumps(
        {"validation_totals": totals,
         "validation_by_family": {name: {key: len(value) if key == "tasks" else value
                                         for key, value in c.items()}
                                  for name, c in by_family.items()},
         "anchors": summary_anchors,
         "device": base.get("device"), "torch": base.get("torch")}, indent=1))
    print(table)


def names(family: str, mode: str) -> None:
    print(" ".join(p.name for p in PROBLEMS if p.family == family and p.mode == mode))


def main() -> int:
    if sys.argv[1] == "names":
        names(sys.argv[2], sys.argv[3])
        return 0
    command, path = sys.argv[1], pathlib.Path(sys.argv[2])
    {"export": export_all, "baselines": baselines, "report": report}[command](path)
    return 0


if __name__ == "__main__":
    sys.exit(main())
