"""forge.export: an nn.Module and example inputs -> Forge's graph IR (forge.v1.Graph).

The module goes through torch.export and is functionalized (run_decompositions with an empty
table), which keeps the high-level ATen ops the partitioner fuses around (linear, layer_norm,
softmax, scaled_dot_product_attention). Shapes are specialized to the example inputs. Weights do
not travel inside the graph: each parameter, buffer and constant is named by the SHA-256 of its
bytes, and the bytes are returned beside the graph for upload.
"""

from __future__ import annotations

import dataclasses
import pathlib
import hashlib
import operator
from typing import Any, Sequence

import torch

from forge._protos import graph_pb2

# Constants at most this large travel inside the graph as well as by digest.
DEFAULT_INLINE_LIMIT_BYTES = 64

_DTYPES = {
    torch.float64: graph_pb2.DTYPE_FLOAT64,
    torch.float32: graph_pb2.DTYPE_FLOAT32,
    torch.float16: graph_pb2.DTYPE_FLOAT16,
    torch.bfloat16: graph_pb2.DTYPE_BFLOAT16,
    torch.float8_e4m3fn: graph_pb2.DTYPE_FLOAT8_E4M3FN,
    torch.float8_e5m2: graph_pb2.DTYPE_FLOAT8_E5M2,
    torch.int8: graph_pb2.DTYPE_INT8,
    torch.int16: graph_pb2.DTYPE_INT16,
    torch.int32: graph_pb2.DTYPE_INT32,
    torch.int64: graph_pb2.DTYPE_INT64,
    torch.uint8: graph_pb2.DTYPE_UINT8,
    torch.bool: graph_pb2.DTYPE_BOOL,
    torch.complex64: graph_pb2.DTYPE_COMPLEX64,
}
_LAYOUTS = {
    torch.strided: graph_pb2.LAYOUT_STRIDED,
    torch.sparse_coo: graph_pb2.LAYOUT_SPARSE_COO,
    torch.sparse_csr: graph_pb2.LAYOUT_SPARSE_CSR,
    torch.sparse_csc: graph_pb2.LAYOUT_SPARSE_CSC,
    torch.sparse_bsr: graph_pb2.LAYOUT_SPARSE_BSR,
    torch.sparse_bsc: graph_pb2.LAYOUT_SPARSE_BSC,
}
_MEMORY_FORMATS = {
    torch.contiguous_format: graph_pb2.MEMORY_FORMAT_CONTIGUOUS,
    torch.channels_last: graph_pb2.MEMORY_FORMAT_CHANNELS_LAST,
    torch.channels_last_3d: graph_pb2.MEMORY_FORMAT_CHANNELS_LAST_3D,
    torch.preserve_format: graph_pb2.MEMORY_FORMAT_PRESERVE,
}
_INPUT_KINDS = {
    "USER_INPUT": graph_pb2.INPUT_KIND_USER_INPUT,
    "PARAMETER": graph_pb2.INPUT_KIND_PARAMETER,
    "BUFFER": graph_pb2.INPUT_KIND_BUFFER,
    "CONSTANT_TENSOR": graph_pb2.INPUT_KIND_CONSTANT_TENSOR,
}
_OUTPUT_KINDS = {
    "USER_OUTPUT": graph_pb2.OUTPUT_KIND_USER_OUTPUT,
    "BUFFER_MUTATION": graph_pb2.OUTPUT_KIND_BUFFER_MUTATION,
    "USER_INPUT_MUTATION": graph_pb2.OUTPUT_KIND_USER_INPUT_MUTATION,
}


# Runtime checks torch.export inserts (e.g. for Tensor.float()). They return nothing and compute
# nothing; Forge specializes on the exported shapes and dtypes, so they are dropped (with a note).
_DROPPED_CHECKS = frozenset({
    "aten::_assert_tensor_metadata", "aten::_assert_async", "aten::_assert_scalar",
    "aten::sym_constrain_range", "aten::sym_constrain_range_for_size",
})


