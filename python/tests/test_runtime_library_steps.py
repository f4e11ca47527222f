"""Steps whose winner is a library call that ATen or cuDNN makes, run by the runtime as the worker
judged them: an `sdpa` step (one of ATen's fused attention backends) runs its one
scaled_dot_product_attention call with that backend alone, and its task's nodes, with a warning,
where the backend refuses the call; a `cudnn_conv` step builds the winner's cuDNN fused graph
through the worker's header. The CPU tests use the CPU's backends (math, flash) and its refusal
of the efficient kernel, and check the generated sources; the GPU tests (skipped without one)
check each CUDA backend and cuDNN graphs through the plan op and the Python executor, with and
without CUDA graphs, against eager and by the profiler's record of what ran."""

from __future__ import annotations

import json
import logging
import os
import pathlib

import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F

import forge
from forge.runtime import PlanError, TensorLayout, extension_sources, load_plan, read_plan
from forge.runtime.bundle_writer import (aten_step, node_named, sdpa_step, tensor_arguments,
                                         write_bundle)
from forge.runtime.cudnn import CudnnBuild
from forge.runtime.plan import SDPA_BACKEND_ATTRIBUTE

needs_cuda = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")

# The operator each backend's call reaches, as the profiler names it.
BACKEND_OPS = {"math": "aten::_scaled_dot_product_attention_math",
               "flash": "aten::_scaled_dot_product_flash_attention",
               "efficient": "aten::_scaled_dot_product_efficient_attention",
               "cudnn": "aten::_scaled_dot_product_cudnn_attention"}
CPU_FLASH_OP = "aten::_scaled_dot_product_flash_attention_for_cpu"
SDPA_TASK = "5" * 64


class CausalSelfAttention(nn.Module):
    """GPT-2's attention through SDPA: a fused projection split into heads, causal attention, a
    projection per head. (Not GPT-2's merge of the heads, `y.transpose(1, 2).reshape(...)`: the
    export records that reshape as a view, valid for the strides of the output of the backend
    eager chose, which not every backend gives; such a step falls back to its nodes.)"""

    def __init__(self, dim=64, heads=4):
        super().__init__()
        self.heads = heads
        self.qkv = nn.Linear(dim, 3 * dim)
        self.proj = nn.Linear(dim // heads, dim // heads)

    def forward(self, x):
        batch, length, dim = x.shape
        q, k, v = (t.view(batch, length, self.heads, dim // self.heads).transpose(1, 2)
                   for t in self.qkv(x).split(dim, dim=2))
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        return self.proj(y.transpose(1, 2))


def attention_bundle(directory, backend, dtype=torch.float32, device="cpu"):
    """CausalSelfAttention's plan: the projections as ATen steps, everything between them (the
    head split, the attention, the merge) as one sdpa step won by `backend`."""
    torch.manual_seed(0)
    module = CausalSelfAttention().eval().to(device=device, dtype=dtype)
    x = torch.randn(2, 64, 64, device=device, dtype=dtype)
    graph = forge.export(module, (x,)).graph
    nodes = list(graph.nodes)
    steps = [aten_step("1" * 64, nodes[0]), sdpa_step(SDPA_TASK, graph, backend, *nodes[1:-1]),
             aten_step("2" * 64, nodes[-1])]
    return module, x, write_bundle(directory, graph, steps)


def ops_run(module, x) -> set[str]:
    with torch.profiler.profile(acc_events=True) as profile:
        module(x)
    return {event.name for event in profile.events()}


def test_an_sdpa_step_reads_with_its_group_in_the_plans_names(tmp_path):
    _, _, bundle = attention_bundle(tmp_path, "math")
    plan = read_plan(bundle)
    step = plan.steps[1]
    assert step.implementation == "sdpa" and step.sdpa_backend == "math"
    assert step.runnable_as_planned and step not in plan.compiled_steps()
    assert step.describe() == f"step 1 (task {'5' * 12}, ATen's math attention)"
    group = step.sdpa_group
    # The group's inputs and outputs are the step's; what it computes inside is the step's own.
    assert [i.value_name for i in group.inputs] == list(step.inputs)
    assert [o.value_name for o in group.outputs] == list(step.outputs)
    inside = {o for node in group.nodes for o in node.outputs} - set(step.outputs)
    assert inside and all(name.startswith("step1/") for name in inside)
    assert {v.name for v in group.values} == inside
    attention = [n for n in group.nodes if SDPA_BACKEND_ATTRIBUTE in n.attributes]
    assert len(attention) == 1 and attention[0].attributes[SDPA_BACKEND_ATTRIBUTE] == "math"
    assert all(a.tensor in inside for a in attention[0].arguments if a.HasField("tensor"))
    assert inside <= set(plan.layouts(forge.export(*_example()).graph))


def _example():
    torch.manual_seed(0)
    return CausalSelfAttention().eval(), (torch.randn(2, 64, 64),)


def rewrite_steps(bundle, edit):
    """plan.json with edit(its list of steps) applied."""
    plan = json.loads((bundle / "plan.json").read_text())
    edit(plan["steps"])
    (bundle / "plan.json").write_text(json.dumps(plan))


def rewrite_step(bundle, edit):
    rewrite_steps(bundle, lambda steps: edit(steps[1]))


def _unmark(step):
    for node in step["sdpa_group"]["nodes"]:
        node.pop("attributes", None)


@pytest.mark.parametrize("edit,message", [
    (lambda s: s.update(sdpa_backend="fast"), "sdpa_backend 'fast' is not one of"),
    (lambda s: s.pop("sdpa_group"), "field 'sdpa_group' is missing"),
    (lambda s: s["sdpa_group"].update(nodes=[{"name": 3}]),
     "sdpa_group is not a forge.v1.Graph"),
    (lambda s: s["sdpa_group"]["inputs"].pop(),
     "sdpa_group has 0 inputs and 1 outputs, the step 1 and 1"),
    (_unmark, "sdpa_group must have one node with forge.sdpa_backend 'math', has \\[\\]"),
], ids=["backend", "missing", "malformed", "inputs", "unmarked"])
def test_malformed_sdpa_steps_are_clear_errors(tmp_path, edit, message):
    _, _, bundle = attention_bundle(tmp_path, "math")
    rewrite_step(bundle, edit)
    with pytest.raises(PlanError, match=f"plan.json step 1: {message}"):
        read_plan(bundle)


def test_an_sdpa_step_runs_its_one_call_with_its_backend(tmp_path):
    module, x, bundle = attention_bundle(tmp_path, "math")
    optimized = load_plan(bundle, module)
    assert optimized.step_summary() == "1 sdpa, 2 aten"
    expected = module(x)
    torch.testing.assert_close(optimized(x), expected)
    ran = ops_run(optimized, x)
    # Eager runs the CPU's flash kernel; the plan runs the backend that won.
    assert BACKEND_OPS["math"] in ran and CPU_FLASH_OP not in ran
    assert optimized.aten_fallbacks == {}
    # aten_only runs the task's own nodes, as eager does.
    reference = load_plan(bundle, module, aten_only=True)
    assert reference.step_summary() == "3 aten"
    ran = ops_run(reference, x)
    assert CPU_FLASH_OP in ran and BACKEND_OPS["math"] not in ran
    assert torch.equal(reference(x), expected)


def runtime_warnings(caplog) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.name == "forge.runtime"]


def test_a_backend_that_refuses_the_call_falls_back_to_the_nodes_with_a_warning(tmp_path, caplog):
    # The CPU has no efficient kernel: ATen refuses the call with that backend alone.
    module, x, bundle = attention_bundle(tmp_path, "efficient")
    optimized = load_plan(bundle, module)
    with caplog.at_level(logging.WARNING, logger="forge.runtime"):
        first = optimized(x)
    assert torch.equal(first, module(x))
    reason = optimized.aten_fallbacks[SDPA_TASK]
    assert "its call of ATen's efficient attention backend failed" in reason
    assert "No viable backend" in reason
    step = read_plan(bundle).steps[1]
    assert runtime_warnings(caplog) == [f"forge: {step.describe()}: {reason}"]
    # Decided once: later calls run the nodes without trying the backend again.
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="forge.runtime"):
        assert torch.equal(optimized(x), module(x))
    assert runtime_warnings(caplog) == []
    assert CPU_FLASH_OP in ops_run(optimized, x)


