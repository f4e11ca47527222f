"""Result bundles written without the service: plan.json and graph.pb for an exported graph and
steps chosen by the caller, in the layout `forge results` writes (client/forge/results.h), so that
tests and benchmarks (benchmarks/gpu/plan_overhead.py) can run plans of their own through
load_plan. Kernel steps carry their kernel's source (the generated-kernel ABI:
compiler/codegen/generated_kernel.h); nothing here checks that a step computes what its nodes do.
"""

from __future__ import annotations

import json
import pathlib

from google.protobuf import json_format

from forge._protos import graph_pb2
from forge.runtime.plan import SDPA_BACKEND_ATTRIBUTE

_ROLES = {graph_pb2.INPUT_KIND_USER_INPUT: "input", graph_pb2.INPUT_KIND_PARAMETER: "parameter",
          graph_pb2.INPUT_KIND_BUFFER: "buffer"}


def node_named(graph, op: str):
    """The graph's first node of operator `op` ("aten::mul")."""
    return next(node for node in graph.nodes if node.op == op)


def tensor_arguments(node) -> list[str]:
    """The values a node reads, in argument order."""
    names = []
    for argument in node.arguments:
        kind = argument.WhichOneof("value")
        if kind == "tensor":
            names.append(argument.tensor)
        elif kind == "optional_tensor" and argument.optional_tensor.HasField("value_name"):
            names.append(argument.optional_tensor.value_name)
        elif kind == "tensors":
            names += argument.tensors.value_names
    return names


def aten_step(task: str, *nodes) -> dict:
    """A step that runs `nodes` (in order) as their ATen calls: it reads what they read and no
    earlier node of it writes, and writes what they write."""
    inputs, outputs = [], []
    for node in nodes:
        inputs += [name for name in tensor_arguments(node)
                   if name not in outputs and name not in inputs]
        outputs += list(node.outputs)
    return {"task": task, "implementation": "aten", "nodes": [node.name for node in nodes],
            "inputs": inputs, "outputs": outputs}


def sdpa_step(task: str, graph, backend: str, *nodes) -> dict:
    """A step that runs `nodes` (among them one aten::scaled_dot_product_attention) as if ATen's
    `backend` had won their task: its group is the nodes themselves with the attention call
    marked, as codegen::SdpaLibraryTask marks an SDPA node (an explicit attention's rewrite is
    the client's, client/forge/results.cc); its nodes are the fallback. The step's outputs are the
    last node's: what the group computes before it stays inside the step."""
    step = {**aten_step(task, *nodes), "outputs": list(nodes[-1].outputs)}
    group = graph_pb2.Graph()
    values = {v.name: v for v in graph.values}
    written = [o for node in nodes for o in node.outputs]
    for name in dict.fromkeys(step["inputs"] + written):
        group.values.add().CopyFrom(values[name])
    for node in nodes:
        copy = group.nodes.add()
        copy.CopyFrom(node)
        if node.op == "aten::scaled_dot_product_attention":
            copy.attributes[SDPA_BACKEND_ATTRIBUTE] = backend
    for name in step["inputs"]:
        group.inputs.add(value_name=name, kind=graph_pb2.INPUT_KIND_USER_INPUT)
    for name in step["outputs"]:
        group.outputs.add(value_name=name, kind=graph_pb2.OUTPUT_KIND_USER_OUTPUT)
    return {**step, "implementation": "sdpa", "sdpa_backend": backend,
            "sdpa_group": json_format.MessageToDict(group, preserving_proto_field_name=True)}


def pointwise_kernel(expression: str, inputs: int, count: int) -> str:
    """A float32 pointwise kernel in the generated-kernel ABI over `count` elements:
    out0[i] = expression, over in0[i], in1[i], ..."""
    parameters = "".join(f"const float* __restrict__ in{i}, " for i in range(inputs))
    return (f'extern "C" __global__ void forge_pointwise({parameters}float* __restrict__ out0) {{\n'
            "  const int i = blockIdx.x * blockDim.x + threadIdx.x;\n"
            f"  if (i < {count}) out0[i] = {expression};\n}}\n")


