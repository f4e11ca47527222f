// The worker's backend where there is no GPU: the candidate is compiled for real (NVRTC for the
// target GPU's architecture, ptxas' register/shared-memory/spill report), and the timer is
// replaced by the performance model (compiler/cost/perf_model.h, through plan_prediction.h).
// Every measurement it returns has kind MEASUREMENT_KIND_PREDICTED and a device name that says
// so; nothing here was run.
#ifndef FORGE_WORKER_EMULATED_EMULATED_BACKEND_H_
#define FORGE_WORKER_EMULATED_EMULATED_BACKEND_H_

#include <optional>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "common/arch/arch.h"
#include "compiler/codegen/generated_kernel.h"
#include "forge/v1/task.pb.h"
#include "worker/compile/compile_pool.h"
#include "worker/compile/ptxas_report.h"
#include "compiler/cost/learned/cost_predictor.h"
#include "compiler/cost/perf_model.h"
#include "compiler/cost/plan_prediction.h"

namespace forge::emulated {

struct EmulatedResult {
  // A Measurement (kind PREDICTED) or a Failure (stage COMPILE).
  forge::v1::Result result;
  // The model's one-line account of the prediction; the compile error for a failure.
  std::string explanation;
  // For a measurement: which model predicted it (learned vN or analytic) and the analytic time.
  cost::CostPrediction prediction;
  // ptxas' figures the prediction used (generated kernels); nullopt for library candidates.
  std::optional<cost::KernelResources> resources;
};

class EmulatedBackend {
 public:
  // `pool` compiles the candidates and must outlive the backend. With `learned` (which must
  // outlive it too), each analytic prediction goes through the learned performance model
  // (compiler/cost/learned/cost_predictor.h: the learned time where it has a usable model for
  // the GPU, the analytic one otherwise), and the explanation says which.
  explicit EmulatedBackend(compile::CompilePool* pool,
                           const cost::CostPredictor* learned = nullptr)
      : pool_(pool), learned_(learned) {}

  // Predicts `kernel` (generated for `task`) on the GPU named `gpu_name` (common/arch: "H200",
  // "A100", "RTX 4090", ...). Generated kernels are compiled for that GPU's architecture first; a
  // source that does not compile, or a kernel that fits no SM, gives a Failure at
  // FAILURE_STAGE_COMPILE. Library candidates (the ATen fallback, cuBLASLt) are predicted from
  // the roofline (cost::PredictLibraryTime); host-launched candidates (CUTLASS shared objects)
  // from their cost hints too, never compiled here (nvcc takes ~45 s a configuration); both with
  // resources unavailable. The kernel's cost hints say which it is. Fails only
  // for an unknown GPU or an inconsistent task.
  absl::StatusOr<EmulatedResult> Predict(const forge::v1::KernelTask& task,
                                         const codegen::GeneratedKernel& kernel,
                                         absl::string_view gpu_name,
                                         absl::string_view candidate_digest) const;

 private:
  // The learned model's prediction for a candidate the analytic model predicted at `analytic`
  // (explanation extended when the learned model made it), the analytic one otherwise.
  cost::CostPrediction Refine(const GpuArch& gpu, const forge::v1::KernelTask& task,
                const codegen::LaunchPlan& plan,
                const std::optional<cost::KernelResources>& resources,
                const cost::PlanPrediction& analytic, std::string& explanation) const;

  compile::CompilePool* pool_;
  const cost::CostPredictor* learned_ = nullptr;
};

}  // namespace forge::emulated

#endif  // FORGE_WORKER_EMULATED_EMULATED_BACKEND_H_
