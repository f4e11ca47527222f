"""The PyTorch extension of a plan: its sources, generated from runtime/extension's templates, and
their build with torch.utils.cpp_extension (nvcc and the host compiler of this machine).

One custom operator per task that the plan runs as a generated kernel or a cuBLASLt call,
torch.ops.forge.<kind>_<task>_<digest>(inputs..., outputs...) -> (). The name carries the first
digits of the extension's digest, so that plans of different models sharing a task can be loaded
into one process. Builds are cached under the cache directory by that digest: the same plan on the
same torch, CUDA and architecture builds once.
"""

from __future__ import annotations

import dataclasses
import hashlib
import os
import pathlib
import re
import struct
from typing import Mapping

import torch

from forge.runtime.plan import Plan, PlanError, Step, TensorLayout

_RUNTIME_ROOT = pathlib.Path(os.environ.get(
    "FORGE_RUNTIME_ROOT", pathlib.Path(__file__).resolve().parents[3] / "runtime"))
_TEMPLATE_FILES = ("forge_runtime.h", "ops.cpp.in", "kernel.cu.in")

_SCALAR_TYPES = {
    torch.float64: "at::kDouble", torch.float32: "at::kFloat", torch.float16: "at::kHalf",
    torch.bfloat16: "at::kBFloat16", torch.float8_e4m3fn: "at::kFloat8_e4m3fn",
    torch.float8_e5m2: "at::kFloat8_e5m2", torch.int8: "at::kChar", torch.int16: "at::kShort",
    torch.int32: "at::kInt", torch.int64: "at::kLong", torch.uint8: "at::kByte",
    torch.bool: "at::kBool", torch.complex64: "at::kComplexFloat",
}
_EPILOGUES = {"NONE": "kNone", "BIAS": "kBias", "RELU": "kRelu", "RELU_BIAS": "kReluBias",
              "GELU": "kGelu", "GELU_BIAS": "kGeluBias"}


def cache_directory() -> pathlib.Path:
    """$FORGE_CACHE_DIR, else ~/.cache/forge."""
    return pathlib.Path(os.environ.get("FORGE_CACHE_DIR", pathlib.Path.home() / ".cache" / "forge"))


def _templates() -> dict[str, str]:
    directory = _RUNTIME_ROOT / "extension"
    missing = [name for name in _TEMPLATE_FILES if not (directory / name).is_file()]
    if missing:
        raise PlanError(f"the runtime's extension templates are not under {directory} (missing "
                        f"{', '.join(missing)}); set FORGE_RUNTIME_ROOT to the repository's "
                        "runtime/ folder")
    return {name: (directory / name).read_text() for name in _TEMPLATE_FILES}


_PLACEHOLDER = re.compile(r"\{\{([A-Z_]+)\}\}")


def _fill(template: str, values: Mapping[str, object]) -> str:
    """The template with each {{KEY}} replaced in one pass (a kernel source with braces stays)."""
    unfilled = set(_PLACEHOLDER.findall(template)) - set(values)
    if unfilled:
        raise PlanError(f"extension template placeholders {sorted(unfilled)} have no value")
    return _PLACEHOLDER.sub(lambda match: str(values[match.group(1)]), template)


def gencode_flags(target_arch: str) -> list[str]:
    """nvcc flags for the plan's architecture ("sm_90"): its cubin, plus PTX that newer GPUs can
    compile at load time (not for arch-specific targets such as sm_90a, which have no successor)."""
    number = target_arch.removeprefix("sm_")
    if not target_arch.startswith("sm_") or not number.rstrip("af").isdigit():
        raise PlanError(f"plan.json: target_arch {target_arch!r} is not of the form sm_XX")
    flags = [f"-gencode=arch=compute_{number},code=sm_{number}"]
    if number.isdigit():
        flags.append(f"-gencode=arch=compute_{number},code=compute_{number}")
    return flags


