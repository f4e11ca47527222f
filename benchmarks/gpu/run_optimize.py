"""forge.optimize on the GPU machine: the Llama-style block and ResNet-18 (and, with --models, the
models of unseen_models.py and ResNet-18 bf16 batch 32), each optimized through a
running coordinator and GPU worker, checked as forge.optimize checks (against the module in
float64, eager's own error allowed; torch.compile's outputs too), and timed against eager and
torch.compile (run_optimize.sh starts the service and calls this).

    python benchmarks/gpu/run_optimize.py --out DIR --server HOST:PORT --cli PATH [options]

Two ways to the bundle, the same from there on:
  sdk  forge.optimize (needs grpcio in this Python): export, upload, progress, `forge results`,
       build, check;
  cli  when grpcio is missing: export here, `forge submit` / `forge watch` / `forge results`
       with the CLI binary, then forge.runtime.load_plan and the same check.
Timing is benchmarks/suite/timing.py's protocol: warm-up, a >= 2x L2 buffer written before every
rep, CUDA events, median of >= 20 reps. Writes DIR/optimize.md, DIR/optimize.json and, per model,
the bundle's report as DIR/<model>_report.md.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import pathlib
import shutil
import subprocess
import sys
import time

import torch
import torch.nn as nn

ROOT = pathlib.Path(__file__).resolve().parents[2]
for path in ("python", "python/tests", "examples", "benchmarks/suite"):
    sys.path.insert(0, str(ROOT / path))

import forge  # noqa: E402
from forge import end_check  # noqa: E402
from forge.optimize import check_outputs, fetch_bundle  # noqa: E402
from forge.runtime import load_plan  # noqa: E402
import timing  # noqa: E402  (benchmarks/suite/timing.py)

sys.path.insert(0, str(ROOT / "benchmarks/gpu"))
import unseen_models  # noqa: E402  (GPT-2 block, Mistral layer, ConvNeXt block)


class BasicBlock(nn.Module):
    def __init__(self, inputs, outputs, stride):
        super().__init__()
        self.conv1 = nn.Conv2d(inputs, outputs, 3, stride, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(outputs)
        self.conv2 = nn.Conv2d(outputs, outputs, 3, 1, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(outputs)
        self.downsample = None
        if stride != 1 or inputs != outputs:
            self.downsample = nn.Sequential(nn.Conv2d(inputs, outputs, 1, stride, bias=False),
                                            nn.BatchNorm2d(outputs))

    def forward(self, x):
        shortcut = x if self.downsample is None else self.downsample(x)
        y = torch.relu(self.bn1(self.conv1(x)))
        return torch.relu(self.bn2(self.conv2(y)) + shortcut)


class ResNet18(nn.Module):
    """ResNet-18's architecture (torchvision's resnet18), for machines without torchvision."""

    def __init__(self, classes=1000):
        super().__init__()
        self.stem = nn.Sequential(nn.Conv2d(3, 64, 7, 2, 3, bias=False), nn.BatchNorm2d(64),
                                  nn.ReLU(), nn.MaxPool2d(3, 2, 1))
        widths, blocks, inputs = (64, 128, 256, 512), [], 64
        for stage, width in enumerate(widths):
            for index in range(2):
                blocks.append(BasicBlock(inputs, width, 2 if stage and not index else 1))
                inputs = width
        self.blocks = nn.Sequential(*blocks)
        self.fc = nn.Linear(512, classes)

    def forward(self, x):
        return self.fc(torch.flatten(nn.functional.adaptive_avg_pool2d(self.blocks(self.stem(x)),
                                                                      1), 1))


def llama_block():
    from llama_block import example

    module, inputs = example()
    return module, inputs, "torch.float32[2, 64, 256]"


def resnet18():
    torch.manual_seed(0)
    if importlib.util.find_spec("torchvision") is not None:
        from models import resnet18 as torchvision_resnet18

        module, source = torchvision_resnet18(), "torchvision"
    else:
        module, source = ResNet18(), "local definition (no torchvision here)"
    return module.eval(), (torch.randn(1, 3, 224, 224),), f"torch.float32[1, 3, 224, 224], {source}"


def resnet18_b32_bf16():
    module, _, source = resnet18()
    return (module.to(torch.bfloat16), (torch.randn(32, 3, 224, 224, dtype=torch.bfloat16),),
            source.replace("torch.float32[1, 3, 224, 224]", "torch.bfloat16[32, 3, 224, 224]"))


MODELS = {"llama_block": llama_block, "resnet18": resnet18, "resnet18_b32_bf16": resnet18_b32_bf16,
          **unseen_models.MODELS}


def have_grpc() -> bool:
    return importlib.util.find_spec("grpc") is not None


def optimize_with_sdk(name, module, inputs, args, bundle):
    return forge.optimize(module, inputs, server=args.server, budget=args.budget or None,
                          max_seconds=args.search_s, forge_cli=args.cli, bundle_dir=bundle,
                          name=name)


def optimize_with_cli(name, module, inputs, args, bundle):
    """export -> forge submit -> forge watch (bounded; cancel when over) -> forge results."""
    exported = forge.export(module, inputs, name=name)
    model_dir = bundle.parent / f"{name}_export"
    (model_dir / "blobs").mkdir(parents=True, exist_ok=True)
    (model_dir / "graph.pb").write_bytes(exported.graph.SerializeToString(deterministic=True))
    for digest, data in exported.blobs.items():
        (model_dir / "blobs" / digest).write_bytes(data)
    cli = [args.cli]
    server = f"--server={args.server}"
    submitted = subprocess.run(cli + ["submit", str(model_dir), "--json", server,
                                      f"--budget={args.budget}"],
                               capture_output=True, text=True, check=True)
    job = json.loads(submitted.stdout)["jobs"][0]["job"]["id"]
    watch = subprocess.run(["timeout", str(args.search_s)] + cli +
                           ["watch", job, "--plain", server])
    if watch.returncode != 0:  # over time (or ended badly): stop it and take what it found
        subprocess.run(cli + ["cancel", job, "--reason", "run_optimize.py: search time over",
                              server], check=False)
    fetch_bundle(job, args.server, bundle, exported.graph, args.cli)
    with torch.no_grad():
        expected = module(*inputs)
    structure = torch.utils._pytree.tree_flatten(expected)[1]
    optimized = load_plan(bundle, module, graph=exported.graph, blobs=exported.blobs,
                          output_structure=structure)
    for _ in range(2):  # capture, then replay
        check_outputs(optimized(*inputs), expected)
    return optimized


def time_call(timer, fn):
    result = timer.time(fn)
    return {"median_ms": result.median_ms, "p25_ms": result.p25_ms, "p75_ms": result.p75_ms,
            "reps": len(result.reps_ms)}


def matches(fn, inputs, expected, reference) -> str:
    """forge.optimize's end check of `fn`'s outputs: against the float64 module (`reference`),
    with eager's own error as the allowance (eager is not the truth: bf16 eager and a correct
    bf16 plan differ by rounding)."""
    with torch.no_grad():
        try:
            check_outputs(fn(*inputs), expected, reference)
            return "yes"
        except forge.ForgeError as err:
            return f"no: {err}"


def run_model(name, args, timer, deadline, out):
    record = {"model": name}
    module, inputs, shape = MODELS[name]()
    module, inputs = module.cuda(), tuple(t.cuda() for t in inputs)
    record["input"] = shape
    with torch.no_grad():
        expected = module(*inputs)
        record["eager"] = time_call(timer, lambda: module(*inputs))
    reference = end_check.reference_outputs(module, inputs)
    record["reference"] = reference.precision

    bundle = out / "bundles" / name
    if bundle.exists():
        shutil.rmtree(bundle)
    started = time.monotonic()
    optimize = optimize_with_sdk if args.transport == "sdk" else optimize_with_cli
    try:
        optimized = optimize(name, module, inputs, args, bundle)
    except forge.ForgeError as err:
        record["forge_error"] = f"{type(err).__name__}: {err}"
        print(f"{name}: forge failed: {record['forge_error']}", flush=True)
        return record
    record["optimize_s"] = round(time.monotonic() - started, 1)
    record["plan"] = optimized.step_summary()
    record["forge_matches_eager"] = matches(optimized, inputs, expected, reference)
    record["forge_cuda_graph"] = optimized.uses_cuda_graph
    record["capture_error"] = optimized.capture_error
    record["forge"] = time_call(timer, lambda: optimized(*inputs))
    eager_plan = load_plan(bundle, module, cuda_graphs=False, output_structure=torch.utils.
                           _pytree.tree_flatten(expected)[1])
    record["forge_eager_plan_matches"] = matches(eager_plan, inputs, expected, reference)
    record["forge_eager_plan"] = time_call(timer, lambda: eager_plan(*inputs))
    if (bundle / "report.md").is_file():
        shutil.copy(bundle / "report.md", out / f"{name}_report.md")
        # Whether the worker timed the candidates on this GPU or predicted them (no GPU found).
        record["search_times"] = json.loads((bundle / "report.json").read_text())[
            "end_to_end"]["kind"]

    for mode in args.compile_modes:
        if time.monotonic() > deadline - args.compile_reserve_s:
            record[f"compile_{mode}"] = {"skipped": "deadline"}
            continue
        torch._dynamo.reset()
        compiled = torch.compile(module, mode=None if mode == "default" else mode)
        with torch.no_grad():
            first = time.monotonic()
            compiled(*inputs)
            compile_s = round(time.monotonic() - first, 1)
            entry = time_call(timer, lambda: compiled(*inputs))
        entry.update(compile_s=compile_s, matches_eager=matches(compiled, inputs, expected, reference))
        record[f"compile_{mode}"] = entry
    return record


def cell(entry) -> str:
    if not entry:
        return "-"
    if "skipped" in entry:
        return f"skipped ({entry['skipped']})"
    return f"{entry['median_ms']:.3f}"


def write_report(records, args, out):
    device = torch.cuda.get_device_name()
    modes = args.compile_modes
    date = time.strftime("%Y-%m-%d")
    lines = [f"# forge.optimize on {device}, torch {torch.__version__}, {date}",
             "",
             f"Transport: {args.transport}; search per model: at most {args.search_s} s, budget "
             f"{args.budget or 'the coordinator default'}. Times: median ms of CUDA-event reps, "
             "L2 flushed before each (benchmarks/suite/timing.py). \"forge\" replays the plan's "
             "CUDA graph; \"forge eager plan\" runs the same plan step by step.",
             "",
             "Correct: the end check forge.optimize runs, against the module in float64 (eager's own "
             "error is the allowance); a torch.compile mode that fails it is not a \"best\".",
             "",
             "| model | input | correct | eager | " +
             " | ".join(f"torch.compile {m}" for m in modes) +
             " | forge | forge eager plan | forge vs eager | forge vs best compile | plan | "
             "search times |",
             "|---|---|---|---:|" + "---:|" * len(modes) + "---:|---:|---:|---:|---|---|"]
    for r in records:
        if "forge_error" in r:
            lines.append(f"| {r['model']} | {r['input']} | {r['forge_error']} | "
                         f"{cell(r['eager'])} |" + " - |" * (len(modes) + 6))
            continue
        compiled = [r.get(f"compile_{m}") for m in modes]
        best = min((c["median_ms"] for c in compiled if c and "median_ms" in c
                    and c["matches_eager"] == "yes"), default=None)
        forge_ms = r["forge"]["median_ms"]
        lines.append(
            f"| {r['model']} | {r['input']} | {r['forge_matches_eager']} | {cell(r['eager'])} | " +
            " | ".join(cell(c) for c in compiled) +
            f" | {forge_ms:.3f} | {cell(r['forge_eager_plan'])} | "
            f"{r['eager']['median_ms'] / forge_ms:.2f}x | "
            f"{'-' if best is None else f'{best / forge_ms:.2f}x'} | {r['plan']} | "
            f"{r.get('search_times', '-')} |")
    (out / "optimize.md").write_text("\n".join(lines) + "\n")
    (out / "optimize.json").write_text(json.dumps({"device": device, "torch": torch.__version__,
                                                   "records": records}, indent=1))
    print("\n".join(lines))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", type=pathlib.Path, required=True)
    parser.add_argument("--server", required=True)
    parser.add_argument("--cli", required=True, help="the forge CLI binary")
    parser.add_argument("--models", default="llama_block,resnet18")
    parser.add_argument("--budget", type=int, default=0, help="candidate trials per job")
    parser.add_argument("--search-s", type=int, default=75, help="search wall time per job")
    parser.add_argument("--compile-modes", default="default,reduce-overhead")
    parser.add_argument("--compile-reserve-s", type=int, default=60,
                        help="skip a torch.compile mode when less than this is left")
    parser.add_argument("--deadline-s", type=int, default=480)
    parser.add_argument("--transport", choices=("auto", "sdk", "cli"), default="auto")
    args = parser.parse_args()
    deadline = time.monotonic() + args.deadline_s
    args.compile_modes = [m for m in args.compile_modes.split(",") if m]
    if args.transport == "auto":
        args.transport = "sdk" if have_grpc() else "cli"
    print(f"transport: {args.transport} (grpcio {'found' if have_grpc() else 'missing'})",
          flush=True)
    args.out.mkdir(parents=True, exist_ok=True)
    timer = timing.CudaTimer("cuda")
    records = []
    for name in args.models.split(","):
        if time.monotonic() > deadline - args.search_s:
            records.append({"model": name, "input": "-", "eager": {},
                            "forge_error": "not run: deadline"})
            continue
        records.append(run_model(name, args, timer, deadline, args.out))
        write_report(records, args, args.out)  # keep what is done if a later model is cut off
    write_report(records, args, args.out)
    return 0 if all("forge_error" not in r and r["forge_matches_eager"] == "yes"
                    for r in records) else 1


if __name__ == "__main__":
    sys.exit(main())
