"""The PyTorch extension of a plan: its sources, generated from runtime/extension's templates, and
their build with torch.utils.cpp_extension (nvcc and the host compiler of this machine).

One custom operator per task that the plan runs as a generated kernel or a cuBLASLt call,
torch.ops.forge.<kind>_<task>_<digest>(inputs..., outputs...) -> (), and, when the graph is
given, one for the whole plan, torch.ops.forge.plan_<digest>(Tensor[] inputs) -> Tensor[]. The
names carry the first digits of the extension's digest, so that plans of different models sharing
a task can be loaded into one process. Builds are cached under the cache directory by that
digest: the same plan on the same torch, CUDA and architecture builds once.
"""

from __future__ import annotations

import dataclasses
import hashlib
import math
import os
import pathlib
import re
import struct
from typing import Mapping

import torch

from forge._protos import graph_pb2
from forge.runtime.executor import (VECTOR_BYTES, WARMUP_RUNS, AtenNode, PlanOp, RecordedArgument,
                                    aten_nodes, sdpa_nodes, user_inputs, user_outputs)
from forge.runtime.cudnn import CudnnBuild
from forge.runtime.plan import Plan, PlanError, Step, TensorLayout

# The templates: $FORGE_RUNTIME_ROOT/extension, else the copy an installed SDK carries
# (forge/runtime/extension), else the repository's runtime/extension (the SDK used in place).
_PACKAGED_RUNTIME_ROOT = pathlib.Path(__file__).resolve().parent
_RUNTIME_ROOT = pathlib.Path(os.environ.get("FORGE_RUNTIME_ROOT") or (
    _PACKAGED_RUNTIME_ROOT if (_PACKAGED_RUNTIME_ROOT / "extension").is_dir()
    else pathlib.Path(__file__).resolve().parents[3] / "runtime"))
_TEMPLATE_FILES = ("forge_runtime.h", "cublaslt_matmul.h", "host_launched.h", "ops.cpp.in",
                   "kernel.cu.in", "plan.cpp.in", "cudnn_conv_graph.h", "cudnn_conv_step.h",
                   "cudnn_conv_kernels.cu.in")
# Where a host-launched step's source finds the ABI header, under an include directory.
_ABI_HEADER = "compiler/codegen/host_launch_abi.h"

_SCALAR_TYPES = {
    torch.float64: "at::kDouble", torch.float32: "at::kFloat", torch.float16: "at::kHalf",
    torch.bfloat16: "at::kBFloat16", torch.float8_e4m3fn: "at::kFloat8_e4m3fn",
    torch.float8_e5m2: "at::kFloat8_e5m2", torch.int8: "at::kChar", torch.int16: "at::kShort",
    torch.int32: "at::kInt", torch.int64: "at::kLong", torch.uint8: "at::kByte",
    torch.bool: "at::kBool", torch.complex64: "at::kComplexFloat",
}
# The table of the launchers of the kernels cudnn_conv steps run around their graphs
# (cudnn_conv_step.h's RunKernels).
_CUDNN_RUN_KERNELS = "kCudnnRunKernels"
# The function of a channels-last-inside cudnn_conv op that also takes the layouts of its tensors.
_LAYOUTS_SUFFIX = "_layouts"


def _nhwc_inside(step: Step, ops: Mapping[str, str]) -> bool:
    return (step.task in ops and step.implementation == "cudnn_conv" and
            step.cudnn_conv.channels_last_inside)


