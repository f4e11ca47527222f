#include "compiler/graph/op_classes.h"

#include <string>

namespace forge::graph {

OpClass ClassifyOp(absl::string_view op, absl::string_view overload) {
  const ops::OpEntry* entry = ops::FindOp(op, overload);
  return entry == nullptr ? OpClass::kOpaque : entry->op_class;
}

OpClass ClassifyNode(const forge::v1::Node& node) {
  OpClass op_class = ClassifyOp(node.op(), node.overload());
  if (op_class == OpClass::kBatchNormEval && node.op() == "aten::batch_norm") {
    for (const forge::v1::Argument& argument : node.arguments()) {
      if (argument.name() == "training" && argument.bool_value()) return OpClass::kOpaque;
    }
  }
  return op_class;
}

bool IsDepthwiseConv2d(const forge::v1::Node& node, const std::vector<int64_t>& weight_shape) {
  if (node.op() != "aten::conv2d" || weight_shape.size() != 4 || weight_shape[1] != 1) {
    return false;
  }
  const forge::v1::Argument* groups = ops::FindArgument(node, "groups");
  return groups != nullptr && groups->value_case() == forge::v1::Argument::kIntValue &&
         groups->int_value() > 1 && groups->int_value() == weight_shape[0];
}

double FlopsPerElement(const forge::v1::Node& node) {
  const ops::OpEntry* entry = ops::FindOp(node);
  return entry == nullptr ? 0 : entry->flops_per_element;
}

std::string AtenReason(const forge::v1::Node& node) {
  const ops::OpEntry* entry = ops::FindOp(node);
  if (entry != nullptr && !entry->opaque_reason.empty()) return std::string(entry->opaque_reason);
  switch (ClassifyNode(node)) {
    case OpClass::kView:
      return "a view read by several tasks or by the model's outputs: an ATen view call, no data "
             "moves";
    case OpClass::kBatchNormEval:  // the class without its training flag: see ClassifyNode
    case OpClass::kOpaque:
      if (entry != nullptr && entry->op_class == OpClass::kBatchNormEval) {
        return "batch norm in training mode updates its running statistics";
      }
      break;
    default: break;
  }
  return "no kernel family generates it";
}

std::vector<std::string> TensorArgumentNames(const forge::v1::Node& node) {
  std::vector<std::string> names;
  for (const forge::v1::Argument& argument : node.arguments()) {
    switch (argument.value_case()) {
      case forge::v1::Argument::kTensor:
        names.push_back(argument.tensor());
        break;
      case forge::v1::Argument::kOptionalTensor:
        if (argument.optional_tensor().has_value_name()) {
          names.push_back(argument.optional_tensor().value_name());
        }
        break;
      case forge::v1::Argument::kTensors:
        for (const std::string& name : argument.tensors().value_names()) names.push_back(name);
        break;
      case forge::v1::Argument::kOptionalTensors:
        for (const auto& item : argument.optional_tensors().items()) {
          if (item.has_value_name()) names.push_back(item.value_name());
        }
        break;
      default:
        break;
    }
  }
  return names;
}

}  // namespace forge::graph
