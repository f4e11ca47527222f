"""forge.runtime: plan.json parsing, the executor (ATen steps on the CPU; kernel and library steps
on a GPU), and the extension's sources and build.

The bundles here are written by the tests for exported models, in the layout `forge results`
writes (client/forge/results.h), with hand-written kernels in the generated-kernel ABI; the
bundles the real service produces are exercised by test_optimize.py.
"""

import dataclasses
import functools
import json
import os
import pathlib
import re
import shutil
import subprocess
import sys
import types

import pytest
import torch
import torch.nn as nn

import forge
import forge.runtime
from forge._protos import graph_pb2
from forge.runtime import (PlanError, PlanModule, TensorLayout, bind_weights, extension_sources,
                           load_plan, model_digest)
from forge.runtime.bundle_writer import (aten_step, kernel_step, node_named, tensor_arguments,
                                         write_bundle)
from forge.runtime.extension import build_extension, gencode_flags, needed_libraries
from forge.runtime.plan import LibraryCall, read_plan
from llama_block import LlamaBlock

PYTHON_ROOT = pathlib.Path(__file__).resolve().parents[1]

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
    assert library.library_algorithm == ""  # not recorded: the index alone decides
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
    (lambda p: p["steps"][0].update(library_algorithm="the fastest"),
     "not a cuBLASLt algorithm description"),
    (lambda p: p["steps"][1].update(implementation="triton"), "unknown implementation 'triton'"),
    (lambda p: p["steps"][1].pop("launch"), "kernel forge_pointwise has no launch"),
], ids=["format", "source", "buffer", "library_call", "library_algorithm", "implementation",
        "launch"])
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
    with pytest.raises(PlanError, match="is not the one job job-local optimized"):
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
    # A module without tensors runs where it is told (by default the current CUDA device).
    torch.testing.assert_close(load_plan(bundle, module, aten_only=True, device=x.device)(x),
                               module(x))


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
    assert sorted(sources.files) == ["cublaslt_matmul.h", "forge_ops.cpp", "forge_runtime.h",
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
            "{1, true, 16, 0}, forge_runtime::Epilogue::kBias, 2, 0, \"\", "
            f'"step(s) 0 (task {"a" * 12})"}};' in ops)
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
    # With CUDA graphs a choice is made (tiny copies: captured, then kept or dropped by timing),
    # never without.
    assert (optimized.graph_choice is not None) == cuda_graphs
    assert optimized.capture_error is None
    if cuda_graphs:
        assert not optimized.graph_choice.startswith("no CUDA graph"), optimized.graph_choice
    if not cuda_graphs:
        assert not optimized.uses_cuda_graph
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


class TwoHeads(nn.Module):
    """relu(linear) in float32 and in bfloat16: one cuBLASLt call with the RELU_BIAS epilogue per
    dtype."""

    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(80, 96)
        self.fc_bf16 = nn.Linear(80, 96).to(torch.bfloat16)

    def forward(self, x, y):
        return torch.relu(self.fc(x)), torch.relu(self.fc_bf16(y))


RELU_LIBRARY_CALL = ("cublaslt {dtype} batch 1 m 64 n 96 k 80 a (input 0 ld 80 batch_stride 0) b "
                     "(input 1 transposed ld 80 batch_stride 0) epilogue RELU_BIAS bias input 2 "
                     "algo {algo}")


def two_heads_bundle(directory, algos, algorithms=("", "")):
    """TwoHeads's plan: each head as one cuBLASLt call (no epilogue kernel), the float32 head's
    with heuristic algorithm algos[0] (task 11...1), the bfloat16 head's with algos[1] (22...2),
    each recorded as the cuBLASLt algorithm `algorithms[head]` unless that is ""."""
    torch.manual_seed(0)
    module = TwoHeads().eval()
    exported = forge.export(module, (torch.randn(64, 80), torch.randn(64, 80,
                                                                       dtype=torch.bfloat16)))
    graph = exported.graph
    linears = [node for node in graph.nodes if node.op == "aten::linear"]
    relus = [node for node in graph.nodes if node.op == "aten::relu"]
    steps = [{"task": str(head + 1) * 64, "implementation": "library",
              "nodes": [linear.name, relu.name], "inputs": tensor_arguments(linear),
              "outputs": list(relu.outputs),
              "library_call": RELU_LIBRARY_CALL.format(dtype=dtype, algo=algo),
              **({"library_algorithm": algorithm} if algorithm else {})}
             for head, (linear, relu, dtype, algo, algorithm) in enumerate(
                 zip(linears, relus, ("float32", "bfloat16"), algos, algorithms))]
    return module, exported, write_bundle(directory, graph, steps)


def test_library_ops_run_their_searched_algorithm_through_the_shared_cublaslt_header(tmp_path):
    _, exported, bundle = two_heads_bundle(tmp_path / "bundle", (3, 5))
    sources = extension_sources(read_plan(bundle), layouts_of(exported.graph))
    ops = sources.files["forge_ops.cpp"]
    assert ("forge_runtime::LibraryGemm gemm{at::kFloat, 1, 64, 96, 80, {0, false, 80, 0}, "
            "{1, true, 80, 0}, forge_runtime::Epilogue::kReluBias, 2, 3, \"\", "
            f'"step(s) 0 (task {"1" * 12})"}};' in ops)
    assert ("forge_runtime::LibraryGemm gemm{at::kBFloat16, 1, 64, 96, 80, {0, false, 80, 0}, "
            "{1, true, 80, 0}, forge_runtime::Epilogue::kReluBias, 2, 5, \"\", "
            f'"step(s) 1 (task {"2" * 12})"}};' in ops)
    assert (f"task {'2' * 64}, candidate candidate-1: cuBLASLt call, heuristic algorithm 5 "
            "(not recorded: the index alone)" in ops)
    assert "forge_runtime::RunLibraryGemm(gemm, {in0, in1, in2}, out0, kOp);" in ops
    # The worker's header, as the repository holds it, is built into the extension.
    shared = pathlib.Path(__file__).resolve().parents[2] / "runtime" / "extension"
    assert sources.files["cublaslt_matmul.h"] == (shared / "cublaslt_matmul.h").read_text()
    assert '#include "cublaslt_matmul.h"' in sources.files["forge_runtime.h"]
    # Another algorithm is another extension.
    _, _, other = two_heads_bundle(tmp_path / "other", (3, 6))
    assert extension_sources(read_plan(other), layouts_of(exported.graph)).name != sources.name


