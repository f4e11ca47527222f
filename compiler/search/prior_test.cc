#include "compiler/search/prior.h"

#include <string>
#include <vector>

#include "compiler/codegen/testing/codegen_test_util.h"
#include "compiler/codegen/family.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "compiler/cost/perf_model.h"

namespace forge::search {
namespace {

using ::forge::codegen::GeneratedKernel;
using ::forge::codegen::SchedulePoint;
using ::forge::codegen::testing::CumsumTask;
using ::forge::codegen::testing::IntArg;
using ::forge::codegen::testing::SoftmaxTask;
using ::forge::codegen::testing::TaskBuilder;
using ::forge::codegen::testing::TensorArg;
using ::forge::v1::KernelTask;

constexpr auto kF32 = forge::v1::DTYPE_FLOAT32;
constexpr auto kBf16 = forge::v1::DTYPE_BFLOAT16;

// Tasks of a size where the schedule matters: 2^26 float32 elements, and 16384 rows of 4096.
KernelTask LargeReluTask() {
  KernelTask task = TaskBuilder()
                        .Input("x", kF32, {8192, 8192})
                        .Node("relu", "relu", "default", {TensorArg("self", "x")}, kF32,
                              {8192, 8192})
                        .Output("relu")
                        .Build(forge::v1::KERNEL_FAMILY_POINTWISE);
  task.set_flops(int64_t{8192} * 8192);
  task.set_min_bytes(int64_t{8192} * 8192 * 8);
  return task;
}

KernelTask LinearTask() {
  KernelTask task = TaskBuilder()
                        .Input("x", kBf16, {4096, 4096})
                        .Input("w", kBf16, {4096, 4096})
                        .Node("linear", "linear", "",
                              {TensorArg("input", "x"), TensorArg("weight", "w")}, kBf16,
                              {4096, 4096})
                        .Output("linear")
                        .Build(forge::v1::KERNEL_FAMILY_GEMM);
  task.set_flops(int64_t{2} * 4096 * 4096 * 4096);
  task.set_min_bytes(int64_t{3} * 4096 * 4096 * 2);
  return task;
}

const CostModelPrior& H200() {
  static const CostModelPrior* prior = new CostModelPrior(*CostModelPrior::ForGpu("H200"));
  return *prior;
}

GeneratedKernel Generate(const KernelTask& task, forge::v1::KernelFamily family,
                         const SchedulePoint& point) {
  absl::StatusOr<GeneratedKernel> kernel = codegen::FindFamily(family)->Generate(task, point);
  EXPECT_TRUE(kernel.ok()) << kernel.status();
  return kernel.ok() ? *kernel : GeneratedKernel{};
}

double Predict(const KernelTask& task, const GeneratedKernel& kernel) {
  absl::StatusOr<double> seconds = H200().PredictSeconds(task, kernel);
  EXPECT_TRUE(seconds.ok()) << seconds.status();
  return seconds.ok() ? *seconds : 0;
}

SchedulePoint FlatPoint(int64_t threads, int64_t elements, int64_t width) {
  return {"pointwise_flat",
          {{"threads_per_block", threads}, {"elements_per_thread", elements},
           {"vector_width", width}}};
}

SchedulePoint RowPoint(int64_t threads_per_row, int64_t width, int64_t cache_row) {
  return {"row_reduce",
          {{"threads_per_row", threads_per_row}, {"rows_per_block", 1}, {"vector_width", width},
           {"cache_row", cache_row}, {"online_softmax", 1}, {"max_registers", 0}}};
}

TEST(CostModelPriorTest, UnknownGpuIsNotFound) {
  EXPECT_EQ(CostModelPrior::ForGpu("Voodoo 2").status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(H200().gpu().name, "H200");
}

// A scalar load per thread keeps too few bytes in flight to stream 512 MiB at full bandwidth;
// 16-byte loads, unrolled, do. The prediction never beats the roofline floor.
TEST(CostModelPriorTest, MoreBytesInFlightArePredictedFaster) {
  const KernelTask task = LargeReluTask();
  const double scalar = Predict(task, Generate(task, task.family(), FlatPoint(256, 1, 1)));
  const double vector = Predict(task, Generate(task, task.family(), FlatPoint(256, 4, 4)));
  EXPECT_LT(vector, scalar);
  const double floor_seconds =
      static_cast<double>(task.min_bytes()) / H200().gpu().dram_bytes_per_second;
  EXPECT_GE(vector, floor_seconds);
}

// A scan reads and writes once: its default points are predicted near that floor, scalar loads
// slower; few long rows are predicted far faster as chained tiles than as a block per row.
TEST(CostModelPriorTest, ScansArePredictedNearTheirFloor) {
  const codegen::KernelFamily& scan = *codegen::FindFamily(forge::v1::KERNEL_FAMILY_SCAN);
  for (const KernelTask& task : {CumsumTask(kF32, 32768, 4096), CumsumTask(kF32, 8, 1 << 22)}) {
    const double floor_seconds =
        static_cast<double>(task.min_bytes()) / H200().gpu().dram_bytes_per_second;
    absl::StatusOr<std::vector<codegen::TemplateSpace>> spaces = scan.ScheduleSpace(task);
    ASSERT_TRUE(spaces.ok()) << spaces.status();
    const double best = Predict(task, Generate(task, task.family(),
                                               codegen::DefaultPoint(spaces->front())));
    EXPECT_GE(best, floor_seconds);
    EXPECT_LT(best, 1.5 * floor_seconds) << task.outputs(0).shape(0) << " rows";
    const SchedulePoint scalar{"row_scan",
                               {{"threads_per_row", 32},
                                {"rows_per_block", 1},
                                {"vector_width", 1},
                                {"elements_per_thread", 1}}};
    EXPECT_GT(Predict(task, Generate(task, task.family(), scalar)), 2 * best);
  }
}

TEST(CostModelPriorTest, EstimatesFollowTheSchedule) {
  const KernelTask task = SoftmaxTask(kBf16, 16384, 4096);
  // 4096 columns, 64 threads a row, 8 lanes: 8 chunks of 8 elements per thread.
  const EstimatedKernel cached =
      CostModelPrior::Estimate(task, Generate(task, task.family(), RowPoint(64, 8, 1)));
  EXPECT_DOUBLE_EQ(cached.elements_in_flight_per_thread, 64);
  EXPECT_EQ(cached.registers_per_thread, 32 + 64);
  const EstimatedKernel streamed =
      CostModelPrior::Estimate(task, Generate(task, task.family(), RowPoint(64, 8, 0)));
  EXPECT_DOUBLE_EQ(streamed.elements_in_flight_per_thread, 8);
  EXPECT_EQ(streamed.registers_per_thread, 32 + 8);
  // A point's register cap is what it gets (__launch_bounds__ makes ptxas keep to it).
  SchedulePoint capped = RowPoint(64, 8, 1);
  capped.parameters["max_registers"] = 80;
  EXPECT_EQ(CostModelPrior::Estimate(task, Generate(task, task.family(), capped))
                .registers_per_thread,
            80);
}

// A row cached in a cluster's shared memory: cp.async puts a thread's whole part of the row in
// flight (49152 columns / 1024 threads), while the registers hold only the chunks its loops
// unroll (4 deep), so the point fits an SM and is predicted.
TEST(CostModelPriorTest, SharedMemoryRowCacheIsNotCountedAsRegisters) {
  const KernelTask task = SoftmaxTask(forge::v1::DTYPE_FLOAT32, 4096, 393216);
  SchedulePoint point = RowPoint(1024, 4, 1);
  point.parameters["cluster_blocks"] = 8;
  const GeneratedKernel kernel = Generate(task, task.family(), point);
  const EstimatedKernel estimate = CostModelPrior::Estimate(task, kernel);
  EXPECT_DOUBLE_EQ(estimate.elements_in_flight_per_thread, 48);
  EXPECT_EQ(estimate.registers_per_thread, 32 + 16);
  EXPECT_GT(Predict(task, kernel), 0);
  // Without the cache the cluster's chunk loop is unrolled as deep.
  point.parameters["cache_row"] = 0;
  EXPECT_DOUBLE_EQ(
      CostModelPrior::Estimate(task, Generate(task, task.family(), point))
          .elements_in_flight_per_thread,
      16);
}

// Registers cost occupancy: caching a row of 4096 in 64 threads (64 elements each) must not be
// predicted faster than caching it in 256.
TEST(CostModelPriorTest, RegisterHungryPointsLoseOccupancy) {
  const KernelTask task = SoftmaxTask(kBf16, 16384, 4096);
  const GeneratedKernel narrow = Generate(task, task.family(), RowPoint(64, 8, 1));
  const GeneratedKernel wide = Generate(task, task.family(), RowPoint(256, 8, 1));
  EXPECT_GT(CostModelPrior::Estimate(task, narrow).registers_per_thread,
            CostModelPrior::Estimate(task, wide).registers_per_thread);
  EXPECT_GE(Predict(task, narrow), Predict(task, wide));
}

// cuBLASLt's algorithms are invisible to the model: every one is predicted alike, at no less than
// the tensor-core roofline.
TEST(CostModelPriorTest, LibraryPointsArePredictedAsTheCall) {
  const KernelTask task = LinearTask();
  const double first = Predict(task, Generate(task, task.family(), {"cublaslt", {{"algo", 0}}}));
  const double other = Predict(task, Generate(task, task.family(), {"cublaslt", {{"algo", 5}}}));
  EXPECT_DOUBLE_EQ(first, other);
  EXPECT_GE(first, static_cast<double>(task.flops()) / H200().gpu().peak_bf16_flops);
}

SchedulePoint Sm90Point(int64_t tile_m, int64_t tile_n, int64_t schedule) {
  return {"sm90_tma_ws",
          {{"tile_m", tile_m}, {"tile_n", tile_n}, {"tile_k", 64}, {"cluster_m", 1},
           {"cluster_n", 1}, {"schedule", schedule}, {"raster", 0}, {"swizzle", 1}}};
}

// CUTLASS points are ranked by their tiles. 4224 = 33 x 128: 128 x 128 tiles cover the output
// exactly in 1089 CTAs, 8.25 waves of 132 SMs; 128 x 256 tiles pad N to 4352 and make 561 CTAs,
// 4.25 waves, so more of their last wave idles; 64 x 64 tiles feed the tensor cores at half their
// rate. All above the bf16 roofline.
TEST(CostModelPriorTest, CutlassPointsAreRankedByTheirTiles) {
  KernelTask task =
      codegen::testing::LinearActivationTask(kBf16, 4224, 4224, 4096, /*bias=*/false, "");
  task.set_flops(int64_t{2} * 4224 * 4224 * 4096);
  task.set_min_bytes(int64_t{2} * (2 * 4224 * 4096 + 4224 * 4224));
  const auto cutlass = forge::v1::KERNEL_FAMILY_CUTLASS_GEMM;
  const double wide = Predict(task, Generate(task, cutlass, Sm90Point(128, 256, 0)));
  const double square = Predict(task, Generate(task, cutlass, Sm90Point(128, 128, 0)));
  const double small = Predict(task, Generate(task, cutlass, Sm90Point(64, 64, 1)));
  EXPECT_LT(square, wide);
  EXPECT_LT(wide, small);
  EXPECT_GE(square, static_cast<double>(task.flops()) / H200().gpu().peak_bf16_flops);
}

// An SDPA backend's candidate runs ATen like the fallback, but it is a point of the search: the
// prior predicts it as a library call.
TEST(CostModelPriorTest, SdpaBackendsArePredictedAsLibraryCalls) {
  KernelTask task = TaskBuilder()
                        .Input("q", kBf16, {4, 16, 1024, 64})
                        .Input("k", kBf16, {4, 16, 1024, 64})
                        .Input("v", kBf16, {4, 16, 1024, 64})
                        .Node("o", "scaled_dot_product_attention", "default",
                              {TensorArg("query", "q"), TensorArg("key", "k"),
                               TensorArg("value", "v")},
                              kBf16, {4, 16, 1024, 64})
                        .Output("o")
                        .Build(forge::v1::KERNEL_FAMILY_ATTENTION);
  task.set_flops(4.0 * 4 * 16 * 1024 * 1024 * 64);
  task.set_min_bytes(4 * 4 * 16 * 1024 * 64 * 2);
  for (const char* backend : {"sdpa_flash", "sdpa_cudnn", "sdpa_math"}) {
    const double seconds =
        Predict(task, Generate(task, forge::v1::KERNEL_FAMILY_SDPA_LIBRARY, {backend, {}}));
    EXPECT_GE(seconds, static_cast<double>(task.flops()) / H200().gpu().peak_bf16_flops)
        << backend;
  }
}

TEST(CostModelPriorTest, TheAtenFallbackIsNotRanked) {
  const KernelTask task = LargeReluTask();
  const GeneratedKernel fallback =
      Generate(task, forge::v1::KERNEL_FAMILY_ATEN, {"aten_calls", {}});
  EXPECT_EQ(H200().PredictSeconds(task, fallback).status().code(),
            absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace forge::search
