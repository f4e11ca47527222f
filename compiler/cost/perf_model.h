// The performance model: the time a kernel would take on a GPU, from the launch shape, its
// resource figures (ptxas' for the emulated backend, estimates for the search's prior) and the
// task's work, without running it. It is an
// analytic roofline refined by three effects the search's parameters change:
//  - occupancy, from the CUDA occupancy rules of the architecture (register allocation per warp,
//    shared memory allocation granularity and per-block reservation, block and warp limits);
//  - achieved DRAM bandwidth, from Little's law: the bytes the resident warps keep in flight
//    over the bytes the memory system needs in flight (bandwidth x latency) to stay busy;
//  - wave quantization: the last, partial wave of blocks costs a whole wave when the kernel is
//    compute- or latency-bound or runs only a few waves.
// Every constant is in perf_model.cc with its source. Results are predictions, never measurements.
#ifndef FORGE_COMPILER_COST_PERF_MODEL_H_
#define FORGE_COMPILER_COST_PERF_MODEL_H_

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "common/arch/arch.h"
#include "compiler/codegen/generated_kernel.h"

namespace forge::cost {

// What ptxas reported for the kernel, plus the launch's dynamic shared memory.
struct KernelResources {
  int registers_per_thread = 0;
  std::int64_t static_shared_bytes = 0;
  std::int64_t dynamic_shared_bytes = 0;
  std::int64_t spill_store_bytes = 0;  // per thread
  std::int64_t spill_load_bytes = 0;   // per thread
};

// The work of one launch.
struct KernelWork {
  double flops = 0;
  // DRAM traffic: the task's min_bytes plus what this schedule adds (spills, re-reads of inputs
  // that fall out of L2). The caller knows the template, so the caller estimates it.
  double bytes_moved = 0;
  // Bytes of independent global loads one thread has outstanding at once (vector width x element
  // size x loads the template issues before it uses any of them): the Little's-law input.
  double bytes_in_flight_per_thread = 0;
  MathMode math_mode = MathMode::kFp32;
};

// The resource that caps resident blocks per SM.
enum class OccupancyLimiter { kRegisters, kSharedMemory, kThreads, kBlocks };

// "registers", "shared memory", "threads" or "blocks".
absl::string_view OccupancyLimiterName(OccupancyLimiter limiter);

struct Occupancy {
  int blocks_per_sm = 0;
  int active_warps_per_sm = 0;
  int max_warps_per_sm = 0;
  double fraction = 0;  // active / max warps
  OccupancyLimiter limiter = OccupancyLimiter::kBlocks;
};

// Resident blocks per SM of a block of `threads_per_block` threads using `resources`, by the
// occupancy rules of `gpu`'s architecture. ResourceExhausted when not even one block fits (too
// many registers, shared memory or threads); InvalidArgument for an architecture without rules
// or a non-positive thread count.
absl::StatusOr<Occupancy> ComputeOccupancy(const GpuArch& gpu, std::int64_t threads_per_block,
                                           const KernelResources& resources);

// What limits the predicted time.
enum class PredictedBound {
  kMemory,   // DRAM bandwidth at the achievable fraction
  kCompute,  // the math unit's peak
  kLatency,  // too few bytes in flight to use the bandwidth, or the launch itself dominates
};

// "memory-bound", "compute-bound" or "latency-bound".
absl::string_view PredictedBoundName(PredictedBound bound);

struct KernelPrediction {
  double seconds = 0;
  Occupancy occupancy;
  double waves = 0;            // blocks / (SMs x blocks per SM)
  double wave_efficiency = 1;  // waves / ceil(waves); 1 when the model does not quantize
  double bandwidth_fraction = 0;  // achieved DRAM bandwidth over the table's
  double memory_seconds = 0;      // bytes_moved / achieved bandwidth
  double compute_seconds = 0;     // flops / (peak x issue efficiency)
  PredictedBound bound = PredictedBound::kMemory;
  std::string explanation;  // one line for reports
};

// Predicts one launch of `launch` on `gpu`. Fails as ComputeOccupancy does, and with
// InvalidArgument when the work needs a math mode the GPU lacks or a count is negative.
absl::StatusOr<KernelPrediction> PredictKernelTime(const GpuArch& gpu,
                                                   const codegen::LaunchDims& launch,
                                                   const KernelResources& resources,
                                                   const KernelWork& work);

// The overhead of one kernel launch as CUDA events see it, one figure for every GPU of the table
// (perf_model.cc says where it comes from).
double LaunchOverheadSeconds();

// A library call (cuBLASLt, ATen kernels) whose resources Forge cannot see: the roofline time
// over a documented library efficiency, plus one launch overhead per kernel it launches.
struct LibraryPrediction {
  double seconds = 0;
  PredictedBound bound = PredictedBound::kMemory;
  std::string explanation;
};
absl::StatusOr<LibraryPrediction> PredictLibraryTime(const GpuArch& gpu, double flops,
                                                     double bytes, MathMode mode,
                                                     int kernel_launches);

// A tiled GEMM kernel Forge instantiates (a host-launched CUTLASS candidate), from its cost hints
// (CostHints' gemm_* fields): the roofline at the tensor-core peak of its math (3xTF32: a third
// of the TF32 peak, three products per multiply-add, on mma.sync, which sm_90 runs at a measured
// fraction of its WGMMA peak), slowed by
//  - tile quantization: the padded part of edge tiles computes nothing (gemm_tile_utilization);
//  - wave quantization: the last, partial wave of CTAs over the SMs costs a whole wave;
//  - operand reuse: a tile of tm x tn loads (tm + tn) elements per k step for tm * tn
//    multiply-adds; tiles below 128 x 128's reuse feed the tensor cores proportionally slower;
// at a mainloop efficiency (below), plus one launch.
struct GemmPrediction {
  double seconds = 0;
  double waves = 0;
  double wave_efficiency = 1;
  double reuse_efficiency = 1;
  double compute_seconds = 0;
  double memory_seconds = 0;
  PredictedBound bound = PredictedBound::kCompute;
  std::string explanation;
};
// InvalidArgument when the hints describe no tiled GEMM (gemm_math kNone, no tile or CTAs), the
// GPU lacks the math, or a count is negative.
absl::StatusOr<GemmPrediction> PredictGemmTime(const GpuArch& gpu, double flops, double bytes,
                                               const codegen::CostHints& hints);

}  // namespace forge::cost

#endif  // FORGE_COMPILER_COST_PERF_MODEL_H_