# forge_cublaslt::DescribeAlgorithm's form.
FLOAT32_ALGORITHM = ("id 21 tile 18 stages 9 splitk 1 reduction 0 swizzle 0 custom 0 inner 0 "
                     "cluster 0")


def test_library_ops_carry_the_recorded_cublaslt_algorithm(tmp_path):
    _, exported, bundle = two_heads_bundle(tmp_path / "bundle", (3, 5), (FLOAT32_ALGORITHM, ""))
    plan = read_plan(bundle)
    assert [s.library_algorithm for s in plan.steps] == [FLOAT32_ALGORITHM, ""]
    sources = extension_sources(plan, layouts_of(exported.graph))
    ops = sources.files["forge_ops.cpp"]
    assert ("forge_runtime::Epilogue::kReluBias, 2, 3, "
            f'"{FLOAT32_ALGORITHM}", "step(s) 0 (task {"1" * 12})"}};' in ops)
    assert f'kReluBias, 2, 5, "", "step(s) 1 (task {"2" * 12})"}};' in ops
    assert f"cuBLASLt call, heuristic algorithm 3 ({FLOAT32_ALGORITHM})" in ops
    # The header finds the recorded algorithm in this cuBLASLt's list before it runs one.
    assert "plan.FindAlgorithm(gemm.algorithm, gemm.algo)" in sources.files["forge_runtime.h"]
    # The plan op runs the step through the task's op function, which carries it.
    with_plan_op = extension_sources(plan, layouts_of(exported.graph), graph=exported.graph)
    assert (f"    {with_plan_op.ops['1' * 64]}(in0, in1, in2, out0);"
            in plan_op_source(with_plan_op))
    # Another recorded algorithm is another extension, at the same index.
    _, _, other = two_heads_bundle(tmp_path / "other", (3, 5),
                                   (FLOAT32_ALGORITHM.replace("id 21", "id 22"), ""))
    assert extension_sources(read_plan(other), layouts_of(exported.graph)).name != sources.name


def test_an_extension_of_cublaslt_calls_alone_builds_and_links_cublaslt(tmp_path):
    nvcc_or_skip()
    # One head with its algorithm recorded, one without: both ways to choose it compile.
    _, exported, bundle = two_heads_bundle(tmp_path / "bundle", (0, 0), (FLOAT32_ALGORITHM, ""))
    sources = extension_sources(read_plan(bundle), layouts_of(exported.graph))
    built = build_extension(sources, build_root=tmp_path / "extensions")
    needed = needed_libraries(built / "build" / f"{sources.name}.so")
    assert any(library.startswith("libcublasLt.so") for library in needed), needed
    bf16_head = getattr(torch.ops.forge, sources.ops["2" * 64])
    assert str(bf16_head.default._schema) == (f"forge::{sources.ops['2' * 64]}(Tensor in0, "
                                              "Tensor in1, Tensor in2, Tensor(o0!) out0) -> ()")


class TwoHeadsOnTheGpu:
    """TwoHeads on the GPU with an input per head, and its heads run through the ops of
    two_heads_bundle's extensions."""

    def __init__(self, directory):
        torch.manual_seed(0)
        self.directory = directory
        module = TwoHeads().cuda().requires_grad_(False)  # as the executor runs ops: no autograd
        self.heads = [(module.fc, torch.float32, 1e-4), (module.fc_bf16, torch.bfloat16, 1e-2)]
        self.inputs = [torch.randn(64, 80, device="cuda", dtype=dtype)
                       for _, dtype, _ in self.heads]
        self.builds = 0

    def run(self, algos, algorithms=("", "")):
        """Each head's op, built with its algorithm; its output, or the error it raised."""
        self.builds += 1
        _, exported, bundle = two_heads_bundle(self.directory / f"bundle-{self.builds}", algos,
                                               algorithms)
        sources = extension_sources(read_plan(bundle), layouts_of(exported.graph))
        build_extension(sources, build_root=self.directory / "extensions")
        results = []
        for head, ((fc, dtype, _), x) in enumerate(zip(self.heads, self.inputs)):
            out = torch.empty(64, 96, device="cuda", dtype=dtype)
            try:
                getattr(torch.ops.forge, sources.ops[str(head + 1) * 64])(x, fc.weight, fc.bias,
                                                                           out)
                results.append(out)
            except RuntimeError as err:
                results.append(err)
        return results

    def check(self, results, what):
        """Each head's output against relu(linear) in float64."""
        for (fc, dtype, tolerance), x, got in zip(self.heads, self.inputs, results):
            assert isinstance(got, torch.Tensor), f"{dtype} with {what}: {got}"
            want = torch.relu(x.double() @ fc.weight.double().T + fc.bias.double())
            torch.testing.assert_close(got.double(), want, rtol=tolerance, atol=tolerance,
                                       msg=lambda m: f"{dtype}, {what}: {m}")


