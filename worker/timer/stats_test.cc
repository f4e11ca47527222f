#include "worker/timer/stats.h"

#include <vector>

#include "gtest/gtest.h"

namespace forge::timer {
namespace {

TEST(PercentileTest, InterpolatesBetweenRanks) {
  std::vector<double> values = {4, 1, 3, 2};
  EXPECT_DOUBLE_EQ(Percentile(values, 0), 1);
  EXPECT_DOUBLE_EQ(Percentile(values, 1), 4);
  EXPECT_DOUBLE_EQ(Percentile(values, 0.5), 2.5);
  EXPECT_DOUBLE_EQ(Percentile(values, 0.25), 1.75);
  EXPECT_DOUBLE_EQ(Percentile(values, 2), 4);  // clamped
  EXPECT_DOUBLE_EQ(Percentile({}, 0.5), 0);
  EXPECT_DOUBLE_EQ(Percentile({7}, 0.9), 7);
}

TEST(SummarizeTest, OddCount) {
  Summary summary = Summarize({5, 1, 9, 3, 7});
  EXPECT_EQ(summary.count, 5);
  EXPECT_DOUBLE_EQ(summary.median, 5);
  EXPECT_DOUBLE_EQ(summary.min, 1);
  EXPECT_DOUBLE_EQ(summary.max, 9);
  EXPECT_DOUBLE_EQ(summary.mean, 5);
  EXPECT_DOUBLE_EQ(summary.p25, 3);
  EXPECT_DOUBLE_EQ(summary.p75, 7);
  EXPECT_DOUBLE_EQ(summary.spread, 0.8);
}

TEST(SummarizeTest, MedianIgnoresOutliers) {
  std::vector<double> values(21, 10.0);
  values[0] = 1000;  // one slow rep (a context switch, a clock ramp)
  Summary summary = Summarize(values);
  EXPECT_DOUBLE_EQ(summary.median, 10);
  EXPECT_DOUBLE_EQ(summary.max, 1000);
  EXPECT_DOUBLE_EQ(summary.spread, 0);
}

TEST(SummarizeTest, EmptyIsZero) {
  Summary summary = Summarize({});
  EXPECT_EQ(summary.count, 0);
  EXPECT_EQ(summary.median, 0);
  EXPECT_EQ(summary.spread, 0);
}

}  // namespace
}  // namespace forge::timer
