#include "compiler/codegen/stencil/stencil.h"

#include <string>
#include <vector>

#include "compiler/codegen/stencil/analysis.h"
#include "compiler/codegen/stencil/emitter.h"
#include "compiler/codegen/stencil/layout.h"

namespace forge::codegen {

using forge::v1::KernelTask;

absl::Status StencilFamily::Applies(const KernelTask& task) const {
  absl::StatusOr<stencil::StencilTask> analysis = stencil::Analyze(task);
  if (!analysis.ok()) return analysis.status();
  // Emitting the default point proves every op and view of the group is expressible.
  const SchedulePoint point = DefaultPoint(stencil::SpacesOf(*analysis).front());
  return stencil::EmitStencilKernel(task, *analysis, point).status();
}

absl::StatusOr<std::vector<TemplateSpace>> StencilFamily::ScheduleSpace(
    const KernelTask& task) const {
  absl::StatusOr<stencil::StencilTask> analysis = stencil::Analyze(task);
  if (!analysis.ok()) return analysis.status();
  return stencil::SpacesOf(*analysis);
}

absl::Status StencilFamily::Validate(const KernelTask& task, const SchedulePoint& point) const {
  absl::StatusOr<stencil::StencilTask> analysis = stencil::Analyze(task);
  if (!analysis.ok()) return analysis.status();
  return stencil::ValidatePoint(*analysis, point);
}

absl::StatusOr<LaunchPlan> StencilFamily::Plan(const KernelTask& task,
                                               const SchedulePoint& point) const {
  absl::StatusOr<stencil::StencilTask> analysis = stencil::Analyze(task);
  if (!analysis.ok()) return analysis.status();
  if (absl::Status status = stencil::ValidatePoint(*analysis, point); !status.ok()) return status;
  const stencil::Layout layout = stencil::LayoutOf(point);
  LaunchPlan plan;
  plan.kernel_name = stencil::kKernelName;
  plan.template_name = point.template_name;
  plan.parameters = point.parameters;
  plan.generator_version = std::string(generator_version());
  plan.launch = stencil::LaunchOf(*analysis, layout);
  plan.hints = stencil::CostHintsOf(task, *analysis, layout);
  return plan;
}

absl::StatusOr<std::string> StencilFamily::Emit(const KernelTask& task,
                                                const LaunchPlan& plan) const {
  absl::StatusOr<stencil::StencilTask> analysis = stencil::Analyze(task);
  if (!analysis.ok()) return analysis.status();
  return stencil::EmitStencilKernel(task, *analysis,
                                    SchedulePoint{plan.template_name, plan.parameters});
}

}  // namespace forge::codegen
