#include "common/arch/arch.h"

#include <set>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace forge {
namespace {

using ::testing::HasSubstr;

TEST(FindGpuTest, IgnoresCaseSpacesAndDashes) {
  for (absl::string_view name : {"h200", "H200", "h-200"}) {
    absl::StatusOr<GpuArch> gpu = FindGpu(name);
    ASSERT_TRUE(gpu.ok()) << name << ": " << gpu.status();
    EXPECT_EQ(gpu->name, "H200");
  }
  absl::StatusOr<GpuArch> rtx = FindGpu("rtx4090");
  ASSERT_TRUE(rtx.ok()) << rtx.status();
  EXPECT_EQ(rtx->name, "RTX 4090");
  EXPECT_EQ(rtx->arch, "sm_89");
}

TEST(FindGpuTest, UnknownNameListsTheKnownOnes) {
  absl::StatusOr<GpuArch> gpu = FindGpu("v100");
  ASSERT_EQ(gpu.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(gpu.status().message(), HasSubstr("'v100'"));
  for (const GpuArch& known : KnownGpus()) {
    EXPECT_THAT(gpu.status().message(), HasSubstr(known.name));
  }
}

TEST(KnownGpusTest, TableHasTheTargetsAndSaneFigures) {
  std::set<std::string> names;
  for (const GpuArch& gpu : KnownGpus()) {
    names.insert(gpu.name);
    EXPECT_EQ(gpu.arch, "sm_" + std::to_string(gpu.compute_capability)) << gpu.name;
    EXPECT_GT(gpu.sm_count, 0) << gpu.name;
    EXPECT_LE(gpu.shared_memory_per_block_bytes, gpu.shared_memory_per_sm_bytes) << gpu.name;
    EXPECT_GT(gpu.dram_bytes_per_second, 0) << gpu.name;
    // Tensor cores outrun the CUDA cores on every GPU in the table.
    EXPECT_GT(gpu.peak_bf16_flops, gpu.peak_fp32_flops) << gpu.name;
  }
  EXPECT_EQ(names, (std::set<std::string>{"A100", "H100", "H200", "L40S", "RTX 4090", "B200"}));
}

TEST(KnownGpusTest, H200UsesTheMeasuredCeilings) {
  absl::StatusOr<GpuArch> h200 = FindGpu("h200");
  ASSERT_TRUE(h200.ok()) << h200.status();
  EXPECT_DOUBLE_EQ(h200->dram_bytes_per_second, 4.3e12);
  EXPECT_DOUBLE_EQ(h200->PeakFlops(MathMode::kBf16), 790e12);
  EXPECT_DOUBLE_EQ(h200->PeakFlops(MathMode::kFp32), 51e12);
  EXPECT_EQ(h200->sm_count, 132);
}

TEST(RooflineFloorTest, PicksTheLargerTerm) {
  absl::StatusOr<GpuArch> h200 = FindGpu("H200");
  ASSERT_TRUE(h200.ok()) << h200.status();
  // 4.3 GB at 4.3 TB/s is 1 ms; 1 GFLOP at 790 TFLOP/s is far less.
  absl::StatusOr<Roofline> memory = RooflineFloor(*h200, 1e9, 4.3e9, MathMode::kBf16);
  ASSERT_TRUE(memory.ok()) << memory.status();
  EXPECT_DOUBLE_EQ(memory->seconds, 1e-3);
  EXPECT_EQ(memory->bound, Bound::kMemory);
  EXPECT_EQ(BoundName(memory->bound), "memory-bound");

  absl::StatusOr<Roofline> compute = RooflineFloor(*h200, 790e12, 1e6, MathMode::kBf16);
  ASSERT_TRUE(compute.ok()) << compute.status();
  EXPECT_DOUBLE_EQ(compute->seconds, 1.0);
  EXPECT_EQ(compute->bound, Bound::kCompute);
  EXPECT_EQ(BoundName(compute->bound), "compute-bound");
}

TEST(RooflineFloorTest, MissingModeAndNegativeCountsAreErrors) {
  absl::StatusOr<GpuArch> a100 = FindGpu("a100");
  ASSERT_TRUE(a100.ok()) << a100.status();
  absl::StatusOr<Roofline> fp8 = RooflineFloor(*a100, 1e9, 1e6, MathMode::kFp8);
  EXPECT_EQ(fp8.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(fp8.status().message(), HasSubstr("fp8"));
  // Without flops the mode does not matter: a copy has a floor on any GPU.
  absl::StatusOr<Roofline> copy = RooflineFloor(*a100, 0, 2.039e9, MathMode::kFp8);
  ASSERT_TRUE(copy.ok()) << copy.status();
  EXPECT_DOUBLE_EQ(copy->seconds, 1e-3);
  EXPECT_EQ(RooflineFloor(*a100, -1, 0, MathMode::kFp32).status().code(),
            absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace forge
