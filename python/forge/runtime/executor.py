"""The plan executor: an nn.Module whose forward runs a plan's steps in order.

Kernel and library steps call the extension's ops (torch.ops.forge.*) on tensors of exactly the
layouts their kernels were generated for (a value that arrives with other strides or alignment
is copied into one that has them first); ATen steps call their nodes' operators by schema name
(torch.ops.aten.<op>.<overload>) with the arguments the graph records. Weights are the module's
own parameters and buffers, bound by the export's names (no copy).

With CUDA graphs, the first call runs the plan eagerly on a side stream (warm-up), then captures
one run into a torch.cuda.CUDAGraph over static input buffers; later calls copy their inputs in,
replay, and return copies of the static outputs. Every intermediate then lives at a fixed address
in the graph's memory pool. If capture fails (an op that synchronizes with the host, say), the
failure is logged and the plan runs eagerly from then on.
"""

from __future__ import annotations

import logging
from typing import Callable, Mapping, Sequence

import torch
from torch.utils import _pytree as pytree

from forge._protos import graph_pb2
from forge.export import _LAYOUTS, _MEMORY_FORMATS
from forge.runtime.plan import _TORCH_DTYPES, Plan, PlanError, Step, TensorLayout

log = logging.getLogger("forge.runtime")

_TORCH_LAYOUTS = {proto: layout for layout, proto in _LAYOUTS.items()}
_TORCH_MEMORY_FORMATS = {proto: fmt for fmt, proto in _MEMORY_FORMATS.items()}
WARMUP_RUNS = 2  # eager runs before capture: cuBLAS handles, workspaces and lazy inits happen then
VECTOR_BYTES = 16  # the widest access a generated kernel makes


def _overload(node, where: str):
    namespace, _, name = node.op.partition("::")
    try:
        return getattr(getattr(getattr(torch.ops, namespace), name), node.overload or "default")
    except (AttributeError, RuntimeError) as err:
        raise PlanError(f"{where}: operator {node.op}.{node.overload} is not known to this "
                        f"PyTorch ({torch.__version__})") from err


def _argument(arg, device: torch.device, where: str) -> Callable[[dict], object]:
    """A function of the value environment that yields the argument's value."""
    kind = arg.WhichOneof("value")
    if kind == "tensor":
        return lambda env, name=arg.tensor: env[name]
    if kind == "optional_tensor":
        if not arg.optional_tensor.HasField("value_name"):
            return lambda env: None
        return lambda env, name=arg.optional_tensor.value_name: env[name]
    if kind == "tensors":
        names = list(arg.tensors.value_names)
        return lambda env: [env[name] for name in names]
    if kind == "optional_tensors":
        names = [i.value_name if i.HasField("value_name") else None
                 for i in arg.optional_tensors.items]
        return lambda env: [None if name is None else env[name] for name in names]
    if kind in ("int_value", "float_value", "bool_value", "string_value"):
        constant = getattr(arg, kind)
    elif kind in ("ints", "floats", "bools"):
        constant = list(getattr(arg, kind).values)
    elif kind == "none":
        constant = None
    elif kind == "dtype":
        constant = _TORCH_DTYPES[arg.dtype]
    elif kind == "device":
        constant = device  # the graph recorded the export's device; the plan runs on this one
    elif kind == "layout":
        constant = _TORCH_LAYOUTS.get(arg.layout, torch.strided)
    elif kind == "memory_format":
        constant = _TORCH_MEMORY_FORMATS[arg.memory_format]
    else:
        raise PlanError(f"{where}: argument '{arg.name}' has no value the runtime knows ({kind})")
    return lambda env: constant


class _AtenCall:
    """One node of the graph, called through the dispatcher."""

    def __init__(self, node, device: torch.device):
        where = f"node '{node.name}'"
        self.op = _overload(node, where)
        self.positional = [_argument(a, device, where) for a in node.arguments if not a.keyword]
        self.keywords = {a.name: _argument(a, device, where) for a in node.arguments if a.keyword}
        self.outputs = list(node.outputs)

    def __call__(self, env: dict) -> None:
        result = self.op(*[get(env) for get in self.positional],
                         **{name: get(env) for name, get in self.keywords.items()})
        if len(self.outputs) == 1 and not isinstance(result, (tuple, list)):
            result = (result,)
        env.update(zip(self.outputs, result))


def _aligned(tensor: torch.Tensor) -> bool:
    """The judge runs kernels on buffers that start at an allocation, so kernels may access
    their arguments in 16-byte vectors: a tensor that starts elsewhere is staged."""
    return tensor.data_ptr() % VECTOR_BYTES == 0


