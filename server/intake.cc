#include "server/intake.h"

#include <cstddef>
#include <cstdint>
#include <limits>
#include <string>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "common/dtype/dtype.h"
#include "common/status/status_macros.h"

namespace forge::server {
namespace {

using ::forge::v1::Graph;
using ::forge::v1::Node;
using ::forge::v1::TensorSpec;

bool IsIdentifier(absl::string_view text) {
  if (text.empty() || absl::ascii_isdigit(static_cast<unsigned char>(text.front()))) return false;
  for (char c : text) {
    if (!absl::ascii_isalnum(static_cast<unsigned char>(c)) && c != '_') return false;
  }
  return true;
}

// "namespace::name", each part an identifier.
bool IsQualifiedName(absl::string_view op) {
  const size_t colons = op.find("::");
  return colons != absl::string_view::npos && IsIdentifier(op.substr(0, colons)) &&
         IsIdentifier(op.substr(colons + 2));
}

// The schema's form: "namespace::name[.overload](arguments) -> returns", brackets balanced.
absl::Status CheckSchema(const Node& node) {
  const std::string where =
      absl::StrCat("node '", node.name(), "': schema \"", node.schema(), "\"");
  const absl::string_view schema = node.schema();
  const size_t open = schema.find('(');
  if (open == absl::string_view::npos) {
    return absl::InvalidArgumentError(absl::StrCat(where, " has no argument list"));
  }
  absl::string_view name = schema.substr(0, open);
  absl::string_view overload;
  if (const size_t dot = name.rfind('.'); dot != absl::string_view::npos && dot > name.find("::")) {
    overload = name.substr(dot + 1);
    name = name.substr(0, dot);
    if (!IsIdentifier(overload)) {
      return absl::InvalidArgumentError(absl::StrCat(where, ": bad overload name"));
    }
  }
  if (!IsQualifiedName(name)) {
    return absl::InvalidArgumentError(
        absl::StrCat(where, ": the operator name is not \"namespace::name\""));
  }
  if (name != node.op()) {
    return absl::InvalidArgumentError(
        absl::StrCat(where, " names ", name, ", not the node's op ", node.op()));
  }
  std::string closers;  // the brackets still open, innermost last
  size_t close = absl::string_view::npos;
  for (size_t i = open; i < schema.size() && close == absl::string_view::npos; ++i) {
    const char c = schema[i];
    if (c == '(' || c == '[') {
      closers.push_back(c == '(' ? ')' : ']');
    } else if (c == ')' || c == ']') {
      if (closers.empty() || closers.back() != c) {
        return absl::InvalidArgumentError(
            absl::StrCat(where, ": unbalanced '", std::string(1, c), "' at ", i));
      }
      closers.pop_back();
      if (closers.empty()) close = i;
    }
  }
  if (close == absl::string_view::npos) {
    return absl::InvalidArgumentError(absl::StrCat(where, ": the argument list is not closed"));
  }
  const absl::string_view rest = absl::StripAsciiWhitespace(schema.substr(close + 1));
  if (!absl::StartsWith(rest, "->") || absl::StripAsciiWhitespace(rest.substr(2)).empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat(where, ": no \"-> returns\" after the arguments"));
  }
  return absl::OkStatus();
}

// *product = a * b; false on overflow.
bool MultiplyChecked(int64_t a, int64_t b, int64_t* product) {
  return !__builtin_mul_overflow(a, b, product);
}

absl::Status CheckValue(const forge::v1::Value& value, const IntakeLimits& limits) {
  if (value.name().empty()) return absl::InvalidArgumentError("a value without a name");
  const std::string where = absl::StrCat("value '", value.name(), "'");
  const TensorSpec& spec = value.tensor();
  if (!forge::v1::DType_IsValid(spec.dtype()) || spec.dtype() == forge::v1::DTYPE_UNSPECIFIED ||
      DTypeBytes(spec.dtype()) <= 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        where, ": tensor.dtype ", static_cast<int>(spec.dtype()), " is not a dtype Forge knows"));
  }
  if (!forge::v1::Layout_IsValid(spec.layout())) {
    return absl::InvalidArgumentError(absl::StrCat(
        where, ": tensor.layout ", static_cast<int>(spec.layout()), " is not a known layout"));
  }
  if (spec.shape_size() > limits.max_rank) {
    return absl::InvalidArgumentError(absl::StrCat(where, ": tensor.shape has ", spec.shape_size(),
                                                   " dimensions; at most ", limits.max_rank));
  }
  const absl::StatusOr<int64_t> counted = CheckedElements(spec);
  if (!counted.ok()) {
    return absl::InvalidArgumentError(absl::StrCat(where, ": ", counted.status().message()));
  }
  const int64_t elements = *counted;
  if (spec.strides_size() != 0 && spec.strides_size() != spec.shape_size()) {
    return absl::InvalidArgumentError(absl::StrCat(where, ": ", spec.strides_size(),
                                                   " tensor.strides for ", spec.shape_size(),
                                                   " dimensions"));
  }
  if (spec.storage_offset() < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat(where, ": tensor.storage_offset is ", spec.storage_offset()));
  }
  // The span the strides reach, from the storage offset: what a kernel may address.
  int64_t span = elements;
  if (elements > 0 && spec.strides_size() == spec.shape_size()) {
    int64_t last = spec.storage_offset();
    for (int d = 0; d < spec.shape_size(); ++d) {
      int64_t reach = 0;
      if (spec.strides(d) < 0) {
        return absl::InvalidArgumentError(absl::StrCat(where, ": tensor.strides[", d, "] is ",
                                                       spec.strides(d), "; must not be negative"));
      }
      if (!MultiplyChecked(spec.shape(d) - 1, spec.strides(d), &reach) ||
          __builtin_add_overflow(last, reach, &last)) {
        return absl::InvalidArgumentError(absl::StrCat(where, ": tensor.strides overflow int64"));
      }
    }
    if (last >= span) span = last + 1;
  }
  int64_t bytes = 0;
  if (!MultiplyChecked(span, DTypeBytes(spec.dtype()), &bytes) || bytes > limits.max_tensor_bytes) {
    return absl::InvalidArgumentError(absl::StrCat(where, ": ", elements, " elements of ",
                                                   DTypeName(spec.dtype()), " exceed the limit of ",
                                                   limits.max_tensor_bytes, " bytes per tensor"));
  }
  return absl::OkStatus();
}

