#include "tests/support/hostile_graphs.h"

#include <string>

#include "absl/strings/str_cat.h"

namespace forge::testing {

forge::v1::Graph IdentityGraph() {
  forge::v1::Graph graph;
  forge::v1::Value* value = graph.add_values();
  value->set_name("x");
  value->mutable_tensor()->set_dtype(forge::v1::DTYPE_FLOAT32);
  value->mutable_tensor()->add_shape(4);
  value->mutable_tensor()->add_strides(1);
  forge::v1::GraphInput* input = graph.add_inputs();
  input->set_kind(forge::v1::INPUT_KIND_USER_INPUT);
  input->set_value_name("x");
  forge::v1::GraphOutput* output = graph.add_outputs();
  output->set_kind(forge::v1::OUTPUT_KIND_USER_OUTPUT);
  output->set_value_name("x");
  return graph;
}

forge::v1::Graph PointwiseChain(int links) {
  forge::v1::Graph graph = IdentityGraph();
  graph.mutable_values(0)->mutable_tensor()->set_shape(0, 4096);
  std::string last = "x";
  auto add_node = [&](const std::string& name, const std::string& op, const std::string& overload,
                      const std::string& schema) {
    forge::v1::Value* value = graph.add_values();
    *value = graph.values(0);
    value->set_name(name);
    forge::v1::Node* node = graph.add_nodes();
    node->set_name(name);
    node->set_op(op);
    node->set_overload(overload);
    node->set_schema(schema);
    node->add_outputs(name);
    forge::v1::Argument* self = node->add_arguments();
    self->set_name("self");
    self->set_tensor(last);
    last = name;
    return node;
  };
  for (int i = 0; i < links; ++i) {
    add_node(absl::StrCat("relu_", i), "aten::relu", "default",
             "aten::relu(Tensor self) -> Tensor");
    forge::v1::Argument* other = add_node(absl::StrCat("mul_", i), "aten::mul", "Tensor",
                                          "aten::mul.Tensor(Tensor self, Tensor other) -> Tensor")
                                     ->add_arguments();
    other->set_name("other");
    other->set_float_value(1.0001);
  }
  graph.mutable_outputs(0)->set_value_name(last);
  return graph;
}

forge::v1::RegisterRequest EmulatedWorker(const std::string& generator_versions) {
  forge::v1::RegisterRequest request;
  request.set_hostname("test-host");
  request.set_generator_version(generator_versions);
  forge::v1::GpuInfo* gpu = request.add_gpus();
  gpu->set_name("H200");
  gpu->set_arch("sm_90");
  gpu->set_emulated(true);
  return request;
}

}  // namespace forge::testing