@dataclasses.dataclass(frozen=True)
class ExtensionSources:
    name: str  # the extension's (and its build directory's) name
    files: dict[str, str]  # file name -> text
    ops: dict[str, str]  # task digest -> op name under torch.ops.forge
    cuda_flags: list[str]


def _cpp_list(values) -> str:
    return "{" + ", ".join(str(v) for v in values) + "}"


def _layout_literal(layout: TensorLayout) -> str:
    return (f"{{{_SCALAR_TYPES[layout.dtype]}, {_cpp_list(layout.shape)}, "
            f"{_cpp_list(layout.strides)}}}")


class _Generator:
    def __init__(self, plan: Plan, layouts: Mapping[str, TensorLayout], target_arch: str):
        self.plan, self.layouts, self.target_arch = plan, layouts, target_arch
        self.templates = _templates()
        # One op per task: every instance of a task runs its one winner.
        self.steps: dict[str, list[Step]] = {}
        for step in plan.compiled_steps():
            self.steps.setdefault(step.task, []).append(step)
        for steps in self.steps.values():
            for step in steps:
                for value in step.inputs + step.outputs:
                    if value not in layouts:
                        raise PlanError(f"{step.describe()}: the graph has no spec for '{value}'")
                    if layouts[value].dtype not in _SCALAR_TYPES:
                        raise PlanError(f"{step.describe()}: '{value}' has dtype "
                                        f"{layouts[value].dtype}, which the extension lacks")

    def digest(self) -> str:
        """Everything the build depends on."""
        sha = hashlib.sha256()
        for part in (torch.__version__, str(torch.version.cuda), self.target_arch,
                     *self.templates.values()):
            sha.update(part.encode() + b"\0")
        for task, steps in sorted(self.steps.items()):
            step = steps[0]
            sha.update(repr((task, step.candidate, step.implementation, step.kernel_name,
                             step.launch, step.library_call, step.epilogue_inputs,
                             [self.layouts[v] for v in step.inputs + step.outputs])).encode())
            if step.source is not None:
                sha.update(step.source.read_bytes())
        return sha.hexdigest()

    def kernel_file(self, step: Step, symbol: str, launcher: str) -> str:
        launch = step.launch
        arguments = (1 + len(step.epilogue_inputs) if step.implementation == "library"
                     else len(step.inputs)) + len(step.outputs)
        return _fill(self.templates["kernel.cu.in"], {
            "TASK": step.task, "CANDIDATE": step.candidate,
            "SOURCE_PATH": step.source.relative_to(self.plan.directory),
            "KERNEL_NAME": step.kernel_name, "SYMBOL": symbol, "SOURCE": step.source.read_text(),
            "LAUNCHER": launcher, "ARGUMENTS": arguments,
            "DYNAMIC_SHARED_BYTES": launch.dynamic_shared_bytes,
            "GRID": ", ".join(map(str, launch.grid)), "BLOCK": ", ".join(map(str, launch.block))})

    def op_body(self, op: str, step: Step, launcher: str | None) -> str:
        inputs = [f"in{i}" for i in range(len(step.inputs))]
        outputs = [f"out{i}" for i in range(len(step.outputs))]
        parameters = ", ".join(f"const at::Tensor& {name}" for name in inputs + outputs)
        lines = [f"// {self.describe(step)}",
                 f"void {op}({parameters}) {{",
                 f'  constexpr const char* kOp = "forge::{op}";']
        for kind, names, values in (("input", inputs, step.inputs),
                                    ("output", outputs, step.outputs)):
            for i, (name, value) in enumerate(zip(names, values)):
                lines.append(f"  forge_runtime::CheckTensor({name}, "
                             f'{_layout_literal(self.layouts[value])}, kOp, "{kind} {i}");')
        lines.append(f"  const c10::cuda::CUDAGuard guard({(inputs + outputs)[0]}.device());")
        if step.implementation == "library":
            call = step.library_call
            operand = lambda m: (f"{{{m.input}, {str(m.transposed).lower()}, {m.leading_dim}, "
                                 f"{m.batch_stride}}}")
            lines.append(
                f"  const forge_runtime::LibraryGemm gemm{{{_SCALAR_TYPES[call.dtype]}, "
                f"{call.batch}, {call.m}, {call.n}, {call.k}, {operand(call.a)}, "
                f"{operand(call.b)}, forge_runtime::Epilogue::{_EPILOGUES[call.epilogue]}, "
                f"{call.bias_input}}};")
            if launcher is None:
                lines.append(f"  forge_runtime::RunLibraryGemm(gemm, {_cpp_list(inputs)}, out0, "
                             "kOp);")
            else:
                lines += [
                    "  const at::Tensor scratch = at::empty({gemm.batch * gemm.m * gemm.n}, "
                    "in0.options().dtype(gemm.dtype));",
                    f"  forge_runtime::RunLibraryGemm(gemm, {_cpp_list(inputs)}, scratch, kOp);"]
                pointers = ["scratch"] + [inputs[i] for i in step.epilogue_inputs] + outputs
        else:
            pointers = inputs + outputs
        if launcher is not None:
            lines += [f"  void* pointers[] = {_cpp_list(p + '.data_ptr()' for p in pointers)};",
                      f"  forge_runtime::CheckLaunch({launcher}(pointers, "
                      "at::cuda::getCurrentCUDAStream()), kOp);"]
        lines.append("}")
        return "\n".join(lines)

    def describe(self, step: Step) -> str:
        steps = ", ".join(str(s.index) for s in self.steps[step.task])
        if step.implementation == "kernel":
            what = f"generated kernel {step.kernel_name}"
        else:
            what = "cuBLASLt call through ATen" + (f", then kernel {step.kernel_name}"
                                                   if step.kernel_name else "")
        return f"step(s) {steps}: task {step.task}, candidate {step.candidate}: {what}"

    def generate(self) -> ExtensionSources:
        digest = self.digest()
        files, ops, declarations, bodies, schemas, implementations = {}, {}, [], [], [], []
        # Tasks go by 12 hex digits, as the bundle's directories do, or by the whole digest when
        # two share them.
        short = len({task[:12] for task in self.steps}) == len(self.steps)
        for task, steps in self.steps.items():
            step = steps[0]
            label = task[:12] if short else task
            op = f"{step.implementation}_{label}_{digest[:8]}"
            ops[task] = op
            launcher = None
            if step.kernel_name:
                launcher = f"forge_launch_{label}"
                files[f"kernel_{label}.cu"] = self.kernel_file(step, f"forge_kernel_{label}",
                                                               launcher)
                declarations.append(f'extern "C" cudaError_t {launcher}(void** pointers, '
                                    "cudaStream_t stream);")
            bodies.append(self.op_body(op, step, launcher))
            arguments = [f"Tensor in{i}" for i in range(len(step.inputs))]
            arguments += [f"Tensor(o{i}!) out{i}" for i in range(len(step.outputs))]
            schemas.append(f'  m.def("{op}({", ".join(arguments)}) -> ()");')
            implementations.append(f'  m.impl("{op}", &{op});')
        files["forge_ops.cpp"] = _fill(self.templates["ops.cpp.in"], {
            "PLAN_DIGEST": digest[:16], "JOB": self.plan.job or "-",
            "MODEL": self.plan.model or "-", "LAUNCHER_DECLARATIONS": "\n".join(declarations),
            "OPS": "\n\n".join(bodies), "SCHEMAS": "\n".join(schemas),
            "IMPLEMENTATIONS": "\n".join(implementations)})
        files["forge_runtime.h"] = self.templates["forge_runtime.h"]
        return ExtensionSources(name=f"forge_plan_{digest[:16]}", files=files, ops=ops,
                                cuda_flags=gencode_flags(self.target_arch))


