"""Where a plan's time goes beside its kernels: one suite problem's bundle run by PlanModule with
and without a CUDA graph, against the eager module, in one process on the GPU machine, with the
caching allocator's counters (cudaMalloc calls, retries) before and after each way.

    python benchmarks/gpu/plan_overhead.py BUNDLE PROBLEM      (bundle: plan.json + graph.pb)
"""

from __future__ import annotations

import pathlib
import sys

import torch

ROOT = pathlib.Path(__file__).resolve().parents[2]
sys.path[:0] = [str(ROOT), str(ROOT / "python")]

import forge.runtime  # noqa: E402
from benchmarks.suite import problems as suite  # noqa: E402


def median_ms(run, reps: int = 10) -> float:
    run()
    torch.cuda.synchronize()
    times = []
    for _ in range(reps):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        run()
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end))
    return sorted(times)[reps // 2]


def allocator() -> dict:
    stats = torch.cuda.memory_stats()
    return {key: stats.get(key, 0) for key in ("num_device_alloc", "num_device_free",
                                               "num_alloc_retries", "reserved_bytes.all.current")}


def main() -> int:
    bundle, name = pathlib.Path(sys.argv[1]), sys.argv[2]
    problem = next(p for p in suite.PROBLEMS if p.name == name)
    module, inputs = problem.make(torch.device("cuda"), False)
    module.eval()
    with torch.no_grad():
        rows = [("eager", median_ms(lambda: module(*inputs)), allocator(), "")]
        for graphs in (False, True):
            plan = forge.runtime.load_plan(bundle, module, device=inputs[0].device,
                                           cuda_graphs=graphs)
            before = allocator()
            ms = median_ms(lambda: plan(*inputs))
            rows.append((f"plan cuda_graphs={graphs}", ms,
                         {k: allocator()[k] - before[k] for k in before}, plan.graph_choice or ""))
            del plan
    print(f"| {name} | ms | allocator | graph choice |\n|---|---:|---|---|")
    for label, ms, counters, choice in rows:
        print(f"| {label} | {ms:.3f} | {counters} | {choice} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
