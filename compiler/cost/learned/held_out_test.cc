// The held-out evaluation: whole tasks held back, the rest trained on, the held-back rows scored
// as the predictor would predict them, per family and overall, next to the analytic model.
#include "compiler/cost/learned/held_out.h"

#include <set>
#include <string>

#include "compiler/cost/learned/testing/synthetic_dataset.h"
#include "gtest/gtest.h"

namespace forge::cost {
namespace {

TEST(HeldOutTest, HoldsBackWholeTasksAndScoresOnlyThem) {
  const GpuArch gpu = *FindGpu("H200");
  const std::vector<TrainingRow> rows = testing::RowsOf(*testing::SyntheticPointwise(gpu, 10));
  const std::optional<forge::v1::CostModelEvaluation> evaluation =
      *EvaluateHeldOut(rows, TrainOptions{});
  ASSERT_TRUE(evaluation.has_value());
  // Tasks "synthetic-0".."synthetic-9" sorted: the 5th and 10th are held back.
  int64_t held_rows = 0;
  for (const TrainingRow& row : rows) {
    if (row.group == "synthetic-3" || row.group == "synthetic-8") ++held_rows;
  }
  EXPECT_EQ(evaluation->test_rows(), held_rows);
  EXPECT_EQ(evaluation->train_rows(), static_cast<int64_t>(rows.size()) - held_rows);
  ASSERT_EQ(evaluation->errors_size(), 2);
  const forge::v1::CostModelError& pointwise = evaluation->errors(0);
  EXPECT_EQ(pointwise.family(), forge::v1::KERNEL_FAMILY_POINTWISE);
  EXPECT_EQ(pointwise.tasks(), 2);
  EXPECT_EQ(pointwise.rows(), held_rows);
  EXPECT_EQ(pointwise.source(), "learned");
  // The synthetic rule hides ~30% from the analytic model; the learned model finds it on tasks it
  // never saw.
  EXPECT_LT(pointwise.median_percent_error(), pointwise.analytic_median_percent_error());
  EXPECT_TRUE(pointwise.has_spearman());
  const forge::v1::CostModelError& all = evaluation->errors(1);
  EXPECT_EQ(all.family(), forge::v1::KERNEL_FAMILY_UNSPECIFIED);
  EXPECT_EQ(all.rows(), held_rows);
  EXPECT_DOUBLE_EQ(all.median_percent_error(), pointwise.median_percent_error());
}

TEST(HeldOutTest, TooFewTrainingTasksScoreTheAnalyticModel) {
  // Three tasks: one held back, two trained on, under kMinTrainingGroups: the predictor would use
  // the analytic model, so that is what the error is of.
  const GpuArch gpu = *FindGpu("H200");
  const std::vector<TrainingRow> rows = testing::RowsOf(*testing::SyntheticPointwise(gpu, 3));
  const std::optional<forge::v1::CostModelEvaluation> evaluation =
      *EvaluateHeldOut(rows, TrainOptions{});
  ASSERT_TRUE(evaluation.has_value());
  const forge::v1::CostModelError& all = evaluation->errors(evaluation->errors_size() - 1);
  EXPECT_EQ(all.source(), "analytic");
  EXPECT_EQ(all.tasks(), 1);
  EXPECT_DOUBLE_EQ(all.median_percent_error(), all.analytic_median_percent_error());
}

TEST(HeldOutTest, OneTaskHasNothingToHoldBack) {
  const GpuArch gpu = *FindGpu("H200");
  const std::vector<TrainingRow> rows = testing::RowsOf(*testing::SyntheticPointwise(gpu, 1));
  EXPECT_FALSE(EvaluateHeldOut(rows, TrainOptions{})->has_value());
}

}  // namespace
}  // namespace forge::cost