def kept_channels_last(steps, ops: Mapping[str, str], outputs) -> set[str]:
    """The values the plan op keeps channels-last (NHWC) between cudnn_conv steps that run
    channels-last inside (graph_nhwc winners), instead of converting each back to NCHW after one
    step and to NHWC again in the next: a value is kept when such a step, run through its op,
    writes it as its one output, it is not an output of the graph, and every step that reads it
    is such a step reading it only as its x or a residual. Its writer then skips its conversion
    out and its readers their conversions in, whose results would be these very bytes. Every
    other reader (an ATen step, a generated kernel, an NCHW graph) sees NCHW as the graph says."""
    positions = {}  # step index -> the inputs it may take channels-last
    for step in steps:
        if _nhwc_inside(step, ops):
            call = step.cudnn_conv
            positions[step.index] = {call.x_input} | {s.input for s in call.epilogue
                                                      if s.step == "residual"}
    readers: dict[str, list[tuple[Step, int]]] = {}
    for step in steps:
        for position, name in enumerate(step.inputs):
            readers.setdefault(name, []).append((step, position))
    kept = set()
    for step in steps:
        if step.index not in positions or len(step.outputs) != 1:
            continue
        name = step.outputs[0]
        if name in outputs or not readers.get(name):
            continue
        if all(position in positions.get(reader.index, ()) for reader, position in readers[name]):
            kept.add(name)
    return kept
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
    plan_op: PlanOp | None = None  # the op that runs the whole plan (built with the graph)
    # task digest -> op of its host-launched step; torch.ops.forge.<op>_load(path) loads its object
    host_ops: dict[str, str] = dataclasses.field(default_factory=dict)
    # What building with cuDNN adds (cudnn_conv steps): include directories, linker flags.
    include_paths: tuple[str, ...] = ()
    ldflags: tuple[str, ...] = ()


def _cpp_list(values) -> str:
    return "{" + ", ".join(str(v) for v in values) + "}"


def _layout_literal(layout: TensorLayout) -> str:
    return (f"{{{_SCALAR_TYPES[layout.dtype]}, {_cpp_list(layout.shape)}, "
            f"{_cpp_list(layout.strides)}}}")


def extension_steps(plan: Plan, host_tasks, cudnn: CudnnBuild | None = None) -> list[Step]:
    """The steps the extension runs: kernel and library steps that can run as planned, the
    host-launched ones among them whose task has its object (`host_tasks`), and the cudnn_conv
    ones when cuDNN was found (`cudnn`); every other step runs as its ATen calls."""
    return [s for s in plan.compiled_steps()
            if (s.implementation != "host_launched" or s.task in host_tasks) and
            (s.implementation != "cudnn_conv" or cudnn is not None)]


