#include "compiler/codegen/reduction/analysis.h"

#include <algorithm>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/strip.h"
#include "common/status/status_macros.h"

namespace forge::codegen::reduction {
namespace {

using forge::v1::Argument;
using forge::v1::KernelTask;
using forge::v1::Node;
using forge::v1::TensorSpec;

absl::StatusOr<ReductionKind> KindOf(absl::string_view op) {
  absl::ConsumePrefix(&op, "aten::");
  if (op == "sum") return ReductionKind::kSum;
  if (op == "mean") return ReductionKind::kMean;
  if (op == "amax") return ReductionKind::kMax;
  if (op == "amin") return ReductionKind::kMin;
  if (op == "softmax" || op == "_softmax") return ReductionKind::kSoftmax;
  if (op == "log_softmax" || op == "_log_softmax") return ReductionKind::kLogSoftmax;
  // Group norm is layer norm over each (sample, group) row of the rewritten task (analysis.h).
  if (op == "layer_norm" || op == "group_norm" || op == "native_group_norm" ||
      op == "instance_norm") {
    return ReductionKind::kLayerNorm;
  }
  if (op == "var" || op == "var_mean") return ReductionKind::kVar;
  if (op == "logsumexp") return ReductionKind::kLogSumExp;
  return absl::NotFoundError(op);
}



// Reductions reachable from `value` through elementwise producers.
void CollectDependencies(const ReductionTask& task, const std::string& value,
                         std::set<int>& found, std::set<std::string>& seen) {
  if (!seen.insert(value).second) return;
  if (auto it = task.reduction_of_value.find(value); it != task.reduction_of_value.end()) {
    found.insert(it->second);
    return;
  }
  const Node* producer = task.view.Producer(value);
  if (producer == nullptr) return;
  for (const Argument& argument : producer->arguments()) {
    if (argument.value_case() == Argument::kTensor) {
      CollectDependencies(task, argument.tensor(), found, seen);
    } else if (argument.value_case() == Argument::kOptionalTensor &&
               argument.optional_tensor().has_value_name()) {
      CollectDependencies(task, argument.optional_tensor().value_name(), found, seen);
    }
  }
}

// Layer norm over the k > 1 trailing dims of its input (nn.LayerNorm((C, H, W))) is layer norm
// over one dim of their product when each tensor of the group is contiguous across them, and so
// is a sum / mean / amax / amin / var / logsumexp over them with keepdim: the
// task rewritten that way, or nullopt when the group has no such layer norm. A group that mixes it
// with another reduction, a view op, a tensor that broadcasts within the trailing dims, or one
// that is not contiguous across them, stays as it is (and the analysis says what it cannot do).
struct TrailingDims {
  std::vector<int64_t> row_shape;
  int count = 0;  // k
};

// Reductions that name their reduced dims in `dim` (sum, mean, amax, amin, var, logsumexp).
bool ReducesDimList(ReductionKind kind) {
  return kind != ReductionKind::kLayerNorm && !ElementwiseInRow(kind);
}

// The k > 1 trailing dims of a rank-`rank` tensor that `dims` names (each once, any order, negative
// or not), or 0 when it names anything else.
int TrailingDimCount(const Argument* dims, int64_t rank) {
  if (dims == nullptr || dims->value_case() != Argument::kInts) return 0;
  std::set<int64_t> named;
  for (int64_t dim : dims->ints().values()) {
    if (dim < -rank || dim >= rank) return 0;
    named.insert(dim < 0 ? dim + rank : dim);
  }
  const int count = static_cast<int>(named.size());
  if (count < 2 || count != dims->ints().values_size() || *named.begin() != rank - count) return 0;
  return count;
}

std::optional<TrailingDims> NormalizedTrailingDims(const GroupView& view) {
  std::optional<TrailingDims> found;
  for (const Node& node : view.group().nodes()) {
    if (IsPointwiseOp(node)) continue;
    const absl::StatusOr<ReductionKind> kind = KindOf(node.op());
    if (!kind.ok()) return std::nullopt;
    if (ReducesDimList(*kind)) {
      // x.mean((2, 3), keepdim=True) over (N, C, H, W): one row of H * W, as layer norm's
      // trailing dims. (Without keepdim the result's (N, C) would merge as if it broadcast.)
      const Argument* keepdim = FindArgument(node, "keepdim");
      if (keepdim == nullptr || !keepdim->bool_value()) return std::nullopt;
      const std::vector<int64_t> shape = view.Shape(TensorArgument(node, "self"));
      const int count =
          TrailingDimCount(FindArgument(node, "dim"), static_cast<int64_t>(shape.size()));
      if (count == 0) return std::nullopt;
      if (found.has_value() && (found->row_shape != shape || found->count != count)) {
        return std::nullopt;
      }
      found = TrailingDims{shape, count};
      continue;
    }
    if (*kind != ReductionKind::kLayerNorm) return std::nullopt;
    const Argument* normalized = FindArgument(node, "normalized_shape");
    const std::vector<int64_t> shape = view.Shape(TensorArgument(node, "input"));
    if (normalized == nullptr) return std::nullopt;
    const int count = normalized->ints().values_size();
    if (count < 2 || count > static_cast<int>(shape.size()) ||
        !std::equal(normalized->ints().values().begin(), normalized->ints().values().end(),
                    shape.end() - count)) {
      return std::nullopt;
    }
    if (found.has_value() && (found->row_shape != shape || found->count != count)) {
      return std::nullopt;
    }
    found = TrailingDims{shape, count};
  }
  return found;
}

// `spec` with the trailing dims merged into one: those dims right-aligned against the row's must
// all match the row's (merged to their product, if contiguous) or all be 1 (merged to 1).
bool MergeTrailingDims(const TrailingDims& dims, TensorSpec& spec) {
  const int rank = spec.shape_size();
  if (rank == 0) return true;
  const int row_rank = static_cast<int>(dims.row_shape.size());
  if (rank > row_rank) return false;
  const int first = std::max(0, rank - dims.count);  // spec's first merged dim
  bool all_match = rank >= dims.count, all_one = true;
  for (int d = first; d < rank; ++d) {
    all_match = all_match && spec.shape(d) == dims.row_shape[row_rank - rank + d];
    all_one = all_one && spec.shape(d) == 1;
  }
  if (!all_match && !all_one) return false;
  int64_t merged_size = 1, merged_stride = 1;
  for (int d = rank - 1; d >= first; --d) {
    if (spec.shape(d) == 1) continue;
    if (merged_size == 1) {
      merged_stride = spec.strides_size() == rank ? spec.strides(d) : 1;
    } else if (spec.strides_size() == rank && spec.strides(d) != merged_stride * merged_size) {
      return false;
    }
    merged_size *= spec.shape(d);
  }
  // A spec with fewer dims than merged ones keeps its leading size-1 padding out: merging leaves
  // one dim where `rank - first` were.
  std::vector<int64_t> shape(spec.shape().begin(), spec.shape().begin() + first);
  shape.push_back(merged_size);
  spec.mutable_shape()->Assign(shape.begin(), shape.end());
  if (spec.strides_size() == rank) {
    std::vector<int64_t> strides(spec.strides().begin(), spec.strides().begin() + first);
    strides.push_back(merged_stride);
    spec.mutable_strides()->Assign(strides.begin(), strides.end());
  }
  return true;
}

std::optional<KernelTask> FlattenNormalizedDims(const KernelTask& task, const GroupView& view) {
  const std::optional<TrailingDims> dims = NormalizedTrailingDims(view);
  if (!dims.has_value()) return std::nullopt;
  KernelTask flattened = task;
  for (TensorSpec& spec : *flattened.mutable_inputs()) {
    if (!MergeTrailingDims(*dims, spec)) return std::nullopt;
  }
  for (TensorSpec& spec : *flattened.mutable_outputs()) {
    if (!MergeTrailingDims(*dims, spec)) return std::nullopt;
  }
  for (forge::v1::Value& value : *flattened.mutable_group()->mutable_values()) {
    if (!MergeTrailingDims(*dims, *value.mutable_tensor())) return std::nullopt;
  }
  int64_t product = 1;
  for (int d = static_cast<int>(dims->row_shape.size()) - dims->count;
       d < static_cast<int>(dims->row_shape.size()); ++d) {
    product *= dims->row_shape[d];
  }
  for (Node& node : *flattened.mutable_group()->mutable_nodes()) {
    const absl::StatusOr<ReductionKind> kind = KindOf(node.op());
    const bool dim_list = kind.ok() && ReducesDimList(*kind);
    for (Argument& argument : *node.mutable_arguments()) {
      if (argument.name() == "normalized_shape" || (dim_list && argument.name() == "dim")) {
        argument.mutable_ints()->clear_values();
        argument.mutable_ints()->add_values(argument.name() == "dim" ? -1 : product);
      }
    }
  }
  return flattened;
}

bool IsGroupNorm(absl::string_view op) {
  absl::ConsumePrefix(&op, "aten::");
  return op == "group_norm" || op == "native_group_norm" || op == "instance_norm";
}

// What FlattenGroupNorm found: the rows' groups and the channels of a group's columns.
struct GroupNormShape {
  int64_t channels_per_group = 0;
  int64_t spatial = 1;
};

// The task of a group norm over x of shape (N, C, *spatial) rewritten so that each (sample, group)
// is a row of (N, G, C/G * spatial) (analysis.h), with `found` set; nullopt when the group has no
// group norm, and Unimplemented naming the obstacle when it has one this cannot rewrite.
absl::StatusOr<std::optional<KernelTask>> FlattenGroupNorm(const KernelTask& task,
                                                           const GroupView& view,
                                                           GroupNormShape& found) {
  const Node* norm = nullptr;
  for (const Node& node : view.group().nodes()) {
    if (!IsGroupNorm(node.op())) continue;
    if (norm != nullptr) {
      return absl::UnimplementedError(absl::StrCat(
          "reduction: ", DescribeNode(node), " is a second group norm in one task"));
    }
    norm = &node;
  }
  if (norm == nullptr) return std::nullopt;
  for (const Node& node : view.group().nodes()) {
    if (&node != norm && !IsPointwiseOp(node)) {
      return absl::UnimplementedError(absl::StrCat(
          "reduction: ", DescribeNode(node), " is in the task of ", DescribeNode(*norm),
          "; group norm fuses with elementwise ops only"));
    }
  }
  const std::vector<int64_t> shape = view.Shape(TensorArgument(*norm, "input"));
  if (shape.size() < 2) {
    return absl::InvalidArgumentError(absl::StrCat(
        "reduction: ", DescribeNode(*norm), " normalizes a tensor of rank ", shape.size(),
        "; it needs (N, C, ...)"));
  }
  const int64_t channels = shape[1];
  int64_t groups = channels;  // instance norm: a group per channel
  absl::string_view op = norm->op();
  absl::ConsumePrefix(&op, "aten::");
  if (op == "instance_norm") {
    const Argument* use_input_stats = FindArgument(*norm, "use_input_stats");
    if (!TensorArgument(*norm, "running_mean").empty() ||
        !TensorArgument(*norm, "running_var").empty() ||
        (use_input_stats != nullptr && !use_input_stats->bool_value())) {
      return absl::UnimplementedError(absl::StrCat(
          "reduction: ", DescribeNode(*norm),
          " uses or updates running statistics; only instance norm over each instance's own "
          "statistics is a group norm"));
    }
  } else {
    const Argument* count = FindArgument(*norm, op == "group_norm" ? "num_groups" : "group");
    if (count == nullptr || count->value_case() != Argument::kIntValue) {
      return absl::InvalidArgumentError(
          absl::StrCat("reduction: ", DescribeNode(*norm), " has no group count"));
    }
    groups = count->int_value();
  }
  if (groups <= 0 || channels % groups != 0) {
    return absl::InvalidArgumentError(absl::StrCat("reduction: ", DescribeNode(*norm), ": ",
                                                   groups, " groups do not divide ", channels,
                                                   " channels"));
  }
  found.channels_per_group = channels / groups;
  found.spatial = 1;
  for (size_t d = 2; d < shape.size(); ++d) found.spatial *= shape[d];
  const int64_t group_columns = found.channels_per_group * found.spatial;
  // The affine weight and bias stay (C) and are read per channel; native_group_norm's mean and
  // rstd stay (N, G), one per row.
  std::set<std::string, std::less<>> kept;
  for (const char* affine : {"weight", "bias"}) {
    const std::string name = TensorArgument(*norm, affine);
    if (name.empty()) continue;
    if (view.Shape(name) != std::vector<int64_t>{channels}) {
      return absl::InvalidArgumentError(absl::StrCat("reduction: ", DescribeNode(*norm), "'s ",
                                                     affine, " is not of shape (", channels, ")"));
    }
    kept.insert(name);
  }
  for (int o = 1; o < norm->outputs_size(); ++o) {
    if (view.Shape(norm->outputs(o)) != std::vector<int64_t>{shape[0], groups}) {
      return absl::InvalidArgumentError(absl::StrCat("reduction: ", DescribeNode(*norm),
                                                     "'s output ", o, " is not of shape (N, G)"));
    }
    kept.insert(norm->outputs(o));
  }
  for (const Node& node : view.group().nodes()) {
    if (&node == norm) continue;
    for (const Argument& argument : node.arguments()) {
      const std::string name = TensorArgument(node, argument.name());
      if (kept.contains(name)) {
        return absl::UnimplementedError(absl::StrCat(
            "reduction: ", DescribeNode(node), " reads '", name, "', which ", DescribeNode(*norm),
            " reads per channel or writes per group"));
      }
    }
  }
  // (N, C * spatial) by MergeTrailingDims, then (N, G, C/G * spatial); a tensor whose dims there
  // are all 1 becomes (N, 1, 1).
  const TrailingDims dims{shape, static_cast<int>(shape.size()) - 1};
  auto rewrite = [&](const std::string& name, TensorSpec& spec) -> absl::Status {
    if (kept.contains(name)) return absl::OkStatus();
    const int rank = spec.shape_size();
    if (!MergeTrailingDims(dims, spec)) {
      return absl::UnimplementedError(absl::StrCat(
          "reduction: '", name, "' in the task of ", DescribeNode(*norm),
          " is neither contiguous across (C, ...) nor broadcast there from size-1 dims"));
    }
    if (spec.shape_size() == 0) return absl::OkStatus();
    const int last = spec.shape_size() - 1;
    const bool strided = spec.strides_size() == spec.shape_size();
    const int64_t stride = strided ? spec.strides(last) : 1;
    if (spec.shape(last) == channels * found.spatial) {
      spec.set_shape(last, groups);
      spec.add_shape(group_columns);
      if (strided) {
        spec.set_strides(last, stride * group_columns);
        spec.add_strides(stride);
      }
    } else if (rank == static_cast<int>(shape.size())) {
      spec.add_shape(1);
      if (strided) spec.add_strides(1);
    }
    return absl::OkStatus();
  };
  KernelTask flattened = task;
  for (int i = 0; i < flattened.inputs_size(); ++i) {
    FORGE_RETURN_IF_ERROR(
        rewrite(flattened.group().inputs(i).value_name(), *flattened.mutable_inputs(i)));
  }
  for (int o = 0; o < flattened.outputs_size(); ++o) {
    FORGE_RETURN_IF_ERROR(
        rewrite(flattened.group().outputs(o).value_name(), *flattened.mutable_outputs(o)));
  }
  for (forge::v1::Value& value : *flattened.mutable_group()->mutable_values()) {
    FORGE_RETURN_IF_ERROR(rewrite(value.name(), *value.mutable_tensor()));
  }
  return flattened;
}

// The analysis of the task `view` reads, as it is; `group_norm`: what FlattenGroupNorm found,
// when it rewrote the task.
absl::StatusOr<ReductionTask> AnalyzeAsGiven(GroupView view,
                                             const GroupNormShape* group_norm = nullptr) {
  const KernelTask& task = view.task();
  ReductionTask analysis(std::move(view));
  const forge::v1::Graph& group = task.group();
  for (const Node& node : group.nodes()) {
    absl::StatusOr<ReductionKind> kind = KindOf(node.op());
    if (!kind.ok()) {
      // View ops fold into the indices the emitter reads their sources at.
      if (IsElementOp(node)) continue;
      return absl::UnimplementedError(absl::StrCat(
          "reduction: ", DescribeNode(node),
          " is neither a supported reduction, elementwise nor a view"));
    }
    Reduction reduction;
    reduction.node = &node;
    reduction.kind = *kind;
    reduction.input = TensorArgument(node, *kind == ReductionKind::kLayerNorm ? "input" : "self");
    if (reduction.input.empty()) {
      return absl::InvalidArgumentError(
          absl::StrCat("reduction: ", DescribeNode(node), " has no tensor input"));
    }
    const std::vector<int64_t> shape = analysis.view.Shape(reduction.input);
    if (shape.empty()) {
      return absl::UnimplementedError(
          absl::StrCat("reduction: ", DescribeNode(node), " reduces a 0-d tensor"));
    }
    if (analysis.row_shape.empty()) analysis.row_shape = shape;
    if (shape != analysis.row_shape) {
      return absl::UnimplementedError(absl::StrCat(
          "reduction: ", DescribeNode(node), " reduces a tensor of another shape than the first "
          "reduction's; one kernel reduces rows of one shape"));
    }
    const int64_t rank = static_cast<int64_t>(shape.size());
    // The one dimension `dims` names (none: every dimension, which is one for a vector).
    auto one_axis = [&](std::vector<int64_t> dims) -> absl::StatusOr<int> {
      if (dims.empty() && rank == 1) return 0;
      if (dims.size() == 1 && dims[0] >= -rank && dims[0] < rank) {
        return static_cast<int>(dims[0] < 0 ? dims[0] + rank : dims[0]);
      }
      return absl::UnimplementedError(absl::StrCat(
          "reduction: ", DescribeNode(node), " reduces dims [", absl::StrJoin(dims, ", "),
          "] of a rank-", rank, " tensor; only one dimension is supported"));
    };
    absl::StatusOr<int> axis = absl::InternalError("unset");
    switch (*kind) {
      case ReductionKind::kSum:
      case ReductionKind::kMean:
      case ReductionKind::kMax:
      case ReductionKind::kMin:
      case ReductionKind::kLogSumExp:
      case ReductionKind::kVar: {
        const Argument* dims = FindArgument(node, "dim");
        axis = one_axis(dims == nullptr || dims->value_case() != Argument::kInts
                            ? std::vector<int64_t>()
                            : std::vector<int64_t>(dims->ints().values().begin(),
                                                   dims->ints().values().end()));
        if (*kind == ReductionKind::kLogSumExp) analysis.has_softmax = true;
        if (*kind != ReductionKind::kVar) break;
        // var.dim says `unbiased` (default true); var.correction / var_mean.correction say
        // `correction` (default None: 1).
        if (const Argument* unbiased = FindArgument(node, "unbiased"); unbiased != nullptr) {
          reduction.correction = unbiased->bool_value() ? 1 : 0;
        }
        if (const Argument* correction = FindArgument(node, "correction"); correction != nullptr) {
          if (correction->value_case() == Argument::kFloatValue) {
            reduction.correction = correction->float_value();
          } else if (correction->value_case() == Argument::kIntValue) {
            reduction.correction = static_cast<double>(correction->int_value());
          }
        }
        analysis.has_moments = true;
        break;
      }
      case ReductionKind::kSoftmax:
      case ReductionKind::kLogSoftmax: {
        const Argument* dim = FindArgument(node, "dim");
        if (dim == nullptr || dim->value_case() != Argument::kIntValue) {
          return absl::InvalidArgumentError(absl::StrCat("reduction: ", DescribeNode(node), " has no dim"));
        }
        axis = one_axis({dim->int_value()});
        analysis.has_softmax = true;
        break;
      }
      case ReductionKind::kLayerNorm: {
        if (IsGroupNorm(node.op())) {
          if (group_norm == nullptr) {
            return absl::InternalError(absl::StrCat("reduction: ", DescribeNode(node),
                                                    " in a task not rewritten into groups"));
          }
          reduction.channels_per_group = group_norm->channels_per_group;
          reduction.spatial = group_norm->spatial;
        } else if (const Argument* normalized = FindArgument(node, "normalized_shape");
                   normalized == nullptr || normalized->ints().values_size() != 1 ||
                   normalized->ints().values(0) != shape.back()) {
          return absl::UnimplementedError(absl::StrCat(
              "reduction: ", DescribeNode(node), " normalizes more than the last dimension"));
        }
        axis = static_cast<int>(rank - 1);
        reduction.weight = TensorArgument(node, "weight");
        reduction.bias = TensorArgument(node, "bias");
        if (const Argument* eps = FindArgument(node, "eps"); eps != nullptr) {
          reduction.eps = eps->value_case() == Argument::kFloatValue
                              ? eps->float_value()
                              : static_cast<double>(eps->int_value());
        }
        analysis.has_moments = true;
        break;
      }
    }
    if (!axis.ok()) return axis.status();
    if (analysis.axis < 0) analysis.axis = *axis;
    if (*axis != analysis.axis) {
      return absl::UnimplementedError(absl::StrCat(
          "reduction: ", DescribeNode(node), " reduces dim ", *axis,
          " but the first reduction reduces dim ", analysis.axis,
          "; one kernel reduces one dimension"));
    }
    if (!IsFloatingDType(analysis.view.DType(reduction.input))) {
      return absl::UnimplementedError(absl::StrCat("reduction: ", DescribeNode(node),
                                                   " reduces a non-floating tensor"));
    }
    for (const std::string& output : node.outputs()) {  // var_mean: var and mean
      analysis.reduction_of_value[output] = static_cast<int>(analysis.reductions.size());
    }
    analysis.reductions.push_back(std::move(reduction));
  }
  if (analysis.reductions.empty()) {
    return absl::UnimplementedError(absl::StrCat("reduction: task ", task.digest(),
                                                 " has no reduction"));
  }
  analysis.columns = analysis.row_shape[analysis.axis];
  analysis.rows = 1;
  for (size_t d = 0; d < analysis.row_shape.size(); ++d) {
    if (static_cast<int>(d) == analysis.axis) continue;
    analysis.rows *= analysis.row_shape[d];
    if (static_cast<int>(d) > analysis.axis) analysis.inner *= analysis.row_shape[d];
  }
  if (analysis.columns == 0 || analysis.rows == 0) {
    return absl::UnimplementedError("reduction: the reduced tensor is empty");
  }

  analysis.acc_type = "float";
  int64_t largest = 0;
  for (const forge::v1::Value& value : group.values()) {
    if (!StorageType(value.tensor().dtype()).ok()) {
      return absl::UnimplementedError(absl::StrCat("reduction: value '", value.name(),
                                                   "' has unsupported dtype ",
                                                   DTypeName(value.tensor().dtype())));
    }
    if (value.tensor().dtype() == forge::v1::DTYPE_FLOAT64) analysis.acc_type = "double";
    largest = std::max(largest, NumElements(value.tensor().shape()));
  }
  // Outputs: row-shaped (written per element) or one value per row (keepdim or not).
  std::vector<int64_t> per_row_keepdim = analysis.row_shape;
  per_row_keepdim[analysis.axis] = 1;
  std::vector<int64_t> per_row = analysis.row_shape;
  per_row.erase(per_row.begin() + analysis.axis);
  for (int o = 0; o < task.outputs_size(); ++o) {
    const TensorSpec& spec = task.outputs(o);
    const std::string& name = group.outputs(o).value_name();
    const std::vector<int64_t> shape = ShapeOf(spec);
    if (shape != analysis.view.Shape(name) || spec.dtype() != analysis.view.DType(name)) {
      return absl::InvalidArgumentError(absl::StrCat(
          "reduction: output ", o, " ('", name, "') TensorSpec disagrees with its Value"));
    }
    if (shape != analysis.row_shape && shape != per_row_keepdim && shape != per_row) {
      return absl::UnimplementedError(absl::StrCat(
          "reduction: output ", o, " ('", name, "') has shape [", absl::StrJoin(shape, ", "),
          "], neither the rows' [", absl::StrJoin(analysis.row_shape, ", "), "] nor one per row"));
    }
    largest = std::max(largest, MaxOffset(spec) + 1);
    analysis.widest_access = std::max(analysis.widest_access, ElementBytes(spec.dtype()));
  }
  for (int i = 0; i < task.inputs_size(); ++i) {
    largest = std::max(largest, MaxOffset(task.inputs(i)) + 1);
    if (ShapeOf(task.inputs(i)) == analysis.row_shape) {
      ++analysis.row_sized_inputs;
      analysis.widest_access = std::max(analysis.widest_access, ElementBytes(task.inputs(i).dtype()));
    }
  }
  analysis.wide_index = largest >= (int64_t{1} << 30);

  for (size_t r = 0; r < analysis.reductions.size(); ++r) {
    Reduction& reduction = analysis.reductions[r];
    std::set<int> dependencies;
    std::set<std::string> seen;
    CollectDependencies(analysis, reduction.input, dependencies, seen);
    reduction.depends_on.assign(dependencies.begin(), dependencies.end());
  }
  return analysis;
}

}  // namespace

absl::StatusOr<ReductionTask> Analyze(const KernelTask& task) {
  absl::StatusOr<GroupView> view = GroupView::Create(task);
  if (!view.ok()) return view.status();
  std::optional<KernelTask> flattened = FlattenNormalizedDims(task, *view);
  GroupNormShape group_norm;
  bool grouped = false;
  if (!flattened.has_value()) {
    absl::StatusOr<std::optional<KernelTask>> groups = FlattenGroupNorm(task, *view, group_norm);
    if (!groups.ok()) return groups.status();
    flattened = *std::move(groups);
    grouped = flattened.has_value();
  }
  if (!flattened.has_value()) return AnalyzeAsGiven(*std::move(view));
  auto owned = std::make_shared<const KernelTask>(*std::move(flattened));
  absl::StatusOr<GroupView> flattened_view = GroupView::Create(*owned);
  if (!flattened_view.ok()) return flattened_view.status();
  absl::StatusOr<ReductionTask> analysis =
      AnalyzeAsGiven(*std::move(flattened_view), grouped ? &group_norm : nullptr);
  if (analysis.ok()) analysis->flattened = std::move(owned);
  return analysis;
}


bool Moments(ReductionKind kind) {
  return kind == ReductionKind::kLayerNorm || kind == ReductionKind::kVar;
}

bool ElementwiseInRow(ReductionKind kind) {
  return kind == ReductionKind::kSoftmax || kind == ReductionKind::kLogSoftmax ||
         kind == ReductionKind::kLayerNorm;
}

bool Softmax(ReductionKind kind) {
  return kind == ReductionKind::kSoftmax || kind == ReductionKind::kLogSoftmax ||
         kind == ReductionKind::kLogSumExp;
}

std::vector<int64_t> ShapeOf(const TensorSpec& spec) {
  return {spec.shape().begin(), spec.shape().end()};
}

}  // namespace forge::codegen::reduction
