"""What a plan's call costs beside its kernels (issue 21: a plan's call at most 3 us more than the
sum of its kernels; a plan of ATen steps alone within 2% of eager).

Builds a few plans here, without the service (forge.runtime.bundle_writer: an exported module,
steps chosen below, hand-written kernels in the generated-kernel ABI, a cuBLASLt call), loads each
with forge.runtime.load_plan (the extension is built with nvcc on this machine) and times, on the
GPU, in one process:

  - eager: the module itself;
  - plan: PlanModule as load_plan makes it (the plan op, a CUDA graph where it pays), and with
    cuda_graphs=False (one call of the plan op per forward);
  - kernels: the sum of the GPU kernels one eager call of the plan runs (torch.profiler, CUPTI's
    kernel durations, averaged over PROFILED_CALLS calls): the floor the plan's call is held to.

Each way is timed twice: with the suite's protocol (benchmarks/suite/timing.py: L2 flush, the host
waits before each call, so a call's launch latency is in its time), and back to back (BACK_TO_BACK
calls between two events, the host running ahead: a loop's steady cost per call, where host work
hides behind the GPU unless it is longer). Prints a markdown table; --json writes the numbers.

    python benchmarks/gpu/plan_overhead.py [--only NAME ...] [--json FILE] [--dry-run]

--dry-run (no GPU needed) writes the bundles and generates each plan's extension sources, stopping
where the GPU is needed.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import pathlib
import statistics
import sys
import tempfile
import time
from typing import Callable

import torch
import torch.nn as nn

ROOT = pathlib.Path(__file__).resolve().parents[2]
sys.path[:0] = [str(ROOT), str(ROOT / "python")]

from benchmarks.suite.timing import CudaTimer  # noqa: E402
import forge  # noqa: E402
import forge.runtime  # noqa: E402
from forge.runtime.bundle_writer import (aten_step, kernel_step, node_named,  # noqa: E402
                                         write_bundle)
from forge.runtime.plan import TensorLayout, read_plan  # noqa: E402

PROFILED_CALLS = 50
BACK_TO_BACK = 200
OVERHEAD_TARGET_US = 3.0
ATEN_TARGET_RATIO = 1.02


class Softmax(nn.Module):
    def forward(self, x):
        return torch.softmax(x, dim=-1)


class GroupNormSiLU(nn.Module):
    def __init__(self):
        super().__init__()
        self.norm = nn.GroupNorm(32, 320)

    def forward(self, x):
        return nn.functional.silu(self.norm(x))


class Pointwise(nn.Module):
    def forward(self, x):
        return ((x * 2.0).relu() + 1.0) * 0.5


class LinearGelu(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(1024, 1024)

    def forward(self, x):
        return nn.functional.gelu(self.fc(x))


def _task(index: int) -> str:
    return f"{index + 1:012x}".ljust(64, "0")


def softmax_steps(graph) -> list[dict]:
    return [aten_step(_task(0), *graph.nodes)]


def group_norm_silu_steps(graph) -> list[dict]:
    # One task, as the partitioner groups a norm and its epilogue, run by its ATen baseline.
    return [aten_step(_task(0), *graph.nodes)]


POINTWISE_COUNT = 64 * 1024
POINTWISE = {"aten::mul": ["in0[i] * 2.0f", "in0[i] * 0.5f"], "aten::relu": ["fmaxf(in0[i], 0.0f)"],
             "aten::add": ["in0[i] + 1.0f"]}


def pointwise_steps(graph) -> list[dict]:
    expressions = {op: list(reversed(e)) for op, e in POINTWISE.items()}
    return [kernel_step(_task(i), node, expressions[node.op].pop(), POINTWISE_COUNT)
            for i, node in enumerate(graph.nodes)]


LINEAR_CALL = ("cublaslt float16 batch 1 m 64 n 1024 k 1024 a (input 0 ld 1024 batch_stride 0) "
               "b (input 1 transposed ld 1024 batch_stride 0) epilogue BIAS bias input 2 algo 0")


def linear_gelu_steps(graph) -> list[dict]:
    linear, gelu = node_named(graph, "aten::linear"), node_named(graph, "aten::gelu")
    return [{**aten_step(_task(0), linear), "implementation": "library",
             "library_call": LINEAR_CALL},
            aten_step(_task(1), gelu)]


@dataclasses.dataclass(frozen=True)
class Case:
    name: str
    what: str
    module: Callable[[], nn.Module]
    shape: tuple[int, ...]
    dtype: torch.dtype
    steps: Callable[[object], list[dict]]
    all_aten: bool


CASES = [
    Case("softmax", "one ATen step (softmax f16 256x4096)", Softmax, (256, 4096), torch.float16,
         softmax_steps, True),
    Case("group_norm_silu", "all ATen: GroupNorm(32, 320) + SiLU f16 8x320x32x32",
         GroupNormSiLU, (8, 320, 32, 32), torch.float16, group_norm_silu_steps, True),
    Case("pointwise_kernels", "4 generated kernel steps, f32 64x1024", Pointwise, (64, 1024),
         torch.float32, pointwise_steps, False),
    Case("linear_gelu", "cuBLASLt linear (bias) + ATen GELU, f16 64x1024x1024", LinearGelu,
         (64, 1024), torch.float16, linear_gelu_steps, False),
]


def make_bundle(case: Case, directory: pathlib.Path):
    """The case's module (on the CPU), its example input and its bundle."""
    torch.manual_seed(0)
    module = case.module().to(case.dtype).eval()
    x = torch.randn(case.shape, dtype=case.dtype)
    exported = forge.export(module, (x,))
    bundle = write_bundle(directory / case.name, exported.graph, case.steps(exported.graph))
    return module, x, exported.graph, bundle


