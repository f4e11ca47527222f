"""The plan executor: an nn.Module whose forward runs a plan's steps in order.

When the extension is built, forward is one call of its plan op (torch.ops.forge.plan_*), which
runs the steps in C++ (runtime/extension/plan.cpp.in) exactly as this module would. Otherwise
(aten_only, which also runs on the CPU, or a plan without kernel or library steps) the steps are
sequenced here, the reference path: kernel and library steps call the extension's ops (torch.ops.forge.*) on tensors of exactly the
layouts their kernels were generated for (a value that arrives with other strides or alignment
is copied into one that has them first); ATen steps call their nodes' operators by schema name
(torch.ops.aten.<op>.<overload>) with the arguments the graph records. Weights are the module's
own parameters and buffers, bound by the export's names (no copy).

With CUDA graphs and the plan op, the op captures the plan itself (in C++,
runtime/extension/plan.cpp.in): the first call captures it over static input buffers, and later
calls are one call of the op's _replay, which copies only inputs that changed since the last call
and hands out the graph's outputs without copying them; outputs the caller still holds when the
next call comes are moved to memory of their own first, so nothing returned is ever overwritten.
Without the plan op, the first call runs the plan eagerly on a side stream (warm-up), then captures
one run into a torch.cuda.CUDAGraph over static input buffers; later calls copy their inputs in,
replay, and return copies of the static outputs. Either way, if capture fails (an op that
synchronizes with the host, say), the failure is logged and the plan runs eagerly from then on.
A plan of one launch is not captured (a graph saves launches, and there is one). Copying the
inputs costs a pass over them, which for a memory-bound plan over large tensors outweighs what the
graph saves in launches: right after capture, a few replays (input copies included) are timed
against as many eager runs, and the faster way is kept (`graph_choice` says what was measured).
"""

from __future__ import annotations

import dataclasses
import functools
import logging
from typing import Callable, Mapping, Sequence

import torch
from torch.utils import _pytree as pytree

from forge._protos import graph_pb2
from forge.export import _LAYOUTS, _MEMORY_FORMATS
from forge.runtime.plan import (_TORCH_DTYPES, SDPA_BACKEND_ATTRIBUTE, Plan, PlanError, Step,
                                TensorLayout)

log = logging.getLogger("forge.runtime")

_TORCH_LAYOUTS = {proto: layout for layout, proto in _LAYOUTS.items()}
_TORCH_MEMORY_FORMATS = {proto: fmt for fmt, proto in _MEMORY_FORMATS.items()}
WARMUP_RUNS = 2  # eager runs before capture: cuBLAS handles, workspaces and lazy inits happen then
CHOICE_RUNS = 3  # timed runs of each way (graph replay with its copies, eager) after capture
LAUNCH_SAVING_S = 5e-6  # more than a graph saves per kernel launch
COPY_BYTES_PER_S = 3e12  # device-to-device copy bandwidth, below an H100's or H200's
VECTOR_BYTES = 16  # the widest access a generated kernel makes


_CONSTANT_KINDS = {"int_value": "int", "float_value": "float", "bool_value": "bool",
                   "string_value": "string", "ints": "ints", "floats": "floats", "bools": "bools"}


