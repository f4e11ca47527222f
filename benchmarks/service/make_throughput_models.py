"""Small models of many shapes, saved with torch.export.save: a workload of many distinct kernel
tasks for the service throughput benchmark (run_throughput.sh), with only torch needed.

    python3 benchmarks/service/make_throughput_models.py OUT_DIR

Writes OUT_DIR/<name>.pt2 and prints the names, one per line.
"""
import sys
from pathlib import Path

import torch


class Softmax(torch.nn.Module):
    def forward(self, x):
        return torch.softmax(x, dim=-1)


class LayerNormGelu(torch.nn.Module):
    def __init__(self, hidden):
        super().__init__()
        self.norm = torch.nn.LayerNorm(hidden)

    def forward(self, x):
        return torch.nn.functional.gelu(self.norm(x))


class RmsNorm(torch.nn.Module):
    def __init__(self, hidden):
        super().__init__()
        self.weight = torch.nn.Parameter(torch.rand(hidden) + 0.5)

    def forward(self, x):
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-6) * self.weight


class Chain(torch.nn.Module):
    def forward(self, x):
        return torch.clamp(x * torch.sigmoid(x) + torch.tanh(x) / 2, -3.0, 3.0)


def workload():
    for rows, cols in [(256, 1000), (256, 3000), (1024, 2048), (1024, 4096), (512, 8192)]:
        yield f"softmax_{rows}x{cols}", Softmax(), torch.randn(rows, cols)
    for tokens, hidden in [(512, 768), (512, 2048), (2048, 1024), (2048, 4096)]:
        for dtype in (torch.float32, torch.bfloat16):
            name = f"ln_gelu_{tokens}x{hidden}_{str(dtype).split('.')[-1]}"
            yield name, LayerNormGelu(hidden).to(dtype), torch.randn(tokens, hidden, dtype=dtype)
    for tokens, hidden in [(256, 1024), (1024, 4096), (4096, 2048)]:
        yield f"rms_norm_{tokens}x{hidden}", RmsNorm(hidden), torch.randn(tokens, hidden)
    for numel in [1 << 16, 1 << 20, 3 << 20, 1 << 24]:
        yield f"chain_{numel}", Chain(), torch.randn(numel)


def main():
    out = Path(sys.argv[1])
    out.mkdir(parents=True, exist_ok=True)
    for name, module, example in workload():
        program = torch.export.export(module.eval(), (example,))
        torch.export.save(program, out / f"{name}.pt2")
        print(f"{name}.pt2")


if __name__ == "__main__":
    main()