def kernel_ms(run: Callable[[], object]) -> tuple[float, int]:
    """The sum of the GPU kernels one call runs (ms) and their count, by CUPTI."""
    from torch.autograd import DeviceType
    from torch.profiler import ProfilerActivity, profile

    run()
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as profiler:
        for _ in range(PROFILED_CALLS):
            run()
        torch.cuda.synchronize()
    kernels = [e for e in profiler.events() if e.device_type == DeviceType.CUDA and
               not e.name.startswith(("Memcpy", "Memset"))]
    total_us = sum(e.time_range.elapsed_us() for e in kernels)
    return total_us / PROFILED_CALLS / 1e3, round(len(kernels) / PROFILED_CALLS)


def back_to_back_ms(run: Callable[[], object]) -> float:
    """ms per call of BACK_TO_BACK calls issued without waiting (median of 5 such runs)."""
    times = []
    for _ in range(5):
        torch.cuda.synchronize()
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        for _ in range(BACK_TO_BACK):
            run()
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end) / BACK_TO_BACK)
    return statistics.median(times)


def host_us(run: Callable[[], object]) -> float:
    """Host microseconds per call (the host's own work, the GPU kept busy behind it)."""
    torch.cuda.synchronize()
    start = time.perf_counter()
    for _ in range(BACK_TO_BACK):
        run()
    elapsed = time.perf_counter() - start
    torch.cuda.synchronize()
    return elapsed / BACK_TO_BACK * 1e6


def measure(case: Case, directory: pathlib.Path) -> dict:
    module, x, _, bundle = make_bundle(case, directory)
    device = torch.device("cuda")
    module, x = module.to(device), x.to(device)
    timer = CudaTimer(device)
    plan = forge.runtime.load_plan(bundle, module, device=device)
    stepped = forge.runtime.load_plan(bundle, module, device=device, cuda_graphs=False)
    ways = {"eager": lambda: module(x), "plan": lambda: plan(x),
            "plan_no_graph": lambda: stepped(x)}
    row = {"case": case.name, "what": case.what, "steps": plan.step_summary()}
    with torch.no_grad():
        expected = module(x)
        for got in (plan(x), stepped(x)):  # the first call captures (or decides not to)
            torch.testing.assert_close(got, expected, rtol=2e-2, atol=2e-2)
        row["kernels_ms"], row["kernels"] = kernel_ms(ways["plan_no_graph"])
        row["eager_kernels_ms"], row["eager_kernel_count"] = kernel_ms(ways["eager"])
        for name, run in ways.items():
            row[f"{name}_ms"] = timer.time(run).median_ms
            row[f"{name}_b2b_ms"] = back_to_back_ms(run)
            row[f"{name}_host_us"] = host_us(run)
    row["graph"] = plan.uses_cuda_graph
    row["graph_choice"] = plan.graph_choice or ""
    row["overhead_us"] = (row["plan_b2b_ms"] - row["kernels_ms"]) * 1e3
    row["vs_eager"] = row["plan_ms"] / row["eager_ms"]
    row["vs_eager_b2b"] = row["plan_b2b_ms"] / row["eager_b2b_ms"]
    return row


