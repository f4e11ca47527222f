#include "compiler/cost/plan_prediction.h"

#include <algorithm>
#include <cstdint>

#include "absl/status/status.h"
#include "common/status/status_macros.h"
#include "compiler/graph/cost.h"

namespace forge::cost {

KernelWork EstimateKernelWork(const GpuArch& gpu, const forge::v1::KernelTask& task,
                              const codegen::LaunchPlan& plan, const KernelResources& resources,
                              const Occupancy& occupancy) {
  const codegen::CostHints& hints = plan.hints;
  KernelWork work;
  work.flops = static_cast<double>(task.flops());
  work.math_mode = graph::GeneratedKernelMathMode(task);
  const double threads = static_cast<double>(plan.launch.grid[0]) * plan.launch.grid[1] *
                         plan.launch.grid[2] * plan.launch.block[0] * plan.launch.block[1] *
                         plan.launch.block[2];
  work.bytes_moved = static_cast<double>(task.min_bytes()) +
                     threads * (resources.spill_store_bytes + resources.spill_load_bytes);
  work.bytes_in_flight_per_thread = hints.bytes_in_flight_per_thread;
  if (hints.row_rereads > 0) {
    // The rows resident at once against the L2 size: the share of a re-read that misses it.
    const double resident_bytes = static_cast<double>(gpu.sm_count) * occupancy.blocks_per_sm *
                                  hints.rows_per_block * hints.row_bytes;
    const double l2_miss =
        std::clamp(1.0 - static_cast<double>(gpu.l2_bytes) / resident_bytes, 0.0, 1.0);
    work.bytes_moved += hints.row_rereads * hints.row_input_bytes * l2_miss;
  }
  return work;
}

absl::StatusOr<PlanPrediction> PredictPlan(const GpuArch& gpu, const forge::v1::KernelTask& task,
                                           const codegen::LaunchPlan& plan,
                                           const std::optional<KernelResources>& resources) {
  const double flops = static_cast<double>(task.flops());
  const double bytes = static_cast<double>(task.min_bytes());
  if (plan.hints.executor != codegen::Executor::kGeneratedKernel) {
    if (plan.hints.gemm_math != codegen::GemmMath::kNone) {
      // A tiled GEMM Forge instantiated (CUTLASS): its tile, CTAs and math are in the hints.
      FORGE_ASSIGN_OR_RETURN(const GemmPrediction prediction,
                             PredictGemmTime(gpu, flops, bytes, plan.hints));
      return PlanPrediction{prediction.seconds, prediction.explanation};
    }
    // The ATen fallback launches one kernel per non-view node; "cublaslt_then_pointwise" runs
    // its epilogue kernel after the matmul, through a scratch tensor written and read once
    // more; a host-launched candidate without GEMM hints is a library-like call too.
    double library_bytes = bytes;
    if (plan.hints.output_through_scratch) {
      for (const forge::v1::TensorSpec& output : task.outputs()) {
        library_bytes += 2.0 * graph::SpannedBytes(output);
      }
    }
    FORGE_ASSIGN_OR_RETURN(const LibraryPrediction prediction,
                           PredictLibraryTime(gpu, flops, library_bytes,
                                              graph::FloorMathMode(task),
                                              plan.hints.kernel_launches));
    return PlanPrediction{prediction.seconds, prediction.explanation};
  }
  if (!resources.has_value()) {
    return absl::InvalidArgumentError(
        "a generated kernel's analytic prediction needs its ptxas resources");
  }
  KernelResources with_dynamic = *resources;
  with_dynamic.dynamic_shared_bytes = plan.launch.dynamic_shared_bytes;
  const std::int64_t threads_per_block =
      std::int64_t{plan.launch.block[0]} * plan.launch.block[1] * plan.launch.block[2];
  FORGE_ASSIGN_OR_RETURN(const Occupancy occupancy,
                         ComputeOccupancy(gpu, threads_per_block, with_dynamic));
  const KernelWork work = EstimateKernelWork(gpu, task, plan, with_dynamic, occupancy);
  FORGE_ASSIGN_OR_RETURN(const KernelPrediction prediction,
                         PredictKernelTime(gpu, plan.launch, with_dynamic, work));
  return PlanPrediction{prediction.seconds, prediction.explanation};
}

}  // namespace forge::cost