@needs_cuda
def test_library_ops_match_torch_with_the_first_and_last_heuristic_algorithm(tmp_path):
    nvcc_or_skip()
    two_heads = TwoHeadsOnTheGpu(tmp_path)
    # Past the heuristic's list (it offers at most 8): a clear error naming the step.
    counts = []
    for head, error in enumerate(two_heads.run((8, 8))):
        assert isinstance(error, RuntimeError), f"head {head} ran algorithm 8"
        found = re.search(rf"\(step\(s\) {head} \(task {str(head + 1) * 12}\)\): the plan runs "
                          r"algorithm 8 of cuBLASLt's heuristic list, but on this GPU cuBLASLt "
                          r"\d+ offers (\d) algorithm", str(error))
        assert found, str(error)
        counts.append(int(found.group(1)))
    assert all(1 <= count <= 8 for count in counts), counts
    for algos in ((0, 0), tuple(count - 1 for count in counts)):
        two_heads.check(two_heads.run(algos), f"algorithms {algos}")


@needs_cuda
def test_library_ops_run_the_recorded_algorithm_wherever_the_heuristic_lists_it(tmp_path):
    nvcc_or_skip()
    two_heads = TwoHeadsOnTheGpu(tmp_path)
    # An algorithm this cuBLASLt does not list: a clear error naming it, the list and the version.
    unknown = FLOAT32_ALGORITHM.replace("id 21", "id 999999")
    offered = []
    for head, error in enumerate(two_heads.run((0, 0), (unknown, unknown))):
        assert isinstance(error, RuntimeError), f"head {head} ran an algorithm it does not list"
        message = str(error)
        found = re.search(
            rf"\(step\(s\) {head} \(task {str(head + 1) * 12}\)\): the plan runs the cuBLASLt "
            rf"algorithm '{unknown}' \(heuristic result 0 where it was measured\), but on this "
            r"GPU cuBLASLt \d+'s heuristic does not offer it for this product; it offers "
            r"(\d) algorithm\(s\):", message)
        assert found, message
        listed = re.findall(r"^  (\d+): (id -?\d+ tile .*)$", message, re.MULTILINE)
        assert [int(i) for i, _ in listed] == list(range(int(found.group(1)))), message
        offered.append([description for _, description in listed])
    # Recorded at its own index, and at index 0 while the list has it last: both run it.
    two_heads.check(two_heads.run((0, 0), (offered[0][0], offered[1][0])), "recorded at 0")
    last = tuple(len(descriptions) - 1 for descriptions in offered)
    two_heads.check(two_heads.run((0, 0), (offered[0][last[0]], offered[1][last[1]])),
                    f"the algorithms at {last} recorded at 0")


# The plan as one operator (runtime/extension/plan.cpp.in).

class LlamaWithExtras(nn.Module):
    """The Llama block, then ATen calls with every kind of argument the graph records (a device,
    a dtype and keywords, -inf, a string, a tensor list, an optional tensor list with None) and an
    output that is a view of an intermediate that a kernel writes."""

    def __init__(self):
        super().__init__()
        self.block = LlamaBlock()
        self.register_buffer("rows", torch.tensor([0, 3]))

    def forward(self, x):
        h = self.block(x)
        t = torch.tanh(h)
        zeros = torch.zeros(2, 16, 64, dtype=torch.float32, device=x.device)
        masked = t.masked_fill(x > 0.5, float("-inf")).clamp(min=-0.75)
        mixed = torch.stack([masked, zeros + 1.0]).sum(0)
        return h, t.view(2, -1), nn.functional.gelu(mixed, approximate="tanh") + \
            h[:, self.rows].sum()


def llama_bundle(directory, model=LlamaBlock, group_aten=False):
    """A plan of the model on (2, 16, 64) inputs: the block's first linear (q_proj) as a cuBLASLt
    call, its SiLU, its last residual add and any tanh as kernels, every other node an ATen step
    (with group_aten, consecutive ATen nodes one step, as the service's plans group them)."""
    torch.manual_seed(0)
    module, x = model().eval(), torch.randn(2, 16, 64)
    exported = forge.export(module, (x,))
    graph = exported.graph
    q_proj = node_named(graph, "aten::linear")
    residual = next(n for n in graph.nodes if list(n.outputs) == [graph.outputs[0].value_name])
    steps = []
    for node in graph.nodes:
        if node is q_proj:
            step = {**aten_step("", node), "implementation": "library", "library_call": (
                "cublaslt float32 batch 1 m 32 n 64 k 64 a (input 0 ld 64 batch_stride 0) b "
                "(input 1 transposed ld 64 batch_stride 0) epilogue NONE bias input -1 algo 0")}
        elif node is residual:
            step = kernel_step("", node, "in0[i] + in1[i]", 2048)
        elif node.op == "aten::silu":
            step = kernel_step("", node, "in0[i] / (1.0f + expf(-in0[i]))", 4096)
        elif node.op == "aten::tanh":
            step = kernel_step("", node, "tanhf(in0[i])", 2048)
        else:
            step = aten_step("", node)
            previous = steps[-1] if steps else None
            if group_aten and previous and previous["implementation"] == "aten":
                written = set(previous["outputs"])
                previous["nodes"].append(node.name)
                previous["inputs"] += [v for v in step["inputs"]
                                       if v not in written and v not in previous["inputs"]]
                previous["outputs"] += step["outputs"]
                continue
        # Distinct in their first 12 digits, as real task digests are: a bundle keeps each
        # task's kernel in tasks/<12 digits>/ (ids that shared them made every kernel step run
        # the last kernel written there).
        steps.append({**step, "task": f"{len(steps):012x}".ljust(64, "0")})
    return module, x, exported, write_bundle(directory, graph, steps)


def plan_op_source(sources) -> str:
    ops = sources.files["forge_ops.cpp"]
    return ops[ops.index("// The whole plan as one operator"):]


