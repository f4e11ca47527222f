#include "worker/judge/judge.h"

#include "absl/strings/match.h"
#include "gtest/gtest.h"

namespace forge::judge {
namespace {

TEST(ReverificationReasonsTest, PlausibleTimesNeedNone) {
  EXPECT_TRUE(ReverificationReasons(100, 300, 50).empty());
  EXPECT_TRUE(ReverificationReasons(100, 1000, 100).empty());  // exactly 10x, at the floor
}

TEST(ReverificationReasonsTest, FlagsLargeSpeedups) {
  std::vector<std::string> reasons = ReverificationReasons(10, 150, 0);
  ASSERT_EQ(reasons.size(), 1u);
  EXPECT_TRUE(absl::StrContains(reasons[0], "speedup 15.0x")) << reasons[0];
}

TEST(ReverificationReasonsTest, FlagsTimesBelowTheFloor) {
  std::vector<std::string> reasons = ReverificationReasons(10, 0, 20);
  ASSERT_EQ(reasons.size(), 1u);
  EXPECT_TRUE(absl::StrContains(reasons[0], "below the roofline floor")) << reasons[0];
  EXPECT_EQ(ReverificationReasons(1, 100, 20).size(), 2u);
}

}  // namespace
}  // namespace forge::judge
