"""Runs the Forge side of the suite: starts a local service (redis-server, forge-coordinator, one
forge-worker for the GPUs of this machine, or an emulated H200), exports every selected problem
with forge.export (DIR/models/<problem>: graph.pb + weight blobs) and submits it with a fixed
budget, follows each job to its end, fetches its result bundle, and writes the job
summaries run_suite.py reads with --forge-jobs (candidates tried, time to first speedup, time to
best).

    python benchmarks/suite/forge_jobs.py --bin DIR --out DIR --budget N [--max-seconds S]
        [--only NAME,...] [--level L,...] [--small] [--emulate] [--job-timeout-s S] [--resume]
        [--concurrent] [--builds N]

--max-seconds ends each job's search that long after it starts (every task keeps its best so
far); a job still running --job-timeout-s after its submission is cancelled and its bests so far
fetched all the same (with --concurrent, where every job is submitted first, that makes one
deadline for all).
--resume skips problems whose summary and bundle OUT already holds (a run split over several
sessions). Each fetched bundle's PyTorch extension is built in the background
(`python -m forge.runtime build`, --builds at a time, logs in OUT/service/build-<problem>.log)
while the next problems search, so that timing the plans later finds them built.

--bin holds forge-coordinator, forge-worker, forge, forge-sandbox-child (GPU) and optionally
redis-server (else PATH). Writes OUT/jobs/<problem>.json, OUT/bundles/<problem>/ (with the
model's graph.pb, so forge_plan.py can load it) and the service logs under OUT/service/.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import pathlib
import shutil
import socket
import subprocess
import sys
import tempfile
import time

ROOT = pathlib.Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "python"))

import torch  # noqa: E402

import forge  # noqa: E402  (python/forge, the SDK's exporter)
from benchmarks.suite import problems as suite  # noqa: E402


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_for_port(port: int, timeout_s: float) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        with socket.socket() as s:
            if s.connect_ex(("127.0.0.1", port)) == 0:
                return
        time.sleep(0.1)
    raise RuntimeError(f"nothing listens on 127.0.0.1:{port} after {timeout_s} s")


class Service:
    """redis-server + forge-coordinator + one forge-worker, stopped on exit."""

    def __init__(self, bin_dir: pathlib.Path, log_dir: pathlib.Path, emulate: bool):
        self.processes: list[subprocess.Popen] = []
        self.work = pathlib.Path(tempfile.mkdtemp(prefix="forge-suite-"))
        log_dir.mkdir(parents=True, exist_ok=True)
        redis = bin_dir / "redis-server"
        redis = str(redis) if redis.exists() else shutil.which("redis-server")
        redis_port, grpc_port = free_port(), free_port()
        self._start([redis, "--port", str(redis_port), "--bind", "127.0.0.1", "--dir",
                     str(self.work), "--appendonly", "yes", "--save", ""], log_dir / "redis.log")
        self._start([str(bin_dir / "forge-coordinator"), f"--listen=127.0.0.1:{grpc_port}",
                     f"--redis.port={redis_port}", f"--blobs.dir={self.work / 'blobs'}",
                     "--metrics.listen="], log_dir / "coordinator.log")
        worker = [str(bin_dir / "forge-worker"), f"--coordinator=127.0.0.1:{grpc_port}",
                  f"--compile-cache-dir={self.work / 'cubins'}"]
        worker.append("--emulate=H200" if emulate
                      else f"--sandbox-child={bin_dir / 'forge-sandbox-child'}")
        self._start(worker, log_dir / "worker.log")
        wait_for_port(grpc_port, 60)
        self.address = f"127.0.0.1:{grpc_port}"
        self.forge = str(bin_dir / "forge")

    def _start(self, argv: list[str], log: pathlib.Path) -> None:
        with open(log, "w") as out:
            self.processes.append(subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT))

    def cli(self, *args: str, timeout_s: float = 600) -> str:
        result = subprocess.run([self.forge, *args], capture_output=True, text=True,
                                timeout=timeout_s, env={**os.environ, "FORGE_SERVER": self.address})
        if result.returncode not in (0, 1):  # 1: the job ended other than DONE
            raise RuntimeError(f"forge {' '.join(args)}: exit {result.returncode}: "
                               f"{result.stderr.strip()[:2000]}")
        return result.stdout

    def close(self) -> None:
        for process in reversed(self.processes):
            process.terminate()
        for process in self.processes:
            try:
                process.wait(timeout=15)
            except subprocess.TimeoutExpired:
                process.kill()
        shutil.rmtree(self.work, ignore_errors=True)


class ExtensionBuilds:
    """Bundles' extensions built by `python -m forge.runtime build` in background processes, at
    most `parallel` at a time."""

    def __init__(self, parallel: int, log_dir: pathlib.Path):
        self.parallel, self.log_dir = parallel, log_dir
        self.running: list[tuple[str, subprocess.Popen]] = []
        self.failed = 0

    def start(self, name: str, bundle: pathlib.Path) -> None:
        if self.parallel <= 0:
            return
        while len(self.running) >= self.parallel:
            self._reap()
        with open(self.log_dir / f"build-{name}.log", "w") as log:
            process = subprocess.Popen([sys.executable, "-m", "forge.runtime", "build", str(bundle)],
                                       stdout=log, stderr=subprocess.STDOUT,
                                       env={**os.environ, "PYTHONPATH": str(ROOT / "python")})
        self.running.append((name, process))

    def _reap(self) -> None:
        """Waits for the oldest build (builds take about as long as each other), then drops
        every finished one, counting failures."""
        self.running[0][1].wait()
        still = []
        for name, process in self.running:
            if process.poll() is None:
                still.append((name, process))
            elif process.returncode != 0:
                self.failed += 1
                print(f"{name}: building its extension failed (service/build-{name}.log)",
                      flush=True)
        self.running = still

    def wait(self) -> int:
        """Waits for every build; the number that failed."""
        while self.running:
            self._reap()
        return self.failed


def timestamp(text: str) -> float:
    return datetime.datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp()


def summarize(events: list[dict]) -> dict:
    """The job summary run_suite.py expects, from the job's JobEvents (forge watch --json)."""
    start = timestamp(events[0]["time"])
    first_speedup = best = None
    for event in events:
        improved = event.get("task_improved")
        if not improved:
            continue
        at = timestamp(event["time"]) - start
        if first_speedup is None and float(improved.get("speedup_vs_eager", 0)) > 1.0:
            first_speedup = at
        best = at
    progress = events[-1].get("progress", {})
    final = events[-1].get("state_changed", {}).get("current", "")
    return {
        "state": final,
        "candidates_tried": int(progress.get("candidates_completed", 0))
                            + int(progress.get("candidates_failed", 0)),
        "best_speedup": float(progress.get("best_speedup", 1.0)),
        "time_to_first_speedup_s": first_speedup,
        "time_to_best_s": best,
        "wall_s": timestamp(events[-1]["time"]) - start,
    }


