// The worker's backend where there is no GPU: the candidate is compiled for real (NVRTC for the
// target GPU's architecture, ptxas' register/shared-memory/spill report), and the timer is
// replaced by the performance model (compiler/cost/perf_model.h). Every measurement it returns
// has kind MEASUREMENT_KIND_PREDICTED and a device name that says so; nothing here was run.
#ifndef FORGE_WORKER_EMULATED_EMULATED_BACKEND_H_
#define FORGE_WORKER_EMULATED_EMULATED_BACKEND_H_

#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "common/arch/arch.h"
#include "compiler/codegen/generated_kernel.h"
#include "forge/v1/task.pb.h"
#include "worker/compile/compile_pool.h"
#include "worker/compile/ptxas_report.h"
#include "compiler/cost/perf_model.h"

namespace forge::emulated {

// The work of one launch of a generated kernel, from its plan's cost hints (CostHints: the
// family computes them from its own layout) and ptxas' figures:
//  - DRAM traffic: the task's min_bytes, plus every spilled byte per thread, stored and loaded (an
//    upper bound: part of it stays in L1/L2, but the search should see spilling schedules as
//    slower), plus the row re-reads of an uncached row reduction (CostHints::row_rereads): only
//    the share of them that misses L2 reaches DRAM, from the rows resident at once (SMs x blocks
//    per SM x rows per block) against the L2 size;
//  - bytes in flight per thread: CostHints::bytes_in_flight_per_thread.
cost::KernelWork EstimateKernelWork(const GpuArch& gpu, const forge::v1::KernelTask& task,
                                    const codegen::LaunchPlan& plan,
                                    const cost::KernelResources& resources,
                                    const cost::Occupancy& occupancy);

struct EmulatedResult {
  // A Measurement (kind PREDICTED) or a Failure (stage COMPILE).
  forge::v1::Result result;
  // The model's one-line account of the prediction; the compile error for a failure.
  std::string explanation;
};

class EmulatedBackend {
 public:
  // `pool` compiles the candidates and must outlive the backend.
  explicit EmulatedBackend(compile::CompilePool* pool) : pool_(pool) {}

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
  compile::CompilePool* pool_;
};

}  // namespace forge::emulated

#endif  // FORGE_WORKER_EMULATED_EMULATED_BACKEND_H_
