// The error measures on hand-checked values.
#include "compiler/cost/learned/evaluation.h"

#include <cmath>
#include <string>
#include <vector>

#include "gtest/gtest.h"

namespace forge::cost {
namespace {

TEST(EvaluationTest, RanksAverageTies) {
  EXPECT_EQ(Ranks(std::vector<double>{3, 1, 3, 2}), (std::vector<double>{3.5, 1, 3.5, 2}));
}

TEST(EvaluationTest, SpearmanOfOrderAndReverseOrder) {
  const std::vector<double> a = {1, 2, 3, 4};
  EXPECT_DOUBLE_EQ(Spearman(a, std::vector<double>{10, 20, 30, 45}), 1);
  EXPECT_DOUBLE_EQ(Spearman(a, std::vector<double>{4, 3, 2, 1}), -1);
  EXPECT_TRUE(std::isnan(Spearman(a, std::vector<double>{1, 1, 1, 1})));
  EXPECT_TRUE(std::isnan(Spearman(std::vector<double>{1}, std::vector<double>{1})));
}

TEST(EvaluationTest, PercentErrors) {
  const std::vector<double> measured = {100, 100, 100};
  const std::vector<double> predicted = {110, 80, 100};
  EXPECT_DOUBLE_EQ(MeanAbsolutePercentError(predicted, measured), 10);
  EXPECT_DOUBLE_EQ(MedianAbsolutePercentError(predicted, measured), 10);
  EXPECT_DOUBLE_EQ(MedianAbsolutePercentError(std::vector<double>{110, 80},
                                              std::vector<double>{100, 100}),
                   15);
  EXPECT_TRUE(std::isnan(MeanAbsolutePercentError({}, {})));
}

TEST(EvaluationTest, ScoreByTaskRanksWithinEachTask) {
  // Task a ranked right, task b reversed, task c one row (no ranking): mean Spearman 0, worst -1.
  const std::vector<double> measured = {1, 2, 3, 10, 20, 5};
  const std::vector<double> predicted = {1, 2, 3, 20, 10, 10};
  const std::vector<std::string> tasks = {"a", "a", "a", "b", "b", "c"};
  const GroupedScores scores = ScoreByTask(predicted, measured, tasks);
  EXPECT_EQ(scores.rows, 6);
  EXPECT_EQ(scores.tasks, 3);
  EXPECT_DOUBLE_EQ(scores.spearman, 0);
  EXPECT_DOUBLE_EQ(scores.worst_spearman, -1);
  EXPECT_DOUBLE_EQ(scores.mean_ape, (0 + 0 + 0 + 100 + 50 + 100) / 6.0);
  EXPECT_DOUBLE_EQ(scores.median_ape, 25);  // of 0 0 0 50 100 100
  const GroupedScores single = ScoreByTask(std::vector<double>{2}, std::vector<double>{1},
                                           std::vector<std::string>{"a"});
  EXPECT_TRUE(std::isnan(single.spearman));
  EXPECT_TRUE(std::isnan(single.worst_spearman));
}

}  // namespace
}  // namespace forge::cost
