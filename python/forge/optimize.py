"""forge.optimize: an nn.Module in, a faster nn.Module out, through a Forge coordinator.

    fast = forge.optimize(model, (x,), server="forge.internal:50051", budget=2000)
    y = fast(x)

Steps: export (forge.export), submit over gRPC (only the weights the coordinator lacks are
uploaded), follow the job's progress (WatchJob) until it ends, fetch the result bundle with the
forge CLI, build the bundle's extension and plan (forge.runtime.load_plan), and run the end check
(forge.end_check) on the example inputs: the result and eager against a float64 copy of the
module, the result within the dtype's tolerance or nearly as accurate as eager.
"""

from __future__ import annotations

import dataclasses
import getpass
import os
import pathlib
import shutil
import subprocess
import sys
import tempfile
import time
from typing import Any, Callable, Sequence

import torch
from torch.utils import _pytree as pytree

from forge._protos import task_pb2
from forge import end_check
from forge.client import ForgeError, JobClient, JobError, resolve_server, state_name
from forge.end_check import EndCheck, Reference
from forge.export import ExportedModel, export
from forge.runtime import PlanModule, load_plan, read_plan
from forge.runtime.extension import cache_directory

_REPO = pathlib.Path(__file__).resolve().parents[2]


def _repo_cli() -> pathlib.Path:
    """The CLI of this repository's build (scripts/build: $FORGE_BUILD_DIR, default build/)."""
    build = pathlib.Path(os.environ.get("FORGE_BUILD_DIR") or _REPO / "build")
    return build / "client" / "forge" / "forge"

class OutputMismatchError(ForgeError):
    """The optimized module's outputs fail the end check (forge.end_check): `check` says how."""

    def __init__(self, message: str, check: EndCheck | None = None):
        super().__init__(message)
        self.check = check


def find_cli(forge_cli: str | os.PathLike | None = None) -> pathlib.Path:
    """The forge CLI: `forge_cli`, else $FORGE_CLI, else `forge` on PATH, else the repository's
    build ($FORGE_BUILD_DIR or build/)/client/forge/forge."""
    for candidate, origin in ((forge_cli, "forge_cli"), (os.environ.get("FORGE_CLI"), "FORGE_CLI")):
        if candidate:
            path = pathlib.Path(candidate)
            if not (path.is_file() and os.access(path, os.X_OK)):
                raise ForgeError(f"{origin}={candidate} is not an executable forge CLI")
            return path
    on_path = shutil.which("forge")
    if on_path:
        return pathlib.Path(on_path)
    repo_cli = _repo_cli()
    if repo_cli.is_file():
        return repo_cli
    raise ForgeError("the forge CLI was not found (forge_cli=, $FORGE_CLI, PATH or "
                     f"{repo_cli}); build it: scripts/build forge")


class InvalidModelError(ForgeError):
    """The coordinator's intake checks refuse the model or the job's options: found here, by the
    CLI's `forge submit --check` (the coordinator's own checks, compiled in), before anything is
    uploaded; the message is the one the coordinator would give."""


def check_before_upload(graph, options, forge_cli: str | os.PathLike | None = None) -> None:
    """Runs the coordinator's intake checks on `graph` and `options` (a task_pb2.JobOptions)
    through `forge submit MODEL --check`: nothing is sent. Raises InvalidModelError with the
    coordinator's words when they refuse it."""
    cli = find_cli(forge_cli)
    with tempfile.TemporaryDirectory(prefix="forge-check-") as directory:
        model = pathlib.Path(directory) / "model"
        (model / "blobs").mkdir(parents=True)
        (model / "graph.pb").write_bytes(graph.SerializeToString(deterministic=True))
        command = [str(cli), "submit", str(model), "--check",
                   f"--budget={options.budget.max_candidate_trials}",
                   f"--max-seconds={options.budget.max_wall_seconds}",
                   f"--priority={options.priority}",
                   f"--arch={options.target_arch or 'sm_90'}"]
        if options.owner:
            command.append(f"--owner={options.owner}")
        command += [f"--label={key}={value}" for key, value in options.labels.items()]
        done = subprocess.run(command, capture_output=True, text=True)
    if done.returncode != 0:
        message = (done.stderr.strip() or done.stdout.strip()).replace(str(model) + ": ", "")
        raise InvalidModelError(message.removeprefix("forge: ").removeprefix("forge submit: "))


