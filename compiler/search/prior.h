// The search's prior: a predicted time for a schedule point, cheap enough to rank every point of
// a space before anything is compiled (microseconds per point, no NVRTC).
//
// It reads a point's LaunchPlan (KernelFamily::Plan: no source is generated) and only its launch
// and typed cost hints (generated_kernel.h's CostHints), never template or parameter names.
// Generated kernels are predicted by the performance model (compiler/cost/perf_model.h:
// occupancy, Little's-law bandwidth, wave quantization) from the plan's launch shape, with two
// estimates standing in for what only a compile reveals:
//  - elements in flight per thread: all the elements a thread handles when its row is cached in
//    registers (it loads its whole share up front); a cluster's share of a row cached in shared
//    memory (cp.async, no registers); else the elements its main loop unrolls
//    (CostHints::unrolled_elements), capped by the elements it handles;
//  - registers: 32 (what the generated kernels use without unrolling, per ptxas on sm_90) plus
//    one per element in flight, capped at 255 or the plan's max_registers; no spills and no
//    static shared memory.
// DRAM traffic is the task's min_bytes: the model misses schedule-dependent re-reads (a second
// pass over a row), which the search learns from outcomes instead.
// cuBLASLt points are predicted as the library call they are: the roofline over a library
// efficiency plus one launch per kernel it launches.
// With a learned model (compiler/cost/learned/cost_predictor.h), that analytic prediction and the
// estimates above become features of the learned model's prediction, which replaces it where the
// predictor has a model trained on enough measurements (it falls back to the analytic one
// otherwise).
#ifndef FORGE_COMPILER_SEARCH_PRIOR_H_
#define FORGE_COMPILER_SEARCH_PRIOR_H_

#include <utility>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "common/arch/arch.h"
#include "compiler/codegen/generated_kernel.h"
#include "compiler/cost/learned/cost_predictor.h"
#include "forge/v1/task.pb.h"

namespace forge::search {

// What the prior assumes a compile would report, exposed for its tests.
struct EstimatedKernel {
  double elements_in_flight_per_thread = 0;
  int registers_per_thread = 0;
};

class CostModelPrior {
 public:
  // The prior for the GPU `gpu_name` names in common/arch ("H200"); NotFound for an unknown one.
  // `learned` (may be null: the analytic model alone) must outlive the prior.
  static absl::StatusOr<CostModelPrior> ForGpu(absl::string_view gpu_name,
                                               const cost::CostPredictor* learned = nullptr);

  // Predicted seconds of one execution of `plan` (a family's plan of a point of `task`; a
  // GeneratedKernel is one too). InvalidArgument for the ATen fallback (the baseline, not a point
  // of the space); otherwise fails as the perf model does: ResourceExhausted when the launch fits
  // no SM, InvalidArgument for a math mode the GPU lacks.
  absl::StatusOr<double> PredictSeconds(const forge::v1::KernelTask& task,
                                        const codegen::LaunchPlan& plan) const;

  // The figures PredictSeconds assumes for a generated (non-library) kernel.
  static EstimatedKernel Estimate(const forge::v1::KernelTask& task,
                                  const codegen::LaunchPlan& plan);

  const GpuArch& gpu() const { return gpu_; }

 private:
  CostModelPrior(GpuArch gpu, const cost::CostPredictor* learned)
      : gpu_(std::move(gpu)), learned_(learned) {}

  // The analytic prediction of PredictSeconds, and the registers it assumed (0 for a library).
  absl::StatusOr<double> AnalyticSeconds(const forge::v1::KernelTask& task,
                                         const codegen::LaunchPlan& plan,
                                         int& estimated_registers) const;

  GpuArch gpu_;
  const cost::CostPredictor* learned_ = nullptr;
};

}  // namespace forge::search

#endif  // FORGE_COMPILER_SEARCH_PRIOR_H_
