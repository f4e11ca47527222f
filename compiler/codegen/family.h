// Kernel families: the templates that turn a kernel task and a schedule point into a candidate.
//
// A family says whether it can implement a task (Applies), which schedule points it offers for it
// (ScheduleSpace), which of those points are legal (Validate), plans a legal point's launch with
// the cost hints of its layout (Plan: no source, what the search's prior reads) and writes the
// plan's source (Emit); Generate is both. Generation is a pure function of (task, point): the same
// inputs give byte-identical source, and every plan carries the family's generator version, which
// changes whenever the generator's output does.
//
// The ATen fallback family is special: it applies to every task and its GeneratedKernel has no
// source. An empty `source` means "run task.group node by node through ATen" (see
// IsAtenFallback and aten_fallback.h); the worker needs no compiler for it.
#ifndef FORGE_COMPILER_CODEGEN_FAMILY_H_
#define FORGE_COMPILER_CODEGEN_FAMILY_H_

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "compiler/codegen/generated_kernel.h"
#include "forge/v1/task.pb.h"

namespace forge::codegen {

// One schedule parameter and the values the search may give it. Booleans are {0, 1}.
struct ScheduleParameter {
  std::string name;
  std::vector<int64_t> values;
  int64_t default_value = 0;
};

// The schedule space of one template of a family, for one task.
struct TemplateSpace {
  std::string template_name;
  std::vector<ScheduleParameter> parameters;
};

// A point of a template's space: what a forge.v1.Candidate carries.
struct SchedulePoint {
  std::string template_name;
  std::map<std::string, int64_t> parameters;
};

// The point whose every parameter has its default value.
SchedulePoint DefaultPoint(const TemplateSpace& space);

// Every point of `space` (the cartesian product of the parameters' values), in a fixed order.
std::vector<SchedulePoint> EnumeratePoints(const TemplateSpace& space);

// Checks that `point` names the template of `space`, sets every parameter of it to one of its
// allowed values and sets nothing else. Families call it first in Validate.
absl::Status CheckPointInSpace(const TemplateSpace& space, const SchedulePoint& point);

class KernelFamily {
 public:
  virtual ~KernelFamily() = default;

  virtual forge::v1::KernelFamily kind() const = 0;
  // Short lower-case name, e.g. "pointwise".
  virtual absl::string_view name() const = 0;
  // Changes whenever the generated output for some (task, point) changes, e.g. "pointwise-1".
  virtual absl::string_view generator_version() const = 0;

  // OK when the family can implement `task`; Unimplemented naming the first obstacle otherwise.
  virtual absl::Status Applies(const forge::v1::KernelTask& task) const = 0;
  // The templates and parameters the family offers for `task`; fails as Applies does.
  virtual absl::StatusOr<std::vector<TemplateSpace>> ScheduleSpace(
      const forge::v1::KernelTask& task) const = 0;
  // OK when `point` is in the space and meets the template's constraints for `task`;
  // InvalidArgument naming the violated constraint otherwise (Unimplemented as Applies).
  virtual absl::Status Validate(const forge::v1::KernelTask& task,
                                const SchedulePoint& point) const = 0;
  // The launch of a valid point and the cost hints of its layout, without its source (cheap: the
  // coordinator plans every point of a search space); fails as Validate does for an invalid one.
  virtual absl::StatusOr<LaunchPlan> Plan(const forge::v1::KernelTask& task,
                                          const SchedulePoint& point) const = 0;
  // The source of `plan`, a Plan of this family for `task`.
  virtual absl::StatusOr<std::string> Emit(const forge::v1::KernelTask& task,
                                           const LaunchPlan& plan) const = 0;
  // The candidate for a valid point: Plan, then Emit.
  absl::StatusOr<GeneratedKernel> Generate(const forge::v1::KernelTask& task,
                                           const SchedulePoint& point) const;
  // OK when a valid `point` can run on `target_arch` ("sm_90"); FailedPrecondition naming the
  // hardware feature it needs otherwise. Most points run on every arch Forge compiles for.
  virtual absl::Status SupportsArch(const forge::v1::KernelTask& /*task*/,
                                    const SchedulePoint& /*point*/,
                                    absl::string_view /*target_arch*/) const {
    return absl::OkStatus();
  }
};

// What compiling a candidate planned as `plan` costs a worker, by class: COMPILE_COST_NVCC for a
// shared object (host-launched CUTLASS kernels: tens of seconds of nvcc), COMPILE_COST_NVRTC for a
// cubin of a named kernel (generated kernels, a cuBLASLt call's epilogue kernel: about 0.1-1 s),
// COMPILE_COST_NONE for what compiles nothing (the ATen fallback, plain library calls). The same
// decision as the worker's compile::CompileRequestFor, made from the plan alone, so the search
// knows it for every point without writing source.
forge::v1::CompileCost CompileCostOf(const LaunchPlan& plan);

// The compute capability `target_arch` names: 90 for "sm_90" and "sm_90a"; InvalidArgument for
// anything else.
absl::StatusOr<int> ComputeCapabilityOf(absl::string_view target_arch);

// The registry: defined in registry.cc (library forge::codegen, which links every family; a
// family's own library links only forge::codegen_core).
//
// Every family, in a fixed order (generated families first, the ATen fallback last).
const std::vector<const KernelFamily*>& AllFamilies();

// The generator versions of every family, joined ("pointwise-1+reduction-4+..."): what a worker
// registers with, so that the coordinator leases candidates only to workers whose generators
// produce the same source for them.
std::string GeneratorVersions();

// The family of `kind`, or nullptr when no generator implements it (yet).
const KernelFamily* FindFamily(forge::v1::KernelFamily kind);

// The families that apply to `task`: always at least the ATen fallback.
std::vector<const KernelFamily*> ApplicableFamilies(const forge::v1::KernelTask& task);

// True for the ATen fallback's candidates: no source; the worker runs the group through ATen.
bool IsAtenFallback(const GeneratedKernel& kernel);

}  // namespace forge::codegen

#endif  // FORGE_COMPILER_CODEGEN_FAMILY_H_
