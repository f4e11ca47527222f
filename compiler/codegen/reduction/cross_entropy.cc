#include "compiler/codegen/reduction/cross_entropy.h"

#include <algorithm>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_replace.h"
#include "compiler/codegen/cuda_expr.h"
#include "compiler/codegen/kernel_abi.h"
#include "compiler/codegen/reduction/analysis.h"
#include "compiler/codegen/reduction/cuda_sources.h"
#include "compiler/codegen/reduction/reduction.h"

namespace forge::codegen::reduction {

using forge::v1::Argument;
using forge::v1::KernelTask;
using forge::v1::Node;

// aten::nll_loss and nll_loss_nd (one output; nll_loss_forward's two are not this template's).
bool IsNllLoss(const Node& node) {
  return node.op() == "aten::nll_loss" || node.op() == "aten::nll_loss_nd";
}

const Node* FindCrossEntropyNode(const KernelTask& task) {
  for (const Node& node : task.group().nodes()) {
    if (node.op() == "aten::cross_entropy_loss" || IsNllLoss(node)) return &node;
  }
  return nullptr;
}

absl::StatusOr<CrossEntropyTask> AnalyzeCrossEntropy(const KernelTask& task, const Node& node) {
  absl::StatusOr<GroupView> view = GroupView::Create(task);
  if (!view.ok()) return view.status();
  const std::string where = absl::StrCat("cross_entropy: ", DescribeNode(node));
  if (task.group().nodes_size() != 1) {
    return absl::UnimplementedError(absl::StrCat(
        where, " shares its task with ", task.group().nodes_size() - 1,
        " other node(s); the cross_entropy template computes the loss alone"));
  }
  CrossEntropyTask ce;
  ce.node = &node;
  ce.nll = IsNllLoss(node);
  const std::string weight = TensorArgument(node, "weight");
  if (!weight.empty()) {
    ce.weight_position = view->InputPosition(weight);
    if (ce.weight_position < 0) {
      return absl::InvalidArgumentError(
          absl::StrCat(where, ": its class weights must be a task input"));
    }
    ce.weight = view->InputSpec(ce.weight_position);
  }
  if (const Argument* reduction = FindArgument(node, "reduction"); reduction != nullptr) {
    if (reduction->value_case() != Argument::kIntValue || reduction->int_value() < 0 ||
        reduction->int_value() > 2) {
      return absl::InvalidArgumentError(absl::StrCat(
          where, " has reduction ",
          reduction->value_case() == Argument::kIntValue
              ? absl::StrCat(reduction->int_value())
              : std::string("of an unexpected kind"),
          "; ATen's are none (0), mean (1) and sum (2)"));
    }
    ce.mean = reduction->int_value() == 1;
    ce.none = reduction->int_value() == 0;
  }
  if (const Argument* ignore = FindArgument(node, "ignore_index"); ignore != nullptr) {
    if (ignore->value_case() != Argument::kIntValue) {
      return absl::InvalidArgumentError(absl::StrCat(where, " has a non-integer ignore_index"));
    }
    ce.ignore_index = ignore->int_value();
  }
  if (const Argument* smoothing = FindArgument(node, "label_smoothing"); smoothing != nullptr) {
    if (smoothing->value_case() == Argument::kFloatValue) {
      ce.label_smoothing = smoothing->float_value();
    } else if (smoothing->value_case() == Argument::kIntValue) {
      ce.label_smoothing = static_cast<double>(smoothing->int_value());
    } else {
      return absl::InvalidArgumentError(absl::StrCat(where, " has a non-numeric label_smoothing"));
    }
    if (!(ce.label_smoothing >= 0 && ce.label_smoothing <= 1)) {
      return absl::InvalidArgumentError(absl::StrCat(
          where, " has label_smoothing ", ce.label_smoothing, "; it must be in [0, 1]"));
    }
  }
  const std::string logits = TensorArgument(node, "self");
  const std::string target = TensorArgument(node, "target");
  ce.logits_position = view->InputPosition(logits);
  ce.target_position = view->InputPosition(target);
  if (ce.logits_position < 0 || ce.target_position < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat(where, ": its logits and target must be task inputs"));
  }
  ce.logits = view->InputSpec(ce.logits_position);
  ce.target = view->InputSpec(ce.target_position);
  if (ce.logits.shape_size() != 2) {
    return absl::UnimplementedError(absl::StrCat(where, " has logits of rank ",
                                                 ce.logits.shape_size(),
                                                 "; only (N, C) logits are supported"));
  }
  const forge::v1::DType dtype = ce.logits.dtype();
  if (!IsFloatingDType(dtype) || !StorageType(dtype).ok()) {
    return absl::UnimplementedError(
        absl::StrCat(where, " has logits of dtype ", DTypeName(dtype)));
  }
  ce.rows = ce.logits.shape(0);
  ce.classes = ce.logits.shape(1);
  if (ce.target.dtype() != forge::v1::DTYPE_INT64 || ce.target.shape_size() != 1 ||
      ce.target.shape(0) != ce.rows) {
    return absl::UnimplementedError(absl::StrCat(
        where, " has a target that is not int64 of shape [", ce.rows,
        "]; only class-index targets are supported"));
  }
  if (ce.rows == 0 || ce.classes == 0) {
    return absl::UnimplementedError(absl::StrCat(where, " has empty logits"));
  }
  if (ce.weight_position >= 0) {
    if (ce.weight.dtype() != dtype || ce.weight.shape_size() != 1 ||
        ce.weight.shape(0) != ce.classes) {
      return absl::InvalidArgumentError(absl::StrCat(
          where, " has class weights that are not of the logits' dtype and shape [", ce.classes,
          "]"));
    }
    if (ce.label_smoothing != 0) {
      return absl::UnimplementedError(absl::StrCat(
          where, " has class weights and label smoothing; the template takes either alone"));
    }
  }
  const bool output_shape_ok =
      ce.none ? task.outputs_size() == 1 && task.outputs(0).shape_size() == 1 &&
                    task.outputs(0).shape(0) == ce.rows
              : task.outputs_size() == 1 && task.outputs(0).shape_size() == 0;
  if (!output_shape_ok || task.outputs(0).dtype() != dtype) {
    return absl::InvalidArgumentError(absl::StrCat(
        where, ": the task must have one output of the logits' dtype, ",
        ce.none ? absl::StrCat("of shape [", ce.rows, "] (reduction none)") : "0-d"));
  }
  ce.output = task.outputs(0);
  ce.acc_type = dtype == forge::v1::DTYPE_FLOAT64 ? "double" : "float";
  return ce;
}

