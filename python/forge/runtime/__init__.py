"""forge.runtime: runs a result bundle's plan in PyTorch (runtime/README.md).

    optimized = forge.runtime.load_plan("bundle/", module)   # bundle/ from `forge results -o`
    y = optimized(x)

load_plan builds the bundle's PyTorch extension on this machine (nvcc, torch.utils.cpp_extension;
cached by the bundle's digest), which registers one custom operator per task that runs a
generated kernel or a cuBLASLt call and one that runs the whole plan (torch.ops.forge.*), and
returns a PlanModule that calls the plan's op (or, with plan_op=False, sequences the steps from
Python), under a CUDA graph when it pays. With aten_only (which also runs on the CPU) every step
runs as its ATen calls.
"""

from __future__ import annotations

import hashlib
import pathlib
from typing import Mapping

import torch
from torch.utils import _pytree as pytree

from forge._protos import graph_pb2
from forge.runtime.executor import PlanModule, log
from forge.runtime.extension import build_extension, cache_directory, extension_sources
from forge.runtime.cudnn import cudnn_build
from forge.runtime.host_launched import build_host_objects
from forge.runtime.plan import Plan, PlanError, TensorLayout, read_plan

_MUTATIONS = (graph_pb2.OUTPUT_KIND_BUFFER_MUTATION, graph_pb2.OUTPUT_KIND_USER_INPUT_MUTATION)


def model_digest(graph) -> str:
    """The coordinator's digest of a graph (graph::ModelDigest): SHA-256 of its deterministic
    serialization."""
    return hashlib.sha256(graph.SerializeToString(deterministic=True)).hexdigest()


def _read_graph(graph, bundle: pathlib.Path):
    if graph is None:
        graph = bundle / "graph.pb"
        if not graph.is_file():
            raise PlanError(f"{graph} does not exist: the runtime needs the job's model graph for "
                            "its ATen calls and weight names; pass graph= (the Graph that "
                            "forge.export returned, or the path of the export's graph.pb)")
    if isinstance(graph, (str, pathlib.Path)):
        return graph_pb2.Graph.FromString(pathlib.Path(graph).read_bytes())
    return graph


def _module_tensors(module: torch.nn.Module) -> dict[str, torch.Tensor]:
    tensors = dict(module.named_parameters(remove_duplicate=False))
    tensors.update(module.named_buffers(remove_duplicate=False))
    return tensors


def _attribute(module: torch.nn.Module, target: str):
    owner = module
    for part in target.split("."):
        owner = getattr(owner, part, None)
        if owner is None:
            return None
    return owner if isinstance(owner, torch.Tensor) else None


def _blob(blobs, digest: str) -> bytes | None:
    if blobs is None or not digest:
        return None
    if isinstance(blobs, Mapping):
        return blobs.get(digest)
    path = pathlib.Path(blobs) / digest
    return path.read_bytes() if path.is_file() else None


def bind_weights(graph, module: torch.nn.Module, device: torch.device,
                 blobs=None) -> dict[str, torch.Tensor]:
    """Every non-user input of the graph, by value name: the module's parameter, buffer or tensor
    attribute named by the input's target (shared, not copied), else the bytes the graph inlines
    or `blobs` (a mapping or a directory of blobs by digest) hold, on `device`."""
    layouts = {v.name: TensorLayout.of_value(v) for v in graph.values}
    tensors = _module_tensors(module)
    weights = {}
    for graph_input in graph.inputs:
        if graph_input.kind == graph_pb2.INPUT_KIND_USER_INPUT:
            continue
        name, target = graph_input.value_name, graph_input.target
        layout = layouts[name]
        tensor = tensors.get(target)
        if tensor is None:
            tensor = _attribute(module, target)
        if tensor is None:
            data = graph_input.data.inline_bytes or _blob(blobs, graph_input.data.sha256)
            if data is None:
                raise PlanError(f"weight '{target}' (value '{name}') is neither in the module nor "
                                "among the blobs given")
            tensor = torch.frombuffer(bytearray(data), dtype=torch.uint8).view(layout.dtype)
            tensor = tensor.reshape(layout.shape).to(device)
        if tensor.dtype != layout.dtype or tuple(tensor.shape) != layout.shape:
            raise PlanError(f"weight '{target}': the plan was made for {layout.describe()}, the "
                            f"module has {str(tensor.dtype).removeprefix('torch.')}"
                            f"{list(tensor.shape)}")
        if tensor.device != device:
            raise PlanError(f"weight '{target}' is on {tensor.device}, the plan runs on {device}: "
                            "move the module first")
        weights[name] = tensor.detach()
    return weights


