// The analytic model's time for a family's plan of a candidate (codegen::LaunchPlan), whatever
// runs it, as the emulated backend predicts it: a tiled GEMM (CUTLASS) from its tile hints
// (PredictGemmTime), a library call (cuBLASLt, the ATen fallback, a host-launched object without
// GEMM hints) from the roofline over a library efficiency (PredictLibraryTime), a generated kernel
// from its launch, ptxas' resources and the work its cost hints imply (PredictKernelTime over
// EstimateKernelWork). The emulated backend (worker/emulated), the trainer of the learned model
// (server/cost_model_trainer.h) and benchmarks/cost_model predict through here, so a candidate's
// analytic prediction is the same number everywhere it is a feature.
#ifndef FORGE_COMPILER_COST_PLAN_PREDICTION_H_
#define FORGE_COMPILER_COST_PLAN_PREDICTION_H_

#include <optional>
#include <string>

#include "absl/status/statusor.h"
#include "common/arch/arch.h"
#include "compiler/codegen/generated_kernel.h"
#include "compiler/cost/perf_model.h"
#include "forge/v1/task.pb.h"

namespace forge::cost {

// The work of one launch of a generated kernel, from its plan's cost hints (CostHints: the
// family computes them from its own layout) and ptxas' figures:
//  - DRAM traffic: the task's min_bytes, plus every spilled byte per thread, stored and loaded (an
//    upper bound: part of it stays in L1/L2, but the search should see spilling schedules as
//    slower), plus the row re-reads of an uncached row reduction (CostHints::row_rereads): only
//    the share of them that misses L2 reaches DRAM, from the rows resident at once (SMs x blocks
//    per SM x rows per block) against the L2 size;
//  - bytes in flight per thread: CostHints::bytes_in_flight_per_thread.
KernelWork EstimateKernelWork(const GpuArch& gpu, const forge::v1::KernelTask& task,
                              const codegen::LaunchPlan& plan, const KernelResources& resources,
                              const Occupancy& occupancy);

struct PlanPrediction {
  double seconds = 0;
  std::string explanation;  // the model's one line
};

// The analytic time of `plan` (of `task`) on `gpu`. `resources` are ptxas' figures of a generated
// kernel (the launch's dynamic shared memory is the plan's); a generated kernel without them is
// InvalidArgument (the search's prior estimates them instead: compiler/search/prior.h). Fails as
// the perf model does: ResourceExhausted when the kernel fits no SM, InvalidArgument for math
// the GPU lacks.
absl::StatusOr<PlanPrediction> PredictPlan(const GpuArch& gpu, const forge::v1::KernelTask& task,
                                           const codegen::LaunchPlan& plan,
                                           const std::optional<KernelResources>& resources);

}  // namespace forge::cost

#endif  // FORGE_COMPILER_COST_PLAN_PREDICTION_H_