def fetch_bundle(job_id: str, server: str, directory: str | os.PathLike, graph,
                 forge_cli: str | os.PathLike | None = None) -> pathlib.Path:
    """Writes the job's result bundle into `directory` with `forge results JOB -o DIR` (the CLI
    regenerates each winner's kernel source with the C++ code generator, byte for byte what the
    worker ran), and the job's model beside it as graph.pb, for forge.runtime.load_plan."""
    directory = pathlib.Path(directory)
    command = [str(find_cli(forge_cli)), "results", job_id, "-o", str(directory),
               f"--server={server}"]
    done = subprocess.run(command, capture_output=True, text=True)
    if done.returncode != 0:
        raise ForgeError(f"`{' '.join(command)}` failed (exit {done.returncode}): "
                         f"{(done.stderr or done.stdout).strip()}")
    (directory / "graph.pb").write_bytes(graph.SerializeToString(deterministic=True))
    read_plan(directory)  # a bundle without a usable plan fails here, naming the problem
    return directory


def check_outputs(got, eager, reference: Reference | None = None, *, hint: str = "") -> EndCheck:
    """The end check (forge.end_check) of `got` against `eager`'s result and `reference` (default:
    eager itself, the judge's comparison); raises OutputMismatchError when it fails, with `hint`
    appended, and returns it otherwise."""
    check = end_check.compare(got, eager, reference or end_check.Reference(None, "eager"))
    if not check.passed:
        raise OutputMismatchError("; ".join(check.summary()) + hint, check)
    return check


class _Progress:
    """One line of progress: rewritten in place on a terminal; elsewhere (logs, notebooks
    without a terminal) printed when the state changes and at most every `interval` seconds."""

    def __init__(self, job_id: str, stream=None, interval: float = 5.0):
        self.job_id, self.stream, self.interval = job_id, stream or sys.stderr, interval
        self.tty = hasattr(self.stream, "isatty") and self.stream.isatty()
        self.state, self.line, self.printed_at = "submitted", "", 0.0

    def __call__(self, event) -> None:
        changed = event.HasField("state_changed")
        if changed:
            self.state = state_name(event.state_changed.current).lower()
        progress = event.progress
        line = (f"forge {self.job_id}: {self.state}, tasks {progress.tasks_done}/"
                f"{progress.tasks_total}, candidates {progress.candidates_completed} "
                f"({progress.candidates_failed} failed), best {progress.best_speedup:.2f}x over "
                "eager")
        if self.tty:
            self.stream.write("\r" + line.ljust(len(self.line)))
        elif changed or time.monotonic() - self.printed_at >= self.interval:
            self.stream.write(line + "\n")
            self.printed_at = time.monotonic()
        self.line = line
        self.stream.flush()

    def close(self) -> None:
        if self.tty and self.line:
            self.stream.write("\n")
            self.stream.flush()


@dataclasses.dataclass
class OptimizationJob:
    """A submitted job and what is needed to turn its results into a module."""

    client: JobClient
    job: Any  # forge.v1.Job, as submitted
    module: torch.nn.Module
    example_inputs: tuple
    exported: ExportedModel
    forge_cli: str | os.PathLike | None = None
    cuda_graphs: bool = True
    bundle_dir: str | os.PathLike | None = None

    @property
    def id(self) -> str:
        return self.job.id

    def status(self):
        """The job as the coordinator has it now (forge.v1.Job)."""
        return self.client.get_job(self.id)

    def cancel(self, reason: str = "cancelled from the Python SDK"):
        return self.client.cancel(self.id, reason)

    def wait(self, progress: bool | Callable = True):
        """Follows the job to its end; the final Job, or JobError when it FAILED or was
        CANCELLED. `progress`: print a progress line, or a function called with every JobEvent."""
        printer = _Progress(self.id) if progress is True else None
        callback = printer or (progress if callable(progress) else None)
        try:
            job = self.client.wait(self.id, callback)
        finally:
            if printer is not None:
                printer.close()
        if job.state != task_pb2.JOB_STATE_DONE:
            raise JobError(job, self.client.address)
        return job

    def fetch_bundle(self, directory: str | os.PathLike | None = None) -> pathlib.Path:
        """The result bundle on disk (default $FORGE_CACHE_DIR/bundles/<job>-<model digest>)."""
        directory = directory or self.bundle_dir or (
            cache_directory() / "bundles" / f"{self.id}-{self.job.model_digest[:12]}")
        return fetch_bundle(self.id, self.client.address, directory, self.exported.graph,
                            self.forge_cli)

    def result(self, progress: bool | Callable = True) -> PlanModule:
        """Waits for the job, fetches the bundle, builds the optimized module and runs the end
        check (forge.end_check) on the example inputs: the optimized module and eager against a
        float64 copy of the module. The check's errors go to the bundle (end_check.json, and a
        section of report.md/report.json) and, when `progress` prints, to stderr."""
        self.wait(progress)
        bundle = self.fetch_bundle()
        with torch.no_grad():
            expected = self.module(*self.example_inputs)
        _, structure = pytree.tree_flatten(expected)
        optimized = load_plan(bundle, self.module, graph=self.exported.graph,
                              blobs=self.exported.blobs, output_structure=structure,
                              cuda_graphs=self.cuda_graphs)
        reference = end_check.reference_outputs(self.module, self.example_inputs)
        hint = ("; the module is in training mode: call module.eval() before forge.optimize"
                if self.module.training else "")
        # Twice: the first call captures the CUDA graph, the second replays it. The report keeps
        # the first failure, else the replay's check.
        try:
            for _ in range(2):
                with torch.no_grad():
                    check = check_outputs(optimized(*self.example_inputs), expected, reference,
                                          hint=hint)
        except OutputMismatchError as error:
            end_check.write_to_bundle(error.check, bundle)
            raise
        end_check.write_to_bundle(check, bundle)
        if progress is True:
            sys.stderr.write(f"forge {self.id}: " + "\n".join(check.summary()) + "\n")
        return optimized


