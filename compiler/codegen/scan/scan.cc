#include "compiler/codegen/scan/scan.h"

#include <string>
#include <vector>

#include "compiler/codegen/scan/analysis.h"
#include "compiler/codegen/scan/emitter.h"
#include "compiler/codegen/scan/layout.h"

namespace forge::codegen {

using forge::v1::KernelTask;

absl::Status ScanFamily::Applies(const KernelTask& task) const {
  absl::StatusOr<scan::ScanTask> analysis = scan::Analyze(task);
  if (!analysis.ok()) return analysis.status();
  // Emitting the default point proves every op and view of the group is expressible.
  const SchedulePoint point = DefaultPoint(scan::SpacesOf(*analysis).front());
  return scan::EmitScanKernel(task, *analysis, point).status();
}

absl::StatusOr<std::vector<TemplateSpace>> ScanFamily::ScheduleSpace(const KernelTask& task) const {
  absl::StatusOr<scan::ScanTask> analysis = scan::Analyze(task);
  if (!analysis.ok()) return analysis.status();
  return scan::SpacesOf(*analysis);
}

absl::Status ScanFamily::Validate(const KernelTask& task, const SchedulePoint& point) const {
  absl::StatusOr<scan::ScanTask> analysis = scan::Analyze(task);
  if (!analysis.ok()) return analysis.status();
  return scan::ValidatePoint(*analysis, point);
}

absl::StatusOr<LaunchPlan> ScanFamily::Plan(const KernelTask& task,
                                            const SchedulePoint& point) const {
  absl::StatusOr<scan::ScanTask> analysis = scan::Analyze(task);
  if (!analysis.ok()) return analysis.status();
  if (absl::Status status = scan::ValidatePoint(*analysis, point); !status.ok()) return status;
  const scan::Layout layout = scan::LayoutOf(point);
  LaunchPlan plan;
  plan.kernel_name = scan::kKernelName;
  plan.template_name = point.template_name;
  plan.parameters = point.parameters;
  plan.generator_version = std::string(generator_version());
  plan.launch = scan::LaunchOf(*analysis, layout);
  plan.hints = scan::CostHintsOf(task, *analysis, layout);
  return plan;
}

absl::StatusOr<std::string> ScanFamily::Emit(const KernelTask& task, const LaunchPlan& plan) const {
  absl::StatusOr<scan::ScanTask> analysis = scan::Analyze(task);
  if (!analysis.ok()) return analysis.status();
  return scan::EmitScanKernel(task, *analysis, SchedulePoint{plan.template_name, plan.parameters});
}

}  // namespace forge::codegen
