"""The suite's Forge plan hook (run_suite.py --forge-plan benchmarks.suite.forge_plan:plan): the
Forge-optimized module of a problem, from the result bundle forge_jobs.py fetched for it.

FORGE_SUITE_BUNDLES names the directory of bundles (forge_jobs.py's OUT/bundles); a problem
without a bundle there has no plan (the suite says "not run"). The plan runs under a CUDA graph
when FORGE_SUITE_CUDA_GRAPHS is not "0".
"""

from __future__ import annotations

import os
import pathlib
import sys

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[2] / "python"))

import forge.runtime  # noqa: E402


def plan(problem, module, inputs):
    bundles = os.environ.get("FORGE_SUITE_BUNDLES")
    if not bundles:
        return None
    bundle = pathlib.Path(bundles) / problem.name
    if not (bundle / "plan.json").exists():
        return None
    device = next((t.device for t in inputs if hasattr(t, "device")), None)
    return forge.runtime.load_plan(bundle, module, device=device,
                                   cuda_graphs=os.environ.get("FORGE_SUITE_CUDA_GRAPHS") != "0")
