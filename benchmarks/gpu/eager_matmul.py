"""Eager torch.matmul times on this GPU, for ratios against a Forge GEMM candidate timed in the same
run (run_families_check.sh's cutlass phase):  python3 eager_matmul.py f32:4096:4096:4096 ...
Protocol as problems.py's baselines: a >= 2x L2 write before every rep, CUDA events, 5 warm-ups,
median of 30; float32 without TF32 (as Forge's judge holds float32)."""
import statistics
import sys

import torch

torch.backends.cuda.matmul.allow_tf32 = False
FLUSH = torch.empty(256 << 20, dtype=torch.uint8, device="cuda")
DTYPES = {"f32": torch.float32, "bf16": torch.bfloat16, "f16": torch.float16}

for spec in sys.argv[1:]:
    name, m, n, k = spec.split(":")
    a = torch.randn(int(m), int(k), device="cuda", dtype=DTYPES[name])
    b = torch.randn(int(k), int(n), device="cuda", dtype=DTYPES[name])
    times = []
    for rep in range(35):
        FLUSH.zero_()
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        torch.matmul(a, b)
        end.record()
        end.synchronize()
        if rep >= 5:
            times.append(start.elapsed_time(end))
    ms = statistics.median(times)
    print(f"eager matmul {spec}: median {ms * 1000:.2f} us, "
          f"{2 * int(m) * int(n) * int(k) / ms / 1e9:.1f} TFLOP/s")
