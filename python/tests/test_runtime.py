"""forge.runtime: plan.json parsing, the executor (ATen steps on the CPU; kernel and library steps
on a GPU), and the extension's sources and build.

The bundles here are written by the tests for exported models, in the layout `forge results`
writes (client/forge/results.h), with hand-written kernels in the generated-kernel ABI; the
bundles the real service produces are exercised by test_optimize.py.
"""

import json
import pathlib
import re
import shutil

import pytest
import torch
import torch.nn as nn

import forge
from forge._protos import graph_pb2
from forge.runtime import PlanError, TensorLayout, extension_sources, load_plan, model_digest
from forge.runtime.extension import build_extension, gencode_flags, needed_libraries
from forge.runtime.plan import LibraryCall, read_plan
from llama_block import LlamaBlock

ROLES = {graph_pb2.INPUT_KIND_USER_INPUT: "input", graph_pb2.INPUT_KIND_PARAMETER: "parameter",
         graph_pb2.INPUT_KIND_BUFFER: "buffer"}
needs_cuda = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")


class SmallHead(nn.Module):
    """linear -> relu -> * 2, then + 1 and a row sum: a library step with an epilogue kernel, a
    kernel step and an ATen step, and a dict of outputs."""

    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(16, 32)

    def forward(self, x):
        h = torch.relu(self.fc(x)) * 2.0
        return {"shifted": h + 1.0, "total": h.sum(-1)}


# relu(scratch) * 2 over the 8 x 32 product, and + 1: kernels in the generated-kernel ABI (one
# pointer per input, then per output; sizes are constants), both named as generators name them.
EPILOGUE_KERNEL = """// forge library call: {call}
// epilogue kernel reads scratch, then task inputs {{}}
extern "C" __global__ void forge_pointwise(const float* __restrict__ in0,
                                           float* __restrict__ out0) {{
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < 256) out0[i] = fmaxf(in0[i], 0.0f) * 2.0f;
}}
"""
ADD_ONE_KERNEL = """extern "C" __global__ void forge_pointwise(const float* __restrict__ in0,
                                           float* __restrict__ out0) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < 256) out0[i] = in0[i] + 1.0f;
}
"""
LIBRARY_CALL = ("cublaslt float32 batch 1 m 8 n 32 k 16 a (input 0 ld 16 batch_stride 0) b "
                "(input 1 transposed ld 16 batch_stride 0) epilogue BIAS bias input 2 algo 0")