def _target_arch(inputs: Sequence) -> str:
    for tensor in end_check.tensors(inputs):
        if tensor.is_cuda:
            major, minor = torch.cuda.get_device_capability(tensor.device)
            return f"sm_{major}{minor}"
    return ""  # the coordinator's default


def optimize(module: torch.nn.Module, example_inputs: Sequence, *, server: str | None = None,
             budget: int | None = None, max_seconds: int | None = None, priority: int = 0,
             wait: bool = True, progress: bool | Callable = True, cuda_graphs: bool = True,
             forge_cli: str | os.PathLike | None = None, target_arch: str | None = None,
             bundle_dir: str | os.PathLike | None = None, name: str | None = None,
             labels: dict[str, str] | None = None) -> PlanModule | OptimizationJob:
    """Optimizes `module` for `example_inputs` with a Forge coordinator and returns a module that
    runs the optimized plan (inference only; the inputs' shapes and dtypes are fixed to the
    example's).

    server: the coordinator, HOST:PORT; default $FORGE_SERVER, else 127.0.0.1:50051.
    budget: candidates to try over the whole job (default: the coordinator's per-task default);
      max_seconds: wall-clock limit of the search.
    priority: scheduling priority (higher first).
    wait: False returns the OptimizationJob at once (.wait(), .result(), .cancel()).
    progress: print a one-line progress view, or a function called with every JobEvent.
    cuda_graphs: run the plan under a CUDA graph (falls back to eager, logged, when capture fails).
    forge_cli: the forge CLI binary (default $FORGE_CLI, PATH, then the repository's build). The
      bundle is fetched with `forge results`, because each winner's kernel source is regenerated
      from its candidate by the C++ code generator, which only the CLI has.
    target_arch: e.g. "sm_90"; default the example inputs' GPU (else the coordinator's default).
    bundle_dir: where to keep the result bundle; default $FORGE_CACHE_DIR/bundles/<job>-<digest>.

    Raises InvalidModelError when the coordinator's intake checks (run here first, through the
    CLI) refuse the model or the options, ServerError (address and gRPC code) when the
    coordinator is unreachable or refuses,
    JobError when the job fails or is cancelled, PlanError when the bundle cannot be built or run
    here, OutputMismatchError when the result fails the end check (forge.end_check: the result and
    eager against a float64 copy of the module; the result must be within the dtype's tolerance
    or nearly as accurate as eager). The module is not modified: its weights are shared with the
    result, not copied.
    """
    inputs = tuple(example_inputs)
    client = JobClient(resolve_server(server))
    client.ping()  # before the export, which can take a while for a large model
    exported = export(module, inputs, name=name)
    options = task_pb2.JobOptions(priority=priority, owner=getpass.getuser(),
                                  target_arch=target_arch or _target_arch(inputs))
    options.budget.max_candidate_trials = budget or 0
    options.budget.max_wall_seconds = max_seconds or 0
    options.labels["model"] = exported.graph.metadata.name
    options.labels.update(labels or {})
    # The coordinator's intake checks, here, before the weights are uploaded (the CLI, which this
    # function needs anyway for the bundle, has them compiled in).
    check_before_upload(exported.graph, options, forge_cli)
    response = client.submit(exported.graph, exported.blobs, options)
    job = OptimizationJob(client, response.job, module, inputs, exported, forge_cli=forge_cli,
                          cuda_graphs=cuda_graphs, bundle_dir=bundle_dir)
    if not wait:
        return job
    return job.result(progress)