def _default_device(module: torch.nn.Module) -> torch.device:
    """The module's device; for a module without tensors (a softmax), the current CUDA device
    when there is one."""
    for tensor in _module_tensors(module).values():
        return tensor.device
    if torch.cuda.is_available():
        return torch.device("cuda", torch.cuda.current_device())
    return torch.device("cpu")


def _target_arch(plan: Plan, device: torch.device) -> str:
    """The plan's architecture (the device's when the plan names none); PlanError when the
    device is older than it."""
    major, minor = torch.cuda.get_device_capability(device)
    if not plan.target_arch:
        return f"sm_{major}{minor}"
    number = plan.target_arch.removeprefix("sm_").rstrip("af")
    if number.isdigit() and (major, minor) < (int(number) // 10, int(number) % 10):
        raise PlanError(f"the plan's kernels were made for {plan.target_arch}; {device} is "
                        f"sm_{major}{minor}")
    return plan.target_arch


def _plan_and_graph(bundle_dir, graph):
    plan = read_plan(bundle_dir)
    graph = _read_graph(graph, plan.directory)
    if plan.model_digest and model_digest(graph) != plan.model_digest:
        raise PlanError(f"the graph given (digest {model_digest(graph)}) is not the one job "
                        f"{plan.job} optimized ({plan.model_digest})")
    return plan, graph


def _sources(plan: Plan, graph, target_arch: str, host_tasks=(), cudnn=None):
    return extension_sources(plan, plan.layouts(graph), target_arch, graph=graph,
                             host_tasks=host_tasks, cudnn=cudnn)


def _build(plan: Plan, graph, target_arch: str, build_root, verbose: bool):
    """Builds the host-launched steps' objects, then the extension, and loads the objects into
    its ops. Returns the sources, the extension's directory and why each host-launched task that
    has no object, and each cudnn_conv task when cuDNN is not found, runs through ATen (logged
    here, once)."""
    root = pathlib.Path(build_root) if build_root else cache_directory() / "extensions"
    objects, fallbacks = build_host_objects(plan, root)
    cudnn = None
    cudnn_steps = [s for s in plan.compiled_steps() if s.implementation == "cudnn_conv"]
    if cudnn_steps:
        cudnn, why = cudnn_build()
        if cudnn is None:
            fallbacks.update((step.task, why) for step in cudnn_steps)
    for task, reason in fallbacks.items():
        log.warning("forge: task %s runs as ATen calls: %s", task[:12], reason)
    sources = _sources(plan, graph, target_arch, host_tasks=objects, cudnn=cudnn)
    directory = build_extension(sources, build_root=build_root, verbose=verbose)
    for task, op in sources.host_ops.items():
        getattr(torch.ops.forge, f"{op}_load")(str(objects[task]))
    return sources, directory, fallbacks


def build_bundle(bundle_dir: str | pathlib.Path, *, graph=None, target_arch: str | None = None,
                 build_root=None, verbose: bool = False) -> pathlib.Path | None:
    """Builds the bundle's extension into the build cache (and loads it into this process)
    without a module or a GPU, so that a later load_plan of the same bundle on this machine finds
    it built: deployment images, or many bundles built side by side. target_arch defaults to the
    plan's; host-launched steps' objects are built too (one that cannot be is logged, and its step
    runs through ATen). Returns the extension's directory, or None for a plan without steps."""
    plan, graph = _plan_and_graph(bundle_dir, graph)
    if not plan.steps:
        return None
    return _build(plan, graph, target_arch or plan.target_arch, build_root, verbose)[1]


def load_plan(bundle_dir: str | pathlib.Path, module: torch.nn.Module, *, graph=None, blobs=None,
              output_structure: pytree.TreeSpec | None = None, device=None,
              cuda_graphs: bool = True, aten_only: bool = False, plan_op: bool = True,
              build_root=None, verbose: bool = False) -> PlanModule:
    """A module that runs the bundle's plan with `module`'s weights.

    bundle_dir: a result bundle (`forge results JOB -o DIR`, or what forge.optimize fetched).
    graph: the job's model (a forge.v1.Graph or the path of a graph.pb); default DIR/graph.pb.
      It must be the graph the job was submitted with (its digest is checked).
    blobs: weights the module does not hold (lifted constants): a mapping or a directory.
    output_structure: how to nest the outputs (a pytree spec of the original's result); default
      one tensor, or a tuple when the graph has several outputs.
    device: where the plan runs; default the module's device.
    cuda_graphs: capture the plan in a CUDA graph at the first call (eager if capture fails).
    aten_only: run every step as its nodes' ATen calls, without the extension: the reference
      path, which also runs on the CPU.
    plan_op: call the extension's one operator for the whole plan (the default; on a GPU it is
      built for a plan of ATen steps alone too, whose host work it cuts to one call); False
      sequences the steps from Python, with the same kernels and results (the GPU tests check
      the two agree bit for bit).
    build_root: where extensions are built; default $FORGE_CACHE_DIR/extensions.
    """
    plan, graph = _plan_and_graph(bundle_dir, graph)
    mutated = [o.target or o.value_name for o in graph.outputs if o.kind in _MUTATIONS]
    if mutated:
        raise PlanError(f"the model writes to {', '.join(mutated)} when it runs (e.g. BatchNorm "
                        "in training mode); the runtime runs inference graphs only: call "
                        "module.eval() before exporting")
    device = torch.device(device) if device is not None else _default_device(module)
    if device.type == "cuda" and device.index is None:  # "cuda": the current device, as torch
        device = torch.device("cuda", torch.cuda.current_device())
    weights = bind_weights(graph, module, device, blobs)
    compiled = [] if aten_only else plan.compiled_steps()
    for step in plan.steps:
        if not aten_only and not step.runnable_as_planned:
            reason = step.source_error or "its kernel source is missing"
            log.warning("forge: %s runs as ATen calls: %s", step.describe(), reason)
    ops: dict[str, str] = {}
    fallbacks: dict[str, str] = {}
    use_plan_op, plan_op = plan_op, None
    if compiled and device.type != "cuda":
        raise PlanError(f"{compiled[0].describe()} runs on a CUDA GPU; the plan was asked to "
                        f"run on {device} (pass aten_only=True to run every step through ATen)")
    if compiled or (use_plan_op and not aten_only and device.type == "cuda"):
        sources, _, fallbacks = _build(plan, graph, _target_arch(plan, device), build_root,
                                       verbose)
        ops = sources.ops
        plan_op = sources.plan_op if use_plan_op else None
    return PlanModule(plan, graph, weights, ops, device, cuda_graphs=cuda_graphs,
                      output_structure=output_structure, plan_op=plan_op,
                      aten_fallbacks=fallbacks, sdpa_backends=not aten_only)


__all__ = ["Plan", "PlanError", "PlanModule", "TensorLayout", "bind_weights", "build_bundle",
           "build_extension", "extension_sources", "load_plan", "model_digest", "read_plan"]