def kernel_step(task: str, node, expression: str, count: int) -> dict:
    """A step that runs `node` as pointwise_kernel(expression) over its `count` float32 elements
    (a multiple of 128)."""
    return {**aten_step(task, node), "implementation": "kernel", "kernel_name": "forge_pointwise",
            "launch": {"grid": [count // 128, 1, 1], "block": [128, 1, 1]},
            "kernel": pointwise_kernel(expression, len(tensor_arguments(node)), count)}


# Where `forge results` writes the source of the kernels cudnn_conv steps run around their graphs
# (client/forge/results.cc kCudnnRunKernelsFile), and the repository's files it is made of
# (codegen::RunKernelsSource), each from the line after its marker (forge_embed_cuda).
CUDNN_RUN_KERNELS_FILE = "cudnn_conv_kernels.cuh"
_RUN_KERNEL_FILES = ("compiler/codegen/kernel_prelude.cuh",
                     "compiler/codegen/cudnn_conv/batch_norm_fold.cuh",
                     "compiler/codegen/cudnn_conv/transpose.cuh")
_EMBED_MARKER = "// FORGE_EMBED_BEGIN\n"


def cudnn_run_kernels_source() -> str:
    """codegen::RunKernelsSource, from the repository this module sits in."""
    root = pathlib.Path(__file__).resolve().parents[3]
    return "".join((root / name).read_text().split(_EMBED_MARKER, 1)[1]
                   for name in _RUN_KERNEL_FILES)


def write_bundle(directory: pathlib.Path, graph, steps: list[dict],
                 target_arch: str = "sm_90") -> pathlib.Path:
    """A result bundle for `graph`: plan.json with `steps` (dicts in plan.json's form; "kernel"
    holds a kernel's source, written to tasks/<task>/kernel.cu) and graph.pb. A cudnn_conv step
    whose call folds a batch norm or runs channels-last inside names the source of the kernels
    that do it, which the bundle then holds, as `forge results` writes them."""
    from forge.runtime import model_digest

    directory = pathlib.Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    outputs = [o.value_name for o in graph.outputs]
    buffers, listed = [], set()
    specs = {v.name: v.tensor for v in graph.values}

    def add(name, role, sha256=""):
        if name in listed:
            return
        listed.add(name)
        spec = specs[name]
        dtype = graph_pb2.DType.Name(spec.dtype).removeprefix("DTYPE_").lower()
        buffers.append({"name": name, "dtype": dtype, "shape": list(spec.shape), "role": role,
                        "sha256": sha256, "output": name in outputs})
    for graph_input in graph.inputs:
        add(graph_input.value_name, _ROLES.get(graph_input.kind, "constant"),
            graph_input.data.sha256)
    written = []
    for index, step in enumerate(steps):
        step = {"step": index, "candidate": f"candidate-{index}", **step}
        for name in step["inputs"] + step["outputs"]:
            add(name, "intermediate")
        if "kernel" in step:
            source = directory / "tasks" / step["task"][:12] / "kernel.cu"
            source.parent.mkdir(parents=True, exist_ok=True)
            source.write_text(step.pop("kernel"))
            step["source"] = str(source.relative_to(directory))
        call = step.get("cudnn_conv") or {}
        if call.get("batch_norms") or call.get("channels_last_inside"):
            (directory / CUDNN_RUN_KERNELS_FILE).write_text(cudnn_run_kernels_source())
            step.setdefault("run_kernels", CUDNN_RUN_KERNELS_FILE)
        written.append(step)
    plan = {"format": "forge.plan.v1", "job": "job-local", "model": graph.metadata.name,
            "model_digest": model_digest(graph), "target_arch": target_arch, "outputs": outputs,
            "buffers": buffers, "steps": written}
    (directory / "plan.json").write_text(json.dumps(plan, indent=1))
    (directory / "graph.pb").write_bytes(graph.SerializeToString(deterministic=True))
    return directory
