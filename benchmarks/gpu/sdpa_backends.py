"""The time of each of ATen's SDPA backends (the sdpa_library family's candidates) and of eager, on
this GPU, for the attention anchors: python3 sdpa_backends.py [--json OUT]
  B16 H16 S1024 D64 bf16; causal B8 H32 S2048 D128 bf16; GPT-2-style explicit causal float32
  attention (B16 H16 S1024 D64: q @ k^T / sqrt(d), masked_fill, softmax, @ v, as eager runs it).
A backend PyTorch refuses for a problem prints its reason. Protocol: problems.py's bench (a >= 2x
L2 write before every rep, CUDA events, warm-ups, the median); float32 without TF32 (as Forge's
judge holds float32). Each backend's output is checked against a float64 math SDPA."""
import json
import math
import statistics
import sys

import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel

from problems import bench

torch.backends.cuda.matmul.allow_tf32 = False
FLUSH = torch.empty(256 << 20, dtype=torch.uint8, device="cuda")
BACKENDS = {"flash": SDPBackend.FLASH_ATTENTION, "efficient": SDPBackend.EFFICIENT_ATTENTION,
            "cudnn": SDPBackend.CUDNN_ATTENTION, "math": SDPBackend.MATH}
TOLERANCE = {torch.float32: 1e-4, torch.bfloat16: 2e-2}


def explicit_attention(q, k, v):
    """GPT-2's spelling, as Forge's explicit_attention test model writes it."""
    length = q.shape[-2]
    scores = (q @ k.transpose(-2, -1)) / math.sqrt(q.shape[-1])
    mask = torch.tril(torch.ones(length, length, dtype=torch.bool, device=q.device))
    scores = scores.masked_fill(~mask, torch.finfo(scores.dtype).min)
    return torch.softmax(scores, dim=-1) @ v


PROBLEMS = [  # name, B, H, S, D, dtype, causal, eager
    ("sdpa B16 H16 S1024 D64 bf16", 16, 16, 1024, 64, torch.bfloat16, False, None),
    ("sdpa causal B8 H32 S2048 D128 bf16", 8, 32, 2048, 128, torch.bfloat16, True, None),
    ("explicit causal B16 H16 S1024 D64 f32 (GPT-2 style)", 16, 16, 1024, 64, torch.float32, True,
     explicit_attention),
]


def main() -> int:
    results = {"device": torch.cuda.get_device_name(0), "torch": torch.__version__, "problems": {}}
    for name, b, h, s, d, dtype, causal, eager in PROBLEMS:
        torch.manual_seed(0)
        q, k, v = (torch.randn(b, h, s, d, device="cuda", dtype=dtype) for _ in range(3))
        flops = 4 * b * h * s * s * d / (2 if causal else 1)
        reference = F.scaled_dot_product_attention(q.double(), k.double(), v.double(),
                                                   is_causal=causal)
        row = {}

        def time(label, fn):
            try:
                out = fn()
            except RuntimeError as error:  # PyTorch refuses this backend here
                reason = str(error).splitlines()[0][:160]
                print(f"{name}: {label}: refused ({reason})")
                row[label] = {"refused": reason}
                return
            error = ((out.double() - reference).norm() / reference.norm()).item()
            ms = statistics.median(bench(fn, FLUSH))
            print(f"{name}: {label}: median {ms * 1000:.1f} us, {flops / ms / 1e9:.0f} TFLOP/s, "
                  f"relative error {error:.2e}"
                  + ("" if error <= TOLERANCE[dtype] else "  ** above tolerance **"))
            row[label] = {"median_us": ms * 1000, "tflops": flops / ms / 1e9, "rel_error": error}

        for label, backend in BACKENDS.items():
            def call(backend=backend):
                with sdpa_kernel([backend]):
                    return F.scaled_dot_product_attention(q, k, v, is_causal=causal)
            time(label, call)
        if eager is not None:  # the model's own spelling
            time("eager", lambda: eager(q, k, v))
        else:  # eager's SDPA: PyTorch's own choice of backend
            time("eager", lambda: F.scaled_dot_product_attention(q, k, v, is_causal=causal))
        results["problems"][name] = row
    if len(sys.argv) == 3 and sys.argv[1] == "--json":
        with open(sys.argv[2], "w") as out:
            json.dump(results, out, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