def test_the_plan_op_runs_every_step_in_order(tmp_path):
    _, _, exported, bundle = llama_bundle(tmp_path)
    graph, plan = exported.graph, read_plan(bundle)
    sources = extension_sources(plan, layouts_of(graph), graph=graph)
    digest = sources.name.removeprefix("forge_plan_")
    assert sources.plan_op.name == f"plan_{digest}"
    weights = [i.value_name for i in graph.inputs if i.kind != graph_pb2.INPUT_KIND_USER_INPUT]
    assert sources.plan_op.inputs == ("x", *weights)
    source = plan_op_source(sources)
    assert f'm.def("{sources.plan_op.name}(Tensor[] inputs) -> Tensor[]");' in source
    assert f'm.impl("{sources.plan_op.name}", &forge_plan::RunPlan);' in source
    steps = source[source.index("void RunSteps("):source.index("std::vector<at::Tensor> RunPlan(")]
    places = [steps.index(f"  // {step.describe()}: {', '.join(step.nodes)}\n")
              for step in plan.steps]
    assert places == sorted(places) and len(places) == len(graph.nodes)
    place = {name: i for i, name in enumerate(("x", *weights))}
    library, silu, residual = plan.compiled_steps()
    assert library.nodes == (node_named(graph, "aten::linear").name,)
    assert silu.nodes == (node_named(graph, "aten::silu").name,)
    assert residual.outputs == ("add_5",)
    call = steps[steps.index(library.describe()):]
    assert (f"    const at::Tensor in1 = state.Conform(values, {place['p_q_proj_weight']} "
            "/* p_q_proj_weight */);" in call)
    assert f"    {sources.ops[library.task]}(in0, in1, out0);\n  }}" in call
    assert f"{sources.ops[residual.task]}(in0, in1, out0);" in steps
    # The intermediates that kernels write live in the arena; the plan's output does not.
    arena = re.search(r"kArenaValues = \{(.*)\};", source).group(1)
    assert re.findall(r"/\* (\w+) \*/", arena) == [library.outputs[0], silu.outputs[0]]
    assert re.search(r"kOutputs\[\] = \{\d+ /\* add_5 \*/\};", source)
    # ATen steps call their nodes by schema, with the graph's arguments as IValues.
    add = node_named(graph, "aten::add")  # RMSNorm's variance + eps: a float for a Tensor
    epsilon = re.escape((1e-6).hex())
    assert re.search(
        rf'\{{"{add.name}", "aten::add", "Tensor",\n'
        r'     \{Value\("self", Pass::kPositional, \d+ /\* mean \*/\),\n'
        rf'      Constant\("other", Pass::kPositional, c10::IValue\({epsilon}\)\)\}},\n'
        rf'     \{{\d+ /\* {add.name} \*/\}}\}}', source)
    assert re.search(r'Constant\("dim", Pass::kPositional, '
                     r'c10::IValue\(std::vector<int64_t>\{-1\}\)\),\n'
                     r'      Constant\("keepdim", Pass::kPositional, c10::IValue\(true\)\)', source)
    assert re.search(r'"aten::scaled_dot_product_attention", "",\n.*\n.*\n.*\n'
                     r'      Constant\("attn_mask", Pass::kPositional, c10::IValue\(\)\),\n'
                     r'      Constant\("dropout_p", Pass::kPositional, '
                     r'c10::IValue\(0x0.0p\+0\)\),\n'
                     r'      Constant\("is_causal", Pass::kPositional, c10::IValue\(true\)\)\},',
                     source)
    split = node_named(graph, "aten::split")
    assert re.search(rf"\{{(\d+) /\* {split.name}.0 \*/, (\d+) /\* {split.name}.1 \*/\}}", source)
    # Without the graph there is no plan op, and the per-task ops are the same.
    alone = extension_sources(plan, layouts_of(graph))
    assert alone.plan_op is None and "forge_plan::" not in alone.files["forge_ops.cpp"]
    assert alone.name != sources.name and list(alone.ops) == list(sources.ops)


def test_the_plan_op_runs_the_nodes_of_a_grouped_aten_step_in_order(tmp_path):
    # A step of several ATen nodes, each reading what the one before it wrote (view of a linear).
    _, _, exported, bundle = llama_bundle(tmp_path, group_aten=True)
    graph, plan = exported.graph, read_plan(bundle)
    grouped = [step for step in plan.steps if len(step.nodes) > 1]
    assert grouped
    source = plan_op_source(extension_sources(plan, layouts_of(graph), graph=graph))
    order = [node.name for node in graph.nodes]
    for step in grouped:
        assert list(step.nodes) == sorted(step.nodes, key=order.index)
        places = [source.index(f'{{"{name}", "aten::') for name in step.nodes]
        assert places == sorted(places)


def test_the_plan_op_converts_every_kind_of_argument(tmp_path):
    _, _, exported, bundle = llama_bundle(tmp_path, LlamaWithExtras)
    graph = exported.graph
    source = plan_op_source(extension_sources(read_plan(bundle), layouts_of(graph), graph=graph))
    for expected in [
            # The device is the plan's, not the export's; keyword-only arguments go by name.
            'Constant("dtype", Pass::kKeyword, c10::IValue(at::kFloat))',
            'PlanDevice("device", Pass::kKeyword)',
            'Constant("value", Pass::kPositional, '
            "c10::IValue(-std::numeric_limits<double>::infinity()))",
            'Constant("approximate", Pass::kKeyword, c10::IValue(std::string("tanh", 4)))',
            r'Values\("tensors", Pass::kPositional, \{\d+ /\* clamp \*/, \d+ /\* add_\d+ \*/\}\)',
            r'OptionalValues\("indices", Pass::kPositional, \{-1, \d+ /\* b_rows \*/\}\)',
            'Constant("size", Pass::kPositional, c10::IValue(std::vector<int64_t>{2, 16, 64}))']:
        assert re.search(expected if "\\" in expected else re.escape(expected), source), expected