absl::Status CheckNode(const Node& node) {
  if (node.name().empty()) return absl::InvalidArgumentError("a node without a name");
  if (!IsQualifiedName(node.op())) {
    return absl::InvalidArgumentError(absl::StrCat("node '", node.name(), "': op \"", node.op(),
                                                   "\" is not \"namespace::name\""));
  }
  if (!node.schema().empty()) FORGE_RETURN_IF_ERROR(CheckSchema(node));
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<int64_t> CheckedElements(const TensorSpec& spec) {
  int64_t elements = 1;
  for (int d = 0; d < spec.shape_size(); ++d) {
    if (spec.shape(d) < 0) {
      return absl::InvalidArgumentError(absl::StrCat("tensor.shape[", d, "] is ", spec.shape(d),
                                                     "; dimensions must not be negative"));
    }
    if (!MultiplyChecked(elements, spec.shape(d), &elements)) {
      return absl::InvalidArgumentError("the element count of tensor.shape overflows int64");
    }
  }
  return elements;
}

IntakeLimits ClientSideLimits() {
  // 2^61: a tensor or a job's data that large is refused by no configuration, and a sum of two
  // such terms (the running total of weight bytes plus one tensor) still fits int64.
  constexpr int64_t kUnbounded = int64_t{1} << 61;
  return IntakeLimits{.max_graph_bytes = kUnbounded,
                      .max_nodes = kUnbounded,
                      .max_tensor_bytes = kUnbounded,
                      .max_weight_bytes = kUnbounded,
                      .max_candidate_trials = kUnbounded,
                      .max_wall_seconds = kUnbounded,
                      .max_priority = std::numeric_limits<int32_t>::max(),
                      .max_active_jobs_per_owner = 0};
}

absl::Status ValidateGraph(const Graph& graph, const IntakeLimits& limits) {
  const size_t graph_bytes = graph.ByteSizeLong();
  if (graph_bytes > static_cast<size_t>(limits.max_graph_bytes)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "the graph is ", graph_bytes, " bytes; the limit is ", limits.max_graph_bytes));
  }
  if (graph.nodes_size() > limits.max_nodes) {
    return absl::InvalidArgumentError(absl::StrCat("the graph has ", graph.nodes_size(),
                                                   " nodes; the limit is ", limits.max_nodes));
  }
  absl::flat_hash_map<absl::string_view, const TensorSpec*> specs;
  for (const forge::v1::Value& value : graph.values()) {
    FORGE_RETURN_IF_ERROR(CheckValue(value, limits));
    specs.emplace(value.name(), &value.tensor());
  }
  for (const Node& node : graph.nodes()) FORGE_RETURN_IF_ERROR(CheckNode(node));
  int64_t weight_bytes = 0;
  for (const forge::v1::GraphInput& input : graph.inputs()) {
    if (!input.has_data()) continue;
    const std::string where = absl::StrCat("input '", input.value_name(), "'");
    auto spec = specs.find(input.value_name());
    if (spec == specs.end()) {
      return absl::InvalidArgumentError(absl::StrCat(where, " has no Value"));
    }
    // CheckValue bounded elements x dtype bytes: the product cannot overflow.
    const int64_t wanted = *CheckedElements(*spec->second) * DTypeBytes(spec->second->dtype());
    const forge::v1::TensorData& data = input.data();
    if (data.size_bytes() != wanted) {
      return absl::InvalidArgumentError(
          absl::StrCat(where, ": data.size_bytes is ", data.size_bytes(),
                       " but the declared tensor holds ", wanted, " bytes"));
    }
    if (!data.inline_bytes().empty() &&
        static_cast<int64_t>(data.inline_bytes().size()) != wanted) {
      return absl::InvalidArgumentError(
          absl::StrCat(where, ": data.inline_bytes is ", data.inline_bytes().size(),
                       " bytes but the declared tensor holds ", wanted));
    }
    weight_bytes += wanted;  // each term is at most max_tensor_bytes; the sum is checked at once
    if (weight_bytes > limits.max_weight_bytes) {
      return absl::InvalidArgumentError(
          absl::StrCat("the graph's data (parameters, buffers, "
                       "constants) exceeds the limit of ",
                       limits.max_weight_bytes, " bytes per job"));
    }
  }
  return absl::OkStatus();
}

