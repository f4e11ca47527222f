// The error measures on hand-checked values.
#include "compiler/cost/learned/evaluation.h"

#include <cmath>

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

}  // namespace
}  // namespace forge::cost