def test_a_plan_without_the_extension_is_sequenced_in_python(tmp_path):
    module, x, _, bundle = llama_bundle(tmp_path)
    optimized = load_plan(bundle, module, aten_only=True)
    assert optimized.plan_op is None
    torch.testing.assert_close(optimized(x), module(x))


@pytest.fixture(scope="module")
def llama_extension(tmp_path_factory):
    """The extended Llama plan's extension, with its plan op, built once for the tests below."""
    nvcc_or_skip()
    directory = tmp_path_factory.mktemp("llama_plan")
    module, x, exported, bundle = llama_bundle(directory / "bundle", LlamaWithExtras,
                                               group_aten=True)
    sources = extension_sources(read_plan(bundle), layouts_of(exported.graph),
                                graph=exported.graph)
    # Built the way deployments and the suite pre-build bundles: `python -m forge.runtime build`,
    # in another process; this one then only loads what that built.
    built = subprocess.run([sys.executable, "-m", "forge.runtime", "build", str(bundle),
                            "--build-root", str(directory / "extensions")],
                           capture_output=True, text=True, timeout=1200,
                           env={**os.environ, "PYTHONPATH": str(PYTHON_ROOT)})
    assert built.returncode == 0, built.stderr
    assert built.stdout.strip() == f"{bundle}: {directory / 'extensions' / sources.name}"
    library = directory / "extensions" / sources.name / "build" / f"{sources.name}.so"
    modified = library.stat().st_mtime_ns
    build_extension(sources, build_root=directory / "extensions")
    assert library.stat().st_mtime_ns == modified
    return types.SimpleNamespace(module=module, x=x, graph=exported.graph, bundle=bundle,
                                 sources=sources, build_root=directory / "extensions")


def test_the_plan_op_builds_and_is_registered(llama_extension):
    name = llama_extension.sources.plan_op.name
    plan_op, arena = getattr(torch.ops.forge, name), getattr(torch.ops.forge, f"{name}_arena")
    assert str(plan_op.default._schema) == f"forge::{name}(Tensor[] inputs) -> Tensor[]"
    assert str(arena.default._schema) == f"forge::{name}_arena(Device device) -> Tensor[]"
    if not torch.cuda.is_available():
        assert arena(torch.device("cuda", 0)) == []  # nothing ran there
        with pytest.raises(NotImplementedError, match="CPU"):
            plan_op([llama_extension.x])


def plan_op_arguments(extension, x):
    """The plan op's inputs for user input x: x, then the module's weights on the GPU."""
    weights = bind_weights(extension.graph, extension.module, x.device)
    return [x] + [weights[name] for name in extension.sources.plan_op.inputs[1:]]


@needs_cuda
@pytest.mark.parametrize("cuda_graphs", [True, False])
def test_the_plan_op_equals_the_plan_sequenced_in_python(llama_extension, cuda_graphs):
    extension = llama_extension
    module = extension.module.cuda()
    device = torch.device("cuda", torch.cuda.current_device())
    optimized = load_plan(extension.bundle, module, cuda_graphs=cuda_graphs, plan_op=True,
                          build_root=extension.build_root)
    assert optimized.plan_op == extension.sources.plan_op.name
    stepped = PlanModule(read_plan(extension.bundle), extension.graph,
                         bind_weights(extension.graph, module, device),
                         extension.sources.ops, device, cuda_graphs=cuda_graphs,
                         output_structure=None)
    assert stepped.plan_op is None
    x = extension.x.cuda()
    for inputs in (x, torch.randn_like(x), x.transpose(0, 1).contiguous().transpose(0, 1)):
        got, want = optimized(inputs), stepped(inputs)
        for g, w in zip(got, want):
            assert torch.equal(g, w)
        # Eager's .view needs the contiguous copy; the plans take either layout.
        for g, w in zip(got, module(inputs.contiguous())):
            torch.testing.assert_close(g, w, rtol=1e-4, atol=1e-4)
    assert (optimized.graph_choice is not None) == (stepped.graph_choice is not None) == cuda_graphs


@needs_cuda
def test_the_plan_op_reuses_its_arena_and_returns_fresh_outputs(llama_extension):
    extension = llama_extension
    extension.module.cuda()
    name = extension.sources.plan_op.name
    plan_op, arena = getattr(torch.ops.forge, name), getattr(torch.ops.forge, f"{name}_arena")
    x = extension.x.cuda()
    with torch.no_grad():
        first = plan_op(plan_op_arguments(extension, x))
        kept = [t.clone() for t in first]
        buffers = [t.data_ptr() for t in arena(x.device)]
        second = plan_op(plan_op_arguments(extension, torch.randn_like(x)))
    # q_proj's product, the SiLU and the tanh: allocated at the first call, written by both.
    assert len(buffers) == 3 and [t.data_ptr() for t in arena(x.device)] == buffers
    # The outputs are the caller's, the view of the tanh included: the second call did not
    # overwrite the first's.
    for a, b, k in zip(first, second, kept):
        assert torch.equal(a, k) and not torch.equal(a, b)
        assert a.untyped_storage().data_ptr() != b.untyped_storage().data_ptr()
        assert a.untyped_storage().data_ptr() not in buffers


