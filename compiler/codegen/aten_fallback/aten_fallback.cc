#include "compiler/codegen/aten_fallback/aten_fallback.h"

#include <algorithm>
#include <set>

#include "absl/strings/str_cat.h"
#include "compiler/codegen/cuda_expr.h"

namespace forge::codegen {

absl::StatusOr<AtenFallbackPlan> PlanAtenFallback(const forge::v1::KernelTask& task) {
  const forge::v1::Graph& group = task.group();
  AtenFallbackPlan plan;
  std::set<std::string, std::less<>> defined;
  for (const forge::v1::GraphInput& input : group.inputs()) {
    plan.input_values.push_back(input.value_name());
    defined.insert(input.value_name());
  }
  auto check_defined = [&](const forge::v1::Node& node,
                           const std::string& value) -> absl::Status {
    if (defined.contains(value)) return absl::OkStatus();
    return absl::InvalidArgumentError(absl::StrCat("aten fallback: task ", task.digest(), ": ",
                                                   DescribeNode(node), " reads '", value,
                                                   "', which nothing before it defines"));
  };
  for (const forge::v1::Node& node : group.nodes()) {
    if (node.op().empty() || node.schema().empty()) {
      return absl::InvalidArgumentError(absl::StrCat("aten fallback: task ", task.digest(),
                                                     ": node '", node.name(),
                                                     "' has no op or schema to call"));
    }
    for (const forge::v1::Argument& argument : node.arguments()) {
      switch (argument.value_case()) {
        case forge::v1::Argument::kTensor:
          if (absl::Status s = check_defined(node, argument.tensor()); !s.ok()) return s;
          break;
        case forge::v1::Argument::kOptionalTensor:
          if (argument.optional_tensor().has_value_name()) {
            absl::Status s = check_defined(node, argument.optional_tensor().value_name());
            if (!s.ok()) return s;
          }
          break;
        case forge::v1::Argument::kTensors:
          for (const std::string& name : argument.tensors().value_names()) {
            if (absl::Status s = check_defined(node, name); !s.ok()) return s;
          }
          break;
        case forge::v1::Argument::kOptionalTensors:
          for (const forge::v1::OptionalTensor& item : argument.optional_tensors().items()) {
            if (!item.has_value_name()) continue;
            if (absl::Status s = check_defined(node, item.value_name()); !s.ok()) return s;
          }
          break;
        default: break;
      }
    }
    for (const std::string& output : node.outputs()) defined.insert(output);
    plan.calls.push_back(AtenCall{node.name(), node.op(), node.overload(), node.schema()});
  }
  for (const forge::v1::GraphOutput& output : group.outputs()) {
    if (!defined.contains(output.value_name())) {
      return absl::InvalidArgumentError(absl::StrCat("aten fallback: task ", task.digest(),
                                                     ": output '", output.value_name(),
                                                     "' is never defined"));
    }
    plan.output_values.push_back(output.value_name());
  }
  return plan;
}

absl::Status AtenFallbackFamily::Applies(const forge::v1::KernelTask& task) const {
  return PlanAtenFallback(task).status();
}

absl::StatusOr<std::vector<TemplateSpace>> AtenFallbackFamily::ScheduleSpace(
    const forge::v1::KernelTask& task) const {
  if (absl::Status status = Applies(task); !status.ok()) return status;
  return std::vector<TemplateSpace>{TemplateSpace{kTemplateName, {}}};
}

absl::Status AtenFallbackFamily::Validate(const forge::v1::KernelTask& task,
                                          const SchedulePoint& point) const {
  if (absl::Status status = Applies(task); !status.ok()) return status;
  return CheckPointInSpace(TemplateSpace{kTemplateName, {}}, point);
}

absl::StatusOr<LaunchPlan> AtenFallbackFamily::Plan(const forge::v1::KernelTask& task,
                                                    const SchedulePoint& point) const {
  if (absl::Status status = Validate(task, point); !status.ok()) return status;
  LaunchPlan plan;
  plan.launch.grid = {0, 0, 0};
  plan.launch.block = {0, 0, 0};
  plan.template_name = kTemplateName;
  plan.generator_version = std::string(generator_version());
  plan.hints.executor = Executor::kAten;
  // ATen launches a kernel per node; views launch none.
  plan.hints.kernel_launches = static_cast<int>(
      std::count_if(task.group().nodes().begin(), task.group().nodes().end(),
                    [](const forge::v1::Node& node) { return !IsViewOp(node); }));
  return plan;
}

absl::StatusOr<std::string> AtenFallbackFamily::Emit(const forge::v1::KernelTask& /*task*/,
                                                     const LaunchPlan& /*plan*/) const {
  return std::string();  // no source: the worker runs the group through ATen
}

}  // namespace forge::codegen