class _Generator:
    def __init__(self, plan: Plan, layouts: Mapping[str, TensorLayout], target_arch: str,
                 graph=None, host_tasks=(), cudnn: CudnnBuild | None = None):
        self.plan, self.layouts, self.target_arch, self.graph = plan, layouts, target_arch, graph
        self.templates = _templates()
        self.cudnn = cudnn
        # One op per task: every instance of a task runs its one winner.
        self.steps: dict[str, list[Step]] = {}
        for step in extension_steps(plan, host_tasks, cudnn):
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
                             step.launch, step.library_call, step.library_algorithm,
                             step.epilogue_inputs, step.runtime_args, step.nvcc_flags,
                             step.compile_options, step.cudnn_conv,
                             [self.layouts[v] for v in step.inputs + step.outputs])).encode())
            if step.source is not None:
                sha.update(step.source.read_bytes())
            if step.implementation == "host_launched":
                sha.update((step.include / _ABI_HEADER).read_bytes())
            if step.implementation == "cudnn_conv":
                sha.update(repr((self.cudnn.include_paths, self.cudnn.ldflags,
                                 self.cudnn.digest)).encode())
                if step.run_kernels is not None:
                    sha.update(step.run_kernels.read_bytes())
        if self.graph is not None:  # the plan op runs every step, the graph's nodes included
            sha.update(self.graph.SerializeToString(deterministic=True))
            sha.update(repr([(s.task, s.implementation, s.nodes, s.inputs, s.outputs,
                              s.sdpa_backend) for s in self.plan.steps]).encode())
            for step in self.plan.steps:
                if step.sdpa_group is not None:
                    sha.update(step.sdpa_group.SerializeToString(deterministic=True))
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
        if step.implementation == "host_launched":
            lines += [
                "  static const std::vector<int64_t> kRuntimeArgs = "
                f"{_cpp_list(map(_cpp_int, step.runtime_args))};",
                "  forge_runtime::HostLaunchedObject::For(kOp).Launch("
                f"{{{', '.join(inputs + outputs)}}}, kRuntimeArgs, kOp);",
                "}"]
            return "\n".join(lines)
        if step.implementation == "cudnn_conv" and step.cudnn_conv.channels_last_inside:
            # The op, and the function the plan op calls where it keeps tensors channels-last
            # (kept_channels_last): which inputs arrive NHWC, whether the output stays NHWC.
            lines[1] = (f"void {op}{_LAYOUTS_SUFFIX}({parameters}, uint64_t nhwc_inputs, "
                        "bool nhwc_output) {")
            body = self.cudnn_lines(step, inputs)
            body[-1] = body[-1].replace("kOp);", "kOp, nhwc_inputs, nhwc_output);")
            return "\n".join(lines + body + [
                "}", f"void {op}({parameters}) {{",
                f"  {op}{_LAYOUTS_SUFFIX}({', '.join(inputs + outputs)}, 0, false);", "}"])
        if step.implementation == "cudnn_conv":
            return "\n".join(lines + self.cudnn_lines(step, inputs) + ["}"])
        if step.implementation == "library":
            call = step.library_call
            operand = lambda m: (f"{{{m.input}, {str(m.transposed).lower()}, {m.leading_dim}, "
                                 f"{m.batch_stride}}}")
            lines.append(
                f"  const forge_runtime::LibraryGemm gemm{{{_SCALAR_TYPES[call.dtype]}, "
                f"{call.batch}, {call.m}, {call.n}, {call.k}, {operand(call.a)}, "
                f"{operand(call.b)}, forge_runtime::Epilogue::{_EPILOGUES[call.epilogue]}, "
                f"{call.bias_input}, {call.algo}, {_cpp_string(step.library_algorithm)}, "
                f'"step(s) {self.step_indices(step)} (task {step.task[:12]})"}};')
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

    @staticmethod
    def cudnn_lines(step: Step, inputs: list[str]) -> list[str]:
        """A cudnn_conv op's body: its step, made from the call as plan.json has it (the graph is
        built at the first call on a device), and the run over the op's tensors."""
        call = step.cudnn_conv
        kernels = f"&{_CUDNN_RUN_KERNELS}" if call.runs_kernels else "nullptr"
        return [
            "  static forge_runtime::CudnnConvStep* const step = new forge_runtime::CudnnConvStep(",
            f"      {_cpp_string(call.text)},",
            f"      {kernels}, kOp);",
            f"  step->Run({_cpp_list(inputs)}, out0, kOp);"]

    def cudnn_run_kernels(self, digest: str) -> tuple[dict[str, str], list[str]]:
        """The translation unit of the kernels cudnn_conv steps launch around their graphs (the
        bundle's source of them, cudnn_conv_kernels.cu.in) and the ops' declarations of its
        launchers, when a step launches any."""
        sources = {s.run_kernels for steps in self.steps.values() for s in steps
                   if s.implementation == "cudnn_conv" and s.cudnn_conv.runs_kernels}
        if not sources:
            return {}, []
        if len(sources) > 1:
            raise PlanError(f"the plan's cudnn_conv steps name several sources of their kernels "
                            f"({', '.join(sorted(map(str, sources)))}); a bundle has one")
        source = sources.pop()
        fold, transpose = f"forge_cudnn_conv_fold_{digest[:8]}", \
            f"forge_cudnn_conv_transpose_{digest[:8]}"
        text = _fill(self.templates["cudnn_conv_kernels.cu.in"], {
            "SOURCE_PATH": source.relative_to(self.plan.directory), "SOURCE": source.read_text(),
            "FOLD": fold, "TRANSPOSE": transpose})
        declarations = [
            f'extern "C" cudaError_t {fold}(const void*, int, const void*, int, const void*, int, '
            "const void*, int, float, int, float*, cudaStream_t);",
            f'extern "C" cudaError_t {transpose}(int, const void*, void*, long long, long long, '
            "long long, cudaStream_t);",
            f"static const forge_runtime::RunKernels {_CUDNN_RUN_KERNELS}{{&{fold}, &{transpose}}};"]
        return {"cudnn_conv_kernels.cu": text}, declarations

    def step_indices(self, step: Step) -> str:
        """The plan steps that run step's task, "3, 7": they share its op."""
        return ", ".join(str(s.index) for s in self.steps[step.task])

    def describe(self, step: Step) -> str:
        if step.implementation == "kernel":
            what = f"generated kernel {step.kernel_name}"
        elif step.implementation == "host_launched":
            what = f"host-launched {step.kernel_name} (a shared object nvcc built)"
        elif step.implementation == "cudnn_conv":
            what = (f"cuDNN fused graph, heuristic {step.cudnn_conv.heuristic} engine "
                    f"{step.cudnn_conv.engine} ({step.cudnn_conv.engine_name or 'not recorded'})")
        else:
            algorithm = (f" ({step.library_algorithm})" if step.library_algorithm
                         else " (not recorded: the index alone)")
            what = (f"cuBLASLt call, heuristic algorithm {step.library_call.algo}{algorithm}"
                    + (f", then kernel {step.kernel_name}" if step.kernel_name else ""))
        return (f"step(s) {self.step_indices(step)}: task {step.task}, candidate "
                f"{step.candidate}: {what}")

    def generate(self) -> ExtensionSources:
        digest = self.digest()
        files, ops, declarations, bodies, schemas, implementations = {}, {}, [], [], [], []
        host_ops: list[str] = []
        # Tasks go by 12 hex digits, as the bundle's directories do, or by the whole digest when
        # two share them.
        short = len({task[:12] for task in self.steps}) == len(self.steps)
        for task, steps in self.steps.items():
            step = steps[0]
            label = task[:12] if short else task
            op = f"{step.implementation}_{label}_{digest[:8]}"
            ops[task] = op
            launcher = None
            if step.implementation == "host_launched":
                host_ops.append(op)
                files[_ABI_HEADER] = (step.include / _ABI_HEADER).read_text()
            elif step.kernel_name:
                launcher = f"forge_launch_{label}"
                files[f"kernel_{label}.cu"] = self.kernel_file(step, f"forge_kernel_{label}",
                                                               launcher)
                declarations.append(f'extern "C" cudaError_t {launcher}(void** pointers, '
                                    "cudaStream_t stream);")
            bodies.append(self.op_body(op, step, launcher))
            arguments = [f"Tensor in{i}" for i in range(len(step.inputs))]
            arguments += [f"Tensor(o{i}!) out{i}" for i in range(len(step.outputs))]
            schemas.append(f'  m.def("{op}({", ".join(arguments)}) -> ()");')
            if step.implementation == "host_launched":
                # Catch-all (no tensor to dispatch on): forge.runtime calls it with the object.
                schemas.append(
                    f'  m.def("{op}_load(str path) -> ()", [](std::string path) {{ '
                    f'forge_runtime::HostLaunchedObject::Load("forge::{op}", path); }});')
            implementations.append(f'  m.impl("{op}", &{op});')
        if host_ops:
            declarations.insert(0, '#include "host_launched.h"')
            files["host_launched.h"] = self.templates["host_launched.h"]
        cudnn = any(s[0].implementation == "cudnn_conv" for s in self.steps.values())
        if cudnn:  # the frontend's headers cost seconds: only in extensions that use them
            run_kernels, kernel_declarations = self.cudnn_run_kernels(digest)
            files.update(run_kernels)
            declarations += kernel_declarations
            declarations.insert(0, '#include "cudnn_conv_step.h"')
            for header in ("cudnn_conv_graph.h", "cudnn_conv_step.h"):
                files[header] = self.templates[header]
        files["forge_ops.cpp"] = _fill(self.templates["ops.cpp.in"], {
            "PLAN_DIGEST": digest[:16], "JOB": self.plan.job or "-",
            "MODEL": self.plan.model or "-", "LAUNCHER_DECLARATIONS": "\n".join(declarations),
            "OPS": "\n\n".join(bodies), "SCHEMAS": "\n".join(schemas),
            "IMPLEMENTATIONS": "\n".join(implementations)})
        plan_op = None
        if self.graph is not None:
            plan_source = _PlanOpGenerator(self.plan, self.graph, self.layouts, ops)
            if plan_source.inputs and plan_source.outputs:  # an op without tensors can't dispatch
                plan_op = PlanOp(f"plan_{digest[:16]}", tuple(plan_source.inputs))
                # In the ops' translation unit: the steps call the ops' functions directly.
                files["forge_ops.cpp"] += "\n" + plan_source.generate(
                    self.templates["plan.cpp.in"], plan_op.name)
        for header in ("forge_runtime.h", "cublaslt_matmul.h"):
            files[header] = self.templates[header]
        return ExtensionSources(name=f"forge_plan_{digest[:16]}", files=files, ops=ops,
                                cuda_flags=gencode_flags(self.target_arch), plan_op=plan_op,
                                host_ops={task: op for task, op in ops.items() if op in host_ops},
                                include_paths=self.cudnn.include_paths if cudnn else (),
                                ldflags=self.cudnn.ldflags if cudnn else ())