@dataclasses.dataclass(frozen=True)
class RecordedArgument:
    """One argument of a node as the graph records it, decoded once. The Python executor passes
    it to torch.ops, and the plan op's generated C++ (extension.py) converts it to an IValue: both
    follow this one description."""

    name: str
    keyword: bool  # passed by name (keyword-only in the schema)
    # What the value is, by kind. Values of the table: "tensor", a value name; "tensors", value
    # names; "optional_tensors", value names or None. Constants: "int", "float", "bool",
    # "string", "none", "ints", "floats", "bools" (tuples), "dtype" (a torch.dtype), "layout",
    # "memory_format" (torch's). "device": None, for the plan's device (the graph recorded the
    # export's; the plan runs on its own, as the C++ reference interpreter does).
    kind: str
    value: object

    @staticmethod
    def of(arg, where: str) -> "RecordedArgument":
        """Decodes a forge.v1.Argument."""
        kind = arg.WhichOneof("value")
        decoded = functools.partial(RecordedArgument, arg.name, arg.keyword)
        if kind == "tensor":
            return decoded("tensor", arg.tensor)
        if kind == "optional_tensor":
            if not arg.optional_tensor.HasField("value_name"):
                return decoded("none", None)
            return decoded("tensor", arg.optional_tensor.value_name)
        if kind == "tensors":
            return decoded("tensors", tuple(arg.tensors.value_names))
        if kind == "optional_tensors":
            return decoded("optional_tensors", tuple(
                i.value_name if i.HasField("value_name") else None
                for i in arg.optional_tensors.items))
        if kind in ("int_value", "float_value", "bool_value", "string_value"):
            return decoded(_CONSTANT_KINDS[kind], getattr(arg, kind))
        if kind in ("ints", "floats", "bools"):
            return decoded(kind, tuple(getattr(arg, kind).values))
        if kind == "none":
            return decoded("none", None)
        if kind == "dtype":
            return decoded("dtype", _TORCH_DTYPES[arg.dtype])
        if kind == "device":
            return decoded("device", None)
        if kind == "layout":
            return decoded("layout", _TORCH_LAYOUTS.get(arg.layout, torch.strided))
        if kind == "memory_format":
            return decoded("memory_format", _TORCH_MEMORY_FORMATS[arg.memory_format])
        raise PlanError(f"{where}: argument '{arg.name}' has no value the runtime knows ({kind})")


@dataclasses.dataclass(frozen=True)
class AtenNode:
    """A node of the graph that a step runs as its operator, called by schema name."""

    name: str
    op: str  # qualified, "aten::addmm"
    overload: str  # as torch.ops spells it: "default", "Tensor"
    arguments: tuple[RecordedArgument, ...]  # in schema order, trailing defaults omitted
    outputs: tuple[str, ...]  # value names; "<node>.<i>" for the elements of a tuple result

    @staticmethod
    def of(node) -> "AtenNode":
        where = f"node '{node.name}'"
        return AtenNode(node.name, node.op, node.overload or "default",
                        tuple(RecordedArgument.of(a, where) for a in node.arguments),
                        tuple(node.outputs))


def aten_nodes(step: Step, nodes: Mapping[str, object]) -> list[AtenNode]:
    """The nodes a step runs when it runs as ATen calls, in order; `nodes` maps the graph's node
    names to its forge.v1.Node."""
    unknown = [name for name in step.nodes if name not in nodes]
    if unknown:
        raise PlanError(f"{step.describe()}: node '{unknown[0]}' is not in the graph")
    return [AtenNode.of(nodes[name]) for name in step.nodes]


def sdpa_nodes(step: Step) -> list[tuple[AtenNode, str]]:
    """The nodes an sdpa step runs when its backend takes the call, in order, each with the SDPA
    backend it runs under ("" for the views and the epilogue around the call)."""
    return [(AtenNode.of(node), node.attributes.get(SDPA_BACKEND_ATTRIBUTE, ""))
            for node in step.sdpa_group.nodes]


def sdpa_refusal(step: Step, err: Exception) -> str:
    """Why an sdpa step runs its task's nodes: ATen's own words, first line."""
    first = str(err).strip().splitlines()[0] if str(err).strip() else type(err).__name__
    return (f"its call of ATen's {step.sdpa_backend} attention backend failed on this device "
            f"and torch ({first}); its task's nodes run instead")


def user_inputs(graph) -> list[str]:
    """The values of the graph's user inputs, in the order forward takes them."""
    return [i.value_name for i in graph.inputs if i.kind == graph_pb2.INPUT_KIND_USER_INPUT]


def user_outputs(graph) -> list[str]:
    """The values of the graph's user outputs, in the order the module returns them."""
    return [o.value_name for o in graph.outputs if o.kind == graph_pb2.OUTPUT_KIND_USER_OUTPUT]