class ExportError(ValueError):
    """The module cannot be expressed in Forge's graph IR; the message names the node."""


@dataclasses.dataclass
class ExportedModel:
    """A model in Forge's IR: the graph, and the weight bytes it names, keyed by SHA-256 hex."""

    graph: Any  # forge.v1.Graph
    blobs: dict[str, bytes]

    def save(self, directory) -> None:
        """Writes DIR/graph.pb and DIR/blobs/<sha256>: what `forge submit DIR` reads."""
        directory = pathlib.Path(directory)
        (directory / "blobs").mkdir(parents=True, exist_ok=True)
        (directory / "graph.pb").write_bytes(self.graph.SerializeToString(deterministic=True))
        for digest, data in self.blobs.items():
            (directory / "blobs" / digest).write_bytes(data)


def tensor_bytes(tensor: torch.Tensor) -> bytes:
    """The bytes Forge digests: elements in row-major order, little-endian, no padding."""
    flat = tensor.detach().to("cpu").contiguous().reshape(-1)
    return flat.view(torch.uint8).numpy().tobytes()


def _dtype(dtype: torch.dtype, where: str) -> int:
    if dtype not in _DTYPES:
        raise ExportError(f"{where}: dtype {dtype} is not supported by Forge")
    return _DTYPES[dtype]


def _fill_tensor_spec(spec, tensor: torch.Tensor, where: str) -> None:
    spec.dtype = _dtype(tensor.dtype, where)
    try:
        spec.shape.extend(int(s) for s in tensor.shape)
        spec.strides.extend(int(s) for s in tensor.stride())
        spec.storage_offset = int(tensor.storage_offset())
    except (TypeError, RuntimeError) as err:  # unbacked or symbolic sizes
        raise ExportError(f"{where}: shape {tuple(tensor.shape)} is not static ({err})") from err
    spec.device.type = tensor.device.type
    if tensor.device.index is not None:
        spec.device.index = tensor.device.index
    spec.layout = _LAYOUTS.get(tensor.layout, graph_pb2.LAYOUT_UNSPECIFIED)


def _is_schema_default(argument, value) -> bool:
    if not argument.has_default_value() or isinstance(value, torch.fx.Node):
        return False
    default = argument.default_value
    if isinstance(value, (list, tuple)) and isinstance(default, (list, tuple)):
        return list(value) == list(default)
    return type(value) is type(default) and value == default