class _PlanOpGenerator:
    """The plan op's source (plan.cpp.in): the plan's steps in order over a table of values, each
    kernel or library step calling its task's op function, each ATen step its nodes' operators,
    with the arguments that executor.RecordedArgument describes for the Python executor too. An
    sdpa step calls its group's nodes, the attention call with only its backend enabled, and its
    task's nodes once that backend has refused (executor.PlanModule._compile_sdpa)."""

    def __init__(self, plan: Plan, graph, layouts: Mapping[str, TensorLayout],
                 ops: Mapping[str, str]):
        self.layouts, self.ops = layouts, ops
        nodes = {node.name: node for node in graph.nodes}
        # Each step with the nodes it calls as ATen operators (None for a step that calls its
        # task's op) and, for an sdpa step, the nodes of its attention call with their backends.
        self.steps: list[tuple[Step, list[AtenNode] | None,
                               list[tuple[AtenNode, str]] | None]] = [
            (step, None if step.task in ops else aten_nodes(step, nodes),
             sdpa_nodes(step) if step.implementation == "sdpa" else None)
            for step in plan.steps]
        reads = {name for step, calls, sdpa in self.steps
                 for name in self.reads(step, calls) + self.reads(step, self.sdpa_calls(sdpa))}
        self.outputs = user_outputs(graph)
        # Values kept channels-last between the steps that write and read them.
        self.channels_last = kept_channels_last(plan.steps, ops, set(self.outputs))
        weights = [i.value_name for i in graph.inputs
                   if i.kind != graph_pb2.INPUT_KIND_USER_INPUT and i.value_name in
                   reads | set(self.outputs)]
        self.user_input_count = len(user_inputs(graph))
        self.inputs = user_inputs(graph) + weights
        # Places in the table: the inputs, then the values in the order steps write them.
        self.places = {name: place for place, name in enumerate(self.inputs)}
        for step, calls, sdpa in self.steps:
            # An ATen step's nodes run one after another: each reads what the ones before wrote.
            units = [None] if calls is None else [[call] for call in calls]
            for unit in [[call] for call in self.sdpa_calls(sdpa) or ()] + units:
                missing = [name for name in self.reads(step, unit) if name not in self.places]
                if missing:
                    raise PlanError(f"{step.describe()} reads '{missing[0]}', which neither the "
                                    "graph's inputs nor an earlier step or node give")
                for name in self.writes(step, unit):
                    self.places.setdefault(name, len(self.places))
        for name in self.outputs:
            if name not in self.places:
                raise PlanError(f"the graph's output '{name}' is written by no step of the plan")
        for name in self.places:
            if name not in layouts or layouts[name].dtype not in _SCALAR_TYPES:
                raise PlanError(f"value '{name}' has no layout the plan op can hold")

    @staticmethod
    def sdpa_calls(sdpa: list[tuple[AtenNode, str]] | None) -> list[AtenNode] | None:
        return None if sdpa is None else [call for call, _ in sdpa]

    @staticmethod
    def reads(step: Step, calls: list[AtenNode] | None) -> list[str]:
        if calls is None:
            return list(step.inputs)
        names = []
        for call in calls:
            for argument in call.arguments:
                if argument.kind == "tensor":
                    names.append(argument.value)
                elif argument.kind in ("tensors", "optional_tensors"):
                    names += [name for name in argument.value if name is not None]
        return names

    @staticmethod
    def writes(step: Step, calls: list[AtenNode] | None) -> list[str]:
        return list(step.outputs) if calls is None else [o for call in calls for o in call.outputs]

    def place(self, name: str | None) -> str:
        return "-1" if name is None else f"{self.places[name]} /* {_cpp_comment(name)} */"

    def argument(self, argument: RecordedArgument) -> str:
        head = (f"{_cpp_string(argument.name)}, "
                f"Pass::{'kKeyword' if argument.keyword else 'kPositional'}")
        if argument.kind == "tensor":
            return f"Value({head}, {self.place(argument.value)})"
        if argument.kind in ("tensors", "optional_tensors"):
            function = "Values" if argument.kind == "tensors" else "OptionalValues"
            return f"{function}({head}, {_cpp_list(self.place(n) for n in argument.value)})"
        if argument.kind == "device":
            return f"PlanDevice({head})"
        return f"Constant({head}, {_ivalue(argument)})"

    def node(self, call: AtenNode) -> str:
        overload = "" if call.overload == "default" else call.overload
        arguments = ",\n      ".join(self.argument(a) for a in call.arguments)
        return (f"    {{{_cpp_string(call.name)}, {_cpp_string(call.op)}, "
                f"{_cpp_string(overload)},\n"
                f"     {{{arguments}}},\n"
                f"     {_cpp_list(self.place(o) for o in call.outputs)}}}")

    @staticmethod
    def aten_lines(calls: list[AtenNode], first_call: int, indent: str) -> list[str]:
        return [f"{indent}state.Aten({first_call + i}).Run(values);  // {call.op}.{call.overload}"
                for i, call in enumerate(calls)]

    def sdpa_step(self, step: Step, sdpa: list[tuple[AtenNode, str]], calls: list[AtenNode],
                  first_call: int, index: int) -> list[str]:
        """An sdpa step: its attention call (the sdpa nodes at first_call), or from the first
        refusal on its task's nodes (after them); then its outputs in the graph's strides."""
        lines = [f"  if (!state.SdpaRefused({index})) {{", "    try {"]
        for i, (call, backend) in enumerate(sdpa):
            run = f"state.Aten({first_call + i}).Run(values);"
            if backend:
                run = (f"{{ const OnlySdpaBackend only(OnlySdpaBackend::{_SDPA_BACKENDS[backend]}"
                       f"); {run} }}")
            lines.append(f"      {run}  // {call.op}.{call.overload}")
        lines += ["    } catch (const c10::Error& error) {",
                  f"      state.RefuseSdpa({index}, {_cpp_string(step.describe())}, "
                  f"{_cpp_string(step.sdpa_backend)}, error);",
                  "    }", "  }", f"  if (state.SdpaRefused({index})) {{"]
        lines += self.aten_lines(calls, first_call + len(sdpa), "    ")
        return lines + ["  }"] + [f"  state.Relayout(values, {self.place(name)});"
                                   for name in step.outputs]

    def step(self, step: Step, calls: list[AtenNode] | None,
             sdpa: list[tuple[AtenNode, str]] | None, first_call: int, sdpa_index: int) -> str:
        header = f"  // {_cpp_comment(step.describe())}: {_cpp_comment(', '.join(step.nodes))}"
        if sdpa is not None:
            return "\n".join([header] + self.sdpa_step(step, sdpa, calls, first_call,
                                                        sdpa_index))
        if calls is not None:
            return "\n".join([header] + self.aten_lines(calls, first_call, "  "))
        inputs = [f"in{i}" for i in range(len(step.inputs))]
        outputs = [f"out{i}" for i in range(len(step.outputs))]
        lines = [header, "  {"]
        lines += [f"    const at::Tensor {variable} = state.Conform(values, {self.place(name)});"
                  for variable, name in zip(inputs, step.inputs)]
        lines += [f"    const at::Tensor {variable} = state.Produce(values, {self.place(name)});"
                  for variable, name in zip(outputs, step.outputs)]
        nhwc_inputs = sum(1 << i for i, name in enumerate(step.inputs)
                          if name in self.channels_last)
        nhwc_output = any(name in self.channels_last for name in step.outputs)
        if nhwc_inputs or nhwc_output:  # kept_channels_last: a cudnn_conv step's op
            lines += [f"    {self.ops[step.task]}{_LAYOUTS_SUFFIX}({', '.join(inputs + outputs)}, "
                      f"{nhwc_inputs:#x}ULL, {str(nhwc_output).lower()});  // channels-last: "
                      + _cpp_comment(", ".join(n for n in step.inputs + step.outputs
                                               if n in self.channels_last)), "  }"]
        else:
            lines += [f"    {self.ops[step.task]}({', '.join(inputs + outputs)});", "  }"]
        return "\n".join(lines)

    def generate(self, template: str, name: str) -> str:
        steps, nodes, sdpa_steps = [], [], 0
        for step, calls, sdpa in self.steps:
            steps.append(self.step(step, calls, sdpa, len(nodes), sdpa_steps))
            nodes += [self.node(call) for call in (self.sdpa_calls(sdpa) or []) + (calls or [])]
            sdpa_steps += sdpa is not None
        outputs = set(self.outputs)
        arena = [name for step, calls, _ in self.steps if calls is None for name in step.outputs
                 if name not in outputs]
        return _fill(template, {
            "PLAN_OP": name, "VECTOR_BYTES": VECTOR_BYTES, "WARMUP_RUNS": WARMUP_RUNS,
            "USER_INPUT_COUNT": self.user_input_count, "VALUE_COUNT": len(self.places),
            "VALUE_NAMES": _cpp_list(_cpp_string(n) for n in self.places),
            "INPUTS": _cpp_list(self.place(n) for n in self.inputs),
            "OUTPUTS": _cpp_list(self.place(n) for n in self.outputs),
            "ARENA_VALUES": _cpp_list(self.place(n) for n in arena),
            "SDPA_STEP_COUNT": sdpa_steps,
            "LAYOUTS": ",\n".join(f"    {_layout_literal(self.layouts[n])}" for n in self.places),
            "ATEN_NODES": ",\n".join(nodes), "STEPS": "\n".join(steps)})