def _overload(node: AtenNode):
    namespace, _, name = node.op.partition("::")
    try:
        return getattr(getattr(getattr(torch.ops, namespace), name), node.overload)
    except (AttributeError, RuntimeError) as err:
        raise PlanError(f"node '{node.name}': operator {node.op}.{node.overload} is not known to "
                        f"this PyTorch ({torch.__version__})") from err


def _argument(argument: RecordedArgument, device: torch.device) -> Callable[[dict], object]:
    """A function of the value environment that yields the argument's value."""
    if argument.kind == "tensor":
        return lambda env, name=argument.value: env[name]
    if argument.kind == "tensors":
        return lambda env, names=argument.value: [env[name] for name in names]
    if argument.kind == "optional_tensors":
        return lambda env, names=argument.value: [None if name is None else env[name]
                                                  for name in names]
    constant = device if argument.kind == "device" else argument.value
    if isinstance(constant, tuple):
        constant = list(constant)
    return lambda env: constant


class _AtenCall:
    """One node of the graph, called through the dispatcher."""

    def __init__(self, node: AtenNode, device: torch.device):
        self.op = _overload(node)
        self.positional = [_argument(a, device) for a in node.arguments if not a.keyword]
        self.keywords = {a.name: _argument(a, device) for a in node.arguments if a.keyword}
        self.outputs = list(node.outputs)

    def __call__(self, env: dict) -> None:
        result = self.op(*[get(env) for get in self.positional],
                         **{name: get(env) for name, get in self.keywords.items()})
        if len(self.outputs) == 1 and not isinstance(result, (tuple, list)):
            result = (result,)
        env.update(zip(self.outputs, result))


@dataclasses.dataclass(frozen=True)
class PlanOp:
    """The extension's operator that runs the whole plan (runtime/extension/plan.cpp.in):
    torch.ops.forge.<name>(Tensor[] inputs) -> Tensor[], taking the values `inputs` names (the
    graph's user inputs in order, then the weights and constants the plan reads) and returning
    the graph's user outputs."""

    name: str
    inputs: tuple[str, ...]


# SDPA backends by plan.json's names, as torch.nn.attention.sdpa_kernel takes them.
_SDPA_BACKENDS = {"flash": "FLASH_ATTENTION", "efficient": "EFFICIENT_ATTENTION",
                  "cudnn": "CUDNN_ATTENTION", "math": "MATH"}


def _under_backend(call: Callable[[dict], None], backend: str) -> Callable[[dict], None]:
    """`call` with only `backend` of scaled_dot_product_attention enabled (sdpa_kernel: ATen's
    process-wide switches, put back after the call), as the worker ran it (aten/reference.cc)."""
    from torch.nn.attention import SDPBackend, sdpa_kernel

    chosen = getattr(SDPBackend, _SDPA_BACKENDS[backend])

    def run(env: dict) -> None:
        with sdpa_kernel(chosen):
            call(env)
    return run


def _aligned(tensor: torch.Tensor) -> bool:
    """The judge runs kernels on buffers that start at an allocation, so kernels may access
    their arguments in 16-byte vectors: a tensor that starts elsewhere is staged."""
    return tensor.data_ptr() % VECTOR_BYTES == 0


