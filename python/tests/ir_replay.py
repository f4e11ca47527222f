"""Runs a forge.v1.Graph through torch.ops by operator name, using only what the IR says.

A test oracle for the exporter: if the replay of the IR matches the module, the IR carried every
argument, value name and weight faithfully. (The product's reference interpreter is C++.)
"""

import torch

from forge._protos import graph_pb2

_TORCH_DTYPES = {
    graph_pb2.DTYPE_FLOAT64: torch.float64, graph_pb2.DTYPE_FLOAT32: torch.float32,
    graph_pb2.DTYPE_FLOAT16: torch.float16, graph_pb2.DTYPE_BFLOAT16: torch.bfloat16,
    graph_pb2.DTYPE_INT8: torch.int8, graph_pb2.DTYPE_INT16: torch.int16,
    graph_pb2.DTYPE_INT32: torch.int32, graph_pb2.DTYPE_INT64: torch.int64,
    graph_pb2.DTYPE_UINT8: torch.uint8, graph_pb2.DTYPE_BOOL: torch.bool,
}
_TORCH_MEMORY_FORMATS = {
    graph_pb2.MEMORY_FORMAT_CONTIGUOUS: torch.contiguous_format,
    graph_pb2.MEMORY_FORMAT_CHANNELS_LAST: torch.channels_last,
    graph_pb2.MEMORY_FORMAT_CHANNELS_LAST_3D: torch.channels_last_3d,
    graph_pb2.MEMORY_FORMAT_PRESERVE: torch.preserve_format,
}


def _tensor_from_blob(data: bytes, spec) -> torch.Tensor:
    dtype = _TORCH_DTYPES[spec.dtype]
    flat = torch.frombuffer(bytearray(data), dtype=torch.uint8).view(dtype)
    return flat.reshape(list(spec.shape)).clone()


def _argument(arg, env):
    kind = arg.WhichOneof("value")
    if kind == "tensor":
        return env[arg.tensor]
    if kind == "optional_tensor":
        return env[arg.optional_tensor.value_name] if arg.optional_tensor.HasField("value_name") else None
    if kind == "tensors":
        return [env[name] for name in arg.tensors.value_names]
    if kind == "optional_tensors":
        return [env[i.value_name] if i.HasField("value_name") else None for i in arg.optional_tensors.items]
    if kind in ("int_value", "float_value", "bool_value", "string_value"):
        return getattr(arg, kind)
    if kind in ("ints", "floats", "bools"):
        return list(getattr(arg, kind).values)
    if kind == "none":
        return None
    if kind == "dtype":
        return _TORCH_DTYPES[arg.dtype]
    if kind == "device":
        return torch.device(arg.device.type)
    if kind == "memory_format":
        return _TORCH_MEMORY_FORMATS[arg.memory_format]
    raise NotImplementedError(f"argument kind {kind}")


def replay(graph, blobs, user_inputs):
    values = {v.name: v.tensor for v in graph.values}
    env = {}
    users = iter(user_inputs)
    for graph_input in graph.inputs:
        if graph_input.kind == graph_pb2.INPUT_KIND_USER_INPUT:
            env[graph_input.value_name] = next(users)
        else:
            env[graph_input.value_name] = _tensor_from_blob(
                blobs[graph_input.data.sha256], values[graph_input.value_name])
    for node in graph.nodes:
        namespace, name = node.op.split("::")
        packet = getattr(getattr(torch.ops, namespace), name)
        overload = getattr(packet, node.overload)
        args, kwargs = [], {}
        for arg in node.arguments:
            value = _argument(arg, env)
            if arg.keyword:
                kwargs[arg.name] = value
            else:
                args.append(value)
        result = overload(*args, **kwargs)
        if len(node.outputs) == 1 and not isinstance(result, (tuple, list)):
            result = [result]
        for out_name, out_value in zip(node.outputs, result):
            env[out_name] = out_value
    return [env[o.value_name] for o in graph.outputs if o.kind == graph_pb2.OUTPUT_KIND_USER_OUTPUT]