# The plan op's names of the SDPA backends (plan.cpp.in's OnlySdpaBackend).
_SDPA_BACKENDS = {"flash": "kFlash", "efficient": "kEfficient", "cudnn": "kCudnn",
                  "math": "kMath"}


_CPP_LAYOUTS = {torch.strided: "at::kStrided", torch.sparse_coo: "at::kSparse",
                torch.sparse_csr: "at::kSparseCsr", torch.sparse_csc: "at::kSparseCsc",
                torch.sparse_bsr: "at::kSparseBsr", torch.sparse_bsc: "at::kSparseBsc"}
_CPP_MEMORY_FORMATS = {
    torch.contiguous_format: "at::MemoryFormat::Contiguous",
    torch.channels_last: "at::MemoryFormat::ChannelsLast",
    torch.channels_last_3d: "at::MemoryFormat::ChannelsLast3d",
    torch.preserve_format: "at::MemoryFormat::Preserve"}


def _cpp_comment(text: str) -> str:
    return text.replace("*/", "* /").replace("\n", " ")


def _cpp_string(text: str) -> str:
    """A C++ string literal of the text's UTF-8 bytes."""
    return '"' + "".join(chr(b) if 0x20 <= b < 0x7F and chr(b) not in '"\\?' else f"\\{b:03o}"
                         for b in text.encode()) + '"'


