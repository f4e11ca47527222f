"""Times the suite's problems on one GPU: eager, every torch.compile mode the problem names, and the
Forge plan when one is available, all with the timer's protocol (timing.py), in one process, and
checks every result against a float64 reference (or eager). Writes suite.json (raw) and suite.md.

  run_suite.py --out DIR [--only NAME,...] [--level L1,...] [--shard K/N] [--max-problems N]
               [--problem-cap-s S] [--deadline-s S] [--resume] [--commit SHA] [--budget TEXT]
               [--forge-plan MODULE:FUNCTION] [--forge-jobs DIR] [--modes MODE,...]
               [--device cuda|cpu] [--small] [--reference float64|eager]

The Forge plan is pluggable: --forge-plan names a function (problem, module, inputs) -> callable
or None; the callable takes the module's inputs and runs the Forge-optimized computation. Without
it, or when it returns None, the Forge column says "not run". --forge-jobs is a directory of
<problem>.json Forge job summaries (candidates_tried, time_to_first_speedup_s, time_to_best_s),
copied into the results as they are.

The results file is rewritten after every problem, so a run cut short keeps what it measured;
--resume skips problems the file already holds. Exit code 75: the CUDA context was lost (a crash
in a kernel); rerun with --resume.
"""

from __future__ import annotations

import argparse
import datetime
import gc
import importlib
import json
import os
import pathlib
import platform
import signal
import sys
import time
import traceback

ROOT = pathlib.Path(__file__).resolve().parents[2]
sys.path[:0] = [str(ROOT), str(ROOT / "python")]

import torch  # noqa: E402

from benchmarks.suite import problems as suite  # noqa: E402
from benchmarks.suite import report, timing  # noqa: E402
from forge import end_check  # noqa: E402

EXIT_CONTEXT_LOST = 75
SCHEMA_VERSION = 1
# Relative cost of timing a problem in each mode (compile time dominates), for balancing shards.
MODE_WEIGHT = {suite.DEFAULT: 1, suite.REDUCE_OVERHEAD: 1, suite.MAX_AUTOTUNE: 3}
WHOLE_MODEL_WEIGHT = {"L3": 2, "llama": 3, "resnet": 4}


class ProblemTimeout(Exception):
    """The per-problem time cap ran out."""


def shard(selected: list[suite.Problem], index: int, count: int) -> list[suite.Problem]:
    """Shard `index` (1-based) of `count`: greedy balancing of estimated cost, deterministic, each
    shard in suite order."""
    def weight(problem):
        modes = sum(MODE_WEIGHT[mode] for mode in problem.modes)
        return modes * WHOLE_MODEL_WEIGHT.get(problem.level, 1)

    loads, assignment = [0] * count, {}
    for problem in sorted(selected, key=weight, reverse=True):
        lightest = loads.index(min(loads))
        loads[lightest] += weight(problem)
        assignment[problem.name] = lightest
    return [p for p in selected if assignment[p.name] == index - 1]


def select(args) -> list[suite.Problem]:
    selected = list(suite.PROBLEMS)
    if args.only:
        names = [name for name in args.only.replace(",", " ").split() if name]
        selected = [suite.get(name) for name in names]
    if args.level:
        levels = set(args.level.split(","))
        unknown = levels - set(suite.LEVELS)
        if unknown:
            raise SystemExit(f"--level: unknown levels {sorted(unknown)} (known: {suite.LEVELS})")
        selected = [p for p in selected if p.level in levels]
    if args.shard:
        index, count = (int(part) for part in args.shard.split("/"))
        if not 1 <= index <= count:
            raise SystemExit(f"--shard {args.shard}: K must be in 1..N")
        selected = shard(selected, index, count)
    if args.max_problems is not None:
        selected = selected[: args.max_problems]
    return selected


def load_forge_plan(spec: str | None):
    if not spec:
        return None
    module_name, _, function_name = spec.partition(":")
    if not function_name:
        raise SystemExit(f"--forge-plan {spec}: expected MODULE:FUNCTION")
    return getattr(importlib.import_module(module_name), function_name)


def load_forge_job(directory: str | None, name: str) -> dict | None:
    if not directory:
        return None
    path = pathlib.Path(directory) / f"{name}.json"
    return json.loads(path.read_text()) if path.exists() else None


def run_mode(entry: dict, fn, timer, eager_out, reference, check_outputs=timing.check_outputs
             ) -> None:
    """First call (its wall time is the compile time for torch.compile), output check, timing, and
    a re-check of a call made after the timed ones. Fills `entry` as it goes, so a timeout keeps
    what was measured. `check_outputs`: (outputs, eager's, reference or None) -> a check with
    .passed, .failure and .to_json()."""
    with torch.no_grad():
        entry["first_call_s"], out = timing.timed_first_call(fn, timer)
        check = check_outputs(out, eager_out, reference)
        del out
        entry["check"] = check.to_json()
        entry["correct"] = check.passed
        entry["timing"] = timer.time(fn).to_json()
        # Cloned at once: a CUDA graph's outputs are overwritten by its next replay.
        out = [t.clone() for t in timing.as_tensors(fn())]
        recheck = check_outputs(out, eager_out, reference)
        entry["correct"] = check.passed and recheck.passed
        if not recheck.passed:
            entry["recheck_failure"] = recheck.failure