TemplateSpace CrossEntropySpace() {
  return {ReductionFamily::kCrossEntropyTemplateName,
          {{"threads_per_row", {32, 64, 128, 256, 512, 1024}, 32},
           {"rows_per_block", {1, 2, 4, 8}, 1},
           {"vector_width", {1, 2, 4, 8}, 1}}};
}

TemplateSpace CrossEntropyScheduleSpace(const CrossEntropyTask& ce) {
  TemplateSpace space = CrossEntropySpace();
  DefaultToBestPoint(space, [&](const SchedulePoint& point) -> std::optional<double> {
    if (!ValidateCrossEntropyPoint(ce, point).ok()) return std::nullopt;
    // About 32 chunks per thread: on the H200, 32768 x 4096 float32 ran 1.9x faster with one
    // warp a row and 8 rows a block (vector 4) than with 256 threads a row, whose per-row
    // target load and cross-warp barrier are not hidden by enough rows in flight.
    return RowLayoutScore(ce.classes, /*chunks_per_thread=*/32, CrossEntropyLayout(point));
  });
  return space;
}

Layout CrossEntropyLayout(const SchedulePoint& point) {
  Layout layout;
  layout.threads_per_row = Parameter(point, "threads_per_row", 32);
  layout.rows_per_block = Parameter(point, "rows_per_block", 1);
  layout.width = Parameter(point, "vector_width", 1);
  return layout;
}

int64_t CrossEntropyGridBlocks(const CrossEntropyTask& ce, const Layout& layout) {
  return std::min((ce.rows + layout.rows_per_block - 1) / layout.rows_per_block,
                  kMaxCrossEntropyBlocks);
}

absl::Status ValidateCrossEntropyPoint(const CrossEntropyTask& ce, const SchedulePoint& point) {
  if (absl::Status status = CheckPointInSpace(CrossEntropySpace(), point); !status.ok()) {
    return status;
  }
  const Layout layout = CrossEntropyLayout(point);
  if (absl::Status status =
          ValidateRowLayout(ce.rows, ce.classes, ElementBytes(ce.logits.dtype()), layout);
      !status.ok()) {
    return status;
  }
  if (layout.width > 1 && (ce.logits.strides(1) != 1 || ce.logits.strides(0) % layout.width != 0 ||
                           ce.logits.storage_offset() % layout.width != 0)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "vector_width ", layout.width, " needs logits rows of unit stride that start at multiples "
        "of ", layout.width, " elements"));
  }
  return absl::OkStatus();
}