@needs_cuda
def test_the_plan_op_replays_its_graph_without_overwriting_what_callers_hold(llama_extension):
    extension = llama_extension
    extension.module.cuda()
    name = extension.sources.plan_op.name
    plan_op = getattr(torch.ops.forge, name)
    capture = getattr(torch.ops.forge, f"{name}_capture")
    x1 = extension.x.cuda()
    x2 = torch.randn_like(x1)
    with torch.no_grad():
        want1 = plan_op(plan_op_arguments(extension, x1))
        want2 = plan_op(plan_op_arguments(extension, x2))
        graph = capture(plan_op_arguments(extension, x1))
        replay = functools.partial(getattr(torch.ops.forge, f"{name}_replay"), graph)
        held = replay([x1])
        view = held[1][0]  # a view: it follows its tensor's move
        graph_memory = [t.data_ptr() for t in held]
        second = replay([x2])
        # The held outputs moved out of the graph's memory before the replay; the new ones are
        # the graph's.
        assert [t.data_ptr() for t in second] == graph_memory
        assert all(t.data_ptr() not in graph_memory for t in held)
        for got, want in zip(held, want1):
            assert torch.equal(got, want)
        assert torch.equal(view, want1[1][0])
        for got, want in zip(second, want2):
            assert torch.equal(got, want)
        # Dropped outputs cost nothing: the next replay hands out the same memory, unmoved.
        del held, view, second
        third = replay([x2])
        assert [t.data_ptr() for t in third] == graph_memory
        # x2 again, unchanged: its copy is skipped; written in place since: copied again.
        x2.mul_(0.5)
        fourth = replay([x2])
        for got, want in zip(fourth, plan_op(plan_op_arguments(extension, x2))):
            assert torch.equal(got, want)
        with pytest.raises(RuntimeError, match=r"input 0 \('x'\) must be Float\[2, 16, 64\]"):
            replay([torch.randn(4, 16, 64, device="cuda")])


@needs_cuda
def test_forward_after_the_first_call_is_one_call_of_the_plan_op(llama_extension):
    extension = llama_extension
    module = extension.module.cuda()
    for cuda_graphs in (True, False):
        optimized = load_plan(extension.bundle, module, cuda_graphs=cuda_graphs,
                              build_root=extension.build_root)
        x = extension.x.cuda()
        first = [t.clone() for t in optimized(x)]
        assert optimized._fast is not None
        again = optimized(x)
        for a, b in zip(first, again):
            assert torch.equal(a, b)
        # The op refuses what the plan was not made for; forward explains it in Python's words.
        with pytest.raises(PlanError, match="the plan was optimized for float32\\[2, 16, 64\\]"):
            optimized(torch.randn(4, 16, 64, device="cuda"))
    # Two modules of one plan with other weights: each replays its own graph.
    other = LlamaWithExtras().eval().cuda()
    for graphs in (True, False):
        first = load_plan(extension.bundle, module, cuda_graphs=graphs,
                          build_root=extension.build_root)
        second = load_plan(extension.bundle, other, cuda_graphs=graphs,
                           build_root=extension.build_root)
        x = extension.x.cuda()
        for _ in range(3):
            for optimized, original in ((first, module), (second, other)):
                for got, want in zip(optimized(x), original(x)):
                    torch.testing.assert_close(got, want, rtol=1e-4, atol=1e-4)


@needs_cuda
def test_the_plan_op_refuses_inputs_of_other_shapes(llama_extension):
    extension = llama_extension
    extension.module.cuda()
    name = extension.sources.plan_op.name
    arguments = plan_op_arguments(extension, torch.randn(4, 16, 64, device="cuda"))
    with pytest.raises(RuntimeError, match=rf"forge::{name}: input 0 \('x'\) must be "
                                           r"Float\[2, 16, 64\].*got Float\[4, 16, 64\]"):
        getattr(torch.ops.forge, name)(arguments)
    with pytest.raises(RuntimeError, match=rf"takes {len(arguments)} tensors"):
        getattr(torch.ops.forge, name)(arguments[:1])


def test_a_plan_of_aten_steps_gets_its_plan_op_and_building_needs_the_graph(tmp_path):
    torch.manual_seed(0)
    module = SmallHead().eval()
    exported = forge.export(module, (torch.randn(8, 16),))
    aten_only = node_by_node_bundle(tmp_path / "aten", exported.graph)
    # No task op, but the plan op: on a GPU a forward is then one call, not one per node.
    sources = extension_sources(read_plan(aten_only), layouts_of(exported.graph),
                                graph=exported.graph)
    assert sources.ops == {} and sources.plan_op is not None
    for schema in (f"{sources.plan_op.name}_capture(Tensor[] inputs) -> int",
                   f"{sources.plan_op.name}_replay(int graph, Tensor[] inputs, "
                   "bool copy_inputs=False) -> Tensor[]"):
        assert f'm.def("{schema}");' in sources.files["forge_ops.cpp"]
    (tmp_path / "aten" / "graph.pb").unlink()
    result = subprocess.run([sys.executable, "-m", "forge.runtime", "build", str(aten_only)],
                            capture_output=True, text=True, timeout=120,
                            env={**os.environ, "PYTHONPATH": str(PYTHON_ROOT)})
    assert result.returncode == 1
    assert "graph.pb does not exist" in result.stderr


def test_no_cuda_graph_is_tried_where_its_copies_cost_more_than_its_launches_save(tmp_path):
    # 64 MiB in and out of a one-node plan: the copies (tens of microseconds) outweigh one launch.
    torch.manual_seed(0)
    module = SmallHead().eval()
    exported = forge.export(module, (torch.randn(8, 16),))
    optimized = load_plan(node_by_node_bundle(tmp_path, exported.graph), module, aten_only=True)
    big = torch.empty(1 << 24)
    assert not optimized._graph_may_pay([big])
    assert optimized.graph_choice.startswith("no CUDA graph: copying 64 MiB in and out")
    assert optimized._graph_may_pay([torch.empty(8, 16)])


# Host-launched steps (compiler/codegen/host_launch_abi.h): the worker's test translation unit,
# out = x * factor through a workspace (runtime_args {n, factor}), as the winner of x * 2.0.