def table(rows: list[dict]) -> str:
    lines = [
        "| plan | steps | eager ms (b2b) | plan ms (b2b) | no graph ms (b2b) | kernels ms | "
        "plan - kernels us (b2b) | plan / eager (b2b) | host us eager / plan | graph |",
        "|---|---|---:|---:|---:|---:|---:|---:|---:|---|"]
    for r in rows:
        lines.append(
            f"| {r['what']} | {r['steps']} | {r['eager_ms']:.4f} ({r['eager_b2b_ms']:.4f}) | "
            f"{r['plan_ms']:.4f} ({r['plan_b2b_ms']:.4f}) | "
            f"{r['plan_no_graph_ms']:.4f} ({r['plan_no_graph_b2b_ms']:.4f}) | "
            f"{r['kernels_ms']:.4f} ({r['kernels']}) | {r['overhead_us']:.1f} | "
            f"{r['vs_eager']:.3f} ({r['vs_eager_b2b']:.3f}) | "
            f"{r['eager_host_us']:.1f} / {r['plan_host_us']:.1f} | {r['graph_choice']} |")
    return "\n".join(lines)


def verdicts(rows: list[dict], cases: dict[str, Case]) -> list[str]:
    out = []
    for r in rows:
        ok = r["overhead_us"] <= OVERHEAD_TARGET_US
        out.append(f"- {r['case']}: plan - kernels {r['overhead_us']:.1f} us back to back "
                   f"({'meets' if ok else 'misses'} <= {OVERHEAD_TARGET_US} us)")
        if cases[r["case"]].all_aten:
            ok = r["vs_eager"] <= ATEN_TARGET_RATIO
            out.append(f"- {r['case']}: all ATen, {r['vs_eager']:.3f}x eager's time by the "
                       f"suite's timer ({'meets' if ok else 'misses'} <= {ATEN_TARGET_RATIO})")
    return out


def dry_run(cases: list[Case], directory: pathlib.Path) -> None:
    for case in cases:
        module, x, graph, bundle = make_bundle(case, directory)
        plan = read_plan(bundle)
        layouts = {v.name: TensorLayout.of_value(v) for v in graph.values}
        sources = forge.runtime.extension_sources(plan, layouts, graph=graph)
        print(f"{case.name}: {bundle}: {len(plan.steps)} steps, extension {sources.name}, "
              f"ops {sorted(sources.ops.values())}, plan op "
              f"{sources.plan_op.name if sources.plan_op else None}")
    print("dry run: bundles written and extension sources generated; timing needs a CUDA GPU")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", nargs="*", help="case names: " +
                        ", ".join(case.name for case in CASES))
    parser.add_argument("--json", type=pathlib.Path, help="write the rows here")
    parser.add_argument("--dry-run", action="store_true", help="stop before the GPU")
    parser.add_argument("--work", type=pathlib.Path, help="where bundles go (default: temporary)")
    args = parser.parse_args()
    cases = [case for case in CASES if not args.only or case.name in args.only]
    with tempfile.TemporaryDirectory(prefix="forge-plan-overhead-") as temporary:
        directory = args.work or pathlib.Path(temporary)
        if args.dry_run or not torch.cuda.is_available():
            dry_run(cases, directory)
            return 0 if args.dry_run else 1
        rows = [measure(case, directory) for case in cases]
    print(f"{torch.cuda.get_device_name()}, torch {torch.__version__}, "
          f"suite timer medians; (b2b): {BACK_TO_BACK} calls back to back\n")
    print(table(rows))
    print("\n".join(verdicts(rows, {case.name: case for case in cases})))
    if args.json:
        args.json.write_text(json.dumps(rows, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
