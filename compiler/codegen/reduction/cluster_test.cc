#include "compiler/codegen/reduction/reduction.h"

#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "compiler/codegen/reduction/reduction_test_util.h"
#include "compiler/codegen/testing/codegen_test_util.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace forge::codegen {
namespace {

using ::forge::codegen::testing::ClusterPoint;
using ::forge::codegen::testing::ExpectCompiles;
using ::forge::codegen::testing::IntArg;
using ::forge::codegen::testing::LayerNormGelu;
using ::forge::codegen::testing::RmsNorm;
using ::forge::codegen::testing::Softmax;
using ::forge::codegen::testing::TaskBuilder;
using ::forge::codegen::testing::TensorArg;
using ::forge::codegen::testing::kBF16;
using ::forge::codegen::testing::kF16;
using ::forge::codegen::testing::kF32;
using ::forge::codegen::testing::kReduction;
using ::forge::v1::KernelTask;
using ::testing::HasSubstr;

// The softmax anchor's row (393216 float32, 1.5 MiB) fits no block: eight blocks of a cluster
// keep it in shared memory: the default point, whether the rows are few or many.
TEST(ReductionTest, LongRowsAreSharedByAClusterOfBlocks) {
  ReductionFamily family;
  const KernelTask task = Softmax(kF32, {16, 393216});
  absl::StatusOr<std::vector<TemplateSpace>> space = family.ScheduleSpace(task);
  ASSERT_TRUE(space.ok()) << space.status();
  const SchedulePoint point = DefaultPoint(space->front());
  EXPECT_EQ(point.parameters.at("cluster_blocks"), 8);
  EXPECT_EQ(point.parameters.at("cache_row"), 1);
  EXPECT_EQ(point.parameters.at("threads_per_row"), 512);
  EXPECT_EQ(point.parameters.at("vector_width"), 4);
  absl::StatusOr<GeneratedKernel> kernel = family.Generate(task, point);
  ASSERT_TRUE(kernel.ok()) << kernel.status();
  // A cluster of 8 blocks per row, each with its 49152 columns in shared memory.
  EXPECT_EQ(kernel->launch.grid[0], 16u * 8u);
  EXPECT_EQ(kernel->launch.block[0], 512u);
  EXPECT_EQ(kernel->launch.dynamic_shared_bytes, 49152u * 4u);
  EXPECT_THAT(kernel->source, HasSubstr("__cluster_dims__(8, 1, 1)"));
  EXPECT_THAT(kernel->source, HasSubstr("forge_cluster_allreduce<8>"));
  EXPECT_THAT(kernel->source, HasSubstr("const int segment_begin = cluster_rank * 49152;"));
  EXPECT_THAT(kernel->source, HasSubstr("if (forge_cluster_blocks() != 8) __trap();"));

  // With rows enough to fill the GPU too (measured faster than streaming rows, read twice).
  absl::StatusOr<std::vector<TemplateSpace>> many_rows = family.ScheduleSpace(Softmax(kF32, {4096, 393216}));
  ASSERT_TRUE(many_rows.ok());
  EXPECT_EQ(DefaultPoint(many_rows->front()).parameters.at("cluster_blocks"), 8);
  EXPECT_EQ(DefaultPoint(many_rows->front()).parameters.at("cache_row"), 1);
  EXPECT_EQ(DefaultPoint(many_rows->front()).parameters.at("threads_per_row"), 512);

  // Short rows never see the parameter.
  absl::StatusOr<std::vector<TemplateSpace>> short_space =
      family.ScheduleSpace(Softmax(kF32, {64, 4096}));
  ASSERT_TRUE(short_space.ok());
  for (const ScheduleParameter& parameter : short_space->front().parameters) {
    EXPECT_NE(parameter.name, "cluster_blocks");
  }
}

// Without cache_row the blocks of a cluster still split the row and combine through distributed
// shared memory, but each block reads its segment again from global memory in the later passes:
// with a cluster's rows few enough to be in flight at once, those reads can come from L2 while
// the blocks keep several per SM (the cached point holds one 192 KiB block per SM).
TEST(ReductionTest, ClusterWithoutTheRowCacheRereadsItsSegment) {
  ReductionFamily family;
  const KernelTask task = Softmax(kF32, {4096, 393216});
  SchedulePoint point = ClusterPoint(8, 512, 4);
  point.parameters["cache_row"] = 0;
  ASSERT_TRUE(family.Validate(task, point).ok()) << family.Validate(task, point);
  absl::StatusOr<GeneratedKernel> kernel = family.Generate(task, point);
  ASSERT_TRUE(kernel.ok()) << kernel.status();
  EXPECT_EQ(kernel->launch.grid[0], 4096u * 8u);
  EXPECT_EQ(kernel->launch.dynamic_shared_bytes, 0u);
  EXPECT_THAT(kernel->source, HasSubstr("__cluster_dims__(8, 1, 1)"));
  EXPECT_THAT(kernel->source, HasSubstr("forge_cluster_allreduce<8>"));
  EXPECT_THAT(kernel->source, ::testing::Not(HasSubstr("cached0")));
  ExpectCompiles({*kernel}, {"softmax cluster 8 without cache"}, /*expect_no_spills=*/true,
                 {"sm_90"});
}

// A cached cluster is persistent: as many clusters as can be resident take rows from a counter
// until none is left, and copy the next row into shared memory while writing this one's outputs.
TEST(ReductionTest, CachedClustersTakeRowsUntilNoneIsLeft) {
  ReductionFamily family;
  absl::StatusOr<GeneratedKernel> kernel =
      family.Generate(Softmax(kF32, {4096, 393216}), ClusterPoint(8, 1024, 4));
  ASSERT_TRUE(kernel.ok()) << kernel.status();
  // One 192 KiB block per SM: twice the 132 SMs of an H100-class GPU, in clusters of 8, plus one.
  EXPECT_EQ(kernel->launch.grid[0], 34u * 8u);
  const std::string& source = kernel->source;
  EXPECT_THAT(source, HasSubstr("forge_row_slot[0] = atomicAdd(&forge_rows_taken, 1u);"));
  EXPECT_THAT(source, HasSubstr("for (int iteration = 0; row < 4096LL; ++iteration) {"));
  // Chunk j of the next row is copied in once chunk j's outputs are stored.
  const size_t store = source.find("*reinterpret_cast<ForgeVec<float, 4>*>(out0 + ");
  const size_t refill = source.find("if (next_row < 4096LL) forge_fill_row_chunk(next_row, j);");
  ASSERT_NE(store, std::string::npos);
  ASSERT_NE(refill, std::string::npos);
  EXPECT_LT(store, refill);
  // The first pass waits for chunk j's copies alone, the later chunks' still in flight.
  EXPECT_THAT(source, HasSubstr("forge_cp_async_wait_pending(11 - j);"));
  // The last cluster to finish resets the counters for the next launch.
  EXPECT_THAT(source, HasSubstr("atomicAdd(&forge_clusters_done, 1u) == gridDim.x / 8 - 1"));

  // Without the cache, a cluster per row as before.
  SchedulePoint uncached = ClusterPoint(8, 1024, 4);
  uncached.parameters["cache_row"] = 0;
  absl::StatusOr<GeneratedKernel> streaming =
      family.Generate(Softmax(kF32, {4096, 393216}), uncached);
  ASSERT_TRUE(streaming.ok()) << streaming.status();
  EXPECT_EQ(streaming->launch.grid[0], 4096u * 8u);
  EXPECT_THAT(streaming->source, ::testing::Not(HasSubstr("forge_rows_taken")));
}

TEST(ReductionTest, ClusterPointsNeedSm90) {
  ReductionFamily family;
  const KernelTask task = Softmax(kF32, {16, 393216});
  const SchedulePoint point = ClusterPoint(8, 1024, 4);
  ASSERT_TRUE(family.Validate(task, point).ok()) << family.Validate(task, point);
  EXPECT_TRUE(family.SupportsArch(task, point, "sm_90").ok());
  EXPECT_TRUE(family.SupportsArch(task, point, "sm_90a").ok());
  EXPECT_TRUE(family.SupportsArch(task, point, "sm_100").ok());
  const absl::Status sm80 = family.SupportsArch(task, point, "sm_80");
  EXPECT_EQ(sm80.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(sm80.message(), HasSubstr("thread block clusters"));
  EXPECT_EQ(family.SupportsArch(task, point, "gfx90a").code(),
            absl::StatusCode::kInvalidArgument);
  SchedulePoint single = point;
  single.parameters["cluster_blocks"] = 1;
  single.parameters["cache_row"] = 0;
  EXPECT_TRUE(family.SupportsArch(task, single, "sm_80").ok());
  // Compiled for sm_80 anyway, the source says why it cannot be.
  absl::StatusOr<GeneratedKernel> kernel = family.Generate(task, point);
  ASSERT_TRUE(kernel.ok());
  forge::compile::CompileResult result =
      ::forge::codegen::testing::Pool().Submit(::forge::codegen::testing::RequestFor(*kernel, "sm_80")).get();
  EXPECT_FALSE(result.ok());
  EXPECT_THAT(result.log, HasSubstr("needs thread block clusters"));
}

TEST(ReductionTest, ClusterValidateRejectsInvalidPoints) {
  ReductionFamily family;
  const KernelTask task = Softmax(kF32, {16, 393216});
  auto rejects = [&](const SchedulePoint& point, const std::string& why) {
    const absl::Status status = family.Validate(task, point);
    EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << why;
    EXPECT_THAT(status.message(), HasSubstr(why));
  };
  SchedulePoint two_rows = ClusterPoint(8, 512, 4);
  two_rows.parameters["rows_per_block"] = 2;
  rejects(two_rows, "needs rows_per_block 1");
  // 4 blocks would keep 98304 float32 (384 KiB) each.
  rejects(ClusterPoint(4, 1024, 4), "bytes of the row to keep in shared memory");
  // The row-wide constraints hold as before.
  rejects(ClusterPoint(8, 1024, 8, 1), "vector_width 8 of 4-byte elements");
  // A 70001-column row: vector_width 1, each of 8 blocks 8751 columns, the last 8744.
  const KernelTask odd = Softmax(kF32, {4, 70001});
  EXPECT_TRUE(family.Validate(odd, ClusterPoint(8, 256, 1)).ok());
  EXPECT_FALSE(family.Validate(odd, ClusterPoint(8, 256, 2)).ok());
  // cp.async copies the cached row in vectors of at least 4 bytes, along a unit-stride row.
  const KernelTask half = Softmax(kF16, {4, 70001});
  EXPECT_THAT(family.Validate(half, ClusterPoint(8, 256, 1)).message(),
              HasSubstr("of at least 4 bytes per vector"));
  SchedulePoint uncached = ClusterPoint(8, 256, 1);
  uncached.parameters["cache_row"] = 0;
  EXPECT_TRUE(family.Validate(half, uncached).ok());
  const KernelTask transposed = TaskBuilder()
                                    .Input("x", kF32, {4, 100000}, {1, 4})
                                    .Node("softmax", "softmax", "int",
                                          {TensorArg("self", "x"), IntArg("dim", -1)}, kF32,
                                          {4, 100000})
                                    .Output("softmax")
                                    .Build(kReduction);
  EXPECT_THAT(family.Validate(transposed, ClusterPoint(8, 256, 1)).message(),
              HasSubstr("unit stride along the row"));
}

// Every reduction kind in a cluster: moments (layer norm, Welford and two-pass), two-pass
// softmax, log_softmax, sums with a row output, and mixed dtypes, bf16 rows of odd length.
TEST(ReductionTest, ClusterScheduleSpaceSampleCompilesForSm90) {
  ReductionFamily family;
  std::vector<GeneratedKernel> kernels;
  std::vector<std::string> labels;
  for (const KernelTask& task :
       {Softmax(kF32, {4, 393216}), Softmax(kBF16, {3, 128256}, "log_softmax"),
        Softmax(kF16, {2, 100003}), LayerNormGelu(kBF16, 2, 131072),
        RmsNorm(kF32, 2, 262144)}) {
    absl::StatusOr<std::vector<TemplateSpace>> space = family.ScheduleSpace(task);
    ASSERT_TRUE(space.ok()) << space.status();
    std::vector<SchedulePoint> valid;
    for (const SchedulePoint& point : EnumeratePoints(space->front())) {
      if (point.parameters.contains("cluster_blocks") &&
          point.parameters.at("cluster_blocks") > 1 && family.Validate(task, point).ok()) {
        valid.push_back(point);
      }
    }
    ASSERT_GE(valid.size(), 6u) << task.DebugString();
    for (size_t i = 0; i < 6; ++i) {
      const SchedulePoint& point = valid[i * valid.size() / 6];
      absl::StatusOr<GeneratedKernel> kernel = family.Generate(task, point);
      ASSERT_TRUE(kernel.ok()) << kernel.status();
      kernels.push_back(*kernel);
      std::string label = absl::StrCat(task.group().nodes(0).op(), " ");
      for (const auto& [name, value] : point.parameters) absl::StrAppend(&label, name, "=", value, " ");
      labels.push_back(label);
    }
  }
  ExpectCompiles(kernels, labels, /*expect_no_spills=*/true, {"sm_90"});
}

}  // namespace
}  // namespace forge::codegen