class PlanModule(torch.nn.Module):
    """Runs a result bundle's plan (see forge.runtime.load_plan). Inference only: forward runs
    under torch.no_grad. Its inputs must have the example inputs' shapes and dtypes."""

    def __init__(self, plan: Plan, graph, weights: Mapping[str, torch.Tensor],
                 ops: Mapping[str, str], device: torch.device, *, cuda_graphs: bool,
                 output_structure: pytree.TreeSpec | None):
        super().__init__()
        self.plan = plan
        self.device = device
        self.ops = dict(ops)  # task digest -> name under torch.ops.forge
        self._layouts = {v.name: TensorLayout.of_value(v) for v in graph.values}
        self._weights = dict(weights)
        self._inputs = [i.value_name for i in graph.inputs
                        if i.kind == graph_pb2.INPUT_KIND_USER_INPUT]
        self._outputs = [o.value_name for o in graph.outputs
                         if o.kind == graph_pb2.OUTPUT_KIND_USER_OUTPUT]
        self._output_structure = output_structure
        nodes = {node.name: node for node in graph.nodes}
        self._steps = [self._compile(step, nodes) for step in plan.steps]
        self._use_cuda_graph = cuda_graphs and device.type == "cuda"
        self._graph: torch.cuda.CUDAGraph | None = None
        self._static_inputs: list[torch.Tensor] = []
        self._static_outputs: list[torch.Tensor] = []
        self.capture_error: str | None = None  # why capture failed, when it did

    def _compile(self, step: Step, nodes: Mapping[str, object]) -> Callable[[dict], None]:
        if step.task not in self.ops:
            unknown = [name for name in step.nodes if name not in nodes]
            if unknown:
                raise PlanError(f"{step.describe()}: node '{unknown[0]}' is not in the graph")
            calls = [_AtenCall(nodes[name], self.device) for name in step.nodes]

            def run_aten(env: dict) -> None:
                for call in calls:
                    call(env)
            return run_aten

        op = getattr(torch.ops.forge, self.ops[step.task])
        inputs = [(name, self._layouts[name]) for name in step.inputs]
        outputs = [self._layouts[name] for name in step.outputs]
        names = step.outputs

        def run_op(env: dict) -> None:
            arguments = [self._conform(env[name], layout) for name, layout in inputs]
            # Fresh outputs from the caching allocator: nothing returned is overwritten later.
            results = [layout.empty(self.device) for layout in outputs]
            op(*arguments, *results)
            env.update(zip(names, results))
        return run_op

    def _conform(self, tensor: torch.Tensor, layout: TensorLayout) -> torch.Tensor:
        if layout.matches(tensor) and _aligned(tensor):
            return tensor
        staged = layout.empty(self.device)
        staged.copy_(tensor)
        return staged

    def _run(self, inputs: Sequence[torch.Tensor]) -> list[torch.Tensor]:
        env = dict(self._weights)
        env.update(zip(self._inputs, inputs))
        for step in self._steps:
            step(env)
        return [env[name] for name in self._outputs]

    def _check_inputs(self, inputs: Sequence[torch.Tensor]) -> None:
        if len(inputs) != len(self._inputs):
            raise PlanError(f"the plan takes {len(self._inputs)} tensor inputs, got {len(inputs)}")
        for i, (tensor, name) in enumerate(zip(inputs, self._inputs)):
            layout = self._layouts[name]
            if tensor.dtype != layout.dtype or tuple(tensor.shape) != layout.shape:
                raise PlanError(f"input {i} ('{name}'): the plan was optimized for "
                                f"{layout.describe()} (shapes are fixed by the example inputs), "
                                f"got {str(tensor.dtype).removeprefix('torch.')}"
                                f"{list(tensor.shape)}")
            if tensor.device != self.device:
                raise PlanError(f"input {i} ('{name}') is on {tensor.device}; the plan runs on "
                                f"{self.device}")

    def _capture(self, inputs: Sequence[torch.Tensor]) -> None:
        static_inputs = [self._layouts[name].empty(self.device) for name in self._inputs]
        for static, tensor in zip(static_inputs, inputs):
            static.copy_(tensor)
        side = torch.cuda.Stream(self.device)
        side.wait_stream(torch.cuda.current_stream(self.device))
        try:
            with torch.cuda.stream(side):
                for _ in range(WARMUP_RUNS):
                    self._run(static_inputs)
            torch.cuda.current_stream(self.device).wait_stream(side)
            graph = torch.cuda.CUDAGraph()
            with torch.cuda.graph(graph):
                static_outputs = self._run(static_inputs)
        except RuntimeError as err:
            torch.cuda.synchronize(self.device)
            self.capture_error = str(err).splitlines()[0] if str(err) else type(err).__name__
            log.warning("forge: capturing the plan of job %s in a CUDA graph failed (%s); it "
                        "runs eagerly instead", self.plan.job or "?", self.capture_error)
            return
        self._graph, self._static_inputs, self._static_outputs = (graph, static_inputs,
                                                                  static_outputs)

    @property
    def uses_cuda_graph(self) -> bool:
        """Whether calls replay a captured CUDA graph (known after the first call)."""
        return self._graph is not None

    def forward(self, *args, **kwargs):
        leaves, _ = pytree.tree_flatten((args, kwargs))
        inputs = [leaf for leaf in leaves if isinstance(leaf, torch.Tensor)]
        self._check_inputs(inputs)
        with torch.no_grad():
            if self._use_cuda_graph and self._graph is None and self.capture_error is None:
                self._capture(inputs)
            if self._graph is not None:
                for static, tensor in zip(self._static_inputs, inputs):
                    static.copy_(tensor)
                self._graph.replay()
                outputs = [t.clone() for t in self._static_outputs]
            else:
                outputs = self._run(inputs)
        if self._output_structure is not None:
            return pytree.tree_unflatten(outputs, self._output_structure)
        return outputs[0] if len(outputs) == 1 else tuple(outputs)

    def step_summary(self) -> str:
        """How the steps run, e.g. "4 kernel, 1 library, 15 aten"."""
        counts: dict[str, int] = {}
        for step in self.plan.steps:
            kind = step.implementation if step.task in self.ops else "aten"
            counts[kind] = counts.get(kind, 0) + 1
        return ", ".join(f"{counts[kind]} {kind}" for kind in ("kernel", "library", "aten")
                         if kind in counts)

    def extra_repr(self) -> str:
        return (f"job={self.plan.job!r}, model={self.plan.model!r}, steps: "
                f"{self.step_summary()}, device={self.device}, "
                f"cuda_graphs={self._use_cuda_graph}")
