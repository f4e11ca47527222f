#include "compiler/cost/perf_model.h"

#include <algorithm>
#include <cmath>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/status/status_macros.h"

namespace forge::cost {
namespace {

// ---- Occupancy rules (CUDA C++ Programming Guide, "Compute Capabilities" table, and the CUDA
// occupancy calculator's allocation rules for compute capability 8.x-10.x) ----
constexpr int kWarpSize = 32;
constexpr int kMaxThreadsPerBlock = 1024;
constexpr int kMaxRegistersPerThread = 255;
// Registers are allocated per warp in units of 256 (8 per thread), and each warp lives on one of
// the SM's 4 sub-partitions, which owns a quarter of the register file.
constexpr int kRegisterAllocationUnit = 256;
constexpr int kSubPartitionsPerSm = 4;
// Shared memory is allocated in 128-byte units, and since sm_80 the system reserves 1 KiB per
// resident block.
constexpr std::int64_t kSharedAllocationUnit = 128;
constexpr std::int64_t kReservedSharedPerBlock = 1024;

// Resident blocks per SM: 32 on 8.0, 9.0 and 10.0; 24 on 8.9 (the guide's table).
absl::StatusOr<int> MaxBlocksPerSm(const GpuArch& gpu) {
  switch (gpu.compute_capability) {
    case 80:
    case 90:
    case 100: return 32;
    case 89: return 24;
  }
  return absl::InvalidArgumentError(absl::StrCat("no occupancy rules for ", gpu.name, " (",
                                                 gpu.arch, ")"));
}

// ---- Time model ----
// Kernel launch as CUDA events see it: ~2-4 us on H100/H200 between the events around a single
// launch of an empty kernel (NVIDIA's launch-latency figures; Forge's timer measures a lone
// launch). One figure for every GPU in the table.
constexpr double kLaunchOverheadSeconds = 3e-6;
// Loaded DRAM latency that Little's law multiplies with the bandwidth to get the bytes that must
// be in flight to keep DRAM busy. Microbenchmarks of A100/H100 (Jia et al.'s dissection papers,
// Chips and Cheese) put HBM latency at ~480-500 ns idle and ~600-700 ns under load; the value
// below is inside that range and was chosen against the H200 measurements (benchmarks/emulated).
constexpr double kDramLatencySeconds = 600e-9;
// Warps per SM that keep the math pipes issuing without ILP: 4 schedulers x ~4 cycles of
// dependent-issue latency for FFMA (the guide's "arithmetic instructions" section).
constexpr double kWarpsToHideMathLatency = 16;
// A memory-bound kernel whose warps keep less than this fraction of the needed bytes in flight is
// reported latency-bound: its time is set by latency, not by the DRAM's width.
constexpr double kLatencyBoundBandwidthFraction = 0.6;
// Below this many waves the partial last wave is a visible share of a memory-bound kernel's time
// (one wave out of four is 25%), so it is quantized like a compute-bound one.
constexpr double kTailHeavyWaves = 4;

// ---- Library calls ----
// Fractions of the roofline that vendor kernels reach: ATen's elementwise and reduction kernels
// run at ~90% of copy bandwidth (Forge's H200 baselines: eager relu at 97% of the table's
// bandwidth, softmax lower); cuBLAS/cuBLASLt GEMMs at ~80% of the datasheet's tensor-core peak on
// large shapes.
constexpr double kLibraryMemoryEfficiency = 0.9;
constexpr double kLibraryComputeEfficiency = 0.8;

// ---- Tiled GEMM kernels ----
// The share of the tensor-core peak a well-tiled GEMM mainloop sustains on large shapes: cuBLAS
// bf16 8192^3 runs at 699 TFLOP/s on the H200 (issue 26), 88% of the table's measured 790;
// CUTLASS's sm90 kernels are on par. Used for 3xTF32 on mma.sync too.
constexpr double kGemmMainloopEfficiency = 0.85;
// 3xTF32 issues three TF32 products (big*big, big*small, small*big) per float32 multiply-add.
constexpr double kThreeTf32Products = 3;
// 3xTF32 runs on mma.sync, which reaches the table's TF32 peak (a WGMMA figure) only before
// Hopper. On sm_90 mma.sync is the slow path: the CUTLASS probe on the H200
// (benchmarks/results/2026-12-02-h200-cutlass-probe.md) measured 30-41 TFLOP/s of 3xTF32 at
// 4096^3, i.e. 41 x 3 / 0.85 / 494.7 = 0.29 of the TF32 peak for its mma.sync products.
constexpr double kMmaSyncShareOfTf32PeakOnSm90 = 0.29;
// sm90_3xtf32: WGMMA TF32 products over a tripled K, with a split pass before them and the
// tensor cores' partial sums promoted into float32 registers every few MMAs (which also limits
// the tile: the second accumulator doubles the registers). The probe's promoted 128 x 128 tiles
// ran 94 TFLOP/s of float32 work at 4096^3: 94 x 3 / 0.85 / 494.7 = 0.67 of the TF32 peak.
constexpr double kPromotedShareOfTf32Peak = 0.67;
// Operand reuse (tm * tn / (tm + tn)) of a 128 x 128 tile: at or above it, shared memory feeds
// the tensor cores at full rate (CUTLASS's profiler: 64 x 64 tiles reach about half the peak).
constexpr double kFullRateTileReuse = 64;
// Fraction of the table's DRAM bandwidth a GEMM's operand and epilogue streams reach.
constexpr double kGemmBandwidthEfficiency = 0.85;

std::int64_t RoundUp(std::int64_t value, std::int64_t unit) { return (value + unit - 1) / unit * unit; }

}  // namespace

absl::string_view OccupancyLimiterName(OccupancyLimiter limiter) {
  switch (limiter) {
    case OccupancyLimiter::kRegisters: return "registers";
    case OccupancyLimiter::kSharedMemory: return "shared memory";
    case OccupancyLimiter::kThreads: return "threads";
    case OccupancyLimiter::kBlocks: return "blocks";
  }
  return "unknown";
}

absl::string_view PredictedBoundName(PredictedBound bound) {
  switch (bound) {
    case PredictedBound::kMemory: return "memory-bound";
    case PredictedBound::kCompute: return "compute-bound";
    case PredictedBound::kLatency: return "latency-bound";
  }
  return "unknown";
}

absl::StatusOr<Occupancy> ComputeOccupancy(const GpuArch& gpu, std::int64_t threads_per_block,
                                           const KernelResources& resources) {
  FORGE_ASSIGN_OR_RETURN(const int max_blocks, MaxBlocksPerSm(gpu));
  if (threads_per_block <= 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("occupancy needs a positive thread count, got ", threads_per_block));
  }
  if (threads_per_block > kMaxThreadsPerBlock) {
    return absl::ResourceExhaustedError(absl::StrCat(threads_per_block, " threads per block; ",
                                                     gpu.name, " allows ", kMaxThreadsPerBlock));
  }
  if (resources.registers_per_thread > kMaxRegistersPerThread) {
    return absl::ResourceExhaustedError(absl::StrCat(resources.registers_per_thread,
                                                     " registers per thread; the limit is ",
                                                     kMaxRegistersPerThread));
  }
  const std::int64_t shared_bytes = resources.static_shared_bytes + resources.dynamic_shared_bytes;
  if (shared_bytes > gpu.shared_memory_per_block_bytes) {
    return absl::ResourceExhaustedError(
        absl::StrCat(shared_bytes, " bytes of shared memory per block; ", gpu.name, " allows ",
                     gpu.shared_memory_per_block_bytes));
  }

