"""Where a plan's time goes beside its kernels: one suite problem's bundle run by PlanModule with
and without a CUDA graph, against the eager module, in one process on the GPU machine, timed with
the suite's protocol (benchmarks/suite/timing.py), with the caching allocator's counters
(cudaMalloc calls, frees, retries) over each way's calls, warm-up included.

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
from benchmarks.suite.timing import CudaTimer  # noqa: E402


def allocator() -> dict:
    stats = torch.cuda.memory_stats()
    return {key: stats.get(key, 0) for key in ("num_device_alloc", "num_device_free",
                                               "num_alloc_retries", "reserved_bytes.all.current")}


def timed(timer: CudaTimer, run) -> tuple[float, dict]:
    """The median ms of `run` and how the allocator's counters moved over its calls."""
    before = allocator()
    ms = timer.time(run).median_ms
    after = allocator()
    return ms, {key: after[key] - before[key] for key in before}


def main() -> int:
    bundle, name = pathlib.Path(sys.argv[1]), sys.argv[2]
    problem = next(p for p in suite.PROBLEMS if p.name == name)
    module, inputs = problem.make(torch.device("cuda"), False)
    module.eval()
    timer = CudaTimer(inputs[0].device)
    with torch.no_grad():
        rows = [("eager", *timed(timer, lambda: module(*inputs)), "")]
        for graphs in (False, True):
            plan = forge.runtime.load_plan(bundle, module, device=inputs[0].device,
                                           cuda_graphs=graphs)
            rows.append((f"plan cuda_graphs={graphs}", *timed(timer, lambda: plan(*inputs)),
                         plan.graph_choice or ""))
            del plan
    print(f"| {name} | ms | allocator | graph choice |\n|---|---:|---|---|")
    for label, ms, counters, choice in rows:
        print(f"| {label} | {ms:.3f} | {counters} | {choice} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
