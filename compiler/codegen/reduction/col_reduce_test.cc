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

using ::forge::codegen::testing::ChannelRmsNorm;
using ::forge::codegen::testing::ColumnPoint;
using ::forge::codegen::testing::ExpectCompiles;
using ::forge::codegen::testing::SoftmaxDim;
using ::forge::codegen::testing::Statistic;
using ::forge::codegen::testing::kBF16;
using ::forge::codegen::testing::kF32;
using ::forge::v1::KernelTask;
using ::testing::HasSubstr;

TEST(ReductionTest, ColumnScheduleSpaceSampleCompiles) {
  ReductionFamily family;
  std::vector<GeneratedKernel> kernels;
  std::vector<std::string> labels;
  for (const KernelTask& task : {ChannelRmsNorm(kBF16, {4, 64, 16, 16}),
                                 SoftmaxDim(kF32, {8, 1000, 33}, 1),
                                 Statistic("var", "correction", {16, 256, 49}, 1, true)}) {
    absl::StatusOr<std::vector<TemplateSpace>> space = family.ScheduleSpace(task);
    ASSERT_TRUE(space.ok()) << space.status();
    ASSERT_EQ(space->front().template_name, "col_reduce");
    std::vector<SchedulePoint> valid;
    for (const SchedulePoint& point : EnumeratePoints(space->front())) {
      if (family.Validate(task, point).ok()) valid.push_back(point);
    }
    // An evenly spread sample of 20 valid points per task.
    ASSERT_GE(valid.size(), 20u);
    for (size_t i = 0; i < 20; ++i) {
      const SchedulePoint& point = valid[i * valid.size() / 20];
      absl::StatusOr<GeneratedKernel> kernel = family.Generate(task, point);
      ASSERT_TRUE(kernel.ok()) << kernel.status();
      kernels.push_back(*kernel);
      std::string label = "col_reduce ";
      for (const auto& [name, value] : point.parameters) absl::StrAppend(&label, name, "=", value, " ");
      labels.push_back(label);
    }
  }
  ExpectCompiles(kernels, labels, /*expect_no_spills=*/false);
}


TEST(ReductionTest, ColumnTemplateLaunchAndLayout) {
  ReductionFamily family;
  const KernelTask task = ChannelRmsNorm(kF32, {3, 64, 5, 7});  // 105 rows of 64
  absl::StatusOr<GeneratedKernel> kernel = family.Generate(task, ColumnPoint(128, 4, 1));
  ASSERT_TRUE(kernel.ok()) << kernel.status();
  EXPECT_EQ(kernel->template_name, "col_reduce");
  EXPECT_EQ(kernel->launch.block[0], 128u);
  EXPECT_EQ(kernel->launch.grid[0], 4u);  // ceil(105 / 32)
  EXPECT_THAT(kernel->source, HasSubstr("const int row_in_block = threadIdx.x % 32;"));
  EXPECT_THAT(kernel->source, HasSubstr("forge_col_allreduce<4, 32>"));
  // The default point of the anchor shape keeps the 64 channels in registers, one thread a row.
  const KernelTask anchor = ChannelRmsNorm(kF32, {112, 64, 512, 512});
  const SchedulePoint point = DefaultPoint(family.ScheduleSpace(anchor)->front());
  EXPECT_EQ(point.parameters.at("reduce_threads"), 1);
  EXPECT_EQ(point.parameters.at("cache_row"), 1);
  // Few rows: the default splits the reduced dim to fill the GPU.
  const SchedulePoint few = DefaultPoint(family.ScheduleSpace(SoftmaxDim(kF32, {4, 100000, 2}, 1))->front());
  EXPECT_GT(few.parameters.at("reduce_threads"), 1);
}

TEST(ReductionTest, ColumnValidateRejectsInvalidPoints) {
  ReductionFamily family;
  const KernelTask task = Statistic("sum", "dim_IntList", {6, 100, 17}, 1, false);  // 102 rows of 100
  EXPECT_TRUE(family.Validate(task, ColumnPoint(64, 8, 0)).ok());
  EXPECT_EQ(family.Validate(task, ColumnPoint(512, 1, 0)).message(),
            "threads_per_block 512 / reduce_threads 1 = 512 rows per block leaves half the block "
            "idle for 102 rows");
  EXPECT_EQ(family.Validate(Statistic("sum", "dim_IntList", {6, 10, 17}, 1, false),
                            ColumnPoint(64, 32, 0)).message(),
            "reduce_threads 32 leaves half of them idle for 10 reduced elements");
  EXPECT_EQ(family.Validate(task, ColumnPoint(64, 1, 1)).message(),
            "cache_row keeps 100 elements of each of 1 row-sized inputs per thread; more than 64 "
            "registers");
  EXPECT_THAT(family.Validate(task, SchedulePoint{"row_reduce", {}}).message(),
              HasSubstr("template 'row_reduce' is not 'col_reduce'"));
}

TEST(ReductionTest, ColumnSourceIsDeterministicAndVarCorrectionShows) {
  ReductionFamily family;
  const KernelTask task = Statistic("var", "correction", {16, 256, 49}, 1, true);
  const SchedulePoint point = DefaultPoint(family.ScheduleSpace(task)->front());
  absl::StatusOr<GeneratedKernel> first = family.Generate(task, point);
  absl::StatusOr<GeneratedKernel> second =
      family.Generate(Statistic("var", "correction", {16, 256, 49}, 1, true), point);
  ASSERT_TRUE(first.ok() && second.ok());
  EXPECT_EQ(first->source, second->source);
  EXPECT_THAT(first->source, HasSubstr("acc0_0.m2 / ((float)255)"));
  absl::StatusOr<GeneratedKernel> biased =
      family.Generate(Statistic("var", "correction", {16, 256, 49}, 1, true, kF32, 0), point);
  ASSERT_TRUE(biased.ok());
  EXPECT_THAT(biased->source, HasSubstr("acc0_0.m2 / ((float)256)"));
}

}  // namespace
}  // namespace forge::codegen