def write_bundle(directory: pathlib.Path, graph, steps, target_arch="sm_90") -> pathlib.Path:
    """A result bundle for `graph`: plan.json with `steps` (dicts in plan.json's form; "kernel"
    holds a kernel's source, written to tasks/<task>/kernel.cu) and graph.pb."""
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
        add(graph_input.value_name, ROLES.get(graph_input.kind, "constant"),
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
        written.append(step)
    plan = {"format": "forge.plan.v1", "job": "job-test", "model": graph.metadata.name,
            "model_digest": model_digest(graph), "target_arch": target_arch, "outputs": outputs,
            "buffers": buffers, "steps": written}
    (directory / "plan.json").write_text(json.dumps(plan, indent=1))
    (directory / "graph.pb").write_bytes(graph.SerializeToString(deterministic=True))
    return directory


def node_named(graph, op):
    return next(node for node in graph.nodes if node.op == op)


def tensor_arguments(node):
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


def aten_step(task, node):
    return {"task": task, "implementation": "aten", "nodes": [node.name],
            "inputs": tensor_arguments(node), "outputs": list(node.outputs)}


def node_by_node_bundle(directory, graph):
    """A plan that runs every node of the graph as its own ATen step."""
    steps = [aten_step(f"{i:064x}", node) for i, node in enumerate(graph.nodes)]
    return write_bundle(directory, graph, steps)


def small_head_bundle(directory):
    """SmallHead's plan: library (linear, relu, mul), kernel (add), ATen (sum)."""
    torch.manual_seed(0)
    module = SmallHead().eval()
    x = torch.randn(8, 16)
    exported = forge.export(module, (x,))
    graph = exported.graph
    linear, relu, mul, add, total = (node_named(graph, op) for op in (
        "aten::linear", "aten::relu", "aten::mul", "aten::add", "aten::sum"))
    steps = [
        {"task": "a" * 64, "implementation": "library",
         "nodes": [linear.name, relu.name, mul.name],
         "inputs": tensor_arguments(linear), "outputs": list(mul.outputs),
         "library_call": LIBRARY_CALL, "kernel_name": "forge_pointwise",
         "launch": {"grid": [1, 1, 1], "block": [256, 1, 1], "dynamic_shared_bytes": 0},
         "kernel": EPILOGUE_KERNEL.format(call=LIBRARY_CALL)},
        {"task": "b" * 64, "implementation": "kernel", "nodes": [add.name],
         "inputs": list(mul.outputs), "outputs": list(add.outputs),
         "kernel_name": "forge_pointwise",
         "launch": {"grid": [2, 1, 1], "block": [128, 1, 1], "dynamic_shared_bytes": 0},
         "kernel": ADD_ONE_KERNEL},
        aten_step("c" * 64, total),
    ]
    return module, x, exported, write_bundle(directory, graph, steps)


def output_structure(module, x):
    return torch.utils._pytree.tree_flatten(module(x))[1]


def test_read_plan_parses_steps_buffers_and_library_calls(tmp_path):
    _, _, exported, bundle = small_head_bundle(tmp_path)
    plan = read_plan(bundle)
    assert plan.model_digest == model_digest(exported.graph)
    assert [s.implementation for s in plan.steps] == ["library", "kernel", "aten"]
    library, kernel, aten = plan.steps
    assert library.library_call == LibraryCall.parse(LIBRARY_CALL, "test")
    assert (library.library_call.m, library.library_call.n, library.library_call.k) == (8, 32, 16)
    assert library.library_call.b.transposed and not library.library_call.a.transposed
    assert library.library_call.epilogue == "BIAS" and library.library_call.bias_input == 2
    assert library.epilogue_inputs == ()
    assert kernel.launch.grid == (2, 1, 1) and kernel.launch.block == (128, 1, 1)
    assert kernel.source == bundle / "tasks" / ("b" * 12) / "kernel.cu"
    assert aten.source is None and aten.runnable_as_planned
    assert [s.task for s in plan.compiled_steps()] == ["a" * 64, "b" * 64]
    weight = plan.buffers[library.inputs[1]]
    assert weight.role == "parameter" and weight.shape == (32, 16) and weight.dtype == torch.float32
    assert set(plan.outputs) == {o.value_name for o in exported.graph.outputs}


def rewrite_plan(bundle, edit):
    plan = json.loads((bundle / "plan.json").read_text())
    edit(plan)
    (bundle / "plan.json").write_text(json.dumps(plan))


@pytest.mark.parametrize("edit,message", [
    (lambda p: p.update(format="forge.plan.v0"), "format 'forge.plan.v0'"),
    (lambda p: p["steps"][1].update(source="tasks/none/kernel.cu"),
     "tasks/none/kernel.cu does not exist"),
    (lambda p: p["steps"][2].update(inputs=["no_such_value"]), "buffer 'no_such_value'"),
    (lambda p: p["steps"][0].update(library_call="cublas sgemm"), "not a cuBLASLt call"),
    (lambda p: p["steps"][1].update(implementation="triton"), "unknown implementation 'triton'"),
    (lambda p: p["steps"][1].pop("launch"), "kernel forge_pointwise has no launch"),
], ids=["format", "source", "buffer", "library_call", "implementation", "launch"])
def test_malformed_plans_are_clear_errors(tmp_path, edit, message):
    _, _, _, bundle = small_head_bundle(tmp_path)
    rewrite_plan(bundle, edit)
    with pytest.raises(PlanError, match=message.replace("(", r"\(")):
        read_plan(bundle)


def test_a_directory_without_plan_says_how_to_fetch_one(tmp_path):
    with pytest.raises(PlanError, match="forge results JOB -o"):
        read_plan(tmp_path)


def test_aten_only_runs_every_step_on_the_cpu_with_the_modules_weights(tmp_path):
    module, x, exported, bundle = small_head_bundle(tmp_path)
    optimized = load_plan(bundle, module, aten_only=True,
                          output_structure=output_structure(module, x))
    for inputs in (x, torch.randn(8, 16)):
        got, want = optimized(inputs), module(inputs)
        assert set(got) == {"shifted", "total"}
        for key in want:
            torch.testing.assert_close(got[key], want[key])
    # The weights are the module's own tensors, not copies.
    with torch.no_grad():
        module.fc.bias.add_(1.0)
    torch.testing.assert_close(optimized(x)["total"], module(x)["total"])


def test_kernel_steps_on_the_cpu_are_refused_with_the_way_out(tmp_path):
    module, _, _, bundle = small_head_bundle(tmp_path)
    with pytest.raises(PlanError, match=r"step 0 .* runs on a CUDA GPU.*aten_only=True"):
        load_plan(bundle, module)


def test_inputs_must_have_the_example_shapes(tmp_path):
    module, _, _, bundle = small_head_bundle(tmp_path)
    optimized = load_plan(bundle, module, aten_only=True)
    with pytest.raises(PlanError, match=r"input 0 .*float32\[8, 16\].*got float32\[4, 16\]"):
        optimized(torch.randn(4, 16))


def test_the_graph_must_be_the_one_the_plan_was_made_for(tmp_path):
    module, x, _, bundle = small_head_bundle(tmp_path)
    other = forge.export(module, (torch.randn(4, 16),)).graph
    with pytest.raises(PlanError, match="is not the one job job-test optimized"):
        load_plan(bundle, module, graph=other, aten_only=True)
    (bundle / "graph.pb").unlink()
    with pytest.raises(PlanError, match="graph.pb does not exist"):
        load_plan(bundle, module, aten_only=True)


def test_every_node_of_the_llama_block_as_an_aten_step(tmp_path):
    torch.manual_seed(0)
    module, x = LlamaBlock().eval(), torch.randn(2, 16, 64)
    graph = forge.export(module, (x,)).graph
    optimized = load_plan(node_by_node_bundle(tmp_path, graph), module, aten_only=True)
    torch.testing.assert_close(optimized(x), module(x))


class Scaled(nn.Module):
    def forward(self, x):
        return x * torch.tensor([1.0, 2.0, 3.0])


def test_constants_the_module_does_not_hold_come_from_the_graph(tmp_path):
    module, x = Scaled(), torch.randn(4, 3)
    bundle = node_by_node_bundle(tmp_path, forge.export(module, (x,)).graph)
    torch.testing.assert_close(load_plan(bundle, module, aten_only=True)(x), module(x))


def test_models_that_write_their_buffers_are_refused(tmp_path):
    module, x = nn.BatchNorm1d(4).train(), torch.randn(8, 4)
    bundle = node_by_node_bundle(tmp_path, forge.export(module, (x,)).graph)
    with pytest.raises(PlanError, match="module.eval"):
        load_plan(bundle, module, aten_only=True)


def layouts_of(graph):
    return {v.name: TensorLayout.of_value(v) for v in graph.values}


def test_extension_sources_check_layouts_and_launch_as_planned(tmp_path):
    _, _, exported, bundle = small_head_bundle(tmp_path)
    sources = extension_sources(read_plan(bundle), layouts_of(exported.graph))
    assert sources.name.startswith("forge_plan_")
    digest = sources.name.removeprefix("forge_plan_")[:8]
    assert sources.ops == {"a" * 64: f"library_{'a' * 12}_{digest}",
                           "b" * 64: f"kernel_{'b' * 12}_{digest}"}
    assert sorted(sources.files) == ["forge_ops.cpp", "forge_runtime.h",
                                     f"kernel_{'a' * 12}.cu", f"kernel_{'b' * 12}.cu"]
    ops = sources.files["forge_ops.cpp"]
    library, kernel = sources.ops["a" * 64], sources.ops["b" * 64]
    assert (f'm.def("{library}(Tensor in0, Tensor in1, Tensor in2, Tensor(o0!) out0) -> ()");'
            in ops)
    assert f'm.def("{kernel}(Tensor in0, Tensor(o0!) out0) -> ()");' in ops
    assert f'm.impl("{kernel}", &{kernel});' in ops
    assert ('forge_runtime::CheckTensor(in1, {at::kFloat, {32, 16}, {16, 1}}, kOp, "input 1");'
            in ops)
    assert ("forge_runtime::LibraryGemm gemm{at::kFloat, 1, 8, 32, 16, {0, false, 16, 0}, "
            "{1, true, 16, 0}, forge_runtime::Epilogue::kBias, 2};" in ops)
    # The epilogue kernel reads the product's scratch buffer, then the outputs.
    assert "void* pointers[] = {scratch.data_ptr(), out0.data_ptr()};" in ops
    add_one = sources.files[f"kernel_{'b' * 12}.cu"]
    # Both kernels are called forge_pointwise: each is renamed after its task.
    assert f"#define forge_pointwise forge_kernel_{'b' * 12}\n" in add_one
    assert ADD_ONE_KERNEL in add_one
    assert re.search(r"cudaLaunchKernel\(.*dim3\(2, 1, 1\),\s*dim3\(128, 1, 1\), arguments, "
                     "kDynamicSharedBytes, stream\)", add_one, re.DOTALL)
    assert "constexpr int kArguments = 2;" in add_one
    assert sources.cuda_flags == gencode_flags("sm_90")


def test_the_extension_is_named_by_everything_it_is_built_from(tmp_path):
    _, _, exported, bundle = small_head_bundle(tmp_path / "one")
    plan = read_plan(bundle)
    first = extension_sources(plan, layouts_of(exported.graph))
    assert extension_sources(plan, layouts_of(exported.graph)).name == first.name
    assert extension_sources(plan, layouts_of(exported.graph), "sm_100").name != first.name
    source = bundle / "tasks" / ("b" * 12) / "kernel.cu"
    source.write_text(source.read_text().replace("1.0f", "2.0f"))
    assert extension_sources(plan, layouts_of(exported.graph)).name != first.name


def test_gencode_flags():
    assert gencode_flags("sm_90") == ["-gencode=arch=compute_90,code=sm_90",
                                      "-gencode=arch=compute_90,code=compute_90"]
    assert gencode_flags("sm_90a") == ["-gencode=arch=compute_90a,code=sm_90a"]
    with pytest.raises(PlanError, match="not of the form sm_XX"):
        gencode_flags("hopper")


def nvcc_or_skip():
    from torch.utils import cpp_extension

    if torch.version.cuda is None or cpp_extension.CUDA_HOME is None or \
            shutil.which("nvcc", path=str(pathlib.Path(cpp_extension.CUDA_HOME) / "bin")) is None:
        pytest.skip("building the extension needs a CUDA build of torch and nvcc (CUDA_HOME)")


def test_needed_libraries_reads_the_dynamic_section():
    libtorch = pathlib.Path(torch.__file__).parent / "lib" / "libtorch_cpu.so"
    assert "libc10.so" in needed_libraries(libtorch)
    assert needed_libraries(pathlib.Path(__file__)) == []  # not an ELF file


def test_the_extension_builds_and_registers_its_ops(tmp_path):
    nvcc_or_skip()
    _, _, exported, bundle = small_head_bundle(tmp_path / "bundle")
    sources = extension_sources(read_plan(bundle), layouts_of(exported.graph))
    built = build_extension(sources, build_root=tmp_path / "extensions")
    # Exceptions from the ops (their layout checks) must reach torch's libstdc++.
    assert "libstdc++.so.6" in needed_libraries(built / "build" / f"{sources.name}.so")
    # Loaded once per process: a second copy would register the same ops twice.
    assert build_extension(sources, build_root=tmp_path / "elsewhere") == built
    assert not (tmp_path / "elsewhere").exists()
    kernel = getattr(torch.ops.forge, sources.ops["b" * 64])
    assert str(kernel.default._schema) == \
        f"forge::{sources.ops['b' * 64]}(Tensor in0, Tensor(o0!) out0) -> ()"
    library = getattr(torch.ops.forge, sources.ops["a" * 64])
    assert "Tensor in2" in str(library.default._schema)
    if not torch.cuda.is_available():
        with pytest.raises(NotImplementedError, match="CPU"):
            kernel(torch.zeros(8, 32), torch.empty(8, 32))


@needs_cuda
@pytest.mark.parametrize("cuda_graphs", [True, False])
def test_the_plan_runs_its_kernels_on_the_gpu(tmp_path, cuda_graphs):
    nvcc_or_skip()
    module, x, _, bundle = small_head_bundle(tmp_path / "bundle")
    module, x = module.cuda(), x.cuda()
    optimized = load_plan(bundle, module, cuda_graphs=cuda_graphs,
                          build_root=tmp_path / "extensions",
                          output_structure=output_structure(module, x))
    for inputs in (x, torch.randn_like(x), x.t().contiguous().t()):  # last: other strides
        got, want = optimized(inputs), module(inputs)
        for key in want:
            torch.testing.assert_close(got[key], want[key], rtol=1e-4, atol=1e-4)
    assert optimized.uses_cuda_graph == cuda_graphs
    first = optimized(x)["shifted"]
    optimized(torch.randn_like(x))
    torch.testing.assert_close(first, module(x)["shifted"], rtol=1e-4, atol=1e-4)  # not overwritten


@needs_cuda
def test_ops_refuse_tensors_of_other_layouts(tmp_path):
    nvcc_or_skip()
    module, x, exported, bundle = small_head_bundle(tmp_path / "bundle")
    sources = extension_sources(read_plan(bundle), layouts_of(exported.graph))
    build_extension(sources, build_root=tmp_path / "extensions")
    add_one = getattr(torch.ops.forge, sources.ops["b" * 64])
    good = torch.randn(8, 32, device="cuda")
    out = torch.empty_like(good)
    add_one(good, out)
    torch.testing.assert_close(out, good + 1)
    with pytest.raises(RuntimeError, match=r"input 0 must have strides \[32, 1\]"):
        add_one(torch.randn(32, 8, device="cuda").t(), out)
    with pytest.raises(RuntimeError, match="output 0 must be Float"):
        add_one(good, out.double())