def context_lost(err: BaseException) -> bool:
    text = str(err)
    return any(marker in text for marker in ("illegal memory access", "unspecified launch failure",
                                              "device-side assert", "illegal instruction",
                                              "CUDA error: an illegal"))


def guarded(entry: dict, what, deadline: float, cap_s: float) -> None:
    """Runs what(); a timeout or an error (other than a lost CUDA context) is recorded in `entry`
    instead of stopping the suite."""
    if time.monotonic() >= deadline:
        entry.update(status="timeout", error="problem time cap reached before it started")
        return
    try:
        what()
        entry["status"] = "ok"
    except ProblemTimeout:
        entry.update(status="timeout", error=f"problem time cap of {cap_s:.0f} s")
    except Exception as err:  # noqa: BLE001 - a failing mode must not stop the suite
        if context_lost(err):
            raise
        # torch.compile may wrap the timeout's exception in its own.
        timed_out = time.monotonic() >= deadline
        entry.update(status="timeout" if timed_out else "error",
                     error=f"{type(err).__name__}: {str(err)[:2000]}")


def run_problem(record: dict, problem: suite.Problem, args, timer, forge_plan, deadline: float,
                cap_s: float) -> None:
    """Fills `record` step by step (a timeout or a crash keeps what was measured)."""
    ceilings = args.ceilings
    cost = problem.cost(args.small)
    record.update({
        "description": problem.description, "anchor": problem.anchor,
        "dtype": str(problem.dtype).removeprefix("torch."),
        "bound": problem.bound(ceilings, args.small), "modes": list(problem.modes),
        "flops": cost.flops, "min_bytes": cost.min_bytes,
        "floor_ms": problem.floor_ms(ceilings, args.small), "reference": args.reference,
        "eager": {}, "compile": {}, "forge": {"status": "not run"},
        "forge_job": load_forge_job(args.forge_jobs, problem.name),
    })
    started = time.monotonic()
    module, inputs = problem.make(torch.device(args.device), args.small)
    record["inputs"] = [{"shape": list(t.shape), "dtype": str(t.dtype).removeprefix("torch.")}
                        for t in inputs]
    # The reference: a float64 copy of the module (float32 where an op has no float64 kernel),
    # computed as forge.optimize's end check computes it.
    reference_run = end_check.Reference(None, "eager")
    with torch.no_grad():
        if args.reference == "float64":
            reference_run = end_check.reference_outputs(module, inputs)
            record.update(reference=reference_run.precision, reference_note=reference_run.note)
        reference = reference_run.outputs
        eager_out = [t.detach() for t in timing.as_tensors(module(*inputs))]
        if reference is not None:
            record["eager"][f"rel_norm_error_vs_{reference_run.precision}"] = [
                timing.relative_norm_error(e, r) for e, r in zip(eager_out, reference)]
        record["eager"]["timing"] = timer.time(lambda: module(*inputs)).to_json()
    for index in problem.static_inputs:
        torch._dynamo.mark_static_address(inputs[index])
    for mode in problem.modes:
        if args.modes is not None and mode not in args.modes:
            continue
        entry = record["compile"].setdefault(mode, {})
        torch._dynamo.reset()
        compiled = torch.compile(module, mode=mode)
        guarded(entry, lambda: run_mode(entry, lambda: compiled(*inputs), timer, eager_out,
                                        reference), deadline, cap_s)
        del compiled
    forge = record["forge"]
    if forge_plan is None:
        forge["reason"] = "no Forge plan hook (--forge-plan)"
    else:
        plans = []
        guarded(forge, lambda: plans.append(forge_plan(problem, module, inputs)), deadline, cap_s)
        if plans and plans[0] is None:
            forge.update(status="not run", reason="the hook has no Forge plan for this problem")
        elif plans:
            # The Forge column: forge.optimize's end check itself (forge.end_check), so that the
            # suite accepts exactly the plans forge.optimize accepts.
            def forge_check(out, eager, _):
                return end_check.compare(out, eager, reference_run)

            guarded(forge, lambda: run_mode(forge, lambda: plans[0](*inputs), timer, eager_out,
                                            reference, forge_check), deadline, cap_s)
    record["wall_s"] = time.monotonic() - started


def environment(args, timer) -> dict:
    cuda = torch.device(args.device).type == "cuda"
    card = torch.cuda.get_device_name(torch.device(args.device)) if cuda else "cpu"
    info = {
        "schema": SCHEMA_VERSION,
        "card": card,
        "device": args.device,
        "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "commit": args.commit,
        "budget": args.budget,
        "torch": torch.__version__,
        "cuda": torch.version.cuda,
        "python": platform.python_version(),
        "small": args.small,
        "shard": args.shard,
        "reference": args.reference,
        "ceilings": args.ceilings.to_json(),
        "timer": timer.describe(),
        "settings": {"cuda.matmul.allow_tf32": torch.backends.cuda.matmul.allow_tf32,
                     "cudnn.allow_tf32": torch.backends.cudnn.allow_tf32,
                     "float32_matmul_precision": torch.get_float32_matmul_precision()},
    }
    try:
        import triton
        info["triton"] = triton.__version__
    except ImportError:
        info["triton"] = None
    if cuda:
        info["measured_copy_bytes_per_s"] = timer.copy_bandwidth()
        torch.cuda.empty_cache()
    return info