def submit_problem(service: Service, problem: suite.Problem, out: pathlib.Path, budget: int,
                   max_seconds: int, small: bool) -> str:
    """Exports the problem and submits it; the job's id."""
    # Exported on the CPU (forge.export reads the weights' values); the service runs the model.
    module, inputs = problem.make(torch.device("cpu"), small)
    exported = out / "models" / problem.name
    forge.export(module.eval(), inputs, name=problem.name).save(exported)
    submitted = json.loads(service.cli("submit", str(exported), "--budget", str(budget),
                                       "--max-seconds", str(max_seconds), "--json",
                                       "--label", f"suite={problem.name}"))
    job = submitted["jobs"][0]
    if not job.get("ok"):
        raise RuntimeError(f"{problem.name}: submit failed: {job.get('error')}")
    return job["job"]["id"]


def finish_problem(service: Service, problem: suite.Problem, job_id: str, out: pathlib.Path,
                   timeout_s: float, submitted_at: float) -> dict:
    """Follows the job to its end, at most until `timeout_s` after its submission (a
    time.monotonic() reading), and fetches its bundle; the job's summary."""
    timed_out = False
    left_s = max(submitted_at + timeout_s - time.monotonic(), 1.0)
    try:
        lines = service.cli("watch", job_id, "--json", timeout_s=left_s).splitlines()
    except subprocess.TimeoutExpired:
        # The bests found so far still make a plan; the summary says the job did not finish.
        # Watching the ended job replays all its events.
        timed_out = True
        service.cli("cancel", job_id, "--json")
        lines = service.cli("watch", job_id, "--json", timeout_s=60).splitlines()
    events = [json.loads(line) for line in lines if line.strip()]
    summary = summarize(events) | {"job": job_id}
    if timed_out:
        summary["state"] = f"cancelled after the {timeout_s:g} s job timeout"
    bundle = out / "bundles" / problem.name
    service.cli("results", job_id, "-o", str(bundle))
    # What forge.runtime.load_plan reads.
    shutil.copy(out / "models" / problem.name / "graph.pb", bundle / "graph.pb")
    summary["bundle"] = str(bundle)
    return summary


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--bin", required=True, type=pathlib.Path)
    parser.add_argument("--out", required=True, type=pathlib.Path)
    parser.add_argument("--budget", required=True, type=int, help="candidate trials per job")
    parser.add_argument("--only")
    parser.add_argument("--level")
    parser.add_argument("--small", action="store_true")
    parser.add_argument("--emulate", action="store_true", help="an emulated H200: PREDICTED times")
    parser.add_argument("--max-seconds", type=int, default=0,
                        help="end each job's search this long after it starts (0: no limit)")
    parser.add_argument("--job-timeout-s", type=float, default=600)
    parser.add_argument("--concurrent", action="store_true",
                        help="submit every job first and let the service run them side by side")
    parser.add_argument("--builds", type=int, default=4,
                        help="bundle extensions built at a time in the background (0: none)")
    parser.add_argument("--resume", action="store_true",
                        help="skip problems whose summary and bundle are already under --out")
    args = parser.parse_args()
    selected = [p for p in suite.PROBLEMS
                if (not args.only or p.name in args.only.replace(",", " ").split())
                and (not args.level or p.level in args.level.split(","))]
    jobs_dir = args.out / "jobs"
    jobs_dir.mkdir(parents=True, exist_ok=True)
    service = Service(args.bin.resolve(), args.out / "service", args.emulate)
    builds = ExtensionBuilds(args.builds, args.out / "service")
    failures = 0
    try:
        pending = [p for p in selected
                   if not (args.resume and (jobs_dir / f"{p.name}.json").exists()
                           and (args.out / "bundles" / p.name / "plan.json").exists())]
        # Concurrent: every job submitted first, the service runs them side by side (their
        # times to first speedup and to best then include waiting for the others' candidates).
        jobs: dict[str, str | Exception] = {}
        submitted_at: dict[str, float] = {}

        def submit(problem: suite.Problem) -> None:
            submitted_at[problem.name] = time.monotonic()
            try:
                jobs[problem.name] = submit_problem(service, problem, args.out, args.budget,
                                                    args.max_seconds, args.small)
            except Exception as err:  # one problem's failure is recorded, the others run
                jobs[problem.name] = err

        if args.concurrent:
            for problem in pending:
                submit(problem)
        for problem in pending:
            if problem.name not in jobs:
                submit(problem)
            job = jobs[problem.name]
            try:
                if isinstance(job, Exception):
                    raise job
                summary = finish_problem(service, problem, job, args.out, args.job_timeout_s,
                                         submitted_at[problem.name])
            except Exception as err:
                failures += 1
                summary = {"state": "error", "error": f"{type(err).__name__}: {err}"[:2000]}
            if "bundle" in summary:
                builds.start(problem.name, pathlib.Path(summary["bundle"]))
            summary |= {"budget": args.budget, "max_seconds": args.max_seconds,
                        "concurrent": args.concurrent}
            (jobs_dir / f"{problem.name}.json").write_text(json.dumps(summary, indent=1))
            print(f"{problem.name}: {summary.get('state')} "
                  f"{summary.get('candidates_tried', '-')} candidates, "
                  f"best {summary.get('best_speedup', '-')}x", flush=True)
    finally:
        service.close()
        failures += builds.wait()
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