class PlanModule(torch.nn.Module):
    """Runs a result bundle's plan (see forge.runtime.load_plan). Inference only: forward runs
    under torch.no_grad. Its inputs must have the example inputs' shapes and dtypes.

    With `plan_op` (the extension's operator for the whole plan) forward makes that one call;
    without, it sequences the steps in Python: the reference path, which also runs on the CPU."""

    def __init__(self, plan: Plan, graph, weights: Mapping[str, torch.Tensor],
                 ops: Mapping[str, str], device: torch.device, *, cuda_graphs: bool,
                 output_structure: pytree.TreeSpec | None, plan_op: PlanOp | None = None,
                 aten_fallbacks: Mapping[str, str] | None = None, sdpa_backends: bool = True):
        super().__init__()
        # Why tasks whose winner the extension could not run (a host-launched object that could
        # not be built, an SDPA backend that refused the call) run as their ATen calls, by task
        # digest.
        self.aten_fallbacks = dict(aten_fallbacks or {})
        # Whether sdpa steps run their backend's call (else their task's nodes: aten_only).
        self.sdpa_backends = sdpa_backends
        self.plan = plan
        self.device = device  # load_plan's, with its index
        self.ops = dict(ops)  # task digest -> name under torch.ops.forge
        self._layouts = plan.layouts(graph)
        self._weights = dict(weights)
        self._inputs = user_inputs(graph)
        self._outputs = user_outputs(graph)
        self._output_structure = output_structure
        # The name of the op that runs the whole plan under torch.ops.forge; None when the steps
        # are sequenced in Python.
        self.plan_op: str | None = None
        self._steps: list[Callable[[dict], None]] = []
        if plan_op is not None:
            self.plan_op = plan_op.name
            self._plan_call = getattr(torch.ops.forge, plan_op.name)
            self._capture_op = getattr(torch.ops.forge, f"{plan_op.name}_capture")
            self._replay_op = getattr(torch.ops.forge, f"{plan_op.name}_replay")
            self._plan_weights = [self._weights[name]
                                  for name in plan_op.inputs[len(self._inputs):]]
        else:
            nodes = {node.name: node for node in graph.nodes}
            self._steps = [self._compile(step, nodes) for step in plan.steps]
        self._use_cuda_graph = cuda_graphs and device.type == "cuda"
        self._graph: torch.cuda.CUDAGraph | None = None
        self._static_inputs: list[torch.Tensor] = []
        self._static_outputs: list[torch.Tensor] = []
        self.capture_error: str | None = None  # why capture failed, when it did
        self.graph_choice: str | None = None  # why the graph was kept, dropped or not tried
        self._dropped_graph: torch.cuda.CUDAGraph | None = None
        # The replay of the plan op's graph (captured in C++), bound to its id, when it is kept.
        self._op_replay: Callable[..., list[torch.Tensor]] | None = None
        # After the first call, with the plan op: the one call that runs the plan on the user
        # inputs (a tuple), without Python's checks (the op checks them).
        self._fast: Callable[[tuple], list[torch.Tensor]] | None = None
        leaf = output_structure is None or output_structure.is_leaf()
        self._single_output = leaf and len(self._outputs) == 1

    def _compile(self, step: Step, nodes: Mapping[str, object]) -> Callable[[dict], None]:
        if step.implementation == "sdpa" and self.sdpa_backends:
            return self._compile_sdpa(step, nodes)
        if step.task not in self.ops:
            calls = [_AtenCall(node, self.device) for node in aten_nodes(step, nodes)]

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

    def _compile_sdpa(self, step: Step, nodes: Mapping[str, object]) -> Callable[[dict], None]:
        """The step's one attention call under its backend; the task's nodes from the first
        refusal on (logged, and kept in aten_fallbacks), as the plan op does. Either way its
        outputs leave with the strides the graph records: a backend may lay its result out
        otherwise than the one the export ran, and a later step (a view) may rely on them."""
        calls = [_AtenCall(node, self.device) for node, _ in sdpa_nodes(step)]
        calls = [_under_backend(call, backend) if backend else call
                 for call, (_, backend) in zip(calls, sdpa_nodes(step))]
        fallback = [_AtenCall(node, self.device) for node in aten_nodes(step, nodes)]
        outputs = [(name, self._layouts[name]) for name in step.outputs]
        refused = []

        def run_sdpa(env: dict) -> None:
            if not refused:
                try:
                    for call in calls:
                        call(env)
                except RuntimeError as err:
                    refused.append(sdpa_refusal(step, err))
                    self.aten_fallbacks[step.task] = refused[0]
                    log.warning("forge: %s: %s", step.describe(), refused[0])
            if refused:
                for call in fallback:
                    call(env)
            for name, layout in outputs:
                if not layout.matches(env[name]):
                    staged = layout.empty(self.device)
                    staged.copy_(env[name])
                    env[name] = staged
        return run_sdpa

    def _conform(self, tensor: torch.Tensor, layout: TensorLayout) -> torch.Tensor:
        if layout.matches(tensor) and _aligned(tensor):
            return tensor
        staged = layout.empty(self.device)
        staged.copy_(tensor)
        return staged

    def _run(self, inputs: Sequence[torch.Tensor]) -> list[torch.Tensor]:
        if self.plan_op is not None:
            return list(self._plan_call([*inputs, *self._plan_weights]))
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

    def _graph_may_pay(self, inputs: Sequence[torch.Tensor]) -> bool:
        """Whether replaying could beat eager at all: its copies of the inputs in (and, without
        the plan op, of the outputs out) against the launches it saves (at most LAUNCH_SAVING_S
        each). A plan of one launch has nothing to save."""
        # A task op launches its kernel or library call (one launch: fused nodes are one kernel);
        # an ATen step one launch per node, at least.
        launches = sum(1 if step.task in self.ops else len(step.nodes) for step in self.plan.steps)
        if launches <= 1:
            self.graph_choice = "no CUDA graph: the plan is one launch, which a graph cannot save"
            return False
        copied = sum(t.nbytes for t in inputs)
        direction = "in"
        if self.plan_op is None:
            copied += sum(self._layouts[name].nbytes() for name in self._outputs)
            direction = "in and out"
        copy_s = 2 * copied / COPY_BYTES_PER_S
        if copy_s <= LAUNCH_SAVING_S * launches:
            return True
        self.graph_choice = (f"no CUDA graph: copying {copied / 2**20:.0f} MiB {direction} "
                             f"(~{copy_s * 1e3:.3f} ms) costs more than {launches} launches save")
        return False

    def _capture_failed(self, err: RuntimeError) -> None:
        torch.cuda.synchronize(self.device)
        self.capture_error = str(err).splitlines()[0] if str(err) else type(err).__name__
        log.warning("forge: capturing the plan of job %s in a CUDA graph failed (%s); it runs "
                    "eagerly instead", self.plan.job or "?", self.capture_error)

    def _capture_plan_op(self, inputs: Sequence[torch.Tensor]) -> None:
        """The plan op captures itself; kept when its replays (every input copied) beat eager."""
        if not self._inputs:
            self.graph_choice = "no CUDA graph: the plan has no user inputs to replay it on"
            return
        if not self._graph_may_pay(inputs):
            return
        try:
            replay = functools.partial(self._replay_op, self._capture_op(
                [*inputs, *self._plan_weights]))
        except RuntimeError as err:
            self._capture_failed(err)
            return
        eager_ms = self._time(lambda: self._plan_call([*inputs, *self._plan_weights]))
        replay_ms = self._time(lambda: replay(list(inputs), True))
        if replay_ms <= eager_ms:
            self._op_replay = replay
        kept = "kept" if self._op_replay is not None else "dropped"
        self.graph_choice = (f"{kept} the CUDA graph: replay with input copies {replay_ms:.3f} "
                             f"ms, eager {eager_ms:.3f} ms")

    def _capture(self, inputs: Sequence[torch.Tensor]) -> None:
        if self.plan_op is not None:
            self._capture_plan_op(inputs)
            return
        if not self._graph_may_pay(inputs):
            return
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
            # Eager is timed before the capture (its allocations then come from the cache).
            eager_ms = self._time(lambda: self._run(inputs))
            graph = torch.cuda.CUDAGraph()
            with torch.cuda.graph(graph):
                static_outputs = self._run(static_inputs)
        except RuntimeError as err:
            self._capture_failed(err)
            return
        self._graph, self._static_inputs, self._static_outputs = (graph, static_inputs,
                                                                  static_outputs)
        replay_ms = self._time(lambda: self._replay(inputs))
        keep = replay_ms <= eager_ms
        self.graph_choice = (f"{'kept' if keep else 'dropped'} the CUDA graph: replay with input "
                             f"and output copies {replay_ms:.3f} ms, eager {eager_ms:.3f} ms")
        if not keep:
            # The dropped graph stays referenced: with its memory pool released, the caching
            # allocator returned every later eager run's blocks to the driver (a cudaMalloc and
            # cudaFree per intermediate, 14x slower on the H200).
            self._dropped_graph = graph
            self._graph, self._static_inputs, self._static_outputs = None, [], []

    def _time(self, run: Callable[[], object]) -> float:
        """Median ms of CHOICE_RUNS runs on the current stream, by CUDA events."""
        times = []
        for _ in range(CHOICE_RUNS):
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            run()
            end.record()
            end.synchronize()
            times.append(start.elapsed_time(end))
        return sorted(times)[len(times) // 2]

    def _replay(self, inputs: Sequence[torch.Tensor]) -> list[torch.Tensor]:
        for static, tensor in zip(self._static_inputs, inputs):
            static.copy_(tensor)
        self._graph.replay()
        return [t.clone() for t in self._static_outputs]

    @property
    def uses_cuda_graph(self) -> bool:
        """Whether calls replay a captured CUDA graph (known after the first call): captured,
        and faster than eager with its copies."""
        return self._graph is not None or self._op_replay is not None

    def _structured(self, outputs: Sequence[torch.Tensor]):
        if self._single_output:
            return outputs[0]
        if self._output_structure is not None:
            return pytree.tree_unflatten(list(outputs), self._output_structure)
        return tuple(outputs)

    def forward(self, *args, **kwargs):
        fast = self._fast
        if fast is not None and not kwargs:
            # The plan op checks the inputs. When it refuses them (or they are not all tensors),
            # the path below checks them in Python, to explain, and runs what it can.
            try:
                if torch.is_grad_enabled():
                    with torch.no_grad():
                        return self._structured(fast(args))
                return self._structured(fast(args))
            except (RuntimeError, TypeError):
                pass
        leaves, _ = pytree.tree_flatten((args, kwargs))
        inputs = [leaf for leaf in leaves if isinstance(leaf, torch.Tensor)]
        self._check_inputs(inputs)
        with torch.no_grad():
            if self._use_cuda_graph and self._graph is None and self.graph_choice is None and \
                    self.capture_error is None:
                self._capture(inputs)
            if self._graph is not None:
                outputs = self._replay(inputs)
            elif self._op_replay is not None:
                outputs = self._op_replay(inputs)
            else:
                outputs = self._run(inputs)
        if self.plan_op is not None and len(leaves) == len(inputs):
            self._note_sdpa_refusals()
            # From now on one call of the plan op (or of its replay) per forward.
            weights = self._plan_weights
            self._fast = self._op_replay or (lambda args: self._plan_call([*args, *weights]))
        return self._structured(outputs)

    def _note_sdpa_refusals(self) -> None:
        """The plan op's sdpa steps whose backend refused at the first call, into aten_fallbacks
        (as the Python executor keeps them): the op says why per step, by its description."""
        if not any(step.implementation == "sdpa" for step in self.plan.steps):
            return
        refusals = getattr(torch.ops.forge, f"{self.plan_op}_sdpa_refusals")(self.device)
        for refusal in refusals:
            for step in self.plan.steps:
                if refusal.startswith(f"{step.describe()}: "):
                    self.aten_fallbacks[step.task] = refusal[len(step.describe()) + 2:]

    def step_summary(self) -> str:
        """How the steps run, e.g. "4 kernel, 1 library, 15 aten"."""
        counts: dict[str, int] = {}
        for step in self.plan.steps:
            runs_sdpa = step.implementation == "sdpa" and self.sdpa_backends
            kind = step.implementation if step.task in self.ops or runs_sdpa else "aten"
            counts[kind] = counts.get(kind, 0) + 1
        return ", ".join(f"{counts[kind]} {kind}" for kind in ("kernel", "host_launched",
                                                                "library", "cudnn_conv", "sdpa",
                                                                "aten")
                         if kind in counts)

    def extra_repr(self) -> str:
        fallbacks = "".join(f", task {task[:12]} through ATen: {reason}"
                            for task, reason in self.aten_fallbacks.items())
        return (f"job={self.plan.job!r}, model={self.plan.model!r}, steps: "
                f"{self.step_summary()}, device={self.device}, "
                f"cuda_graphs={self._use_cuda_graph}, plan_op={self.plan_op!r}{fallbacks}")
