#include "compiler/codegen/family.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_join.h"
#include "absl/strings/strip.h"

namespace forge::codegen {

SchedulePoint DefaultPoint(const TemplateSpace& space) {
  SchedulePoint point{space.template_name, {}};
  for (const ScheduleParameter& parameter : space.parameters) {
    point.parameters[parameter.name] = parameter.default_value;
  }
  return point;
}

std::vector<SchedulePoint> EnumeratePoints(const TemplateSpace& space) {
  std::vector<SchedulePoint> points = {SchedulePoint{space.template_name, {}}};
  for (const ScheduleParameter& parameter : space.parameters) {
    std::vector<SchedulePoint> extended;
    extended.reserve(points.size() * parameter.values.size());
    for (const SchedulePoint& point : points) {
      for (int64_t value : parameter.values) {
        SchedulePoint next = point;
        next.parameters[parameter.name] = value;
        extended.push_back(std::move(next));
      }
    }
    points = std::move(extended);
  }
  return points;
}

absl::StatusOr<int> ComputeCapabilityOf(absl::string_view target_arch) {
  absl::string_view digits = target_arch;
  int capability = 0;
  if (absl::ConsumePrefix(&digits, "sm_") && (absl::ConsumeSuffix(&digits, "a"), true) &&
      digits.size() >= 2 && absl::SimpleAtoi(digits, &capability)) {
    return capability;
  }
  return absl::InvalidArgumentError(
      absl::StrCat("target arch \"", target_arch, "\" is not of the form sm_NN or sm_NNa"));
}

absl::Status CheckPointInSpace(const TemplateSpace& space, const SchedulePoint& point) {
  if (point.template_name != space.template_name) {
    return absl::InvalidArgumentError(absl::StrCat("template '", point.template_name,
                                                   "' is not '", space.template_name, "'"));
  }
  for (const ScheduleParameter& parameter : space.parameters) {
    auto it = point.parameters.find(parameter.name);
    if (it == point.parameters.end()) {
      return absl::InvalidArgumentError(absl::StrCat("template '", space.template_name,
                                                     "': parameter '", parameter.name,
                                                     "' is not set"));
    }
    if (std::find(parameter.values.begin(), parameter.values.end(), it->second) ==
        parameter.values.end()) {
      return absl::InvalidArgumentError(
          absl::StrCat("template '", space.template_name, "': parameter '", parameter.name,
                       "' = ", it->second, " is not one of {",
                       absl::StrJoin(parameter.values, ", "), "}"));
    }
  }
  for (const auto& [name, value] : point.parameters) {
    bool known = false;
    for (const ScheduleParameter& parameter : space.parameters) known |= parameter.name == name;
    if (!known) {
      return absl::InvalidArgumentError(absl::StrCat(
          "template '", space.template_name, "' has no parameter '", name, "'"));
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<GeneratedKernel> KernelFamily::Generate(const forge::v1::KernelTask& task,
                                                       const SchedulePoint& point) const {
  absl::StatusOr<LaunchPlan> plan = Plan(task, point);
  if (!plan.ok()) return plan.status();
  absl::StatusOr<std::string> source = Emit(task, *plan);
  if (!source.ok()) return source.status();
  GeneratedKernel kernel;
  static_cast<LaunchPlan&>(kernel) = *std::move(plan);
  kernel.source = *std::move(source);
  return kernel;
}

forge::v1::CompileCost CompileCostOf(const LaunchPlan& plan) {
  switch (plan.compile_output) {
    case CompileOutput::kNvccSharedObject:
      return forge::v1::COMPILE_COST_NVCC;
    case CompileOutput::kNvrtcCubin:
      return plan.kernel_name.empty() ? forge::v1::COMPILE_COST_NONE
                                      : forge::v1::COMPILE_COST_NVRTC;
  }
  return forge::v1::COMPILE_COST_UNSPECIFIED;
}

bool IsAtenFallback(const GeneratedKernel& kernel) { return kernel.source.empty(); }

}  // namespace forge::codegen