def write_results(out_dir: pathlib.Path, results: dict) -> None:
    path = out_dir / "suite.json"
    scratch = path.with_suffix(".json.tmp")
    scratch.write_text(json.dumps(results, indent=1))
    os.replace(scratch, path)
    (out_dir / "suite.md").write_text(report.render(report.merge([results])))


def parse_args(argv):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", required=True, type=pathlib.Path)
    parser.add_argument("--only", help="problem names, comma- or space-separated")
    parser.add_argument("--level", help=f"levels, comma-separated, of {','.join(suite.LEVELS)}")
    parser.add_argument("--shard", help="K/N: the K-th of N cost-balanced shards")
    parser.add_argument("--max-problems", type=int)
    parser.add_argument("--modes", help="restrict the torch.compile modes, comma-separated "
                                        "(empty: none)")
    parser.add_argument("--problem-cap-s", type=float, default=240.0,
                        help="wall-clock cap per problem (compiles included)")
    parser.add_argument("--deadline-s", type=float,
                        help="no problem starts or runs past this many seconds from the start")
    parser.add_argument("--resume", action="store_true",
                        help="keep the problems --out/suite.json already holds and skip them")
    parser.add_argument("--commit", default="unknown")
    parser.add_argument("--budget", default="", help="the Forge job budget, recorded as given")
    parser.add_argument("--forge-plan", help="MODULE:FUNCTION returning the Forge plan callable")
    parser.add_argument("--forge-jobs", help="directory of <problem>.json Forge job summaries")
    parser.add_argument("--ceilings", type=pathlib.Path,
                        help="JSON of Ceilings.to_json(); default: the H200's measured ceilings")
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--small", action="store_true", help="the reduced-size variants")
    parser.add_argument("--reference", choices=("float64", "eager"), default="float64")
    args = parser.parse_args(argv)
    # --modes= (empty) times no torch.compile mode.
    args.modes = None if args.modes is None else {m for m in args.modes.split(",") if m}
    args.ceilings = (suite.Ceilings.from_json(json.loads(args.ceilings.read_text()))
                     if args.ceilings else suite.H200_CEILINGS)
    return args


def on_alarm(signum, frame):
    raise ProblemTimeout()


def run_selected(selected, args, results, timer, forge_plan, run_deadline: float) -> int:
    """Runs every selected problem not in `results` yet, writing the results after each; the exit
    code (EXIT_CONTEXT_LOST when a crash took the CUDA context down)."""
    done = {record["name"] for record in results["problems"]}
    for problem in selected:
        if problem.name in done:
            continue
        left = run_deadline - time.monotonic()
        if left < 30:
            print(f"deadline: {problem.name} and later problems not started", flush=True)
            break
        cap = min(args.problem_cap_s, left)
        print(f"== {problem.name} (cap {cap:.0f} s)", flush=True)
        record = {"name": problem.name, "level": problem.level}
        results["problems"].append(record)
        signal.alarm(max(1, int(cap)))
        try:
            run_problem(record, problem, args, timer, forge_plan, time.monotonic() + cap, cap)
        except ProblemTimeout:
            record["error"] = f"problem time cap of {cap:.0f} s reached outside the timed modes"
        except Exception as err:  # noqa: BLE001 - one failing problem must not stop the suite
            record["error"] = f"{type(err).__name__}: {str(err)[:2000]}"
            record["traceback"] = traceback.format_exc()[-4000:]
            if context_lost(err):
                print(f"CUDA context lost in {problem.name}: {err}", flush=True)
                write_results(args.out, results)
                return EXIT_CONTEXT_LOST
        finally:
            signal.alarm(0)
        write_results(args.out, results)
        print(report.one_line(record), flush=True)
        torch._dynamo.reset()
        gc.collect()
        if torch.device(args.device).type == "cuda":
            torch.cuda.empty_cache()
    write_results(args.out, results)
    return 0


def main(argv=None) -> int:
    args = parse_args(argv)
    run_deadline = time.monotonic() + (args.deadline_s or float("inf"))
    args.out.mkdir(parents=True, exist_ok=True)
    selected = select(args)
    forge_plan = load_forge_plan(args.forge_plan)
    timer = timing.make_timer(args.device)
    previous = args.out / "suite.json"
    if args.resume and previous.exists():
        results = json.loads(previous.read_text())
    else:
        results = environment(args, timer) | {"problems": []}
    results["selected"] = [p.name for p in selected]
    handler = signal.signal(signal.SIGALRM, on_alarm)
    try:
        return run_selected(selected, args, results, timer, forge_plan, run_deadline)
    finally:
        signal.signal(signal.SIGALRM, handler)


if __name__ == "__main__":
    sys.exit(main())
