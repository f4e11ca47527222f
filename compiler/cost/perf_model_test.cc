#include "compiler/cost/perf_model.h"

#include <algorithm>
#include <vector>

#include "gtest/gtest.h"

namespace forge::cost {
namespace {

GpuArch Gpu(absl::string_view name) {
  absl::StatusOr<GpuArch> gpu = FindGpu(name);
  EXPECT_TRUE(gpu.ok()) << gpu.status();
  return *gpu;
}

KernelResources Registers(int registers) {
  return KernelResources{.registers_per_thread = registers};
}

// 256 threads, 32 registers: 8 warps x 1024 registers; 64 warps fit both the thread and the
// register limit, so 8 blocks and every warp slot used.
TEST(OccupancyTest, SmallKernelFillsTheSm) {
  absl::StatusOr<Occupancy> occupancy = ComputeOccupancy(Gpu("H200"), 256, Registers(32));
  ASSERT_TRUE(occupancy.ok()) << occupancy.status();
  EXPECT_EQ(occupancy->blocks_per_sm, 8);
  EXPECT_EQ(occupancy->active_warps_per_sm, 64);
  EXPECT_DOUBLE_EQ(occupancy->fraction, 1.0);
  EXPECT_EQ(occupancy->limiter, OccupancyLimiter::kThreads);
}

// 255 registers round up to 256 per thread = 8192 per warp: 2 warps per sub-partition, 8 per SM,
// one block of 256 threads.
TEST(OccupancyTest, MaximumRegistersLeaveOneBlock) {
  absl::StatusOr<Occupancy> occupancy = ComputeOccupancy(Gpu("H100"), 256, Registers(255));
  ASSERT_TRUE(occupancy.ok()) << occupancy.status();
  EXPECT_EQ(occupancy->blocks_per_sm, 1);
  EXPECT_DOUBLE_EQ(occupancy->fraction, 8.0 / 64);
  EXPECT_EQ(occupancy->limiter, OccupancyLimiter::kRegisters);
}

// 33 registers allocate as 40 (1280 per warp): 12 warps per sub-partition, 48 per SM, 6 blocks of
// 8 warps. Without the allocation unit it would be 65536 / (33 * 256) = 7 blocks.
TEST(OccupancyTest, RegistersAllocateInUnitsOf256PerWarp) {
  absl::StatusOr<Occupancy> occupancy = ComputeOccupancy(Gpu("A100"), 256, Registers(33));
  ASSERT_TRUE(occupancy.ok()) << occupancy.status();
  EXPECT_EQ(occupancy->blocks_per_sm, 6);
  EXPECT_EQ(occupancy->limiter, OccupancyLimiter::kRegisters);
}

// 48 KiB + 1 KiB reserved per block: 228 KiB / 49 KiB = 4 blocks.
TEST(OccupancyTest, SharedMemoryLimitsBlocks) {
  KernelResources resources = Registers(16);
  resources.static_shared_bytes = 32 * 1024;
  resources.dynamic_shared_bytes = 16 * 1024;
  absl::StatusOr<Occupancy> occupancy = ComputeOccupancy(Gpu("H200"), 128, resources);
  ASSERT_TRUE(occupancy.ok()) << occupancy.status();
  EXPECT_EQ(occupancy->blocks_per_sm, 4);
  EXPECT_EQ(occupancy->limiter, OccupancyLimiter::kSharedMemory);
  EXPECT_DOUBLE_EQ(occupancy->fraction, 16.0 / 64);
}

// sm_89 holds at most 24 blocks and 48 warps: single-warp blocks reach half occupancy.
TEST(OccupancyTest, BlockLimitOfSm89) {
  absl::StatusOr<Occupancy> occupancy = ComputeOccupancy(Gpu("L40S"), 32, Registers(16));
  ASSERT_TRUE(occupancy.ok()) << occupancy.status();
  EXPECT_EQ(occupancy->blocks_per_sm, 24);
  EXPECT_EQ(occupancy->limiter, OccupancyLimiter::kBlocks);
  EXPECT_DOUBLE_EQ(occupancy->fraction, 0.5);
}

TEST(OccupancyTest, KernelsThatFitNoSmAreResourceExhausted) {
  KernelResources too_much_shared = Registers(32);
  too_much_shared.dynamic_shared_bytes = 228 * 1024;
  EXPECT_TRUE(absl::IsResourceExhausted(
      ComputeOccupancy(Gpu("H200"), 128, too_much_shared).status()));
  EXPECT_TRUE(absl::IsResourceExhausted(
      ComputeOccupancy(Gpu("RTX 4090"), 1024, Registers(128)).status()));
  EXPECT_TRUE(absl::IsResourceExhausted(ComputeOccupancy(Gpu("H200"), 2048, Registers(16)).status()));
  EXPECT_TRUE(absl::IsInvalidArgument(ComputeOccupancy(Gpu("H200"), 0, Registers(16)).status()));
}

codegen::LaunchDims Launch(uint32_t blocks, uint32_t threads) {
  codegen::LaunchDims launch;
  launch.grid = {blocks, 1, 1};
  launch.block = {threads, 1, 1};
  return launch;
}

// A streaming kernel with 16-byte loads at full occupancy over `bytes`.
KernelWork Streaming(double bytes) {
  return KernelWork{.flops = bytes / 8, .bytes_moved = bytes, .bytes_in_flight_per_thread = 16};
}

TEST(PredictionTest, PartialLastWaveCostsAWholeWaveWhenComputeBound) {
  const GpuArch gpu = Gpu("H200");
  // The same work per block: 1.5 waves do three quarters of the work of 2 waves.
  const KernelWork math{.flops = 1e12, .bytes_moved = 1e6, .bytes_in_flight_per_thread = 4};
  KernelWork three_quarters = math;
  three_quarters.flops *= 0.75;
  // 256 threads at 32 registers: 8 blocks per SM, 1056 per wave.
  const uint32_t wave = 8 * static_cast<uint32_t>(gpu.sm_count);
  absl::StatusOr<KernelPrediction> two_waves =
      PredictKernelTime(gpu, Launch(2 * wave, 256), Registers(32), math);
  absl::StatusOr<KernelPrediction> one_and_a_half =
      PredictKernelTime(gpu, Launch(wave + wave / 2, 256), Registers(32), three_quarters);
  ASSERT_TRUE(two_waves.ok()) << two_waves.status();
  ASSERT_TRUE(one_and_a_half.ok()) << one_and_a_half.status();
  EXPECT_EQ(two_waves->bound, PredictedBound::kCompute);
  EXPECT_DOUBLE_EQ(two_waves->waves, 2.0);
  EXPECT_DOUBLE_EQ(two_waves->wave_efficiency, 1.0);
  EXPECT_DOUBLE_EQ(one_and_a_half->waves, 1.5);
  EXPECT_DOUBLE_EQ(one_and_a_half->wave_efficiency, 0.75);
  // The partial wave takes as long as a full one.
  EXPECT_DOUBLE_EQ(one_and_a_half->seconds, two_waves->seconds);
}

TEST(PredictionTest, ManyWavesOfAMemoryBoundKernelAreNotQuantized) {
  const GpuArch gpu = Gpu("H200");
  const uint32_t blocks = 8 * static_cast<uint32_t>(gpu.sm_count) * 100 + 7;
  absl::StatusOr<KernelPrediction> prediction =
      PredictKernelTime(gpu, Launch(blocks, 256), Registers(32), Streaming(4e9));
  ASSERT_TRUE(prediction.ok()) << prediction.status();
  EXPECT_EQ(prediction->bound, PredictedBound::kMemory);
  EXPECT_DOUBLE_EQ(prediction->wave_efficiency, 1.0);
  EXPECT_DOUBLE_EQ(prediction->bandwidth_fraction, 1.0);
  // At the full bandwidth the time is the roofline's memory term plus the launch.
  EXPECT_NEAR(prediction->memory_seconds, 4e9 / gpu.dram_bytes_per_second, 1e-9);
  EXPECT_GT(prediction->seconds, prediction->memory_seconds);
}

TEST(PredictionTest, TooFewBytesInFlightIsLatencyBound) {
  const GpuArch gpu = Gpu("H200");
  KernelWork scalar_loads = Streaming(4e9);
  scalar_loads.bytes_in_flight_per_thread = 4;
  // 255 registers: one 256-thread block per SM, 8 KiB in flight per SM.
  absl::StatusOr<KernelPrediction> prediction =
      PredictKernelTime(gpu, Launch(132 * 1000, 256), Registers(255), scalar_loads);
  ASSERT_TRUE(prediction.ok()) << prediction.status();
  EXPECT_EQ(prediction->bound, PredictedBound::kLatency);
  EXPECT_LT(prediction->bandwidth_fraction, 0.5);
  EXPECT_GT(prediction->memory_seconds, 2 * 4e9 / gpu.dram_bytes_per_second);
}

TEST(PredictionTest, TinyKernelIsDominatedByTheLaunch) {
  absl::StatusOr<KernelPrediction> prediction =
      PredictKernelTime(Gpu("A100"), Launch(1, 128), Registers(16), Streaming(4096));
  ASSERT_TRUE(prediction.ok()) << prediction.status();
  EXPECT_EQ(prediction->bound, PredictedBound::kLatency);
  EXPECT_NE(prediction->explanation.find("latency-bound"), std::string::npos);
}

TEST(PredictionTest, RejectsNegativeWorkAndMissingMathModes) {
  const GpuArch a100 = Gpu("A100");
  EXPECT_TRUE(absl::IsInvalidArgument(
      PredictKernelTime(a100, Launch(10, 128), Registers(16), Streaming(-1)).status()));
  KernelWork fp8 = Streaming(1e6);
  fp8.math_mode = MathMode::kFp8;  // A100 has no fp8 tensor cores
  EXPECT_TRUE(absl::IsInvalidArgument(
      PredictKernelTime(a100, Launch(10, 128), Registers(16), fp8).status()));
}

// One streaming kernel on every GPU of the table: more bandwidth, less time.
TEST(PredictionTest, MemoryBoundKernelOrdersTheGpusByBandwidth) {
  std::vector<std::pair<double, double>> bandwidth_and_seconds;
  for (const GpuArch& gpu : KnownGpus()) {
    absl::StatusOr<KernelPrediction> prediction =
        PredictKernelTime(gpu, Launch(1 << 20, 256), Registers(24), Streaming(8e9));
    ASSERT_TRUE(prediction.ok()) << gpu.name << ": " << prediction.status();
    EXPECT_GT(prediction->seconds, 0) << gpu.name;
    EXPECT_EQ(prediction->bound, PredictedBound::kMemory) << gpu.name;
    bandwidth_and_seconds.emplace_back(gpu.dram_bytes_per_second, prediction->seconds);
  }
  ASSERT_EQ(bandwidth_and_seconds.size(), 6u);
  std::sort(bandwidth_and_seconds.begin(), bandwidth_and_seconds.end());
  for (size_t i = 1; i < bandwidth_and_seconds.size(); ++i) {
    EXPECT_LT(bandwidth_and_seconds[i].second, bandwidth_and_seconds[i - 1].second);
  }
}

TEST(LibraryPredictionTest, RooflineOverEfficiencyPlusLaunches) {
  const GpuArch gpu = Gpu("H100");
  absl::StatusOr<LibraryPrediction> one = PredictLibraryTime(gpu, 0, 1e9, MathMode::kFp32, 1);
  absl::StatusOr<LibraryPrediction> three = PredictLibraryTime(gpu, 0, 1e9, MathMode::kFp32, 3);
  ASSERT_TRUE(one.ok()) << one.status();
  ASSERT_TRUE(three.ok()) << three.status();
  EXPECT_EQ(one->bound, PredictedBound::kMemory);
  EXPECT_GT(one->seconds, 1e9 / gpu.dram_bytes_per_second);
  EXPECT_GT(three->seconds, one->seconds);
  absl::StatusOr<LibraryPrediction> gemm = PredictLibraryTime(gpu, 1e13, 1e8, MathMode::kBf16, 1);
  ASSERT_TRUE(gemm.ok()) << gemm.status();
  EXPECT_EQ(gemm->bound, PredictedBound::kCompute);
  EXPECT_GT(gemm->seconds, 1e13 / gpu.peak_bf16_flops);
}

// ---- Tiled GEMMs ----

// The hints of a GEMM of `ctas` CTAs of tile_m x tile_n.
codegen::CostHints GemmHints(int64_t tile_m, int64_t tile_n, int64_t ctas,
                             codegen::GemmMath math = codegen::GemmMath::kTensorCore16Bit,
                             double utilization = 1) {
  codegen::CostHints hints;
  hints.executor = codegen::Executor::kHostLaunched;
  hints.gemm_math = math;
  hints.gemm_tile_m = tile_m;
  hints.gemm_tile_n = tile_n;
  hints.gemm_tile_k = 64;
  hints.gemm_ctas = ctas;
  hints.gemm_tile_utilization = utilization;
  return hints;
}

double GemmSeconds(const codegen::CostHints& hints, double flops = 2.0 * 8192 * 8192 * 8192,
                   double bytes = 3.0 * 8192 * 8192 * 2) {
  absl::StatusOr<GemmPrediction> prediction = PredictGemmTime(Gpu("H200"), flops, bytes, hints);
  EXPECT_TRUE(prediction.ok()) << prediction.status();
  return prediction.ok() ? prediction->seconds : 0;
}

TEST(GemmPredictionTest, AFullWaveBeatsOneThatSpillsOneCtaIntoASecond) {
  // 132 SMs: 132 CTAs are one full wave; 133 need a second wave that is almost empty.
  const double full = GemmSeconds(GemmHints(128, 256, 132));
  const double spilled = GemmSeconds(GemmHints(128, 256, 133));
  EXPECT_GT(spilled, 1.9 * full);
  EXPECT_LT(spilled, 2.1 * full);
}

TEST(GemmPredictionTest, PaddedTilesAreSlower) {
  // The same CTAs, half of each tile's work padding.
  EXPECT_GT(GemmSeconds(GemmHints(128, 256, 132 * 8, codegen::GemmMath::kTensorCore16Bit, 0.5)),
            1.9 * GemmSeconds(GemmHints(128, 256, 132 * 8)));
}

TEST(GemmPredictionTest, SmallTilesReuseLessAndAreSlower) {
  const double large = GemmSeconds(GemmHints(128, 256, 132 * 8));
  const double medium = GemmSeconds(GemmHints(128, 128, 132 * 8));
  const double small = GemmSeconds(GemmHints(64, 64, 132 * 8));
  EXPECT_DOUBLE_EQ(large, medium);  // both at full reuse
  EXPECT_GT(small, 1.9 * medium);
}

// 3xTF32 on mma.sync: about twice FFMA's float32 roofline on the A100, but below it on the H200,
// where mma.sync is the slow path (the CUTLASS probe: 41 TFLOP/s at best against FFMA's 50).
TEST(GemmPredictionTest, ThreeTf32BeatsFloat32OnAmpereNotOnHopper) {
  const double flops = 2.0 * 4096 * 4096 * 4096;
  const double bytes = 3.0 * 4096 * 4096 * 4;
  const codegen::CostHints hints =
      GemmHints(128, 128, 132 * 8, codegen::GemmMath::kTensorCore3xTf32);
  auto seconds = [&](absl::string_view gpu) {
    absl::StatusOr<GemmPrediction> prediction = PredictGemmTime(Gpu(gpu), flops, bytes, hints);
    EXPECT_TRUE(prediction.ok()) << prediction.status();
    return prediction.ok() ? prediction->seconds : 0;
  };
  EXPECT_LT(seconds("A100"), flops / Gpu("A100").peak_fp32_flops / 1.5);
  EXPECT_GT(seconds("H200"), flops / Gpu("H200").peak_fp32_flops);
  // And far below bf16's rate on the same card.
  EXPECT_GT(seconds("H200"), 10 * GemmSeconds(GemmHints(128, 128, 132 * 8), flops, bytes));
}

TEST(GemmPredictionTest, ASmallGemmIsMemoryOrLaunchBound) {
  absl::StatusOr<GemmPrediction> prediction =
      PredictGemmTime(Gpu("H200"), 2.0 * 8 * 4096 * 14336, 4096.0 * 14336 * 2, GemmHints(64, 64, 224));
  ASSERT_TRUE(prediction.ok()) << prediction.status();
  EXPECT_EQ(prediction->bound, PredictedBound::kMemory);
}

TEST(GemmPredictionTest, NotAGemmIsRefused) {
  EXPECT_EQ(PredictGemmTime(Gpu("H200"), 1, 1, codegen::CostHints()).status().code(),
            absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace forge::cost