class MergedHeadsAttention(CausalSelfAttention):
    """GPT-2's merge of the heads after the attention: the export records its reshape as a view,
    valid for the strides of the output of the backend the export ran (the CPU's flash kernel:
    [B, S, H, D] in memory), not for the math backend's ([B, H, S, D])."""

    def forward(self, x):
        batch, length, dim = x.shape
        q, k, v = (t.view(batch, length, self.heads, dim // self.heads).transpose(1, 2)
                   for t in self.qkv(x).split(dim, dim=2))
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        return y.transpose(1, 2).reshape(batch, length, dim)


def test_an_sdpa_steps_output_keeps_the_strides_later_steps_rely_on(tmp_path):
    # As the partitioner cuts llama_block: the attention a step, the merge of the heads another.
    torch.manual_seed(0)
    module, x = MergedHeadsAttention().eval(), torch.randn(2, 64, 64)
    graph = forge.export(module, (x,)).graph
    nodes = list(graph.nodes)
    attention = next(i for i, n in enumerate(nodes)
                     if n.op == "aten::scaled_dot_product_attention")
    assert [n.op for n in nodes[attention + 1:]] == ["aten::transpose", "aten::view"]
    steps = [aten_step("1" * 64, nodes[0]),
             sdpa_step(SDPA_TASK, graph, "math", *nodes[1:attention + 1]),
             aten_step("2" * 64, *nodes[attention + 1:])]
    bundle = write_bundle(tmp_path, graph, steps)
    optimized = load_plan(bundle, module)
    torch.testing.assert_close(optimized(x), module(x))
    assert BACKEND_OPS["math"] in ops_run(optimized, x) and optimized.aten_fallbacks == {}
    output = read_plan(bundle).steps[1].outputs[0]
    assert "state.Relayout(values, " + str(_place(plan_op_source(bundle), output)) in \
        plan_op_source(bundle)


def _place(source: str, name: str) -> int:
    """The place of value `name` in a plan op's table."""
    names = source[source.index("kValueNames[kValueCount] = {") + 28:].split("}", 1)[0]
    return [n.strip().strip('"') for n in names.split(",")].index(name)


def plan_op_source(bundle, graph=None) -> str:
    plan = read_plan(bundle)
    graph = graph or _graph(bundle)
    sources = extension_sources(plan, plan.layouts(graph), graph=graph)
    return sources.files["forge_ops.cpp"]


def _graph(bundle):
    from forge._protos import graph_pb2

    graph = graph_pb2.Graph()
    graph.ParseFromString((bundle / "graph.pb").read_bytes())
    return graph


def test_the_plan_op_calls_the_attention_under_its_backend_and_falls_back_on_refusal(tmp_path):
    _, _, bundle = attention_bundle(tmp_path, "efficient")
    source = plan_op_source(bundle)
    assert "constexpr size_t kSdpaStepCount = 1;" in source
    assert ("{ const OnlySdpaBackend only(OnlySdpaBackend::kEfficient); "
            "state.Aten(8).Run(values); }  // aten::scaled_dot_product_attention.default") in source
    assert ('state.RefuseSdpa(0, "step 1 (task 555555555555, ATen\'s efficient attention)"'
            in source)
    # The fallback: the task's nodes, after the group's (10 = the first linear, the group's 9).
    fallback = source[source.index("if (state.SdpaRefused(0)) {"):]
    assert "state.Aten(10).Run(values);  // aten::split.Tensor" in fallback
    assert '"step1/scaled_dot_product_attention"' in source  # the group's value has its place


def nvcc_or_skip():
    from torch.utils import cpp_extension

    if cpp_extension.CUDA_HOME is None:
        pytest.skip("needs nvcc (CUDA_HOME)")


def test_the_plan_op_of_an_sdpa_step_builds_and_registers(tmp_path):
    nvcc_or_skip()
    from forge.runtime import build_bundle

    _, _, bundle = attention_bundle(tmp_path / "bundle", "efficient")
    build_bundle(bundle, build_root=tmp_path / "extensions")
    op = plan_op_name(bundle)
    for suffix in ("", "_capture", "_replay", "_arena", "_sdpa_refusals"):
        assert hasattr(torch.ops.forge, f"{op}{suffix}")
    # Before its first call on a device, no step has been refused there.
    assert getattr(torch.ops.forge, f"{op}_sdpa_refusals")(torch.device("cpu")) == []


def plan_op_name(bundle) -> str:
    plan, graph = read_plan(bundle), _graph(bundle)
    return extension_sources(plan, plan.layouts(graph), graph=graph).plan_op.name


# Each CUDA backend with a dtype it takes, and the tolerance against eager (which may choose
# another backend).
CUDA_BACKENDS = {"math": (torch.float32, 1e-5), "efficient": (torch.float32, 1e-5),
                 "flash": (torch.bfloat16, 2e-2), "cudnn": (torch.bfloat16, 2e-2)}


@pytest.fixture(scope="module")
def extensions(tmp_path_factory):
    """Where the GPU tests build their extensions: $FORGE_TEST_EXTENSIONS when set (the GPU
    script builds them there first, in parallel: prebuild_gpu_extensions), else a fresh folder."""
    folder = os.environ.get("FORGE_TEST_EXTENSIONS")
    return pathlib.Path(folder) if folder else tmp_path_factory.mktemp("extensions")


def gpu_bundles(directory, device="cuda") -> list:
    """The bundles of the GPU tests, one per extension they build (CUDA_BACKENDS, the refusing
    flash float32 one, CONV_CASES, the chain), made on the GPU as the tests make them."""
    directory = pathlib.Path(directory)
    bundles = [attention_bundle(directory / f"sdpa_{backend}", backend, dtype, device)[2]
               for backend, (dtype, _) in CUDA_BACKENDS.items()]
    bundles.append(attention_bundle(directory / "sdpa_flash_float32", "flash", torch.float32,
                                    device)[2])
    bundles += [conv_bundle(directory / f"conv_{case}", dtype, device, channels_last)[2]
                for case, (dtype, channels_last, _) in CONV_CASES.items()]
    bundles.append(chain_bundle(directory / "chain", torch.bfloat16, device)[2])
    return bundles


def _build_one(bundle: str, build_root: str) -> str:
    from forge.runtime import build_bundle

    build_bundle(bundle, build_root=build_root)
    return bundle


def prebuild_gpu_extensions(build_root, workers: int = 8, only: str = "") -> None:
    """Builds the GPU tests' extensions into `build_root` in parallel processes (each a
    torch.utils.cpp_extension build): the tests then find them built
    (benchmarks/gpu/run_runtime_library_steps.sh). `only`: comma-separated prefixes of the
    bundles' names to build ("sdpa", "conv", "chain"; empty: all)."""
    import concurrent.futures
    import multiprocessing
    import tempfile

    prefixes = tuple(p for p in only.split(",") if p) or ("",)
    with tempfile.TemporaryDirectory() as scratch:
        bundles = [str(b) for b in gpu_bundles(scratch) if b.name.startswith(prefixes)]
        context = multiprocessing.get_context("spawn")
        with concurrent.futures.ProcessPoolExecutor(workers, mp_context=context) as pool:
            for done in pool.map(_build_one, bundles, [str(build_root)] * len(bundles)):
                print(f"built {pathlib.Path(done).name}", flush=True)


@needs_cuda
@pytest.mark.parametrize("backend", list(CUDA_BACKENDS))
@pytest.mark.parametrize("plan_op", [True, False], ids=["plan_op", "python"])
@pytest.mark.parametrize("cuda_graphs", [True, False], ids=["graph", "eager"])
def test_each_cuda_backend_runs_the_attention_in_the_plan(tmp_path, extensions, backend, plan_op,
                                                          cuda_graphs):
    dtype, tolerance = CUDA_BACKENDS[backend]
    module, x, bundle = attention_bundle(tmp_path, backend, dtype, "cuda")
    optimized = load_plan(bundle, module, plan_op=plan_op, cuda_graphs=cuda_graphs,
                          build_root=extensions)
    assert optimized.step_summary() == "1 sdpa, 2 aten"
    expected = module(x)
    for inputs, wanted in ((x, expected), (x.flip(1), module(x.flip(1)))):
        for _ in range(3):
            torch.testing.assert_close(optimized(inputs), wanted, atol=tolerance, rtol=tolerance)
    assert optimized.aten_fallbacks == {}
    if plan_op:
        assert getattr(torch.ops.forge, f"{optimized.plan_op}_sdpa_refusals")(x.device) == []
    if not cuda_graphs:  # a replay runs no operator the profiler could see
        assert BACKEND_OPS[backend] in ops_run(optimized, x)


@needs_cuda
@pytest.mark.parametrize("plan_op", [True, False], ids=["plan_op", "python"])
def test_a_cuda_backend_that_refuses_falls_back_to_the_nodes(tmp_path, extensions, plan_op,
                                                             caplog):
    # FlashAttention takes no float32: the step warns once and runs its task's nodes.
    module, x, bundle = attention_bundle(tmp_path, "flash", torch.float32, "cuda")
    optimized = load_plan(bundle, module, plan_op=plan_op, cuda_graphs=False,
                          build_root=extensions)
    with pytest.warns(UserWarning) if plan_op else caplog.at_level(logging.WARNING):
        first = optimized(x)
    torch.testing.assert_close(first, module(x), atol=1e-5, rtol=1e-5)
    reason = optimized.aten_fallbacks[SDPA_TASK]
    assert reason.startswith("its call of ATen's flash attention backend failed on this device")
    if plan_op:
        step = read_plan(bundle).steps[1]
        assert getattr(torch.ops.forge, f"{optimized.plan_op}_sdpa_refusals")(x.device) == [
            f"{step.describe()}: {reason}"]
    assert BACKEND_OPS["flash"] not in ops_run(optimized, x)
    torch.testing.assert_close(optimized(x), module(x), atol=1e-5, rtol=1e-5)


class ConvRelu(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(8, 16, 3, padding=1)

    def forward(self, x):
        return torch.relu(self.conv(x))


CONV_TASK = "c" * 64


def conv_bundle(directory, dtype=torch.float32, device="cpu", channels_last=False):
    """ConvRelu's plan: conv + bias + ReLU as one cudnn_conv step, its call as the client writes
    it for the cudnn_conv family's winner (client/forge/results.cc CudnnConvJson), with the
    layouts the export recorded."""
    torch.manual_seed(0)
    module = ConvRelu().eval().to(device=device, dtype=dtype)
    x = torch.randn(2, 8, 16, 16, device=device, dtype=dtype)
    if channels_last:
        module, x = module.to(memory_format=torch.channels_last), x.contiguous(
            memory_format=torch.channels_last)
    graph = forge.export(module, (x,)).graph
    conv, relu = node_named(graph, "aten::conv2d"), node_named(graph, "aten::relu")
    layouts = {v.name: TensorLayout.of_value(v) for v in graph.values}
    tensor = lambda name: {"dims": list(layouts[name].shape),
                           "strides": list(layouts[name].strides)}
    x_name, w_name, _ = tensor_arguments(conv)
    call = {"dtype": str(dtype).removeprefix("torch."), "x_input": 0, "w_input": 1,
            "x": tensor(x_name), "w": tensor(w_name), "y": tensor(relu.outputs[0]),
            "padding": [1, 1], "stride": [1, 1], "dilation": [1, 1], "groups": 1,
            "epilogue": [{"step": "bias", "input": 2, "scalar": 1},
                         {"step": "relu", "input": -1, "scalar": 1}],
            "residuals": [], "heuristic": 0, "engine": 0, "engine_name": ""}
    step = {**aten_step(CONV_TASK, conv, relu), "outputs": list(relu.outputs),
            "implementation": "cudnn_conv", "cudnn_conv": call}
    return module, x, write_bundle(directory, graph, [step])


def test_a_cudnn_conv_step_reads_its_call(tmp_path):
    _, _, bundle = conv_bundle(tmp_path)
    step = read_plan(bundle).steps[0]
    assert step.implementation == "cudnn_conv" and step.runnable_as_planned
    assert step.describe() == f"step 0 (task {'c' * 12}, cuDNN fused graph)"
    call = step.cudnn_conv
    assert call.dtype == torch.float32 and (call.x_input, call.w_input) == (0, 1)
    assert call.x.dims == (2, 8, 16, 16) and call.x.strides == (2048, 256, 16, 1)
    assert call.w.dims == (16, 8, 3, 3) and call.y.dims == (2, 16, 16, 16)
    assert [(s.step, s.input) for s in call.epilogue] == [("bias", 2), ("relu", -1)]


def rewrite_call(bundle, edit):
    rewrite_steps(bundle, lambda steps: edit(steps[0]["cudnn_conv"]))


# What the extension's sources are with cuDNN found (the paths are not read to generate them).
FAKE_CUDNN = CudnnBuild(("/frontend/include", "/cudnn/include"), ("-l:libcudnn.so.9",), "0")


def cudnn_sources(bundle):
    """The bundle's plan and the extension's sources with cuDNN found (FAKE_CUDNN)."""
    plan, graph = read_plan(bundle), _graph(bundle)
    return plan, extension_sources(plan, plan.layouts(graph), graph=graph, cudnn=FAKE_CUDNN)


@pytest.mark.parametrize("edit,message", [
    (lambda c: c.update(dtype="float64"), "dtype 'float64' is not one of"),
    (lambda c: c["epilogue"].append({"step": "swish", "input": -1}),
     "epilogue step 'swish' is not one of"),
    (lambda c: c["epilogue"][0].update(input=7),
     "epilogue step bias reads input 7, the step has 3"),
    (lambda c: c["epilogue"][1].update(input=0), "epilogue step relu reads input 0"),
    (lambda c: c["residuals"].append({"dims": [1], "strides": [1]}), "1 residual tensors for 0"),
    (lambda c: c["w"].update(dims=[16, 8, 3]), "x, w and y need dims and strides of one rank"),
    (lambda c: c.update(engine=-1), "x_input 0, w_input 1, heuristic 0 or engine -1 out of range"),
    (lambda c: c.update(padding=[1, "1"]), "field 'padding' should be a list of integers"),
], ids=["dtype", "step", "bias_input", "relu_input", "residuals", "rank", "engine", "padding"])
def test_malformed_cudnn_conv_steps_are_clear_errors(tmp_path, edit, message):
    _, _, bundle = conv_bundle(tmp_path)
    rewrite_call(bundle, edit)
    with pytest.raises(PlanError, match=f"plan.json step 0: cudnn_conv: {message}"):
        read_plan(bundle)


def test_the_cudnn_conv_op_builds_the_winners_graph_through_the_workers_header(tmp_path):
    _, _, bundle = conv_bundle(tmp_path)
    plan, sources = cudnn_sources(bundle)
    graph, cudnn = _graph(bundle), FAKE_CUDNN
    op = sources.ops[CONV_TASK]
    assert op.startswith(f"cudnn_conv_{'c' * 12}_")
    assert {"cudnn_conv_graph.h", "cudnn_conv_step.h"} <= set(sources.files)
    assert sources.include_paths == cudnn.include_paths and sources.ldflags == cudnn.ldflags
    source = sources.files["forge_ops.cpp"]
    assert '#include "cudnn_conv_step.h"' in source
    # The step reads the call as plan.json has it (forge_cudnn::ParseCall), with no kernels to
    # run around the graph, and runs over the task's inputs in order.
    call = json.loads((bundle / "plan.json").read_text())["steps"][0]["cudnn_conv"]
    text = plan.steps[0].cudnn_conv.text
    assert json.loads(text) == call
    assert "new forge_runtime::CudnnConvStep(" in source and '"dtype' not in source  # escaped
    assert "      nullptr, kOp);" in source
    assert "step->Run({in0, in1, in2}, out0, kOp);" in source
    assert "cudnn_conv_kernels.cu" not in sources.files
    # The plan op calls the task's op, not the nodes.
    assert f"    {op}(in0, in1, in2, out0);" in source
    # Without cuDNN the step runs its nodes, and the extension does not include the frontend.
    without = extension_sources(plan, plan.layouts(graph), graph=graph)
    assert CONV_TASK not in without.ops and "cudnn_conv_step.h" not in without.files
    assert "aten::conv2d" in without.files["forge_ops.cpp"]
    assert without.include_paths == () and without.name != sources.name


class ConvChain(nn.Module):
    """Three convolutions as ResNet stacks them (64 channels, 28x28: the shapes cuDNN's NHWC
    engines ran with these epilogues in tests/gpu/cudnn_conv_gpu_test), each a cudnn_conv task:
    conv, eval batch norm, relu6 (a fold and a clamp); conv + bias, ReLU; conv, batch norm, the
    residual add of its own input, ReLU. Batch norms with statistics and affine parameters far
    from the identity."""

    def __init__(self, channels=64):
        super().__init__()
        conv = lambda bias: nn.Conv2d(channels, channels, 3, padding=1, bias=bias)
        self.conv1, self.bn1 = conv(False), nn.BatchNorm2d(channels)
        self.conv2 = conv(True)
        self.conv3, self.bn3 = conv(False), nn.BatchNorm2d(channels, eps=1e-3)
        for bn in (self.bn1, self.bn3):
            bn.running_mean.copy_(torch.randn(channels) * 0.5)
            bn.running_var.copy_(torch.rand(channels) * 2 + 0.25)
            bn.weight.data.copy_(torch.randn(channels))
            bn.bias.data.copy_(torch.randn(channels) * 0.5)

    def forward(self, x):
        y = F.relu6(self.bn1(self.conv1(x)))
        y = torch.relu(self.conv2(y))
        return torch.relu(self.bn3(self.conv3(y)) + y)


CHAIN_TASKS = ("d" * 64, "e" * 64, "f" * 64)
_FOLD_TYPES = {torch.float32: 0, torch.bfloat16: 1, torch.float16: 2}


def _nhwc(dims) -> list[int]:
    """The strides of an NHWC (or KRSC) copy of an (N, C, H, W) tensor."""
    n, c, h, w = dims
    return [h * w * c, 1, w * c, c]


def chain_bundle(directory, dtype=torch.bfloat16, device="cpu", channels_last=(True,) * 3):
    """ConvChain's plan: each block one cudnn_conv step, its call as the client writes it
    (codegen::CudnnConvCallJson) for a graph_nhwc winner (channels-last inside; `channels_last`
    per block, False: the graph template on the NCHW tensors): the first folds its batch norm and
    clamps to [0, 6], the third folds its batch norm and adds its input back."""
    torch.manual_seed(0)
    module = ConvChain().eval().to(device=device, dtype=dtype)
    x = torch.randn(4, 64, 28, 28, device=device, dtype=dtype)
    graph = forge.export(module, (x,)).graph
    layouts = {v.name: TensorLayout.of_value(v) for v in graph.values}
    nodes = list(graph.nodes)
    convs = [i for i, n in enumerate(nodes) if n.op == "aten::conv2d"]
    blocks = [nodes[convs[0]:convs[1]], nodes[convs[1]:convs[2]], nodes[convs[2]:]]
    dtype_name = str(dtype).removeprefix("torch.")
    steps = []
    for task, block, nhwc in zip(CHAIN_TASKS, blocks, channels_last):
        conv = block[0]
        step = {**aten_step(task, *block), "outputs": list(block[-1].outputs),
                "implementation": "cudnn_conv"}
        position = step["inputs"].index

        def tensor(name, copy=nhwc):
            dims = list(layouts[name].shape)
            return {"dims": dims, "strides": _nhwc(dims) if copy else list(layouts[name].strides)}

        x_name, w_name = tensor_arguments(conv)[:2]
        epilogue, batch_norms, residuals = [], [], []
        if len(tensor_arguments(conv)) == 3:
            epilogue.append({"step": "bias", "input": position(tensor_arguments(conv)[2]),
                             "scalar": 1, "upper": None})
        for node in block[1:]:
            if node.op == "aten::_native_batch_norm_legit_no_training":
                _, weight, bias, mean, var = tensor_arguments(node)
                operand = lambda name: {"input": position(name), "type": _FOLD_TYPES[dtype]}
                eps = next(a.float_value for a in node.arguments if a.name == "eps")
                batch_norms.append({"mean": operand(mean), "var": operand(var),
                                    "weight": operand(weight), "bias": operand(bias),
                                    "eps": eps})
                epilogue.append({"step": "batch_norm", "input": -1, "scalar": 1, "upper": None})
            elif node.op == "aten::relu":
                epilogue.append({"step": "relu", "input": -1, "scalar": 1, "upper": None})
            elif node.op == "aten::add":  # the block's input added back
                residual = next(n for n in tensor_arguments(node) if n in step["inputs"])
                epilogue.append({"step": "residual", "input": position(residual), "scalar": 1,
                                 "upper": None})
                residuals.append(tensor(residual))
            else:
                assert node.op == "aten::relu6", node.op
                epilogue.append({"step": "clamp", "input": -1, "scalar": 0.0, "upper": 6.0})
        padding = list(next(a.ints.values for a in conv.arguments if a.name == "padding")) \
            if any(a.name == "padding" for a in conv.arguments) else [0, 0]
        step["cudnn_conv"] = {
            "dtype": dtype_name, "x_input": position(x_name), "w_input": position(w_name),
            "x": tensor(x_name), "w": tensor(w_name), "y": tensor(block[-1].outputs[0]),
            "padding": padding, "stride": [1, 1], "dilation": [1, 1], "groups": 1,
            "epilogue": epilogue, "residuals": residuals, "batch_norms": batch_norms,
            "channels_last_inside": nhwc, "heuristic": 0, "engine": 0,
            "engine_name": ""}
        steps.append(step)
    return module, x, write_bundle(directory, graph, steps)


def test_cudnn_conv_steps_read_their_folds_clamps_and_channels_last_copies(tmp_path):
    _, _, bundle = chain_bundle(tmp_path)
    plan = read_plan(bundle)
    first, second, third = (step.cudnn_conv for step in plan.steps)
    assert [s.step for s in first.epilogue] == ["batch_norm", "clamp"]
    assert (first.epilogue[1].scalar, first.epilogue[1].upper) == (0.0, 6.0)
    assert first.epilogue[0].upper == float("inf")  # null: no bound
    norm = first.batch_norms[0]
    step_inputs = plan.steps[0].inputs
    assert "running_mean" in step_inputs[norm.mean.input]
    assert "running_var" in step_inputs[norm.var.input]
    assert norm.weight.dtype == torch.bfloat16 and norm.eps == 1e-5
    assert all(call.channels_last_inside for call in (first, second, third))
    assert third.batch_norms[0].eps == pytest.approx(1e-3)
    assert [(s.step, s.input) for s in third.epilogue] == [
        ("batch_norm", -1), ("residual", third.x_input), ("relu", -1)]
    assert third.residuals[0].strides == (64 * 28 * 28, 1, 28 * 64, 64)  # its NHWC copy
    assert all(call.runs_kernels for call in (first, second, third))
    assert plan.steps[0].run_kernels == bundle / "cudnn_conv_kernels.cuh"
    source = plan.steps[0].run_kernels.read_text()
    assert "forge_batch_norm_fold" in source and "forge_transpose_2" in source
    assert "struct __align__(2) ForgeHalf" in source  # the prelude the kernels need


@pytest.mark.parametrize("edit,message", [
    (lambda s: s["cudnn_conv"]["batch_norms"].append(s["cudnn_conv"]["batch_norms"][0]),
     "cudnn_conv: 2 batch norms' operands for 1 batch_norm steps"),
    (lambda s: s["cudnn_conv"]["batch_norms"][0]["mean"].update(input=-1),
     "cudnn_conv: batch norm mean reads input -1 of type 1"),
    (lambda s: s["cudnn_conv"]["batch_norms"][0]["var"].update(type=7),
     "cudnn_conv: batch norm var reads input .* of type 7"),
    (lambda s: s["cudnn_conv"].update(channels_last_inside="yes"),
     "cudnn_conv: channels_last_inside 'yes'"),
    (lambda s: s.update(run_kernels="missing.cuh"),
     "the source of its batch norm fold and channels-last copies, .*missing.cuh, does not exist"),
], ids=["norms", "mean", "type", "channels_last", "run_kernels"])
def test_malformed_folds_and_copies_are_clear_errors(tmp_path, edit, message):
    _, _, bundle = chain_bundle(tmp_path)
    rewrite_steps(bundle, lambda steps: edit(steps[0]))
    with pytest.raises(PlanError, match=f"plan.json step 0: {message}"):
        read_plan(bundle)


def test_the_kernels_around_cudnn_graphs_are_the_bundles_built_once(tmp_path):
    _, _, bundle = chain_bundle(tmp_path)
    plan, sources = cudnn_sources(bundle)
    kernels = sources.files["cudnn_conv_kernels.cu"]
    assert (bundle / "cudnn_conv_kernels.cuh").read_text() in kernels
    fold = f"forge_cudnn_conv_fold_{sources.name.removeprefix('forge_plan_')[:8]}"
    assert f'extern "C" cudaError_t {fold}(' in kernels
    source = sources.files["forge_ops.cpp"]
    assert f'extern "C" cudaError_t {fold}(' in source
    assert source.count("      &kCudnnRunKernels, kOp);") == 3
    # The kernels' source is part of what the extension is: another source, another build.
    (bundle / "cudnn_conv_kernels.cuh").write_text(
        (bundle / "cudnn_conv_kernels.cuh").read_text() + "\n// changed\n")
    assert cudnn_sources(bundle)[1].name != sources.name


def test_the_plan_op_keeps_a_tensor_channels_last_between_two_nhwc_steps(tmp_path):
    # Every step runs channels-last inside. Step 1 writes a value only step 2 reads, as its x;
    # step 2 one that step 3 reads as its x and its residual: each writer leaves its NHWC result
    # in the buffer and each reader takes it as its NHWC copy, one conversion pair fewer per
    # value. Step 3 writes the graph's output: NCHW, as the graph says. The ops themselves (the
    # Python executor's) still convert.
    _, _, bundle = chain_bundle(tmp_path)
    plan, sources = cudnn_sources(bundle)
    source = sources.files["forge_ops.cpp"]
    first, second, third = (sources.ops[task] for task in CHAIN_TASKS)
    kept = [plan.steps[0].outputs[0], plan.steps[1].outputs[0]]
    assert [plan.steps[i].inputs[plan.steps[i].cudnn_conv.x_input] for i in (1, 2)] == kept
    assert (f"    {first}_layouts(in0, in1, in2, in3, in4, in5, out0, 0x0ULL, true);  "
            f"// channels-last: {kept[0]}") in source
    assert (f"    {second}_layouts(in0, in1, in2, out0, 0x1ULL, true);  "
            f"// channels-last: {kept[0]}, {kept[1]}") in source
    assert (f"    {third}_layouts(in0, in1, in2, in3, in4, in5, out0, 0x1ULL, false);  "
            f"// channels-last: {kept[1]}") in source
    assert f"void {second}(const at::Tensor& in0" in source  # the op the Python executor calls
    assert f"  {second}_layouts(in0, in1, in2, out0, 0, false);" in source
    # A step on the NCHW tensors (the graph template) takes no layouts.
    _, _, nchw = chain_bundle(tmp_path / "nchw", channels_last=(False, True, True))
    plan, sources = cudnn_sources(nchw)
    source = sources.files["forge_ops.cpp"]
    first, second = (sources.ops[task] for task in CHAIN_TASKS[:2])
    assert f"void {first}_layouts(" not in source
    assert f"    {first}(in0, in1, in2, in3, in4, in5, out0);" in source
    assert f"    {second}_layouts(in0, in1, in2, out0, 0x0ULL, true);" in source


@pytest.mark.parametrize("edit,why", [
    (lambda steps: steps[1]["cudnn_conv"].update(channels_last_inside=False),
     "its reader converts nothing"),
    (lambda steps: steps.append({"step": 3, "task": "a" * 64, "implementation": "aten",
                                 "nodes": [], "inputs": [steps[0]["outputs"][0]],
                                 "outputs": []}), "an ATen step reads it too"),
    (lambda steps: steps[1]["cudnn_conv"].update(x_input=1, w_input=0),
     "its reader takes it as a weight"),
], ids=["nchw_reader", "aten_reader", "weight"])
def test_a_tensor_stays_nchw_where_any_reader_needs_it(tmp_path, edit, why):
    from forge.runtime.extension import kept_channels_last

    _, _, bundle = chain_bundle(tmp_path)
    rewrite_steps(bundle, edit)
    steps = read_plan(bundle).steps
    ops = {task: f"op_{task[:4]}" for task in CHAIN_TASKS}
    assert steps[0].outputs[0] not in kept_channels_last(steps, ops, set()), why
    # Without its op (cuDNN missing: the step runs its nodes), nothing is kept either.
    unedited = chain_bundle(tmp_path / "unedited")[2]
    steps = read_plan(unedited).steps
    both = {steps[0].outputs[0], steps[1].outputs[0]}
    assert kept_channels_last(steps, ops, set()) == both
    assert kept_channels_last(steps, {CHAIN_TASKS[1]: "op"}, set()) == set()
    assert kept_channels_last(steps, ops, {steps[0].outputs[0]}) == both - {steps[0].outputs[0]}


def cudnn_or_skip() -> CudnnBuild:
    from forge.runtime.cudnn import cudnn_build

    cudnn, why = cudnn_build()
    if cudnn is None:
        pytest.skip(why)
    return cudnn


def test_the_extension_of_cudnn_conv_steps_builds_with_cudnn_and_their_kernels(tmp_path):
    # The chain's steps fold batch norms, clamp and run channels-last inside: the extension
    # compiles the bundle's kernels with nvcc and links their launchers into the ops.
    nvcc_or_skip()
    from forge.runtime import build_bundle

    cudnn = cudnn_or_skip()
    _, _, bundle = chain_bundle(tmp_path / "bundle")
    build_bundle(bundle, build_root=tmp_path / "extensions")
    plan, graph = read_plan(bundle), _graph(bundle)
    sources = extension_sources(plan, plan.layouts(graph), graph=graph, cudnn=cudnn)
    assert "cudnn_conv_kernels.cu" in sources.files
    for task in CHAIN_TASKS:
        assert hasattr(torch.ops.forge, sources.ops[task])
    assert hasattr(torch.ops.forge, sources.plan_op.name)


# dtype, channels-last, tolerance against eager.
CONV_CASES = {"float32": (torch.float32, False, 1e-4),
              "bfloat16_nhwc": (torch.bfloat16, True, 2e-2)}


@needs_cuda
@pytest.mark.parametrize("case", list(CONV_CASES))
@pytest.mark.parametrize("plan_op", [True, False], ids=["plan_op", "python"])
@pytest.mark.parametrize("cuda_graphs", [True, False], ids=["graph", "eager"])
def test_a_cudnn_conv_step_runs_the_fused_graph(tmp_path, extensions, case, plan_op, cuda_graphs,
                                                monkeypatch):
    cudnn_or_skip()
    # Eager without TF32, as the judge holds float32 convolutions (the graph's engines keep it).
    monkeypatch.setattr(torch.backends.cudnn, "allow_tf32", False)
    dtype, channels_last, tolerance = CONV_CASES[case]
    module, x, bundle = conv_bundle(tmp_path, dtype, "cuda", channels_last)
    optimized = load_plan(bundle, module, plan_op=plan_op, cuda_graphs=cuda_graphs,
                          build_root=extensions)
    assert optimized.aten_fallbacks == {}
    assert optimized.step_summary() == "1 cudnn_conv"
    for inputs in (x, x * -0.5):
        for _ in range(3):
            torch.testing.assert_close(optimized(inputs), module(inputs), atol=tolerance,
                                       rtol=tolerance)
    if not cuda_graphs:
        ran = ops_run(optimized, x)
        assert "aten::convolution" not in ran and "aten::cudnn_convolution" not in ran
        if not plan_op:
            assert f"forge::{optimized.ops[CONV_TASK]}" in ran


@needs_cuda
@pytest.mark.parametrize("plan_op", [True, False], ids=["plan_op", "python"])
@pytest.mark.parametrize("cuda_graphs", [True, False], ids=["graph", "eager"])
def test_batch_norm_folds_clamps_and_channels_last_winners_run_in_the_plan(
        tmp_path, extensions, plan_op, cuda_graphs):
    # The winners the plan used to send to ATen: each step converts to channels-last and back as
    # the judged graph_nhwc candidate did (the plan op: once per kept value), folds its batch
    # norm and clamps, and the plan is as close to the float64 reference as the judge asks:
    # bfloat16's 1e-2 beyond eager's own error. bfloat16: cuDNN's engines run these graphs only
    # in NHWC and in half precision (tests/gpu/cudnn_conv_gpu_test's log on the H200).
    cudnn_or_skip()
    module, x, bundle = chain_bundle(tmp_path, torch.bfloat16, "cuda")
    optimized = load_plan(bundle, module, plan_op=plan_op, cuda_graphs=cuda_graphs,
                          build_root=extensions)
    assert optimized.aten_fallbacks == {}
    assert optimized.step_summary() == "3 cudnn_conv"
    try:
        optimized(x)
    except RuntimeError as error:  # not an error of the runtime's: no winner would be this
        if "cuDNN cannot run the winner's graph" not in str(error):
            raise
        pytest.skip(f"engine 0 of heuristic A does not run here: {error}")
    reference = ConvChain().eval()
    reference.load_state_dict(module.state_dict())
    reference = reference.to(device="cuda", dtype=torch.float64)
    for inputs in (x, x * -0.5 + 0.25, torch.randn_like(x) * 3):
        expected = reference(inputs.double())
        eager_error = (module(inputs).double() - expected).abs().max().item()
        for _ in range(3):
            got = optimized(inputs)
            assert got.dtype == torch.bfloat16 and got.shape == expected.shape
            torch.testing.assert_close(got.double(), expected, atol=1e-2 + eager_error,
                                       rtol=1e-2)
    if not cuda_graphs:
        ran = ops_run(optimized, x)
        assert not {"aten::convolution", "aten::cudnn_convolution",
                    "aten::_native_batch_norm_legit_no_training", "aten::relu6"} & ran
