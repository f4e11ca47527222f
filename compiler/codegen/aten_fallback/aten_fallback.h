// The ATen fallback family: no generated kernel; the worker runs the task's group node by node
// through ATen (the reference interpreter's dispatcher calls, on the GPU). It applies to every
// well-formed task, so every task has at least one candidate, and it is the baseline the
// generated families must beat.
//
// Its GeneratedKernel has an empty source and kernel name (IsAtenFallback), template
// "aten_calls", no parameters and no launch; what to run is the task itself, summarized by
// PlanAtenFallback.
#ifndef FORGE_COMPILER_CODEGEN_ATEN_FALLBACK_ATEN_FALLBACK_H_
#define FORGE_COMPILER_CODEGEN_ATEN_FALLBACK_ATEN_FALLBACK_H_

#include <string>
#include <vector>

#include "compiler/codegen/family.h"

namespace forge::codegen {

// One ATen call of the plan: the node of the group it comes from.
struct AtenCall {
  std::string node_name;
  std::string op;        // "aten::mul"
  std::string overload;  // "Tensor"
  std::string schema;    // the dispatcher's schema string, which the worker looks the op up by
};

// The group as the worker runs it: bind the kernel's inputs to input_values (KernelTask.inputs
// order), make the calls in order, and copy output_values into the kernel's outputs
// (KernelTask.outputs order).
struct AtenFallbackPlan {
  std::vector<std::string> input_values;
  std::vector<AtenCall> calls;
  std::vector<std::string> output_values;
};

// The plan for `task`; InvalidArgument when a node lacks its op or schema or reads a value that
// no group input or earlier node defines, or an output is never defined.
absl::StatusOr<AtenFallbackPlan> PlanAtenFallback(const forge::v1::KernelTask& task);

class AtenFallbackFamily : public KernelFamily {
 public:
  static constexpr char kTemplateName[] = "aten_calls";

  forge::v1::KernelFamily kind() const override { return forge::v1::KERNEL_FAMILY_ATEN; }
  absl::string_view name() const override { return "aten"; }
  absl::string_view generator_version() const override { return "aten-1"; }

  absl::Status Applies(const forge::v1::KernelTask& task) const override;
  absl::StatusOr<std::vector<TemplateSpace>> ScheduleSpace(
      const forge::v1::KernelTask& task) const override;
  absl::Status Validate(const forge::v1::KernelTask& task,
                        const SchedulePoint& point) const override;
  absl::StatusOr<LaunchPlan> Plan(const forge::v1::KernelTask& task,
                                  const SchedulePoint& point) const override;
  // Empty: the worker runs the group through ATen (IsAtenFallback).
  absl::StatusOr<std::string> Emit(const forge::v1::KernelTask& task,
                                   const LaunchPlan& plan) const override;
};

}  // namespace forge::codegen

#endif  // FORGE_COMPILER_CODEGEN_ATEN_FALLBACK_ATEN_FALLBACK_H_