def _cpp_int(value: int) -> str:
    # -2^63 has no literal: 9223372036854775808 does not fit before the minus applies.
    return "std::numeric_limits<int64_t>::min()" if value == -2**63 else str(value)


def _cpp_double(value: float) -> str:
    if math.isnan(value):
        return "std::numeric_limits<double>::quiet_NaN()"
    if math.isinf(value):
        return ("-" if value < 0 else "") + "std::numeric_limits<double>::infinity()"
    return value.hex()  # exact: a hexadecimal floating literal


def _ivalue(argument: RecordedArgument) -> str:
    """The C++ IValue of a constant argument, as the Python executor passes it to torch.ops."""
    kind, value = argument.kind, argument.value
    if kind == "none":
        return "c10::IValue()"
    if kind == "int":
        return f"c10::IValue(int64_t{{{_cpp_int(value)}}})"
    if kind == "float":
        return f"c10::IValue({_cpp_double(value)})"
    if kind == "bool":
        return f"c10::IValue({str(value).lower()})"
    if kind == "string":
        return f"c10::IValue(std::string({_cpp_string(value)}, {len(value.encode())}))"
    if kind == "ints":
        return f"c10::IValue(std::vector<int64_t>{_cpp_list(map(_cpp_int, value))})"
    if kind == "floats":
        return f"c10::IValue(std::vector<double>{_cpp_list(map(_cpp_double, value))})"
    if kind == "bools":
        items = _cpp_list(str(v).lower() for v in value) if value else ""
        return f"c10::IValue(c10::List<bool>({items}))"
    names = {"dtype": _SCALAR_TYPES, "layout": _CPP_LAYOUTS,
             "memory_format": _CPP_MEMORY_FORMATS}.get(kind, {})
    if value not in names:
        raise PlanError(f"argument '{argument.name}': the plan op cannot pass {kind} {value}")
    return f"c10::IValue({names[value]})"


