// The SDPA library family: an ATTENTION task (SDPA or explicit attention, attention_analysis.h)
// run by one of ATen's fused scaled-dot-product-attention backends. The schedule point is the
// backend, one template each:
//   sdpa_flash      FlashAttention-2 (float16 / bfloat16, head dim <= 256, no tensor mask)
//   sdpa_efficient  the memory-efficient (CUTLASS) kernel (float32 too; masks; no GQA heads)
//   sdpa_cudnn      cuDNN's fused attention (float16 / bfloat16, head dim <= 256, multiple of 8)
//   sdpa_math       the composite math path (any float dtype; what eager does for SDPA)
// For explicit attention, the call replaces the matmul / scale / mask / softmax / matmul chain, so
// the S x S scores never materialize. Validate declines a backend, with the reason, where
// PyTorch's own checks (sdp_utils) would refuse the call; anything they refuse beyond that makes
// the candidate unsupported when it runs (ATen says "no available kernel").
//
// Execution: the candidate has no source; its executor is kAten, like the ATen fallback, but what
// runs is SdpaLibraryTask: the task with its group rewritten to call
// aten::scaled_dot_product_attention once (the mask as SDPA takes it: is_causal, a bool mask of
// kept scores, or an additive one; the scale explicit), that node carrying the attribute
// kSdpaBackendAttribute with the backend's name. The LibTorch boundary (aten/) runs such a node
// with only that backend enabled. The judge still checks the result against the task's own ops.
#ifndef FORGE_COMPILER_CODEGEN_SDPA_LIBRARY_SDPA_LIBRARY_H_
#define FORGE_COMPILER_CODEGEN_SDPA_LIBRARY_SDPA_LIBRARY_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "compiler/codegen/family.h"

namespace forge::codegen {

// The node attribute that names the SDPA backend a node runs with ("flash", "efficient",
// "cudnn", "math"); read by aten/ and by the runtime.
inline constexpr char kSdpaBackendAttribute[] = "forge.sdpa_backend";

// Whether `template_name` is one of this family's templates.
bool IsSdpaLibraryTemplate(absl::string_view template_name);
// The backend a template runs ("flash" for sdpa_flash); empty for other templates.
absl::string_view SdpaBackendOf(absl::string_view template_name);

// The task the worker runs for a valid point (see above); fails as Validate does.
absl::StatusOr<forge::v1::KernelTask> SdpaLibraryTask(const forge::v1::KernelTask& task,
                                                      const SchedulePoint& point);

// The task that a candidate run through ATen (Executor::kAten) executes: for this family's
// templates SdpaLibraryTask (one scaled_dot_product_attention call, that backend), for any other
// template (the ATen fallback) the task itself. The worker's sandbox, the generators benchmark and
// the plan's writer (client/forge/results.cc) all ask this one function.
absl::StatusOr<forge::v1::KernelTask> AtenExecutedTask(const forge::v1::KernelTask& task,
                                                       const SchedulePoint& point);

class SdpaLibraryFamily : public KernelFamily {
 public:
  forge::v1::KernelFamily kind() const override { return forge::v1::KERNEL_FAMILY_SDPA_LIBRARY; }
  absl::string_view name() const override { return "sdpa_library"; }
  absl::string_view generator_version() const override { return "sdpa_library-1"; }

  // ATTENTION tasks the analysis takes, without an additive mask applied before the scale (SDPA
  // scales first).
  absl::Status Applies(const forge::v1::KernelTask& task) const override;
  absl::StatusOr<std::vector<TemplateSpace>> ScheduleSpace(
      const forge::v1::KernelTask& task) const override;
  absl::Status Validate(const forge::v1::KernelTask& task,
                        const SchedulePoint& point) const override;
  absl::StatusOr<LaunchPlan> Plan(const forge::v1::KernelTask& task,
                                  const SchedulePoint& point) const override;
  // Empty: the worker runs SdpaLibraryTask through ATen.
  absl::StatusOr<std::string> Emit(const forge::v1::KernelTask& task,
                                   const LaunchPlan& plan) const override;
};

}  // namespace forge::codegen

#endif  // FORGE_COMPILER_CODEGEN_SDPA_LIBRARY_SDPA_LIBRARY_H_
