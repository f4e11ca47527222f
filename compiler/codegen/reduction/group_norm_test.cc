// Group norm in the reduction family: layer norm over each (sample, group) row of the task
// rewritten to (N, G, C/G * spatial), the affine read per channel, the epilogue fused; instance
// norm as a group per channel; native_group_norm's mean and rstd as per-row outputs. The kernels
// compile with NVRTC for sm_80 and sm_90 (the default points of every case in Cases(), in
// reduction_test.cc; the anchor's cluster point here).
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "compiler/codegen/reduction/analysis.h"
#include "compiler/codegen/reduction/reduction.h"
#include "compiler/codegen/reduction/reduction_test_util.h"
#include "compiler/codegen/testing/codegen_test_util.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace forge::codegen {
namespace {

using ::forge::codegen::testing::ExpectCompiles;
using ::forge::codegen::testing::GroupNormSilu;
using ::forge::codegen::testing::InstanceNorm;
using ::forge::codegen::testing::IntArg;
using ::forge::codegen::testing::IntsArg;
using ::forge::codegen::testing::kBF16;
using ::forge::codegen::testing::kF16;
using ::forge::codegen::testing::kF32;
using ::forge::codegen::testing::NativeGroupNormResidual;
using ::forge::codegen::testing::NoneArg;
using ::forge::codegen::testing::OptionalTensorArg;
using ::forge::codegen::testing::Point;
using ::forge::codegen::testing::TaskBuilder;
using ::forge::codegen::testing::TensorArg;
using ::forge::codegen::testing::kReduction;
using ::forge::v1::KernelTask;
using ::testing::HasSubstr;

// A row_reduce point of a task with moments and no softmax.
SchedulePoint NormPoint(int64_t threads, int64_t rows, int64_t width, int64_t cache,
                        int64_t welford) {
  SchedulePoint point = Point(threads, rows, width, cache, 0);
  point.parameters.erase("online_softmax");
  point.parameters["welford"] = welford;
  return point;
}

TEST(GroupNormTest, EachSampleAndGroupIsARow) {
  absl::StatusOr<reduction::ReductionTask> analysis =
      reduction::Analyze(GroupNormSilu(kF16, {2, 320, 64, 64}, 32));
  ASSERT_TRUE(analysis.ok()) << analysis.status();
  EXPECT_EQ(analysis->row_shape, (std::vector<int64_t>{2, 32, 40960}));
  EXPECT_EQ(analysis->rows, 64);
  EXPECT_EQ(analysis->columns, 40960);
  ASSERT_EQ(analysis->reductions.size(), 1u);
  EXPECT_EQ(analysis->reductions[0].kind, reduction::ReductionKind::kLayerNorm);
  EXPECT_EQ(analysis->reductions[0].channels_per_group, 10);
  EXPECT_EQ(analysis->reductions[0].spatial, 4096);
  ASSERT_NE(analysis->flattened, nullptr);
  EXPECT_EQ(analysis->view.Shape("silu"), (std::vector<int64_t>{2, 32, 40960}));
  EXPECT_EQ(analysis->view.Shape("w"), (std::vector<int64_t>{320}));

  // (N, C): the linear + group norm of the suite, a row per (sample, group) of C/G channels.
  absl::StatusOr<reduction::ReductionTask> two_d =
      reduction::Analyze(GroupNormSilu(kBF16, {8192, 4096}, 32));
  ASSERT_TRUE(two_d.ok()) << two_d.status();
  EXPECT_EQ(two_d->rows, 8192 * 32);
  EXPECT_EQ(two_d->columns, 128);
  EXPECT_EQ(two_d->reductions[0].spatial, 1);

  // Instance norm: a group per channel.
  absl::StatusOr<reduction::ReductionTask> instance =
      reduction::Analyze(InstanceNorm(kF32, {2, 5, 9, 11}));
  ASSERT_TRUE(instance.ok()) << instance.status();
  EXPECT_EQ(instance->rows, 10);
  EXPECT_EQ(instance->columns, 99);
  EXPECT_EQ(instance->reductions[0].channels_per_group, 1);
}

TEST(GroupNormTest, TheKernelReadsTheAffinePerChannelAndFusesTheEpilogue) {
  ReductionFamily family;
  const KernelTask task = GroupNormSilu(kF16, {2, 320, 8, 8}, 32);
  ASSERT_TRUE(family.Applies(task).ok()) << family.Applies(task);
  absl::StatusOr<GeneratedKernel> kernel = family.Generate(task, NormPoint(128, 1, 8, 1, 1));
  ASSERT_TRUE(kernel.ok()) << kernel.status();
  // Column c of group o1 normalizes channel o1 * 10 + c / 64; a chunk of 8 lies in one channel,
  // whose weight and bias it loads once.
  EXPECT_THAT(kernel->source, HasSubstr("const int e_1 = (o1 * 10 + c0 / 64);"));
  EXPECT_THAT(kernel->source, HasSubstr("forge_half_to_float(in1[e_1])"));
  EXPECT_THAT(kernel->source, HasSubstr("forge_half_to_float(in2[e_1])"));
  EXPECT_THAT(kernel->source, ::testing::Not(HasSubstr("(c0 + 7) / 64")));
  // 5 x 7 spatial elements: a chunk of 4 may straddle two channels, each lane reads its own.
  absl::StatusOr<GeneratedKernel> odd =
      family.Generate(GroupNormSilu(kF16, {2, 32, 5, 7}, 8), NormPoint(32, 1, 4, 0, 1));
  ASSERT_TRUE(odd.ok()) << odd.status();
  EXPECT_THAT(odd->source, HasSubstr("(o1 * 4 + (c0 + 3) / 35)"));
  EXPECT_THAT(kernel->source, HasSubstr("forge_welford_add("));
  EXPECT_THAT(kernel->source, HasSubstr("64 rows of 640"));
  // One kernel: SiLU applied to the normalized element before the store.
  EXPECT_EQ(kernel->launch.grid[0], 64u);
}

TEST(GroupNormTest, NativeGroupNormWritesItsMeanAndRstdPerRow) {
  ReductionFamily family;
  const KernelTask task = NativeGroupNormResidual(kF16, {3, 8, 5, 5}, 2);
  for (int welford : {0, 1}) {
    const SchedulePoint point = NormPoint(32, 2, 4, 0, welford);
    absl::StatusOr<GeneratedKernel> kernel = family.Generate(task, point);
    ASSERT_TRUE(kernel.ok()) << kernel.status();
    EXPECT_THAT(kernel->source, HasSubstr("(float)(row0_mean)"));
    EXPECT_THAT(kernel->source, HasSubstr("(float)(row0_rstd)"));
    EXPECT_THAT(kernel->source, HasSubstr("out1[")) << "mean";
    EXPECT_THAT(kernel->source, HasSubstr("out2[")) << "rstd";
  }
}

// The GroupNorm(32, 320) + SiLU anchor with two samples has 64 rows of 40960: a block a row would
// leave half the SMs idle, so the default point splits each row over a cluster (in shared
// memory, read once) until the blocks give two per SM.
TEST(GroupNormTest, FewLongRowsAreSplitOverAClusterByDefault) {
  ReductionFamily family;
  const KernelTask task = GroupNormSilu(kF16, {2, 320, 64, 64}, 32);
  absl::StatusOr<std::vector<TemplateSpace>> space = family.ScheduleSpace(task);
  ASSERT_TRUE(space.ok()) << space.status();
  const SchedulePoint point = DefaultPoint(space->front());
  EXPECT_EQ(point.parameters.at("cluster_blocks"), 8);
  EXPECT_EQ(point.parameters.at("cache_row"), 1);
  EXPECT_EQ(point.parameters.at("vector_width"), 8);
  absl::StatusOr<GeneratedKernel> kernel = family.Generate(task, point);
  ASSERT_TRUE(kernel.ok()) << kernel.status();
  EXPECT_EQ(kernel->launch.grid[0], 64u * 8u);
  EXPECT_THAT(kernel->source, HasSubstr("__cluster_dims__(8, 1, 1)"));
  EXPECT_FALSE(family.SupportsArch(task, point, "sm_80").ok());
  ExpectCompiles({*kernel}, {"group_norm_silu_anchor"}, /*expect_no_spills=*/true, {"sm_90"});

}

// 16 samples: 512 rows of 40960, enough for a block a row to fill the GPU (the default, as
// before: 1024 threads, the row in registers), but one such block per SM in 3.9 waves. Clusters
// of 2 and 4 smaller blocks, the row in their shared memory, are offered beside it for the search
// (and compile for sm_90 without spills); from 4 x 132 rows on, only a block a row.
TEST(GroupNormTest, RowsUpToFourPerSmAreOfferedClusters) {
  ReductionFamily family;
  const KernelTask task = GroupNormSilu(kF16, {16, 320, 64, 64}, 32);
  absl::StatusOr<std::vector<TemplateSpace>> space = family.ScheduleSpace(task);
  ASSERT_TRUE(space.ok()) << space.status();
  EXPECT_EQ(DefaultPoint(space->front()).parameters,
            (std::map<std::string, int64_t>{{"cache_row", 1},
                                            {"cluster_blocks", 1},
                                            {"max_registers", 0},
                                            {"rows_per_block", 1},
                                            {"threads_per_row", 1024},
                                            {"vector_width", 8},
                                            {"welford", 1}}));
  std::vector<GeneratedKernel> kernels;
  std::vector<std::string> labels;
  for (const auto& [blocks, threads] : std::vector<std::pair<int64_t, int64_t>>{
           {2, 512}, {2, 1024}, {4, 256}, {4, 512}}) {
    SchedulePoint point = NormPoint(threads, 1, 8, 1, 1);
    point.parameters["cluster_blocks"] = blocks;
    ASSERT_TRUE(family.Validate(task, point).ok()) << family.Validate(task, point);
    absl::StatusOr<GeneratedKernel> kernel = family.Generate(task, point);
    ASSERT_TRUE(kernel.ok()) << kernel.status();
    EXPECT_THAT(kernel->source, HasSubstr(absl::StrCat("__cluster_dims__(", blocks, ", 1, 1)")));
    kernels.push_back(*kernel);
    labels.push_back(absl::StrCat("group norm 512 rows, cluster ", blocks, " x ", threads));
  }
  ExpectCompiles(kernels, labels, /*expect_no_spills=*/true, {"sm_90"});

  absl::StatusOr<std::vector<TemplateSpace>> many =
      family.ScheduleSpace(GroupNormSilu(kF16, {17, 320, 64, 64}, 32));  // 544 rows
  ASSERT_TRUE(many.ok());
  for (const ScheduleParameter& parameter : many->front().parameters) {
    EXPECT_NE(parameter.name, "cluster_blocks");
  }
}

TEST(GroupNormTest, WhatCannotBeRewrittenIsNamed) {
  ReductionFamily family;
  // Channels-last x is not contiguous across (C, H, W).
  KernelTask channels_last = GroupNormSilu(kF32, {2, 8, 4, 4}, 2);
  const std::vector<int64_t> nhwc_strides = {128, 1, 32, 8};
  channels_last.mutable_inputs(0)->mutable_strides()->Assign(nhwc_strides.begin(),
                                                             nhwc_strides.end());
  EXPECT_THAT(family.Applies(channels_last).message(), HasSubstr("neither contiguous"));

  KernelTask uneven = GroupNormSilu(kF32, {2, 10, 4, 4}, 4);
  EXPECT_EQ(family.Applies(uneven).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(family.Applies(uneven).message(), HasSubstr("4 groups do not divide 10 channels"));

  const KernelTask with_view =
      TaskBuilder()
          .Input("x", kF32, {2, 8, 4, 4})
          .Node("group_norm", "group_norm", "default",
                {TensorArg("input", "x"), IntArg("num_groups", 2)}, kF32, {2, 8, 4, 4})
          .Node("view", "view", "default",
                {TensorArg("self", "group_norm"), IntsArg("size", {2, 8, 16})}, kF32, {2, 8, 16})
          .Output("view")
          .Build(kReduction);
  EXPECT_THAT(family.Applies(with_view).message(), HasSubstr("elementwise ops only"));

  const KernelTask running =
      TaskBuilder()
          .Input("x", kF32, {2, 8, 4, 4})
          .Input("mean", kF32, {8})
          .Input("var", kF32, {8})
          .Node("instance_norm", "instance_norm", "default",
                {TensorArg("input", "x"), NoneArg("weight"), NoneArg("bias"),
                 OptionalTensorArg("running_mean", "mean"), OptionalTensorArg("running_var", "var"),
                 testing::BoolArg("use_input_stats", false)},
                kF32, {2, 8, 4, 4})
          .Output("instance_norm")
          .Build(kReduction);
  EXPECT_THAT(family.Applies(running).message(), HasSubstr("running statistics"));
}

}  // namespace
}  // namespace forge::codegen