  const int max_warps = gpu.max_threads_per_sm / kWarpSize;
  const int warps_per_block = static_cast<int>((threads_per_block + kWarpSize - 1) / kWarpSize);

  Occupancy occupancy;
  occupancy.max_warps_per_sm = max_warps;
  occupancy.blocks_per_sm = max_blocks;
  occupancy.limiter = OccupancyLimiter::kBlocks;
  auto limit_to = [&occupancy](int blocks, OccupancyLimiter limiter) {
    if (blocks < occupancy.blocks_per_sm) {
      occupancy.blocks_per_sm = blocks;
      occupancy.limiter = limiter;
    }
  };
  limit_to(max_warps / warps_per_block, OccupancyLimiter::kThreads);
  if (resources.registers_per_thread > 0) {
    const int registers_per_warp = static_cast<int>(
        RoundUp(std::int64_t{resources.registers_per_thread} * kWarpSize, kRegisterAllocationUnit));
    const int warps_per_sub_partition =
        gpu.registers_per_sm / kSubPartitionsPerSm / registers_per_warp;
    limit_to(warps_per_sub_partition * kSubPartitionsPerSm / warps_per_block,
             OccupancyLimiter::kRegisters);
  }
  const std::int64_t shared_per_block =
      RoundUp(shared_bytes + kReservedSharedPerBlock, kSharedAllocationUnit);
  limit_to(static_cast<int>(gpu.shared_memory_per_sm_bytes / shared_per_block),
           OccupancyLimiter::kSharedMemory);

  if (occupancy.blocks_per_sm == 0) {
    return absl::ResourceExhaustedError(absl::StrCat(
        "no block of ", threads_per_block, " threads with ", resources.registers_per_thread,
        " registers and ", shared_bytes, " bytes of shared memory fits an SM of ", gpu.name,
        " (limited by ", OccupancyLimiterName(occupancy.limiter), ")"));
  }
  occupancy.active_warps_per_sm = occupancy.blocks_per_sm * warps_per_block;
  occupancy.fraction = static_cast<double>(occupancy.active_warps_per_sm) / max_warps;
  return occupancy;
}