absl::Status ValidateJobOptions(const forge::v1::JobOptions& options, const IntakeLimits& limits) {
  const forge::v1::JobBudget& budget = options.budget();
  if (budget.max_candidate_trials() < 0 || budget.max_wall_seconds() < 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "options.budget must not be negative (max_candidate_trials ", budget.max_candidate_trials(),
        ", max_wall_seconds ", budget.max_wall_seconds(), ")"));
  }
  if (budget.max_candidate_trials() > limits.max_candidate_trials) {
    return absl::InvalidArgumentError(absl::StrCat("options.budget.max_candidate_trials is ",
                                                   budget.max_candidate_trials(), "; the limit is ",
                                                   limits.max_candidate_trials));
  }
  if (budget.max_wall_seconds() > limits.max_wall_seconds) {
    return absl::InvalidArgumentError(absl::StrCat("options.budget.max_wall_seconds is ",
                                                   budget.max_wall_seconds(), "; the limit is ",
                                                   limits.max_wall_seconds));
  }
  if (options.priority() > limits.max_priority || options.priority() < -limits.max_priority) {
    return absl::InvalidArgumentError(absl::StrCat("options.priority is ", options.priority(),
                                                   "; it must lie within +-", limits.max_priority));
  }
  return absl::OkStatus();
}

}  // namespace forge::server