def extension_sources(plan: Plan, layouts: Mapping[str, TensorLayout],
                      target_arch: str | None = None, *, graph=None,
                      host_tasks=(), cudnn: CudnnBuild | None = None) -> ExtensionSources:
    """The extension's sources for the plan's kernel and library steps (nothing is compiled).
    `layouts` gives every value's layout by name; `target_arch` defaults to the plan's. With
    `graph` (the job's forge.v1.Graph), the extension also registers the whole plan as one op.
    Host-launched steps get an op when their task is in `host_tasks` (their objects were built:
    forge.runtime.host_launched); the others run as their ATen calls. cudnn_conv steps get an op
    when `cudnn` (forge.runtime.cudnn.cudnn_build) says how to build with cuDNN."""
    arch = target_arch or plan.target_arch
    if not arch:
        raise PlanError("plan.json names no target_arch: pass the GPU's (e.g. sm_90)")
    return _Generator(plan, layouts, arch, graph, host_tasks, cudnn).generate()


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
        path.parent.mkdir(parents=True, exist_ok=True)
        if not path.exists() or path.read_text() != text:  # unchanged files keep their mtime
            path.write_text(text)
        if not name.endswith(".h"):
            paths.append(str(path))
    try:
        cpp_extension.load(name=sources.name, sources=paths, extra_cflags=["-O2"],
                           extra_cuda_cflags=["-O3", *sources.cuda_flags],
                           # cpp_extension puts $CUDA_HOME/lib64 on the link path; libcublasLt
                           # is linked even without library steps, as torch loads it anyway.
                           extra_ldflags=["-lcublasLt", *sources.ldflags],
                           extra_include_paths=[str(source_dir), *sources.include_paths],
                           build_directory=str(build_dir),
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
