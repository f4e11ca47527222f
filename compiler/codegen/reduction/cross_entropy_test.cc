#include "compiler/codegen/reduction/reduction.h"

#include <map>
#include <string>
#include <vector>

#include "compiler/codegen/reduction/reduction_test_util.h"
#include "compiler/codegen/testing/codegen_test_util.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace forge::codegen {
namespace {

using ::forge::codegen::testing::CrossEntropy;
using ::forge::codegen::testing::CrossEntropyPoint;
using ::forge::codegen::testing::ExpectCompiles;
using ::forge::codegen::testing::FloatArg;
using ::forge::codegen::testing::IntArg;
using ::forge::codegen::testing::Label;
using ::forge::codegen::testing::OptionalTensorArg;
using ::forge::codegen::testing::Point;
using ::forge::codegen::testing::TaskBuilder;
using ::forge::codegen::testing::TensorArg;
using ::forge::codegen::testing::kBF16;
using ::forge::codegen::testing::kF16;
using ::forge::codegen::testing::kF32;
using ::forge::codegen::testing::kF64;
using ::forge::codegen::testing::kReduction;
using ::forge::v1::KernelTask;
using ::testing::HasSubstr;

TEST(CrossEntropyTest, DefaultSchedulesCompileWithoutSpills) {
  ReductionFamily family;
  const std::vector<std::pair<std::string, KernelTask>> cases = {
      {"anchor_f32_32768x4096", CrossEntropy(kF32, 32768, 4096)},
      {"bf16_odd_1001", CrossEntropy(kBF16, 77, 1001)},
      {"f16_sum", CrossEntropy(kF16, 64, 512, {IntArg("reduction", 2)})},
      {"f64_ignore_index", CrossEntropy(kF64, 9, 33, {IntArg("ignore_index", 3)})},
      {"one_class", CrossEntropy(kF32, 5, 1)},
      {"transposed_logits", CrossEntropy(kF32, 100, 7, {}, {1, 100})},
      {"vocabulary_bf16", CrossEntropy(kBF16, 16, 50257)},
      {"label_smoothing_bf16_anchor", CrossEntropy(kBF16, 8192, 32000,
                                                   {FloatArg("label_smoothing", 0.1)})},
      {"none_bf16", CrossEntropy(kBF16, 77, 1001, {IntArg("reduction", 0)})},
      {"weighted_f32_ignore", CrossEntropy(kF32, 100, 33,
                                           {OptionalTensorArg("weight", "w"),
                                            IntArg("ignore_index", 1)})},
      {"nll_loss_nd_f32", CrossEntropy(kF32, 100, 33, {}, {}, "nll_loss_nd")},
      {"nll_loss_nd_none_weighted_bf16",
       CrossEntropy(kBF16, 77, 1001, {OptionalTensorArg("weight", "w"), IntArg("reduction", 0)},
                    {}, "nll_loss_nd")},
      {"none_smoothed_f16",
       CrossEntropy(kF16, 64, 512, {IntArg("reduction", 0), FloatArg("label_smoothing", 0.2)})},
      {"label_smoothing_f32_ignore_sum",
       CrossEntropy(kF32, 33, 1001,
                    {IntArg("reduction", 2), IntArg("ignore_index", 0),
                     FloatArg("label_smoothing", 0.25)})}};
  std::vector<GeneratedKernel> kernels;
  std::vector<std::string> labels;
  for (const auto& [label, task] : cases) {
    ASSERT_TRUE(family.Applies(task).ok()) << label << ": " << family.Applies(task);
    absl::StatusOr<std::vector<TemplateSpace>> space = family.ScheduleSpace(task);
    ASSERT_TRUE(space.ok()) << label << ": " << space.status();
    ASSERT_EQ(space->front().template_name, "cross_entropy");
    const SchedulePoint point = DefaultPoint(space->front());
    ASSERT_TRUE(family.Validate(task, point).ok()) << label << ": " << family.Validate(task, point);
    absl::StatusOr<GeneratedKernel> kernel = family.Generate(task, point);
    ASSERT_TRUE(kernel.ok()) << label << ": " << kernel.status();
    kernels.push_back(*kernel);
    labels.push_back(Label(label, point));
  }
  ExpectCompiles(kernels, labels, /*expect_no_spills=*/true);
}

TEST(CrossEntropyTest, ScheduleSpaceSampleCompiles) {
  ReductionFamily family;
  std::vector<GeneratedKernel> kernels;
  std::vector<std::string> labels;
  for (const KernelTask& task :
       {CrossEntropy(kF32, 64, 2048), CrossEntropy(kBF16, 33, 1000, {IntArg("reduction", 2)})}) {
    absl::StatusOr<std::vector<TemplateSpace>> space = family.ScheduleSpace(task);
    ASSERT_TRUE(space.ok()) << space.status();
    std::vector<SchedulePoint> valid;
    for (const SchedulePoint& point : EnumeratePoints(space->front())) {
      if (family.Validate(task, point).ok()) valid.push_back(point);
    }
    // An evenly spread sample of 12 valid points per task.
    ASSERT_GE(valid.size(), 12u);
    for (size_t i = 0; i < 12; ++i) {
      const SchedulePoint& point = valid[i * valid.size() / 12];
      absl::StatusOr<GeneratedKernel> kernel = family.Generate(task, point);
      ASSERT_TRUE(kernel.ok()) << kernel.status();
      kernels.push_back(*kernel);
      labels.push_back(Label("cross_entropy", point));
    }
  }
  ExpectCompiles(kernels, labels, /*expect_no_spills=*/false);
}

TEST(CrossEntropyTest, LaunchAndSource) {
  ReductionFamily family;
  const KernelTask anchor = CrossEntropy(kF32, 32768, 4096);
  const SchedulePoint point = DefaultPoint(family.ScheduleSpace(anchor)->front());
  EXPECT_EQ(point.parameters, (std::map<std::string, int64_t>{
                                  {"threads_per_row", 32}, {"rows_per_block", 8},
                                  {"vector_width", 4}}));
  absl::StatusOr<GeneratedKernel> kernel = family.Generate(anchor, point);
  ASSERT_TRUE(kernel.ok()) << kernel.status();
  EXPECT_EQ(kernel->kernel_name, "forge_cross_entropy");
  EXPECT_EQ(kernel->template_name, "cross_entropy");
  EXPECT_EQ(kernel->launch.block[0], 256u);
  EXPECT_EQ(kernel->launch.grid[0], 4096u);  // capped: blocks stride over the 32768 rows
  EXPECT_THAT(kernel->source, HasSubstr("constexpr long long kIgnoreIndex = -100LL;"));
  EXPECT_THAT(kernel->source, HasSubstr("constexpr bool kMean = true;"));
  // Few rows: one block per row group.
  absl::StatusOr<GeneratedKernel> small =
      family.Generate(CrossEntropy(kF32, 21, 64, {IntArg("reduction", 2), IntArg("ignore_index", 0)}),
                      CrossEntropyPoint(32, 4, 2));
  ASSERT_TRUE(small.ok()) << small.status();
  EXPECT_EQ(small->launch.grid[0], 6u);  // ceil(21 / 4)
  EXPECT_EQ(small->launch.block[0], 128u);
  EXPECT_THAT(small->source, HasSubstr("constexpr bool kMean = false;"));
  EXPECT_THAT(small->source, HasSubstr("constexpr long long kIgnoreIndex = 0LL;"));
  EXPECT_THAT(small->source, HasSubstr("constexpr int kGridBlocks = 6;"));
}

TEST(CrossEntropyTest, SourceIsDeterministicAndSumsInBlockOrder) {
  ReductionFamily family;
  const SchedulePoint point = CrossEntropyPoint(128, 2, 8);
  absl::StatusOr<GeneratedKernel> first = family.Generate(CrossEntropy(kBF16, 300, 1024), point);
  absl::StatusOr<GeneratedKernel> second = family.Generate(CrossEntropy(kBF16, 300, 1024), point);
  ASSERT_TRUE(first.ok() && second.ok());
  EXPECT_EQ(first->source, second->source);
  EXPECT_EQ(first->generator_version, "reduction-9");
  // The one atomic is the integer counter of finished blocks; partials are added in a fixed order.
  const std::string& source = first->source;
  size_t atomics = 0;
  for (size_t at = source.find("atomic"); at != std::string::npos; at = source.find("atomic", at + 1)) {
    ++atomics;
  }
  EXPECT_EQ(atomics, 1u);
  EXPECT_THAT(source, HasSubstr("atomicAdd(&forge_ce_blocks_done, 1u)"));
  EXPECT_THAT(source, HasSubstr("for (int b = threadIdx.x; b < kGridBlocks; b += kBlockThreads)"));
}

TEST(CrossEntropyTest, ValidateRejectsInvalidPoints) {
  ReductionFamily family;
  const KernelTask task = CrossEntropy(kF32, 64, 1001);
  EXPECT_TRUE(family.Validate(task, CrossEntropyPoint(128, 1, 1)).ok());
  EXPECT_EQ(family.Validate(task, CrossEntropyPoint(128, 1, 4)).message(),
            "vector_width 4 does not divide the row length 1001");
  const KernelTask wide = CrossEntropy(kF32, 64, 4096);
  EXPECT_EQ(family.Validate(wide, CrossEntropyPoint(1024, 2, 4)).message(),
            "threads_per_row 1024 x rows_per_block 2 exceeds 1024 threads per block");
  EXPECT_EQ(family.Validate(wide, CrossEntropyPoint(128, 1, 8)).message(),
            "vector_width 8 of 4-byte elements exceeds a 16-byte vector access");
  EXPECT_TRUE(family.Validate(CrossEntropy(kBF16, 64, 4096), CrossEntropyPoint(128, 1, 8)).ok());
  EXPECT_EQ(family.Validate(CrossEntropy(kF32, 64, 100), CrossEntropyPoint(512, 1, 1)).message(),
            "threads_per_row 512 leaves half the row's threads idle for 100 columns of "
            "vector_width 1");
  EXPECT_EQ(family.Validate(CrossEntropy(kF32, 2, 4096), CrossEntropyPoint(128, 8, 4)).message(),
            "rows_per_block 8 leaves half the block idle for 2 rows");
  EXPECT_EQ(family.Validate(CrossEntropy(kF32, 100, 8, {}, {1, 100}), CrossEntropyPoint(32, 1, 2))
                .message(),
            "vector_width 2 needs logits rows of unit stride that start at multiples of 2 elements");
  EXPECT_THAT(family.Validate(wide, Point(128, 1, 4, 0, 1)).message(),
              HasSubstr("template 'row_reduce' is not 'cross_entropy'"));
}

// Label smoothing e adds the row's sum of logits to the one pass: lse - (1 - e) x[target] -
// e/C sum_c x_c per counted row. Without it the kernel has no such sum.
TEST(CrossEntropyTest, LabelSmoothingSumsTheRowInTheSamePass) {
  ReductionFamily family;
  absl::StatusOr<GeneratedKernel> smoothed = family.Generate(
      CrossEntropy(kBF16, 64, 1000, {FloatArg("label_smoothing", 0.1)}), CrossEntropyPoint(32, 4, 8));
  ASSERT_TRUE(smoothed.ok()) << smoothed.status();
  EXPECT_THAT(smoothed->source, HasSubstr("label_smoothing 0.10000000000000001)"));
  EXPECT_THAT(smoothed->source, HasSubstr("constexpr bool kSmoothed = true;"));
  EXPECT_THAT(smoothed->source, HasSubstr("constexpr double kLabelSmoothing = 0.10000000000000001;"));
  absl::StatusOr<GeneratedKernel> plain =
      family.Generate(CrossEntropy(kBF16, 64, 1000), CrossEntropyPoint(32, 4, 8));
  ASSERT_TRUE(plain.ok()) << plain.status();
  EXPECT_THAT(plain->source, HasSubstr("constexpr bool kSmoothed = false;"));
}

// Class weights scale a row's loss by its target's and the mean divides by their sum;
// reduction none writes each row's loss and stops there; nll_loss reads log-probabilities.
TEST(CrossEntropyTest, ClassWeightsReductionNoneAndNllLoss) {
  ReductionFamily family;
  absl::StatusOr<GeneratedKernel> weighted = family.Generate(
      CrossEntropy(kF32, 64, 100, {OptionalTensorArg("weight", "w")}), CrossEntropyPoint(32, 4, 4));
  ASSERT_TRUE(weighted.ok()) << weighted.status();
  EXPECT_THAT(weighted->source, HasSubstr("cross-entropy (mean, class weights, ignore_index -100)"));
  EXPECT_THAT(weighted->source, HasSubstr("constexpr bool kWeighted = true;"));
  EXPECT_THAT(weighted->source, HasSubstr("const ForgeCeLogit* const weight = in2;"));
  absl::StatusOr<GeneratedKernel> none = family.Generate(
      CrossEntropy(kBF16, 64, 100, {IntArg("reduction", 0)}), CrossEntropyPoint(32, 4, 4));
  ASSERT_TRUE(none.ok()) << none.status();
  EXPECT_THAT(none->source, HasSubstr("constexpr bool kNone = true;"));
  EXPECT_THAT(none->source, HasSubstr("const ForgeCeLogit* const weight = nullptr;"));
  // nll_loss on log-probabilities: the loss is -x[target], no pass over the row.
  absl::StatusOr<GeneratedKernel> nll = family.Generate(
      CrossEntropy(kF32, 64, 100, {}, {}, "nll_loss_nd"), CrossEntropyPoint(32, 4, 4));
  ASSERT_TRUE(nll.ok()) << nll.status();
  EXPECT_THAT(nll->source, HasSubstr(": nll_loss (mean, ignore_index -100)"));
  EXPECT_THAT(nll->source, HasSubstr("constexpr bool kNll = true;"));
  // reduction none with a 0-d output (or mean with a per-row one) is malformed.
  KernelTask scalar_none = CrossEntropy(kF32, 8, 10, {IntArg("reduction", 0)});
  scalar_none.mutable_outputs(0)->clear_shape();
  scalar_none.mutable_outputs(0)->clear_strides();
  EXPECT_THAT(family.Applies(scalar_none).message(), HasSubstr("of shape [8] (reduction none)"));
}

TEST(CrossEntropyTest, RejectsUnsupportedVariants) {
  ReductionFamily family;
  auto rejection = [&](const KernelTask& task) {
    const absl::Status status = family.Applies(task);
    EXPECT_EQ(status.code(), absl::StatusCode::kUnimplemented) << status;
    return std::string(status.message());
  };
  const std::string node = "cross_entropy: aten::cross_entropy_loss.default (node cross_entropy_loss)";
  EXPECT_EQ(family.Applies(CrossEntropy(kF32, 8, 10, {IntArg("reduction", 3)})).message(),
            node + " has reduction 3; ATen's are none (0), mean (1) and sum (2)");
  EXPECT_EQ(family.Applies(CrossEntropy(kF32, 8, 10, {FloatArg("label_smoothing", 1.5)})).message(),
            node + " has label_smoothing 1.5; it must be in [0, 1]");
  EXPECT_EQ(rejection(CrossEntropy(kF32, 8, 10,
                                   {OptionalTensorArg("weight", "w"),
                                    FloatArg("label_smoothing", 0.1)})),
            node + " has class weights and label smoothing; the template takes either alone");
  // Class-probability targets: float, of the logits' shape.
  EXPECT_EQ(rejection(TaskBuilder()
                          .Input("x", kF32, {8, 10})
                          .Input("t", kF32, {8, 10})
                          .Node("cross_entropy_loss", "cross_entropy_loss", "default",
                                {TensorArg("self", "x"), TensorArg("target", "t")}, kF32, {})
                          .Output("cross_entropy_loss")
                          .Build(kReduction)),
            node + " has a target that is not int64 of shape [8]; only class-index targets are "
                   "supported");
  EXPECT_EQ(rejection(TaskBuilder()
                          .Input("x", kF32, {8, 10, 3})
                          .Input("t", forge::v1::DTYPE_INT64, {8, 3})
                          .Node("cross_entropy_loss", "cross_entropy_loss", "default",
                                {TensorArg("self", "x"), TensorArg("target", "t")}, kF32, {})
                          .Output("cross_entropy_loss")
                          .Build(kReduction)),
            node + " has logits of rank 3; only (N, C) logits are supported");
  EXPECT_EQ(rejection(TaskBuilder()
                          .Input("x", kF32, {8, 10})
                          .Input("t", forge::v1::DTYPE_INT64, {8})
                          .Node("cross_entropy_loss", "cross_entropy_loss", "default",
                                {TensorArg("self", "x"), TensorArg("target", "t")}, kF32, {})
                          .Node("scaled", "mul", "Tensor",
                                {TensorArg("self", "cross_entropy_loss"), FloatArg("other", 2.0)},
                                kF32, {})
                          .Output("scaled")
                          .Build(kReduction)),
            node + " shares its task with 1 other node(s); the cross_entropy template computes "
                   "the loss alone");
}

}  // namespace
}  // namespace forge::codegen
