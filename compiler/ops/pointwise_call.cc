#include "compiler/ops/pointwise_call.h"

#include <cmath>

#include "absl/status/status.h"
#include "absl/strings/str_format.h"
#include "absl/strings/strip.h"

namespace forge::ops {
namespace {

using forge::v1::Argument;

std::string FormatDouble(double value) {
  if (std::isnan(value)) return "forge_nan()";
  if (std::isinf(value)) return value > 0 ? "forge_inf()" : "(-forge_inf())";
  return absl::StrFormat("(%.17g)", value);
}

}  // namespace

const Argument* FindArgument(const forge::v1::Node& node, absl::string_view name) {
  for (const Argument& argument : node.arguments()) {
    if (argument.name() == name) return &argument;
  }
  return nullptr;
}

std::string DescribeNode(const forge::v1::Node& node) {
  return absl::StrCat(node.op(), node.overload().empty() ? "" : ".", node.overload(), " (node ",
                      node.name(), ")");
}

absl::string_view OpName(const forge::v1::Node& node) {
  absl::string_view op = node.op();
  absl::ConsumePrefix(&op, "aten::");
  return op;
}

bool IsFloatingDType(forge::v1::DType dtype) {
  return dtype == forge::v1::DTYPE_FLOAT64 || dtype == forge::v1::DTYPE_FLOAT32 ||
         dtype == forge::v1::DTYPE_FLOAT16 || dtype == forge::v1::DTYPE_BFLOAT16;
}

absl::StatusOr<std::optional<Operand>> PointwiseCall::Optional(absl::string_view name) {
  const Argument* argument = FindArgument(node_, name);
  if (argument == nullptr) return std::optional<Operand>();
  std::string tensor_name;
  switch (argument->value_case()) {
    case Argument::kTensor: tensor_name = argument->tensor(); break;
    case Argument::kOptionalTensor:
      if (!argument->optional_tensor().has_value_name()) return std::optional<Operand>();
      tensor_name = argument->optional_tensor().value_name();
      break;
    case Argument::kFloatValue:
      return Operand{FormatDouble(argument->float_value()), forge::v1::DTYPE_FLOAT64, true,
                     argument->float_value()};
    case Argument::kIntValue:
      return Operand{absl::StrCat("(", argument->int_value(), "LL)"), forge::v1::DTYPE_INT64, true,
                     static_cast<double>(argument->int_value())};
    case Argument::kBoolValue:
      return Operand{argument->bool_value() ? "true" : "false", forge::v1::DTYPE_BOOL, true,
                     argument->bool_value() ? 1.0 : 0.0};
    case Argument::kNone: return std::optional<Operand>();
    default:
      return absl::UnimplementedError(absl::StrCat(DescribeNode(node_), ": argument '", name,
                                                   "' has a form the generator does not read"));
  }
  absl::StatusOr<Operand> operand = tensor_operand_(tensor_name);
  if (!operand.ok()) return operand.status();
  return *std::move(operand);
}

absl::StatusOr<Operand> PointwiseCall::Required(absl::string_view name) {
  absl::StatusOr<std::optional<Operand>> found = Optional(name);
  if (!found.ok()) return found.status();
  if (!found->has_value()) {
    return absl::InvalidArgumentError(
        absl::StrCat(DescribeNode(node_), ": argument '", name, "' is missing"));
  }
  return **found;
}

std::string PointwiseCall::As(const Operand& x, absl::string_view type) {
  if (type == "bool") {
    return x.dtype == forge::v1::DTYPE_BOOL ? x.expr : absl::StrCat("((", x.expr, ") != 0)");
  }
  return absl::StrCat("((", type, ")", x.expr, ")");
}

std::string PointwiseCall::ComparisonType(const std::vector<Operand>& operands) {
  bool any_float_tensor = false, any_double_tensor = false, any_float_literal = false;
  for (const Operand& x : operands) {
    if (!x.literal && IsFloatingDType(x.dtype)) {
      any_float_tensor = true;
      any_double_tensor |= x.dtype == forge::v1::DTYPE_FLOAT64;
    }
    any_float_literal |= x.literal && x.dtype == forge::v1::DTYPE_FLOAT64;
  }
  if (any_double_tensor) return "double";
  if (any_float_literal || any_float_tensor) return "float";
  return "long long";
}

}  // namespace forge::ops
