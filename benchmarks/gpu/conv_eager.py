"""PyTorch eager times of cudnn_conv_bench's problems on this GPU, for ratios against the cuDNN
fused graph timed in the same run (run_cudnn_conv.sh):  python3 conv_eager.py
Per problem: eager with torch.backends.cudnn.benchmark off (LibTorch's default, what the worker's
ATen baseline runs) and on; "conv+BN+ReLU" is the unfolded module (conv, eval-mode batch norm,
ReLU), as the fused candidate is judged against. Protocol: problems.py's bench (a >= 2x L2 write before every rep, CUDA
events, warm-ups, the median); float32 without TF32 (as Forge's judge holds float32)."""
import statistics

import torch
import torch.nn.functional as F

from problems import bench

torch.backends.cuda.matmul.allow_tf32 = False
torch.backends.cudnn.allow_tf32 = False
FLUSH = torch.empty(256 << 20, dtype=torch.uint8, device="cuda")

# name, dtype, (n, c, h, w, k, r, stride, padding), epilogue, channels_last: cudnn_conv_bench.cc's.
PROBLEMS = [
    ("conv3x3+bias+relu", torch.bfloat16, (32, 64, 56, 56, 64, 3, 1, 1), ["relu"], False),
    ("conv3x3+bias+relu NHWC", torch.bfloat16, (32, 64, 56, 56, 64, 3, 1, 1), ["relu"], True),
    ("conv+BN+ReLU NHWC", torch.float16, (32, 64, 56, 56, 64, 3, 1, 1), ["bn", "relu"], True),
    ("conv+BN+ReLU 128", torch.bfloat16, (32, 128, 56, 56, 128, 3, 1, 1), ["bn", "relu"], False),
    ("resnet 1x1 256->64 +relu NHWC", torch.bfloat16, (32, 256, 56, 56, 64, 1, 1, 0), ["relu"], True),
    ("resnet 3x3 128 s2 +relu NHWC", torch.bfloat16, (32, 128, 56, 56, 128, 3, 2, 1), ["relu"], True),
    ("resnet 1x1 64->256 +residual+relu NHWC", torch.bfloat16, (32, 64, 56, 56, 256, 1, 1, 0),
     ["residual", "relu"], True),
    ("resnet stem 7x7 s2 +relu NHWC", torch.float16, (32, 3, 224, 224, 64, 7, 2, 3), ["relu"], True),
    ("conv3x3+bias+relu float32", torch.float32, (16, 64, 56, 56, 64, 3, 1, 1), ["relu"], False),
]


def problem_fn(dtype, dims, epilogue, channels_last):
    n, c, h, w, k, r, stride, padding = dims
    memory_format = torch.channels_last if channels_last else torch.contiguous_format
    x = torch.randn(n, c, h, w, device="cuda", dtype=dtype).to(memory_format=memory_format)
    weight = torch.randn(k, c, r, r, device="cuda", dtype=dtype).to(memory_format=memory_format)
    bias = torch.randn(k, device="cuda", dtype=dtype)
    p = (h + 2 * padding - r) // stride + 1
    q = (w + 2 * padding - r) // stride + 1
    residual = torch.randn(n, k, p, q, device="cuda", dtype=dtype).to(memory_format=memory_format)
    bn = [torch.randn(k, device="cuda", dtype=dtype) for _ in range(3)] + [
        torch.rand(k, device="cuda", dtype=dtype) + 0.5]

    def fn():
        y = F.conv2d(x, weight, None if "bn" in epilogue else bias, stride, padding)
        for step in epilogue:
            if step == "bn":
                y = F.batch_norm(y, bn[0], bn[3], bn[1], bn[2], training=False)
            elif step == "residual":
                y = y + residual
            else:
                y = getattr(torch, step)(y)
        return y
    return fn


print(f"{'problem':42} {'eager us':>10} {'eager bench us':>15}")
for name, dtype, dims, epilogue, channels_last in PROBLEMS:
    fn = problem_fn(dtype, dims, epilogue, channels_last)
    medians = []
    for benchmark in (False, True):
        torch.backends.cudnn.benchmark = benchmark
        with torch.no_grad():
            medians.append(statistics.median(bench(fn, FLUSH)) * 1000)
    print(f"{name:42} {medians[0]:10.1f} {medians[1]:15.1f}")