std::string CrossEntropySource(const KernelTask& task, const CrossEntropyTask& ce,
                               const Layout& layout) {
  const forge::v1::DType dtype = ce.logits.dtype();
  const std::string storage = *StorageType(dtype);
  std::string source(KernelPrelude());
  absl::StrAppend(&source, kReductionPrelude);
  absl::StrAppend(
      &source, "\n// Task ", task.digest(), ce.nll ? ": nll_loss (" : ": cross-entropy (",
      ce.none ? "none" : ce.mean ? "mean" : "sum", ce.weight_position >= 0 ? ", class weights" : "",
      ", ignore_index ", ce.ignore_index,
      ce.label_smoothing != 0 ? absl::StrFormat(", label_smoothing %.17g", ce.label_smoothing)
                              : std::string(),
      ") of ", ce.rows, " rows of ", ce.classes,
      " classes; ", layout.threads_per_row, " threads per row, ", layout.rows_per_block,
      " rows per block, vector ", layout.width, ".\n");
  absl::StrAppend(&source, "using ForgeCeLogit = ", storage, ";\nusing ForgeCeAcc = ", ce.acc_type,
                  ";\n");
  absl::StrAppend(&source, "__device__ __forceinline__ ForgeCeAcc forge_ce_load(ForgeCeLogit x) { "
                  "return (ForgeCeAcc)", LoadConversion(dtype, "x"), "; }\n");
  absl::StrAppend(&source, "__device__ __forceinline__ ", storage,
                  " forge_ce_store(ForgeCeAcc x) { return ",
                  StoreConversion(dtype, absl::StrCat("((", *RegisterType(dtype), ")x)")),
                  "; }\n");
  const std::vector<std::pair<std::string, int64_t>> constants = {
      {"kRows", ce.rows},
      {"kClasses", ce.classes},
      {"kLogitsOffset", ce.logits.storage_offset()},
      {"kRowStride", ce.logits.strides(0)},
      {"kClassStride", ce.logits.strides(1)},
      {"kTargetOffset", ce.target.storage_offset()},
      {"kTargetStride", ce.target.strides(0)},
      {"kIgnoreIndex", ce.ignore_index},
      {"kOutStride", ce.none && ce.output.strides_size() == 1 ? ce.output.strides(0) : 1},
      {"kWeightOffset", ce.weight_position >= 0 ? ce.weight.storage_offset() : 0},
      {"kWeightStride",
       ce.weight_position >= 0 && ce.weight.strides_size() == 1 ? ce.weight.strides(0) : 1}};
  for (const auto& [name, value] : constants) {
    absl::StrAppend(&source, "constexpr long long ", name, " = ", value, "LL;\n");
  }
  absl::StrAppend(&source, "constexpr int kThreadsPerRow = ", layout.threads_per_row,
                  ";\nconstexpr int kRowsPerBlock = ", layout.rows_per_block,
                  ";\nconstexpr int kVectorWidth = ", layout.width,
                  ";\nconstexpr int kGridBlocks = ", CrossEntropyGridBlocks(ce, layout),
                  ";\nconstexpr bool kMean = ", ce.mean ? "true" : "false", ";\n");
  // Without label smoothing the kernel has no row sum of the logits (if constexpr).
  absl::StrAppend(&source, "constexpr bool kNll = ", ce.nll ? "true" : "false",
                  ";\nconstexpr bool kNone = ", ce.none ? "true" : "false",
                  ";\nconstexpr bool kWeighted = ", ce.weight_position >= 0 ? "true" : "false",
                  ";\n");
  absl::StrAppend(&source, "constexpr bool kSmoothed = ", ce.label_smoothing != 0 ? "true" : "false",
                  ";\nconstexpr double kLabelSmoothing = ",
                  absl::StrFormat("%.17g", ce.label_smoothing), ";\n");
  std::string body = kCrossEntropyBody;
  body = absl::StrReplaceAll(
      body, {{"FORGE_CE_PARAMETERS", KernelParameterList(task)},
             {"FORGE_CE_ALIASES",
              absl::StrCat("const ForgeCeLogit* const logits = in", ce.logits_position,
                           ";\n  const long long* const target = in", ce.target_position,
                           ";\n  const ForgeCeLogit* const weight = ",
                           ce.weight_position >= 0 ? absl::StrCat("in", ce.weight_position)
                                                   : std::string("nullptr"),
                           ";\n  ", storage, "* const out = out0;")}});
  absl::StrAppend(&source, body);
  return source;
}


}  // namespace forge::codegen::reduction