def extension_sources(plan: Plan, layouts: Mapping[str, TensorLayout],
                      target_arch: str | None = None) -> ExtensionSources:
    """The extension's sources for the plan's kernel and library steps (nothing is compiled).
    `layouts` gives every value's layout by name; `target_arch` defaults to the plan's."""
    arch = target_arch or plan.target_arch
    if not arch:
        raise PlanError("plan.json names no target_arch: pass the GPU's (e.g. sm_90)")
    return _Generator(plan, layouts, arch).generate()


# Extensions loaded into this process, by name: loading a second copy of one (built under
# another root) would register its ops twice, which the dispatcher refuses.
_LOADED: dict[str, pathlib.Path] = {}


def build_extension(sources: ExtensionSources, *, build_root: str | pathlib.Path | None = None,
                    verbose: bool = False) -> pathlib.Path:
    """Compiles and loads the extension (torch.utils.cpp_extension.load): its ops are then under
    torch.ops.forge. A build of the same sources is reused, and an extension already loaded in
    this process is not loaded again. Returns the extension's directory."""
    from torch.utils import cpp_extension

    if sources.name in _LOADED:
        return _LOADED[sources.name]
    root = pathlib.Path(build_root) if build_root else cache_directory() / "extensions"
    directory = root / sources.name
    source_dir = directory / "src"
    build_dir = directory / "build"
    source_dir.mkdir(parents=True, exist_ok=True)
    build_dir.mkdir(exist_ok=True)
    paths = []
    for name, text in sources.files.items():
        path = source_dir / name
        if not path.exists() or path.read_text() != text:  # unchanged files keep their mtime
            path.write_text(text)
        if not name.endswith(".h"):
            paths.append(str(path))
    try:
        cpp_extension.load(name=sources.name, sources=paths, extra_cflags=["-O2"],
                           extra_cuda_cflags=["-O3", *sources.cuda_flags],
                           extra_include_paths=[str(source_dir)], build_directory=str(build_dir),
                           is_python_module=False, verbose=verbose,
                           # The ops use CUDA's headers even when the plan has no kernel file.
                           with_cuda=True)
    except Exception as err:  # compiler errors arrive as RuntimeError or CalledProcessError
        raise PlanError(f"building the extension {sources.name} in {build_dir} failed (rerun "
                        f"with verbose=True for the compiler's output): {err}") from err
    library = build_dir / f"{sources.name}.so"
    if library.exists() and "libstdc++.so.6" not in needed_libraries(library):
        # Its ops would throw C++ exceptions (their layout checks) that torch, with the shared
        # libstdc++, cannot catch: the process would die instead of raising.
        raise PlanError(
            f"the extension {library} does not link libstdc++ dynamically (the C++ compiler "
            f"{os.environ.get('CXX', 'c++')} linked it statically); set CXX to a compiler that "
            "links it as a shared library, e.g. CXX=/usr/bin/g++")
    _LOADED[sources.name] = directory
    return directory


def needed_libraries(path: pathlib.Path) -> list[str]:
    """The DT_NEEDED entries of a 64-bit little-endian ELF shared library."""
    data = path.read_bytes()
    if data[:4] != b"\x7fELF" or data[4] != 2 or data[5] != 1:
        return []
    section_offset, = struct.unpack_from("<Q", data, 0x28)
    entry_size, count, _ = struct.unpack_from("<HHH", data, 0x3A)
    sections = [struct.unpack_from("<IIQQQQIIQQ", data, section_offset + i * entry_size)
                for i in range(count)]
    needed = []
    for _, kind, _, _, offset, size, link, _, _, _ in sections:
        if kind != 6:  # SHT_DYNAMIC
            continue
        strings = sections[link][4]
        for at in range(offset, offset + size, 16):
            tag, value = struct.unpack_from("<qQ", data, at)
            if tag == 0:
                break
            if tag == 1:  # DT_NEEDED
                end = data.index(b"\0", strings + value)
                needed.append(data[strings + value:end].decode())
    return needed