REPOSITORY = PYTHON_ROOT.parent
SCALE_SOURCE = REPOSITORY / "worker" / "compile" / "testdata" / "host_launch_scale.cu"
NVCC_FLAGS = ["-std=c++17", "-O3", "-arch=sm_90a", "--expt-relaxed-constexpr", "-shared",
              "-Xcompiler", "-fPIC", "-DNDEBUG", "-Xptxas", "-v"]


class Doubled(nn.Module):
    def forward(self, x):
        return (x * 2.0).relu()


def host_launched_bundle(directory, source=None, options=()):
    """Doubled's plan on 64 x 256 float32: the product as a host-launched step (`source`, default
    the scale unit), the ReLU as ATen, with the ABI header in the bundle as `forge results`
    writes it."""
    torch.manual_seed(0)
    module, x = Doubled().eval(), torch.randn(64, 256)
    exported = forge.export(module, (x,))
    graph = exported.graph
    mul, relu = node_named(graph, "aten::mul"), node_named(graph, "aten::relu")
    header = directory / "include" / "compiler" / "codegen" / "host_launch_abi.h"
    header.parent.mkdir(parents=True)
    shutil.copy(REPOSITORY / "compiler" / "codegen" / "host_launch_abi.h", header)
    steps = [{**aten_step("1" * 64, mul), "implementation": "host_launched",
              "kernel_name": "forge_cutlass_gemm", "kernel": source or SCALE_SOURCE.read_text(),
              "nvcc_flags": NVCC_FLAGS, "compile_options": list(options),
              "runtime_args": [64 * 256, 2], "include": "include"},
             aten_step("2" * 64, relu)]
    return module, x, exported, write_bundle(directory, graph, steps)


def test_a_host_launched_step_reads_with_what_builds_and_calls_it(tmp_path):
    _, _, _, bundle = host_launched_bundle(tmp_path, options=["-DFORGE_TILE=128"])
    step = read_plan(bundle).steps[0]
    assert step.implementation == "host_launched" and step.runnable_as_planned
    assert step.nvcc_flags == tuple(NVCC_FLAGS) and step.compile_options == ("-DFORGE_TILE=128",)
    assert step.runtime_args == (64 * 256, 2) and step.include == bundle / "include"
    assert step.describe() == f"step 0 (task {'1' * 12}, host-launched forge_cutlass_gemm)"
    plan = json.loads((bundle / "plan.json").read_text())
    plan["steps"][0]["runtime_args"] = [1, "2"]
    (bundle / "plan.json").write_text(json.dumps(plan))
    with pytest.raises(PlanError, match="step 0: runtime_args must be 64-bit integers"):
        read_plan(bundle)


def test_a_host_launched_steps_object_is_built_with_the_workers_command(tmp_path, monkeypatch):
    from forge.runtime import host_launched

    _, _, _, bundle = host_launched_bundle(tmp_path / "bundle", options=["-DFORGE_TILE=128"])
    step = read_plan(bundle).steps[0]
    monkeypatch.setattr(host_launched, "nvcc_version", lambda nvcc: "release 13.0")
    build = host_launched.plan_host_object(step, tmp_path / "root", nvcc="/cuda/bin/nvcc")
    # worker/compile/nvcc.h NvccCommand: nvcc, its flags, the include directories (the ABI
    # header's, then CUTLASS's, which this source does not include), the source's options.
    assert build.command == ["/cuda/bin/nvcc", *NVCC_FLAGS, f"-I{bundle / 'include'}",
                             "-DFORGE_TILE=128", "-o", str(build.path), str(step.source)]
    assert build.directory == tmp_path / "root" / "host_launched" / build.digest[:24]
    other = dataclasses.replace(step, compile_options=("-DFORGE_TILE=64",))
    assert host_launched.plan_host_object(other, tmp_path / "root", nvcc="nvcc").digest != \
        build.digest
    monkeypatch.setattr(host_launched, "nvcc_version", lambda nvcc: "release 13.1")
    assert host_launched.plan_host_object(step, tmp_path / "root", nvcc="/cuda/bin/nvcc") \
        .digest != build.digest


CUTLASS_SOURCE = '#include "cutlass/cutlass.h"\n' + SCALE_SOURCE.read_text()


def test_without_cutlass_headers_a_host_launched_step_runs_through_aten(tmp_path, monkeypatch):
    from forge.runtime import host_launched

    _, _, exported, bundle = host_launched_bundle(tmp_path / "bundle", source=CUTLASS_SOURCE)
    monkeypatch.delenv("FORGE_CUTLASS_INCLUDE", raising=False)
    monkeypatch.setattr(host_launched, "PINNED_CUTLASS", tmp_path / "no-cutlass")
    monkeypatch.setattr(host_launched.importlib.util, "find_spec", lambda name: None)
    plan = read_plan(bundle)
    objects, fallbacks = host_launched.build_host_objects(plan, tmp_path / "root")
    assert objects == {}
    assert "needs CUTLASS's headers and none were found" in fallbacks["1" * 64]
    # The plan op then runs the product as its ATen call, and no task op is made for it.
    sources = extension_sources(plan, layouts_of(exported.graph), graph=exported.graph,
                                host_tasks=objects)
    assert sources.ops == {} and sources.host_ops == {}
    assert "state.Aten(0).Run(values);  // aten::mul.Tensor" in plan_op_source(sources)
    # With headers where FORGE_CUTLASS_INCLUDE says, they are on the command line.
    include = tmp_path / "cutlass" / "include"
    (include / "cutlass").mkdir(parents=True)
    (include / "cutlass" / "version.h").write_text(
        "#define CUTLASS_MAJOR 4\n#define CUTLASS_MINOR 2\n#define CUTLASS_PATCH 0\n")
    monkeypatch.setenv("FORGE_CUTLASS_INCLUDE", str(include))
    monkeypatch.setattr(host_launched, "nvcc_version", lambda nvcc: "release 13.0")
    build = host_launched.plan_host_object(plan.steps[0], tmp_path / "root", nvcc="nvcc")
    assert build.command[len(NVCC_FLAGS) + 1:len(NVCC_FLAGS) + 3] == [
        f"-I{bundle / 'include'}", f"-I{include}"]