class _Converter:
    def __init__(self, program: torch.export.ExportedProgram, inline_limit: int):
        self.program = program
        self.inline_limit = inline_limit
        self.graph = graph_pb2.Graph()
        self.blobs: dict[str, bytes] = {}
        # FX node name -> IR value name (differs only for the elements of tuple results).
        self.value_of: dict[str, str] = {}
        self.dropped_checks = 0

    def add_value(self, name: str, tensor: Any, where: str) -> None:
        if not isinstance(tensor, torch.Tensor):
            raise ExportError(f"{where}: produces a non-tensor value ({type(tensor).__name__}); "
                              "Forge graphs carry tensors only")
        value = self.graph.values.add(name=name)
        _fill_tensor_spec(value.tensor, tensor, where)

    def convert(self) -> None:
        signature = self.program.graph_signature
        specs = {spec.arg.name: spec for spec in signature.input_specs}
        for node in self.program.graph.nodes:
            where = f"node '{node.name}'"
            if node.op == "placeholder":
                self.convert_input(node, specs[node.name])
            elif node.op == "call_function" and node.target is operator.getitem:
                source, index = node.args
                if not isinstance(source.meta.get("val"), (tuple, list)):
                    raise ExportError(f"{where}: getitem on a non-tuple value")
                self.value_of[node.name] = self.value_of[f"{source.name}[{index}]"]
            elif node.op == "call_function":
                self.convert_call(node, where)
            elif node.op == "output":
                pass
            else:
                raise ExportError(f"{where}: unsupported FX node kind '{node.op}'")
        for spec in signature.output_specs:
            kind = _OUTPUT_KINDS.get(spec.kind.name)
            if kind is None:
                raise ExportError(f"output '{spec.arg.name}': unsupported output kind {spec.kind.name}")
            name = getattr(spec.arg, "name", None)
            if name is None:
                raise ExportError(f"output {spec.arg}: non-tensor outputs are not supported")
            self.graph.outputs.add(kind=kind, value_name=self.value_of[name], target=spec.target or "")

    def convert_input(self, node, spec) -> None:
        where = f"input '{node.name}'"
        kind = _INPUT_KINDS.get(spec.kind.name)
        if kind is None:
            raise ExportError(f"{where}: unsupported input kind {spec.kind.name}")
        self.value_of[node.name] = node.name
        graph_input = self.graph.inputs.add(kind=kind, value_name=node.name)
        if kind == graph_pb2.INPUT_KIND_USER_INPUT:
            graph_input.target = node.name
            self.add_value(node.name, node.meta["val"], where)
            return
        graph_input.target = spec.target
        if kind == graph_pb2.INPUT_KIND_BUFFER:
            graph_input.persistent = bool(spec.persistent)
        if spec.target in self.program.state_dict:
            tensor = self.program.state_dict[spec.target]
        else:
            tensor = self.program.constants[spec.target]
        if kind == graph_pb2.INPUT_KIND_CONSTANT_TENSOR and spec.target.startswith("lifted_tensor"):
            graph_input.kind = graph_pb2.INPUT_KIND_LIFTED_CONSTANT
        self.add_value(node.name, tensor, where)
        data = tensor_bytes(tensor)
        digest = hashlib.sha256(data).hexdigest()
        self.blobs[digest] = data
        graph_input.data.sha256 = digest
        graph_input.data.size_bytes = len(data)
        if len(data) <= self.inline_limit:
            graph_input.data.inline_bytes = data

    def convert_call(self, node, where: str) -> None:
        target = node.target
        if not isinstance(target, torch._ops.OpOverload):
            raise ExportError(f"{where}: calls {target}, which is not an ATen operator overload")
        schema = target._schema
        if schema.name in _DROPPED_CHECKS and not schema.returns:
            self.dropped_checks += 1
            return
        ir_node = self.graph.nodes.add(name=node.name, op=schema.name, overload=target._overloadname,
                                       schema=str(schema))
        self.convert_arguments(ir_node, node, schema, where)
        for key in ("stack_trace",):
            if node.meta.get(key):
                ir_node.attributes[key] = str(node.meta[key])
        result = node.meta.get("val")
        if isinstance(result, (tuple, list)):
            for index, element in enumerate(result):
                name = f"{node.name}.{index}"
                self.value_of[f"{node.name}[{index}]"] = name
                self.add_value(name, element, f"{where} result {index}")
                ir_node.outputs.append(name)
        else:
            self.value_of[node.name] = node.name
            self.add_value(node.name, result, where)
            ir_node.outputs.append(node.name)

    def convert_arguments(self, ir_node, node, schema, where: str) -> None:
        given = {}
        for index, value in enumerate(node.args):
            given[schema.arguments[index].name] = value
        given.update(node.kwargs)
        unknown = set(given) - {a.name for a in schema.arguments}
        if unknown:
            raise ExportError(f"{where}: arguments {sorted(unknown)} are not in schema {schema}")
        # Canonical argument list: schema order, up to the last argument whose value differs from
        # its schema default (the C++ .pt2 importer follows the same rule, so digests agree).
        last = max((i for i, a in enumerate(schema.arguments)
                    if a.name in given and not _is_schema_default(a, given[a.name])), default=-1)
        for argument in schema.arguments[: last + 1]:
            if argument.name in given:
                value = given[argument.name]
            elif argument.has_default_value():
                value = argument.default_value
            else:
                raise ExportError(f"{where}: required argument '{argument.name}' is missing")
            ir_arg = ir_node.arguments.add(name=argument.name, keyword=argument.kwarg_only)
            self.fill_argument(ir_arg, value, str(argument.type), f"{where} argument '{argument.name}'")

    def tensor_name(self, value, where: str) -> str:
        if not isinstance(value, torch.fx.Node):
            raise ExportError(f"{where}: expected a tensor, got {type(value).__name__}")
        return self.value_of[value.name]

    def fill_argument(self, ir_arg, value, type_name: str, where: str) -> None:
        if value is None:
            ir_arg.none.SetInParent()
        elif isinstance(value, torch.fx.Node):
            if type_name.startswith("Optional[Tensor"):
                ir_arg.optional_tensor.value_name = self.tensor_name(value, where)
            else:
                ir_arg.tensor = self.tensor_name(value, where)
        elif isinstance(value, bool):
            ir_arg.bool_value = value
        elif isinstance(value, int):
            ir_arg.int_value = value
        elif isinstance(value, float):
            ir_arg.float_value = value
        elif isinstance(value, str):
            ir_arg.string_value = value
        elif isinstance(value, torch.dtype):
            ir_arg.dtype = _dtype(value, where)
        elif isinstance(value, torch.device):
            ir_arg.device.type = value.type
            if value.index is not None:
                ir_arg.device.index = value.index
        elif isinstance(value, torch.layout):
            ir_arg.layout = _LAYOUTS[value]
        elif isinstance(value, torch.memory_format):
            ir_arg.memory_format = _MEMORY_FORMATS[value]
        elif isinstance(value, (list, tuple)):
            self.fill_list(ir_arg, list(value), type_name, where)
        else:
            raise ExportError(f"{where}: unsupported value {value!r} of type {type(value).__name__}")

    def fill_list(self, ir_arg, items: list, type_name: str, where: str) -> None:
        if "Optional[Tensor]" in type_name:
            ir_arg.optional_tensors.SetInParent()
            for item in items:
                entry = ir_arg.optional_tensors.items.add()
                if item is not None:
                    entry.value_name = self.tensor_name(item, where)
        elif "Tensor" in type_name:
            ir_arg.tensors.SetInParent()
            ir_arg.tensors.value_names.extend(self.tensor_name(item, where) for item in items)
        elif all(isinstance(item, bool) for item in items) and "bool" in type_name:
            ir_arg.bools.SetInParent()
            ir_arg.bools.values.extend(items)
        elif all(isinstance(item, int) and not isinstance(item, bool) for item in items):
            ir_arg.ints.SetInParent()
            ir_arg.ints.values.extend(items)
        elif all(isinstance(item, (int, float)) for item in items):
            ir_arg.floats.SetInParent()
            ir_arg.floats.values.extend(float(item) for item in items)
        else:
            raise ExportError(f"{where}: unsupported list {items!r} for type {type_name}")


def export(module: torch.nn.Module, example_inputs: Sequence[Any], *, name: str | None = None,
           inline_limit: int = DEFAULT_INLINE_LIMIT_BYTES) -> ExportedModel:
    """Exports `module` called on `example_inputs` into Forge's graph IR."""
    if not isinstance(module, torch.nn.Module):
        raise ExportError(f"forge.export needs an nn.Module, got {type(module).__name__}")
    try:
        program = torch.export.export(module, tuple(example_inputs))
    except Exception as err:  # torch.export raises many types; keep its message
        raise ExportError(f"torch.export failed for {type(module).__name__}: {err}") from err
    program = program.run_decompositions({})
    converter = _Converter(program, inline_limit)
    converter.convert()
    metadata = converter.graph.metadata
    metadata.name = name or type(module).__name__
    metadata.source_format = graph_pb2.SOURCE_FORMAT_PYTHON_EXPORT
    metadata.torch_version = torch.__version__
    metadata.notes.append("shapes specialized to the example inputs")
    if converter.dropped_checks:
        metadata.notes.append(f"dropped {converter.dropped_checks} runtime shape/dtype checks "
                              "(e.g. aten::_assert_tensor_metadata)")
    return ExportedModel(graph=converter.graph, blobs=converter.blobs)