absl::StatusOr<KernelPrediction> PredictKernelTime(const GpuArch& gpu,
                                                   const codegen::LaunchDims& launch,
                                                   const KernelResources& resources,
                                                   const KernelWork& work) {
  if (work.flops < 0 || work.bytes_moved < 0 || work.bytes_in_flight_per_thread < 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "kernel work must be non-negative: flops=", work.flops, " bytes_moved=", work.bytes_moved,
        " bytes_in_flight_per_thread=", work.bytes_in_flight_per_thread));
  }
  const double peak_flops = gpu.PeakFlops(work.math_mode);
  if (work.flops > 0 && peak_flops <= 0) {
    return absl::InvalidArgumentError(
        absl::StrCat(gpu.name, " has no ", MathModeName(work.math_mode), " math"));
  }
  const std::int64_t threads_per_block =
      std::int64_t{launch.block[0]} * launch.block[1] * launch.block[2];
  const double blocks = static_cast<double>(launch.grid[0]) * launch.grid[1] * launch.grid[2];
  KernelResources with_dynamic = resources;
  with_dynamic.dynamic_shared_bytes = launch.dynamic_shared_bytes;
  FORGE_ASSIGN_OR_RETURN(const Occupancy occupancy,
                         ComputeOccupancy(gpu, threads_per_block, with_dynamic));

  KernelPrediction prediction;
  prediction.occupancy = occupancy;
  const double blocks_per_wave = static_cast<double>(gpu.sm_count) * occupancy.blocks_per_sm;
  prediction.waves = blocks / blocks_per_wave;

  // A grid smaller than one wave leaves SMs with fewer blocks than they could hold.
  const double warps_per_block = std::ceil(static_cast<double>(threads_per_block) / kWarpSize);
  const double resident_blocks_per_sm =
      std::min<double>(occupancy.blocks_per_sm, blocks / gpu.sm_count);
  const double resident_warps_per_sm = resident_blocks_per_sm * warps_per_block;

  // Little's law: DRAM delivers bandwidth x latency bytes per latency period only if that many
  // are requested; each SM must keep its share of them in flight.
  const double needed_in_flight_per_sm =
      gpu.dram_bytes_per_second * kDramLatencySeconds / gpu.sm_count;
  const double in_flight_per_sm =
      resident_warps_per_sm * kWarpSize * work.bytes_in_flight_per_thread;
  prediction.bandwidth_fraction = std::min(1.0, in_flight_per_sm / needed_in_flight_per_sm);
  if (work.bytes_moved > 0) {
    prediction.memory_seconds =
        work.bytes_moved / (gpu.dram_bytes_per_second * std::max(prediction.bandwidth_fraction, 1e-6));
  }
  const double issue_efficiency = std::min(1.0, resident_warps_per_sm / kWarpsToHideMathLatency);
  if (work.flops > 0) {
    prediction.compute_seconds = work.flops / (peak_flops * std::max(issue_efficiency, 1e-6));
  }

  const bool memory_dominates = prediction.memory_seconds >= prediction.compute_seconds;
  prediction.bound =
      !memory_dominates ? PredictedBound::kCompute
      : prediction.bandwidth_fraction < kLatencyBoundBandwidthFraction ? PredictedBound::kLatency
                                                                       : PredictedBound::kMemory;
  double body_seconds = std::max(prediction.memory_seconds, prediction.compute_seconds);
  const bool quantize = prediction.waves > 1 && (prediction.bound != PredictedBound::kMemory ||
                                                 prediction.waves < kTailHeavyWaves);
  if (quantize) {
    prediction.wave_efficiency = prediction.waves / std::ceil(prediction.waves);
    body_seconds /= prediction.wave_efficiency;
  }
  if (kLaunchOverheadSeconds > body_seconds) prediction.bound = PredictedBound::kLatency;
  prediction.seconds = kLaunchOverheadSeconds + body_seconds;
  prediction.explanation = absl::StrFormat(
      "%s: %d blocks/SM (%s-limited), occupancy %.0f%%, %.2f waves (efficiency %.2f), %.0f%% of "
      "DRAM bandwidth, %s",
      gpu.name, occupancy.blocks_per_sm, OccupancyLimiterName(occupancy.limiter),
      100 * occupancy.fraction, prediction.waves, prediction.wave_efficiency,
      100 * prediction.bandwidth_fraction, PredictedBoundName(prediction.bound));
  return prediction;
}

double LaunchOverheadSeconds() { return kLaunchOverheadSeconds; }

