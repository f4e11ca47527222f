import hashlib

import pytest
import torch

import forge
from forge._protos import graph_pb2
from ir_replay import replay
from models import all_models, nonfinite_constant_models

MODELS = all_models()


@pytest.fixture(scope="module")
def exported():
    return {name: forge.export(module, inputs) for name, module, inputs in MODELS}


@pytest.mark.parametrize("name,module,inputs", MODELS, ids=[m[0] for m in MODELS])
def test_replaying_the_ir_reproduces_the_module(exported, name, module, inputs):
    model = exported[name]
    expected = module(*inputs)
    expected = expected if isinstance(expected, (tuple, list)) else [expected]
    # Fresh inputs as well as the example ones: the IR must not have baked the inputs in.
    fresh = tuple(torch.randn_like(t) if t.is_floating_point() else t for t in inputs)
    fresh_expected = module(*fresh)
    got = replay(model.graph, model.blobs, inputs)
    assert len(got) == len(expected)
    for g, e in zip(got, expected):
        torch.testing.assert_close(g, e)
    torch.testing.assert_close(replay(model.graph, model.blobs, fresh)[0],
                               fresh_expected if torch.is_tensor(fresh_expected) else fresh_expected[0])


@pytest.mark.parametrize("name,module,inputs", MODELS, ids=[m[0] for m in MODELS])
def test_weights_travel_by_digest(exported, name, module, inputs):
    model = exported[name]
    state = module.state_dict()
    weight_inputs = [i for i in model.graph.inputs if i.kind != graph_pb2.INPUT_KIND_USER_INPUT]
    assert set(state) <= {i.target for i in weight_inputs}, "every state_dict entry is a graph input"
    for graph_input in weight_inputs:
        data = model.blobs[graph_input.data.sha256]
        assert hashlib.sha256(data).hexdigest() == graph_input.data.sha256
        assert graph_input.data.size_bytes == len(data)
        if graph_input.target in state:
            assert data == forge.tensor_bytes(state[graph_input.target])


@pytest.mark.parametrize("name,module,inputs", MODELS, ids=[m[0] for m in MODELS])
def test_graph_is_well_formed(exported, name, module, inputs):
    graph = exported[name].graph
    names = [v.name for v in graph.values]
    assert len(names) == len(set(names)), "each value is defined once"
    defined = {i.value_name for i in graph.inputs}
    for node in graph.nodes:
        assert node.schema.startswith(node.op + (("." + node.overload) if node.overload != "default" else "") + "(")
        for arg in node.arguments:
            kind = arg.WhichOneof("value")
            assert kind is not None, f"{node.name}.{arg.name} has no value"
            if kind == "tensor":
                assert arg.tensor in defined, f"{node.name} reads {arg.tensor} before it is defined"
        defined.update(node.outputs)
    for output in graph.outputs:
        assert output.value_name in defined
    for value in graph.values:
        assert len(value.tensor.shape) == len(value.tensor.strides)
        assert value.tensor.dtype != graph_pb2.DTYPE_UNSPECIFIED


def test_export_is_deterministic():
    name, module, inputs = MODELS[2]
    first = forge.export(module, inputs).graph
    second = forge.export(module, inputs).graph
    for graph in (first, second):
        for node in graph.nodes:
            node.attributes.pop("stack_trace", None)
    assert first.SerializeToString(deterministic=True) == second.SerializeToString(deterministic=True)


def test_llama_block_uses_the_high_level_ops_the_partitioner_fuses(exported):
    ops = {node.op for node in exported["llama_block"].graph.nodes}
    assert {"aten::linear", "aten::scaled_dot_product_attention", "aten::silu", "aten::rsqrt"} <= ops


def test_not_a_module_is_a_clear_error():
    with pytest.raises(forge.ExportError, match="needs an nn.Module"):
        forge.export(lambda x: x, (torch.randn(2),))


class DataDependentBranch(torch.nn.Module):
    def forward(self, x):
        if x.sum() > 0:
            return x + 1
        return x - 1


def test_untraceable_control_flow_is_a_clear_error():
    with pytest.raises(forge.ExportError, match="torch.export failed for DataDependentBranch"):
        forge.export(DataDependentBranch(), (torch.randn(4),))


def test_cpp_model_list_matches_the_exported_models():
    import pathlib
    import re

    header = pathlib.Path(__file__).resolve().parents[2] / "tests" / "fixtures" / "test_models.h"

    def names(array):
        body = header.read_text().split(f"{array} = {{", 1)[1].split("};", 1)[0]
        return re.findall(r'"([a-z0-9_]+)"', body)

    assert names("kTestModelNames") == [name for name, _, _ in MODELS]
    assert names("kNonFiniteConstantModelNames") == [
        name for name, _, _ in nonfinite_constant_models()]
