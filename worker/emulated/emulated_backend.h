// The worker's backend where there is no GPU: the candidate is compiled for real (NVRTC for the
// target GPU's architecture, ptxas' register/shared-memory/spill report), and the timer is
// replaced by the performance model (perf_model.h). Every measurement it returns has kind
// MEASUREMENT_KIND_PREDICTED and a device name that says so; nothing here was run.
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
#include "worker/emulated/perf_model.h"

namespace forge::emulated {

// The DRAM traffic and bytes in flight a generated kernel's schedule implies, beyond the task's
// min_bytes:
//  - spills: every spilled byte per thread, stored and loaded, counted as DRAM traffic (an upper
//    bound: part of it stays in L1/L2, but the search should see spilling schedules as slower);
//  - "row_reduce" without cache_row re-reads the row-sized inputs once per extra pass over the
//    row (a second statistics pass when online_softmax or welford is 0, and the pass that writes
//    a row-sized output); only the share of those re-reads that misses L2 reaches DRAM, from the
//    rows resident at once (SMs x blocks per SM x rows per block) against the L2 size.
// Bytes in flight per thread: "pointwise_flat" unrolls elements_per_thread chunks of
// vector_width elements of every full-size input; "row_reduce" (a row as its kernel sees it,
// ReductionFamily::RowLength) loads one chunk of vector_width
// elements per row-sized input per loop step, or all its chunks when cache_row keeps them in
// registers. Other templates: one vector_width access of the widest input.
KernelWork EstimateKernelWork(const GpuArch& gpu, const forge::v1::KernelTask& task,
                              const codegen::GeneratedKernel& kernel,
                              const KernelResources& resources, const Occupancy& occupancy);

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
  // the roofline (PredictLibraryTime). Fails only for an unknown GPU or an inconsistent task.
  absl::StatusOr<EmulatedResult> Predict(const forge::v1::KernelTask& task,
                                         const codegen::GeneratedKernel& kernel,
                                         absl::string_view gpu_name,
                                         absl::string_view candidate_digest) const;

 private:
  compile::CompilePool* pool_;
};

}  // namespace forge::emulated

#endif  // FORGE_WORKER_EMULATED_EMULATED_BACKEND_H_