absl::StatusOr<LibraryPrediction> PredictLibraryTime(const GpuArch& gpu, double flops,
                                                     double bytes, MathMode mode,
                                                     int kernel_launches) {
  FORGE_ASSIGN_OR_RETURN(const Roofline floor, RooflineFloor(gpu, flops, bytes, mode));
  const double efficiency = floor.bound == Bound::kMemory ? kLibraryMemoryEfficiency
                                                          : kLibraryComputeEfficiency;
  LibraryPrediction prediction;
  const double body_seconds = floor.seconds / efficiency;
  const double launch_seconds = std::max(kernel_launches, 1) * kLaunchOverheadSeconds;
  prediction.seconds = launch_seconds + body_seconds;
  prediction.bound = launch_seconds > body_seconds ? PredictedBound::kLatency
                     : floor.bound == Bound::kMemory ? PredictedBound::kMemory
                                                     : PredictedBound::kCompute;
  prediction.explanation = absl::StrFormat(
      "%s: library call, roofline at %.0f%% efficiency plus %d launch(es), %s", gpu.name,
      100 * efficiency, std::max(kernel_launches, 1), PredictedBoundName(prediction.bound));
  return prediction;
}

absl::StatusOr<GemmPrediction> PredictGemmTime(const GpuArch& gpu, double flops, double bytes,
                                               const codegen::CostHints& hints) {
  if (hints.gemm_math == codegen::GemmMath::kNone || hints.gemm_tile_m <= 0 ||
      hints.gemm_tile_n <= 0 || hints.gemm_ctas <= 0 || hints.gemm_ctas_per_sm <= 0 ||
      hints.gemm_tile_utilization <= 0) {
    return absl::InvalidArgumentError("the cost hints describe no tiled GEMM kernel");
  }
  if (flops < 0 || bytes < 0) return absl::InvalidArgumentError("negative flops or bytes");
  const bool three_tf32 = hints.gemm_math == codegen::GemmMath::kTensorCore3xTf32;
  const bool three_tf32_wgmma = hints.gemm_math == codegen::GemmMath::kTensorCore3xTf32Wgmma;
  const double mma_sync_share = gpu.compute_capability >= 90 ? kMmaSyncShareOfTf32PeakOnSm90 : 1;
  const double peak =
      three_tf32 ? gpu.PeakFlops(MathMode::kTf32) * mma_sync_share / kThreeTf32Products
      : three_tf32_wgmma
          ? gpu.PeakFlops(MathMode::kTf32) * kPromotedShareOfTf32Peak / kThreeTf32Products
          : gpu.PeakFlops(MathMode::kBf16);
  if (peak <= 0) {
    return absl::InvalidArgumentError(
        absl::StrCat(gpu.name, " has no tensor cores for this GEMM's math"));
  }
  GemmPrediction prediction;
  const double slots = static_cast<double>(gpu.sm_count) * hints.gemm_ctas_per_sm;
  prediction.waves = static_cast<double>(hints.gemm_ctas) / slots;
  prediction.wave_efficiency = prediction.waves / std::ceil(prediction.waves);
  const double tile_m = static_cast<double>(hints.gemm_tile_m);
  const double tile_n = static_cast<double>(hints.gemm_tile_n);
  prediction.reuse_efficiency =
      std::min(1.0, tile_m * tile_n / (tile_m + tile_n) / kFullRateTileReuse);
  prediction.compute_seconds =
      flops / (peak * kGemmMainloopEfficiency * prediction.reuse_efficiency *
               prediction.wave_efficiency * hints.gemm_tile_utilization);
  prediction.memory_seconds = bytes / (gpu.dram_bytes_per_second * kGemmBandwidthEfficiency);
  const double body = std::max(prediction.compute_seconds, prediction.memory_seconds);
  prediction.seconds = body + kLaunchOverheadSeconds;
  prediction.bound = kLaunchOverheadSeconds > body ? PredictedBound::kLatency
                     : prediction.compute_seconds >= prediction.memory_seconds
                         ? PredictedBound::kCompute
                         : PredictedBound::kMemory;
  prediction.explanation = absl::StrFormat(
      "%s: %s GEMM, %lldx%lld tiles (%.0f%% useful, reuse %.2f), %.2f waves (efficiency %.2f), "
      "%s",
      gpu.name,
      three_tf32 ? "3xTF32 (mma.sync)" : three_tf32_wgmma ? "3xTF32 (WGMMA)" : "16-bit tensor-core",
      static_cast<long long>(hints.gemm_tile_m), static_cast<long long>(hints.gemm_tile_n),
      100 * hints.gemm_tile_utilization, prediction.reuse_efficiency, prediction.waves,
      prediction.wave_efficiency, PredictedBoundName(prediction.bound));
  return prediction;
}

}  // namespace forge::cost
