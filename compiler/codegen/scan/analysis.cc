#include "compiler/codegen/scan/analysis.h"

#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/dtype/dtype.h"

namespace forge::codegen::scan {
namespace {

using forge::v1::Argument;
using forge::v1::KernelTask;
using forge::v1::Node;
using forge::v1::TensorSpec;

constexpr ScanOp kScanOps[] = {
    {.op = "aten::cumsum", .functor = "ForgeScanSum", .sum = true},
    {.op = "aten::cumprod", .functor = "ForgeScanProd"},
    {.op = "aten::cummax",
     .functor = "ForgeScanArgMax",
     .with_indices = true,
     .floating_only = true},
    {.op = "aten::cummin",
     .functor = "ForgeScanArgMin",
     .with_indices = true,
     .floating_only = true},
    {.op = "aten::logcumsumexp", .functor = "ForgeScanLogAddExp", .floating_only = true},
};

std::vector<int64_t> ShapeOf(const TensorSpec& spec) {
  return {spec.shape().begin(), spec.shape().end()};
}

// The scan node's input value and dim, checked.
absl::Status ReadScanNode(const Node& node, ScanTask& analysis) {
  const std::string where = absl::StrCat("scan: ", DescribeNode(node));
  const Argument* self = FindArgument(node, "self");
  if (self == nullptr || self->value_case() != Argument::kTensor) {
    return absl::InvalidArgumentError(absl::StrCat(where, " has no tensor input"));
  }
  analysis.input = self->tensor();
  analysis.shape = analysis.view.Shape(analysis.input);
  const int64_t rank = static_cast<int64_t>(analysis.shape.size());
  if (rank == 0) {
    return absl::UnimplementedError(absl::StrCat(where, " scans a 0-d tensor"));
  }
  const Argument* dim = FindArgument(node, "dim");
  if (dim == nullptr || dim->value_case() != Argument::kIntValue) {
    return absl::InvalidArgumentError(absl::StrCat(where, " has no integer dim"));
  }
  if (dim->int_value() < -rank || dim->int_value() >= rank) {
    return absl::InvalidArgumentError(
        absl::StrCat(where, " scans dim ", dim->int_value(), " of a rank-", rank, " tensor"));
  }
  analysis.axis =
      static_cast<int>(dim->int_value() < 0 ? dim->int_value() + rank : dim->int_value());
  const int expected_outputs = analysis.op->with_indices ? 2 : 1;
  if (node.outputs_size() != expected_outputs) {
    return absl::InvalidArgumentError(
        absl::StrCat(where, " has ", node.outputs_size(), " outputs, not ", expected_outputs));
  }
  analysis.values = node.outputs(0);
  if (analysis.op->with_indices) analysis.indices = node.outputs(1);
  for (const std::string& output : node.outputs()) {
    if (analysis.view.Shape(output) != analysis.shape) {
      return absl::InvalidArgumentError(
          absl::StrCat(where, ": output '", output, "' has another shape than its input"));
    }
  }
  const forge::v1::DType input_dtype = analysis.view.DType(analysis.input);
  analysis.value_dtype = analysis.view.DType(analysis.values);
  if (analysis.op->floating_only &&
      (!IsFloatingDType(input_dtype) || analysis.value_dtype != input_dtype)) {
    return absl::UnimplementedError(absl::StrCat(where, " scans ", DTypeName(input_dtype), " into ",
                                                 DTypeName(analysis.value_dtype),
                                                 "; it takes floating tensors of one dtype"));
  }
  if (!analysis.indices.empty() &&
      analysis.view.DType(analysis.indices) != forge::v1::DTYPE_INT64) {
    return absl::InvalidArgumentError(absl::StrCat(where, ": its indices are not int64"));
  }
  // Floating results combine in float32 (float64 when either end is float64); integer ones
  // (cumsum / cumprod of integers: int64) in int64.
  if (IsFloatingDType(analysis.value_dtype)) {
    analysis.value_type =
        analysis.value_dtype == forge::v1::DTYPE_FLOAT64 || input_dtype == forge::v1::DTYPE_FLOAT64
            ? "double"
            : "float";
  } else if (analysis.value_dtype == forge::v1::DTYPE_INT64 && !IsFloatingDType(input_dtype)) {
    analysis.value_type = "long long";
  } else {
    return absl::UnimplementedError(absl::StrCat(where, " scans ", DTypeName(input_dtype), " into ",
                                                 DTypeName(analysis.value_dtype)));
  }
  return absl::OkStatus();
}

}  // namespace

const ScanOp* FindScanOp(absl::string_view op) {
  for (const ScanOp& entry : kScanOps) {
    if (entry.op == op) return &entry;
  }
  return nullptr;
}

std::vector<int64_t> ShapeWithout(const std::vector<int64_t>& shape, int axis) {
  std::vector<int64_t> result = shape;
  result.erase(result.begin() + axis);
  return result;
}

absl::StatusOr<ScanTask> Analyze(const KernelTask& task) {
  absl::StatusOr<GroupView> view = GroupView::Create(task);
  if (!view.ok()) return view.status();
  ScanTask analysis(*std::move(view));
  const forge::v1::Graph& group = task.group();
  for (const Node& node : group.nodes()) {
    if (const ScanOp* op = FindScanOp(node.op()); op != nullptr) {
      if (analysis.node != nullptr) {
        return absl::UnimplementedError(absl::StrCat("scan: ", DescribeNode(node),
                                                     " is a second scan; one kernel computes one"));
      }
      analysis.node = &node;
      analysis.op = op;
      continue;
    }
    if (!IsPointwiseOp(node) && !IsViewOp(node)) {
      return absl::UnimplementedError(
          absl::StrCat("scan: ", DescribeNode(node), " is neither a scan, elementwise nor a view"));
    }
  }
  if (analysis.node == nullptr) {
    return absl::UnimplementedError(absl::StrCat("scan: task ", task.digest(), " has no scan"));
  }
  if (absl::Status status = ReadScanNode(*analysis.node, analysis); !status.ok()) return status;
  analysis.length = analysis.shape[analysis.axis];
  int64_t elements = 1;
  for (size_t d = 0; d < analysis.shape.size(); ++d) {
    elements *= analysis.shape[d];
    if (static_cast<int>(d) > analysis.axis) analysis.inner *= analysis.shape[d];
  }
  if (elements == 0) return absl::UnimplementedError("scan: the scanned tensor is empty");
  analysis.rows = elements / analysis.length;

  int64_t largest = elements;
  for (const forge::v1::Value& value : group.values()) {
    if (!StorageType(value.tensor().dtype()).ok()) {
      return absl::UnimplementedError(absl::StrCat("scan: value '", value.name(),
                                                   "' has unsupported dtype ",
                                                   DTypeName(value.tensor().dtype())));
    }
  }
  if (task.outputs_size() == 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("scan: task ", task.digest(), " has no outputs"));
  }
  for (int o = 0; o < task.outputs_size(); ++o) {
    const TensorSpec& spec = task.outputs(o);
    const std::string& name = group.outputs(o).value_name();
    if (ShapeOf(spec) != analysis.view.Shape(name) || spec.dtype() != analysis.view.DType(name)) {
      return absl::InvalidArgumentError(
          absl::StrCat("scan: output ", o, " ('", name, "') TensorSpec disagrees with its Value"));
    }
    if (ShapeOf(spec) != analysis.shape) {
      return absl::UnimplementedError(absl::StrCat(
          "scan: output ", o, " ('", name, "') has shape [", absl::StrJoin(spec.shape(), ", "),
          "], not the scanned tensor's [", absl::StrJoin(analysis.shape, ", "), "]"));
    }
    largest = std::max(largest, MaxOffset(spec) + 1);
    analysis.widest_access = std::max(analysis.widest_access, ElementBytes(spec.dtype()));
  }
  for (int i = 0; i < task.inputs_size(); ++i) {
    largest = std::max(largest, MaxOffset(task.inputs(i)) + 1);
    if (ShapeOf(task.inputs(i)) == analysis.shape) {
      analysis.widest_access =
          std::max(analysis.widest_access, ElementBytes(task.inputs(i).dtype()));
    }
  }
  analysis.wide_index = largest >= (int64_t{1} << 30);
  return analysis;
}

}  // namespace forge::codegen::scan