def test_extension_sources_of_a_host_launched_step(tmp_path):
    _, _, exported, bundle = host_launched_bundle(tmp_path)
    plan = read_plan(bundle)
    sources = extension_sources(plan, layouts_of(exported.graph), graph=exported.graph,
                                host_tasks={"1" * 64: tmp_path / "object.so"})
    op = sources.ops["1" * 64]
    assert op.startswith("host_launched_111111111111_") and sources.host_ops == {"1" * 64: op}
    ops = sources.files["forge_ops.cpp"]
    assert '#include "host_launched.h"' in ops
    assert sources.files["compiler/codegen/host_launch_abi.h"] == \
        (REPOSITORY / "compiler" / "codegen" / "host_launch_abi.h").read_text()
    assert "static const std::vector<int64_t> kRuntimeArgs = {16384, 2};" in ops
    assert "forge_runtime::HostLaunchedObject::For(kOp).Launch({in0, out0}, kRuntimeArgs, kOp);" \
        in ops
    assert f'm.def("{op}_load(str path) -> ()", [](std::string path) {{ ' \
        f'forge_runtime::HostLaunchedObject::Load("forge::{op}", path); }});' in ops
    assert not any(name.startswith("kernel_") for name in sources.files)
    # The plan op calls it as it calls a kernel step's op, on inputs of its layouts.
    assert re.search(rf"{op}\(in0, out0\);", plan_op_source(sources))
    # Another object (other options) is another op: one process may load both plans.
    _, _, other_graph, other = host_launched_bundle(tmp_path / "other", options=["-DOTHER"])
    assert extension_sources(read_plan(other), layouts_of(other_graph.graph),
                             graph=other_graph.graph,
                             host_tasks={"1" * 64: tmp_path / "other.so"}).name != sources.name


def test_a_host_launched_steps_object_builds_with_nvcc(tmp_path):
    """The real nvcc build of a host-launched step's object (the scale unit: seconds, no
    CUTLASS; a CUTLASS sm90 unit takes minutes: cutlass_gemm_compile_test covers that command),
    then its entry points, which need no GPU."""
    import ctypes

    from forge.runtime import host_launched

    nvcc_or_skip()
    _, _, _, bundle = host_launched_bundle(tmp_path / "bundle")
    objects, fallbacks = host_launched.build_host_objects(read_plan(bundle), tmp_path / "root")
    assert fallbacks == {}
    path = objects["1" * 64]
    assert path.name == "forge_host_launched.so" and "libstdc++.so.6" in needed_libraries(path)
    modified = path.stat().st_mtime_ns
    assert host_launched.build_host_objects(read_plan(bundle), tmp_path / "root")[0] == objects
    assert path.stat().st_mtime_ns == modified  # cached
    library = ctypes.CDLL(str(path), mode=os.RTLD_LOCAL)
    assert library.forge_host_abi_version() == 1
    library.forge_workspace_bytes.restype = ctypes.c_int64
    args = (ctypes.c_int64 * 2)(64 * 256, 2)
    assert library.forge_workspace_bytes(args, 2) == 64 * 256 * 4


def test_the_extension_of_a_host_launched_step_builds_and_loads_its_object(tmp_path):
    """Without a GPU: the extension builds with host_launched.h, and its load op dlopens the
    object and checks its ABI (loading needs no driver); a file that is no object is refused."""
    nvcc_or_skip()
    _, _, _, bundle = host_launched_bundle(tmp_path / "bundle")
    directory = forge.runtime.build_bundle(bundle, build_root=tmp_path / "extensions")
    assert (tmp_path / "extensions" / "host_launched").is_dir()
    ops = (directory / "src" / "forge_ops.cpp").read_text()
    op = re.search(r"void (host_launched_1{12}_[0-9a-f]{8})\(", ops).group(1)
    load = getattr(torch.ops.forge, f"{op}_load")
    assert str(load.default._schema) == f"forge::{op}_load(str path) -> ()"
    (tmp_path / "not-an-object.so").write_text("text")
    with pytest.raises(RuntimeError, match=f"forge::{op}: cannot load its host-launched object"):
        load(str(tmp_path / "not-an-object.so"))
    if not torch.cuda.is_available():
        with pytest.raises(NotImplementedError, match="CPU"):
            getattr(torch.ops.forge, op)(torch.randn(64, 256), torch.empty(64, 256))


@needs_cuda
@pytest.mark.parametrize("cuda_graphs", [True, False])
def test_a_host_launched_step_runs_in_the_plan(tmp_path, cuda_graphs):
    module, x, _, bundle = host_launched_bundle(tmp_path / "bundle")
    optimized = load_plan(bundle, module.cuda(), cuda_graphs=cuda_graphs,
                          build_root=tmp_path / "extensions")
    assert optimized.step_summary() == "1 host_launched, 1 aten"
    assert optimized.aten_fallbacks == {}
    x = x.cuda()
    for inputs in (x, torch.randn_like(x)):
        for _ in range(3):
            assert torch.equal(optimized(inputs), (inputs * 2.0).relu())


@needs_cuda
def test_a_host_launched_objects_error_is_the_ops_error(tmp_path):
    module, x, _, bundle = host_launched_bundle(tmp_path / "bundle",
                                                options=["-DFORGE_TEST_LAUNCH_FAILS"])
    optimized = load_plan(bundle, module.cuda(), cuda_graphs=False,
                          build_root=tmp_path / "extensions")
    with pytest.raises(RuntimeError, match="planted failure: this object refuses every launch"):
        optimized(x.cuda())
