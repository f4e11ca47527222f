"""Host-launched steps (compiler/codegen/host_launch_abi.h: CUTLASS winners): each one's
translation unit built by nvcc into a shared object of its own, which the step's op loads
(runtime/extension/host_launched.h).

The command line is the worker's (worker/compile/nvcc.h NvccCommand): the bundle carries its flags
(`nvcc_flags`, compile::NvccFlags of the job's arch) and the source's own `compile_options`; the
include directories are the bundle's (the ABI header) and CUTLASS's headers: $FORGE_CUTLASS_INCLUDE,
else those of the importable `cutlass_library` package (the nvidia-cutlass wheel:
cutlass_library/source/include), else ~/.cache/forge/cutlass-4.2.0.0/include (scripts/setup's).
Objects are cached under the extension cache, in host_launched/<digest>/, by a digest of
everything they depend on: the source, the ABI header, the flags and options, nvcc's --version
text and the CUTLASS headers' version.

A step whose object cannot be built (no nvcc, no CUTLASS headers for a source that includes them,
a compile error) runs through ATen instead; `build_host_objects` says why, and load_plan logs it
once and PlanModule's description carries it.
"""

from __future__ import annotations

import dataclasses
import functools
import hashlib
import importlib.util
import os
import pathlib
import re
import shutil
import subprocess
from typing import Sequence

from forge.runtime.plan import Plan, PlanError, Step

ABI_HEADER = pathlib.PurePosixPath("compiler/codegen/host_launch_abi.h")
OBJECT_NAME = "forge_host_launched.so"
PINNED_CUTLASS = pathlib.Path.home() / ".cache" / "forge" / "cutlass-4.2.0.0" / "include"
NVCC_TIMEOUT_S = 1800  # a CUTLASS sm90 configuration takes minutes on a loaded machine
_CUTLASS_INCLUDE = re.compile(r'^\s*#\s*include\s*[<"]cutl(ass|e)/', re.MULTILINE)
_VERSION_FIELDS = re.compile(r"#define CUTLASS_(MAJOR|MINOR|PATCH) (\d+)")


def nvcc_path() -> str | None:
    """$CUDA_HOME/bin/nvcc (as torch's extension tooling finds CUDA), else nvcc on PATH."""
    from torch.utils import cpp_extension

    home = os.environ.get("CUDA_HOME") or cpp_extension.CUDA_HOME
    if home and (pathlib.Path(home) / "bin" / "nvcc").is_file():
        return str(pathlib.Path(home) / "bin" / "nvcc")
    return shutil.which("nvcc")


def find_include(environment: str, package: str, inside: str, pinned: pathlib.Path | None,
                 marker: str) -> pathlib.Path | None:
    """A library's directory: $`environment`, else `inside` the importable `package`, else
    `pinned` (scripts/setup's copy), the first that holds the file `marker`; None when none
    does."""
    candidates = []
    if os.environ.get(environment):
        candidates.append(pathlib.Path(os.environ[environment]))
    try:
        spec = importlib.util.find_spec(package)
    except (ImportError, ValueError):  # a parent package that is not there
        spec = None
    if spec is not None and spec.submodule_search_locations:
        for location in spec.submodule_search_locations:
            candidates.append(pathlib.Path(location) / inside)
    if pinned is not None:
        candidates.append(pinned)
    return next((c for c in candidates if (c / marker).is_file()), None)


def cutlass_include() -> pathlib.Path | None:
    """Where CUTLASS's headers are (see the module's comment); None when nowhere."""
    return find_include("FORGE_CUTLASS_INCLUDE", "cutlass_library", "source/include",
                        PINNED_CUTLASS, "cutlass/version.h")


def cutlass_version(include: pathlib.Path) -> str:
    """"4.2.0" from cutlass/version.h."""
    fields = dict(_VERSION_FIELDS.findall((include / "cutlass" / "version.h").read_text()))
    return ".".join(fields.get(key, "?") for key in ("MAJOR", "MINOR", "PATCH"))


@functools.lru_cache(maxsize=None)
def nvcc_version(nvcc: str) -> str:
    try:
        run = subprocess.run([nvcc, "--version"], capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.TimeoutExpired) as err:
        raise PlanError(f"nvcc {nvcc} cannot be run: {err}") from err
    if run.returncode != 0 or "release" not in run.stdout:
        raise PlanError(f"nvcc {nvcc} does not answer --version: {run.stdout}{run.stderr}")
    return run.stdout.strip()


