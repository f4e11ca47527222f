#include "compiler/graph/cost.h"

#include <algorithm>
#include <cstdlib>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "common/dtype/dtype.h"
#include "compiler/graph/op_classes.h"

namespace forge::graph {
namespace {

using ::forge::v1::Graph;
using ::forge::v1::Node;
using ::forge::v1::TensorSpec;

using SpecMap = absl::flat_hash_map<std::string, const TensorSpec*>;

absl::StatusOr<const TensorSpec*> SpecOf(const SpecMap& specs, const std::string& name,
                                         const Node& node) {
  auto it = specs.find(name);
  if (it == specs.end()) {
    return absl::InvalidArgumentError(absl::StrCat("node '", node.name(), "' (", node.op(),
                                                   "): value '", name, "' has no tensor spec"));
  }
  return it->second;
}

std::int64_t LastDim(const TensorSpec& spec) {
  return spec.shape().empty() ? 1 : spec.shape(spec.shape_size() - 1);
}

absl::StatusOr<double> NodeFlops(const Node& node, const SpecMap& specs) {
  const OpClass op_class = ClassifyNode(node);
  if (op_class == OpClass::kView || op_class == OpClass::kOpaque || node.outputs().empty()) {
    return 0.0;
  }
  const std::vector<std::string> tensor_args = TensorArgumentNames(node);
  absl::StatusOr<const TensorSpec*> output = SpecOf(specs, node.outputs(0), node);
  if (!output.ok()) return output.status();
  const double output_elements = static_cast<double>(NumElements(**output));
  auto operand = [&](std::size_t index) -> absl::StatusOr<const TensorSpec*> {
    if (index >= tensor_args.size()) {
      return absl::InvalidArgumentError(absl::StrCat("node '", node.name(), "' (", node.op(),
                                                     "): expected at least ", index + 1,
                                                     " tensor arguments"));
    }
    return SpecOf(specs, tensor_args[index], node);
  };
  switch (op_class) {
    case OpClass::kPointwise:
    case OpClass::kBatchNormEval:
      return FlopsPerElement(node) * output_elements;
    case OpClass::kReduction:
    case OpClass::kScan:
    case OpClass::kStencil: {
      absl::StatusOr<const TensorSpec*> input = operand(0);
      if (!input.ok()) return input.status();
      return FlopsPerElement(node) * static_cast<double>(NumElements(**input));
    }
    case OpClass::kGemm: {
      // addmm(bias, mat1, mat2) and baddbmm(bias, batch1, batch2) contract their second operand.
      const bool has_bias_first = node.op() == "aten::addmm" || node.op() == "aten::baddbmm";
      absl::StatusOr<const TensorSpec*> lhs = operand(has_bias_first ? 1 : 0);
      if (!lhs.ok()) return lhs.status();
      return 2.0 * output_elements * static_cast<double>(LastDim(**lhs));
    }
    case OpClass::kConv: {
      absl::StatusOr<const TensorSpec*> weight = operand(1);
      if (!weight.ok()) return weight.status();
      const std::int64_t out_channels = (*weight)->shape().empty() ? 1 : (*weight)->shape(0);
      const double per_output = out_channels == 0 ? 0
          : static_cast<double>(NumElements(**weight)) / static_cast<double>(out_channels);
      return 2.0 * output_elements * per_output;
    }
    case OpClass::kAttention: {
      absl::StatusOr<const TensorSpec*> query = operand(0);
      absl::StatusOr<const TensorSpec*> key = operand(1);
      absl::StatusOr<const TensorSpec*> value = operand(2);
      for (const auto* status : {&query, &key, &value}) {
        if (!status->ok()) return status->status();
      }
      const TensorSpec& q = **query;
      const TensorSpec& k = **key;
      if (q.shape_size() < 2 || k.shape_size() < 2) {
        return absl::InvalidArgumentError(absl::StrCat(
            "node '", node.name(), "': attention needs query and key of rank 2 or more"));
      }
      const double head_dim = static_cast<double>(LastDim(q));
      const double key_length = static_cast<double>(k.shape(k.shape_size() - 2));
      const double value_dim = static_cast<double>(LastDim(**value));
      // query elements / D = B*H*Lq rows, each against Lk keys: QK^T then PV.
      const double rows = head_dim == 0 ? 0 : static_cast<double>(NumElements(q)) / head_dim;
      return 2.0 * rows * key_length * (head_dim + value_dim);
    }
    default:
      return 0.0;
  }
}

bool HasFloat64(const forge::v1::KernelTask& task) {
  for (const auto* specs : {&task.inputs(), &task.outputs()}) {
    for (const TensorSpec& spec : *specs) {
      if (spec.dtype() == forge::v1::DTYPE_FLOAT64) return true;
    }
  }
  return false;
}

}  // namespace

std::int64_t NumElements(const TensorSpec& spec) {
  std::int64_t elements = 1;
  for (std::int64_t size : spec.shape()) {
    if (__builtin_mul_overflow(elements, size, &elements)) return kSaturated;
  }
  return elements;
}

std::int64_t SpannedBytes(const TensorSpec& spec) {
  const std::int64_t elements = NumElements(spec);
  std::int64_t spanned = elements;
  if (elements > 0 && spec.strides_size() == spec.shape_size()) {
    std::int64_t last_offset = 0;
    for (int i = 0; i < spec.shape_size(); ++i) {
      std::int64_t reach = 0;
      if (__builtin_mul_overflow(spec.shape(i) - 1, std::llabs(spec.strides(i)), &reach) ||
          __builtin_add_overflow(last_offset, reach, &last_offset)) {
        last_offset = kSaturated - 1;
        break;
      }
    }
    spanned = std::min(elements, last_offset + 1);
  }
  std::int64_t bytes = 0;
  return __builtin_mul_overflow(spanned, DTypeBytes(spec.dtype()), &bytes) ? kSaturated : bytes;
}

absl::StatusOr<TaskCost> ComputeTaskCost(const Graph& group) {
  SpecMap specs;
  for (const auto& value : group.values()) specs.emplace(value.name(), &value.tensor());

  TaskCost cost;
  double flops = 0;
  bool only_views = true;
  // The storage each value lives in: a view's output shares its input's.
  absl::flat_hash_map<std::string, std::string> storage;
  for (const Node& node : group.nodes()) {
    absl::StatusOr<double> node_flops = NodeFlops(node, specs);
    if (!node_flops.ok()) return node_flops.status();
    flops += *node_flops;
    const bool is_view = ClassifyNode(node) == OpClass::kView;
    only_views = only_views && is_view;
    const std::vector<std::string> args = TensorArgumentNames(node);
    for (const std::string& output : node.outputs()) {
      if (is_view && !args.empty()) {
        auto it = storage.find(args.front());
        storage[output] = it == storage.end() ? args.front() : it->second;
      } else {
        storage[output] = output;
      }
    }
  }
  cost.flops = static_cast<std::int64_t>(flops);
  if (only_views) return cost;

  absl::flat_hash_set<std::string> read;
  for (const auto& input : group.inputs()) {
    if (!read.insert(input.value_name()).second) continue;
    auto it = specs.find(input.value_name());
    if (it == specs.end()) {
      return absl::InvalidArgumentError(
          absl::StrCat("group input '", input.value_name(), "' has no tensor spec"));
    }
    cost.min_bytes += SpannedBytes(*it->second);
  }
  absl::flat_hash_map<std::string, std::int64_t> written;  // storage -> largest bytes
  for (const auto& output : group.outputs()) {
    auto it = specs.find(output.value_name());
    if (it == specs.end()) {
      return absl::InvalidArgumentError(
          absl::StrCat("group output '", output.value_name(), "' has no tensor spec"));
    }
    auto root = storage.find(output.value_name());
    const std::string& key = root == storage.end() ? output.value_name() : root->second;
    std::int64_t& bytes = written[key];
    bytes = std::max(bytes, SpannedBytes(*it->second));
  }
  for (const auto& [key, bytes] : written) cost.min_bytes += bytes;
  return cost;
}

MathMode GeneratedKernelMathMode(const forge::v1::KernelTask& task) {
  return HasFloat64(task) ? MathMode::kFp64 : MathMode::kFp32;
}

MathMode FloorMathMode(const forge::v1::KernelTask& task) {
  if (HasFloat64(task)) return MathMode::kFp64;
  bool fp8_input = false;
  bool sixteen_bit = false;
  for (const auto* specs : {&task.inputs(), &task.outputs()}) {
    for (const TensorSpec& spec : *specs) {
      const forge::v1::DType dtype = spec.dtype();
      sixteen_bit |= dtype == forge::v1::DTYPE_BFLOAT16 || dtype == forge::v1::DTYPE_FLOAT16;
      fp8_input |= specs == &task.inputs() && (dtype == forge::v1::DTYPE_FLOAT8_E4M3FN ||
                                               dtype == forge::v1::DTYPE_FLOAT8_E5M2);
    }
  }
  const bool tensor_cores = task.family() == forge::v1::KERNEL_FAMILY_GEMM ||
                            task.family() == forge::v1::KERNEL_FAMILY_CONV ||
                            task.family() == forge::v1::KERNEL_FAMILY_ATTENTION;
  if (!tensor_cores) return MathMode::kFp32;
  if (fp8_input) return MathMode::kFp8;
  return sixteen_bit ? MathMode::kBf16 : MathMode::kFp32;
}

}  // namespace forge::graph
