"""Eager torch.matmul times on this GPU, for ratios against a Forge GEMM candidate timed in the same
run (run_families_check.sh's cutlass phase):  python3 eager_matmul.py f32:4096:4096:4096 ...
Protocol: problems.py's bench (a >= 2x L2 write before every rep, CUDA events, warm-ups, the
median); float32 without TF32 (as Forge's judge holds float32)."""
import statistics
import sys

import torch

from problems import bench

torch.backends.cuda.matmul.allow_tf32 = False
FLUSH = torch.empty(256 << 20, dtype=torch.uint8, device="cuda")
DTYPES = {"f32": torch.float32, "bf16": torch.bfloat16, "f16": torch.float16}

for spec in sys.argv[1:]:
    name, m, n, k = spec.split(":")
    a = torch.randn(int(m), int(k), device="cuda", dtype=DTYPES[name])
    b = torch.randn(int(k), int(n), device="cuda", dtype=DTYPES[name])
    ms = statistics.median(bench(lambda: torch.matmul(a, b), FLUSH))
    print(f"eager matmul {spec}: median {ms * 1000:.2f} us, "
          f"{2 * int(m) * int(n) * int(k) / ms / 1e9:.1f} TFLOP/s")