@dataclasses.dataclass(frozen=True)
class HostObjectBuild:
    """How one host-launched step's object is built: the command (NvccCommand's order), its
    digest and where the object goes."""

    step: Step
    command: list[str]
    digest: str
    directory: pathlib.Path

    @property
    def path(self) -> pathlib.Path:
        return self.directory / OBJECT_NAME


def needs_cutlass(source: str) -> bool:
    return _CUTLASS_INCLUDE.search(source) is not None


def plan_host_object(step: Step, root: pathlib.Path, *, nvcc: str | None = None,
                     cutlass: pathlib.Path | None = None) -> HostObjectBuild:
    """The build of `step`'s object under `root` (nothing runs but `nvcc --version`). PlanError
    saying what is missing when it cannot be built here."""
    if step.implementation != "host_launched" or step.source is None:
        raise PlanError(f"{step.describe()} is not a host-launched step with a source")
    source = step.source.read_text()
    header = step.include / ABI_HEADER
    if not header.is_file():
        raise PlanError(f"{step.describe()}: the bundle lacks the host-launch ABI header {header}")
    nvcc = nvcc or nvcc_path()
    if nvcc is None:
        raise PlanError(f"{step.describe()}: no nvcc (set CUDA_HOME to the CUDA toolkit) to build "
                        "its host-launched object")
    includes = [step.include]
    version = ""
    if needs_cutlass(source):
        cutlass = cutlass or cutlass_include()
        if cutlass is None:
            raise PlanError(
                f"{step.describe()}: its source needs CUTLASS's headers and none were found (set "
                "FORGE_CUTLASS_INCLUDE, pip install nvidia-cutlass, or run scripts/setup for "
                f"{PINNED_CUTLASS})")
        includes.append(cutlass)
        version = cutlass_version(cutlass)
    sha = hashlib.sha256()
    for part in (source, header.read_text(), *step.nvcc_flags, "\0", *step.compile_options,
                 nvcc_version(nvcc), version):
        sha.update(part.encode() + b"\0")
    digest = sha.hexdigest()
    directory = root / "host_launched" / digest[:24]
    command = [nvcc, *step.nvcc_flags, *(f"-I{path}" for path in includes),
               *step.compile_options, "-o", str(directory / OBJECT_NAME), str(step.source)]
    return HostObjectBuild(step, command, digest, directory)


def build_host_object(build: HostObjectBuild) -> pathlib.Path:
    """Runs the build unless its object is there; PlanError with nvcc's first error otherwise."""
    if build.path.is_file():
        return build.path
    build.directory.mkdir(parents=True, exist_ok=True)
    partial = build.command[:-2] + [str(build.path) + ".partial", build.command[-1]]
    try:
        run = subprocess.run(partial, capture_output=True, text=True, timeout=NVCC_TIMEOUT_S,
                             cwd=build.directory)
    except subprocess.TimeoutExpired as err:
        raise PlanError(f"{build.step.describe()}: nvcc did not build its object within "
                        f"{NVCC_TIMEOUT_S} s") from err
    (build.directory / "nvcc.log").write_text(" ".join(partial) + "\n" + run.stdout + run.stderr)
    if run.returncode != 0:
        errors = [line for line in (run.stdout + run.stderr).splitlines() if "error" in line]
        raise PlanError(f"{build.step.describe()}: nvcc failed (exit {run.returncode}; "
                        f"{build.directory / 'nvcc.log'}): "
                        f"{errors[0] if errors else run.stderr.strip()[-500:]}")
    os.replace(str(build.path) + ".partial", build.path)
    return build.path


def build_host_objects(plan: Plan, root: pathlib.Path,
                       steps: Sequence[Step] | None = None) -> tuple[dict[str, pathlib.Path],
                                                                     dict[str, str]]:
    """The objects of the plan's host-launched steps that can run as planned, by task, and why
    each of the others runs through ATen (by task)."""
    objects, fallbacks = {}, {}
    for step in steps if steps is not None else plan.compiled_steps():
        if step.implementation != "host_launched" or step.task in objects or \
                step.task in fallbacks:
            continue
        try:
            objects[step.task] = build_host_object(plan_host_object(step, root))
        except PlanError as err:
            fallbacks[step.task] = str(err)
    return objects, fallbacks
