#include "compiler/codegen/reduction/reduction.h"

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/dtype/dtype.h"
#include "compiler/codegen/cost_hints.h"
#include "compiler/codegen/reduction/analysis.h"
#include "compiler/codegen/reduction/cross_entropy.h"
#include "compiler/codegen/reduction/layout.h"
#include "compiler/codegen/reduction/reduction_emitter.h"

namespace forge::codegen {

using forge::v1::KernelTask;
using forge::v1::Node;
using reduction::Analyze;
using reduction::CrossEntropyTask;
using reduction::FindCrossEntropyNode;
using reduction::Layout;
using reduction::ReductionTask;

absl::Status ReductionFamily::Applies(const KernelTask& task) const {
  if (const Node* node = FindCrossEntropyNode(task); node != nullptr) {
    return reduction::AnalyzeCrossEntropy(task, *node).status();
  }
  absl::StatusOr<ReductionTask> analysis = Analyze(task);
  if (!analysis.ok()) return analysis.status();
  SchedulePoint point = DefaultPoint(reduction::SpaceOf(*analysis));
  return reduction::EmitReductionKernel(*analysis, point).status();
}

absl::StatusOr<std::vector<TemplateSpace>> ReductionFamily::ScheduleSpace(
    const KernelTask& task) const {
  if (const Node* node = FindCrossEntropyNode(task); node != nullptr) {
    absl::StatusOr<CrossEntropyTask> ce = reduction::AnalyzeCrossEntropy(task, *node);
    if (!ce.ok()) return ce.status();
    return std::vector<TemplateSpace>{reduction::CrossEntropyScheduleSpace(*ce)};
  }
  absl::StatusOr<ReductionTask> analysis = Analyze(task);
  if (!analysis.ok()) return analysis.status();
  auto settle = [&](TemplateSpace& space) {
    reduction::DefaultToBestPoint(space, [&](const SchedulePoint& point) -> std::optional<double> {
      if (!reduction::ValidatePoint(*analysis, point).ok()) return std::nullopt;
      return reduction::DefaultPointScore(*analysis, point);
    });
    return reduction::ValidatePoint(*analysis, DefaultPoint(space)).ok();
  };
  std::vector<TemplateSpace> spaces;
  // Rows read across memory (a norm over a permuted tensor's channels): transpose_reduce first,
  // the default, where some point of it is valid; row_reduce is still searched.
  if (reduction::TransposedRows(*analysis)) {
    TemplateSpace transpose = reduction::TransposeSpaceOf(*analysis);
    if (settle(transpose)) spaces.push_back(std::move(transpose));
  }
  TemplateSpace space = reduction::SpaceOf(*analysis);
  settle(space);
  spaces.push_back(std::move(space));
  return spaces;
}

absl::Status ReductionFamily::Validate(const KernelTask& task, const SchedulePoint& point) const {
  if (const Node* node = FindCrossEntropyNode(task); node != nullptr) {
    absl::StatusOr<CrossEntropyTask> ce = reduction::AnalyzeCrossEntropy(task, *node);
    if (!ce.ok()) return ce.status();
    return reduction::ValidateCrossEntropyPoint(*ce, point);
  }
  absl::StatusOr<ReductionTask> analysis = Analyze(task);
  if (!analysis.ok()) return analysis.status();
  return reduction::ValidatePoint(*analysis, point);
}


absl::Status ReductionFamily::SupportsArch(const KernelTask& /*task*/, const SchedulePoint& point,
                                           absl::string_view target_arch) const {
  const int64_t cluster_blocks = reduction::Parameter(point, "cluster_blocks", 1);
  if (cluster_blocks <= 1) return absl::OkStatus();
  absl::StatusOr<int> capability = ComputeCapabilityOf(target_arch);
  if (!capability.ok()) return capability.status();
  if (*capability < 90) {
    return absl::FailedPreconditionError(absl::StrCat(
        "row_reduce with cluster_blocks ", cluster_blocks,
        " needs thread block clusters (sm_90 or newer), not ", target_arch));
  }
  return absl::OkStatus();
}

absl::StatusOr<LaunchPlan> ReductionFamily::Plan(const KernelTask& task,
                                                 const SchedulePoint& point) const {
  LaunchPlan plan;
  plan.template_name = point.template_name;
  plan.parameters = point.parameters;
  plan.generator_version = std::string(generator_version());
  const forge::v1::TensorSpec* largest = LargestInput(task);
  if (const Node* node = FindCrossEntropyNode(task); node != nullptr) {
    absl::StatusOr<CrossEntropyTask> ce = reduction::AnalyzeCrossEntropy(task, *node);
    if (!ce.ok()) return ce.status();
    if (absl::Status status = reduction::ValidateCrossEntropyPoint(*ce, point); !status.ok()) {
      return status;
    }
    const Layout layout = reduction::CrossEntropyLayout(point);
    plan.kernel_name = kCrossEntropyKernelName;
    plan.launch.grid = {
        static_cast<uint32_t>(reduction::CrossEntropyGridBlocks(*ce, layout)), 1, 1};
    plan.launch.block = {static_cast<uint32_t>(layout.BlockThreads()), 1, 1};
    plan.hints.vector_width = layout.width;
    plan.hints.unrolled_elements = layout.width;
    plan.hints.bytes_in_flight_per_thread =
        static_cast<double>(layout.width * DTypeBytes(largest->dtype()));
    return plan;
  }
  absl::StatusOr<ReductionTask> analysis = Analyze(task);
  if (!analysis.ok()) return analysis.status();
  if (absl::Status status = reduction::ValidatePoint(*analysis, point); !status.ok()) return status;
  const Layout layout = reduction::LayoutOf(*analysis, point);
  const int64_t rows_per_block = layout.rows_per_block;
  plan.kernel_name = kKernelName;
  const int64_t row_groups = layout.SharedCache()
                                 ? reduction::PersistentClusters(*analysis, layout)
                                 : (analysis->rows + rows_per_block - 1) / rows_per_block;
  plan.launch.grid = {static_cast<uint32_t>(row_groups * layout.cluster_blocks), 1, 1};
  plan.launch.block = {static_cast<uint32_t>(layout.BlockThreads()), 1, 1};
  plan.launch.dynamic_shared_bytes = static_cast<uint32_t>(
      point.template_name == kTransposeTemplateName
          ? reduction::TransposeTileBytes(*analysis, layout.rows_per_block)
          : reduction::SharedCacheOf(*analysis, layout).bytes);
  plan.hints = reduction::CostHintsOf(task, *analysis, point, layout);
  return plan;
}

absl::StatusOr<std::string> ReductionFamily::Emit(const KernelTask& task,
                                                  const LaunchPlan& plan) const {
  const SchedulePoint point{plan.template_name, plan.parameters};
  if (const Node* node = FindCrossEntropyNode(task); node != nullptr) {
    absl::StatusOr<CrossEntropyTask> ce = reduction::AnalyzeCrossEntropy(task, *node);
    if (!ce.ok()) return ce.status();
    return reduction::CrossEntropySource(task, *ce, reduction::CrossEntropyLayout(point));
  }
  absl::StatusOr<ReductionTask> analysis = Analyze(task);
  if (!analysis.ok()) return analysis.status();
  return reduction::EmitReductionKernel(*analysis, point);
}

}  // namespace forge::codegen
