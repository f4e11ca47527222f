#include "worker/judge/guard.h"

#include <cstddef>
#include <vector>

#include "absl/strings/match.h"
#include "gtest/gtest.h"

namespace forge::judge {
namespace {

TEST(GuardContentsTest, SameForTheSameLaunchAndBuffer) {
  EXPECT_EQ(GuardContents(7, 3, 1, 512), GuardContents(7, 3, 1, 512));
}

TEST(GuardContentsTest, DiffersPerLaunchBufferAndSeed) {
  const std::vector<std::byte> base = GuardContents(7, 3, 1, 512);
  for (const std::vector<std::byte>& other :
       {GuardContents(7, 4, 1, 512), GuardContents(7, 3, 2, 512), GuardContents(8, 3, 1, 512)}) {
    // Independent random bytes: at most a few agree by chance, never most of them.
    int same = 0;
    for (size_t i = 0; i < base.size(); ++i) same += base[i] == other[i];
    EXPECT_LT(same, 16);
  }
}

TEST(GuardContentsTest, IsNotOneRepeatedWordAndHandlesOddSizes) {
  const std::vector<std::byte> contents = GuardContents(1, 0, 0, 771);
  ASSERT_EQ(contents.size(), 771u);
  // A kernel that copies a guard word it once saw must not match the whole zone: the bytes vary.
  int repeats = 0;
  for (size_t i = 4; i < contents.size(); ++i) repeats += contents[i] == contents[i - 4];
  EXPECT_LT(repeats, 32);
  EXPECT_TRUE(GuardContents(1, 0, 0, 0).empty());
}

TEST(FirstGuardChangeTest, NothingWhenIntact) {
  const std::vector<std::byte> expected = GuardContents(5, 0, 0, 600);
  EXPECT_FALSE(FirstGuardChange(expected, expected, 256).has_value());
}

TEST(FirstGuardChangeTest, OffsetsBeforeTheStartAreNegative) {
  const std::vector<std::byte> expected = GuardContents(5, 0, 0, 600);
  std::vector<std::byte> actual = expected;
  // A float32 written at element -1: bytes -4..-1 of the tensor, the last of the zone before.
  for (size_t i = 252; i < 256; ++i) actual[i] = ~actual[i];
  EXPECT_EQ(FirstGuardChange(expected, actual, 256), -4);
  actual[0] = ~actual[0];  // the allocation's first byte, 256 before the tensor
  EXPECT_EQ(FirstGuardChange(expected, actual, 256), -256);
}

TEST(FirstGuardChangeTest, OffsetsAfterTheEndCountFromIt) {
  const std::vector<std::byte> expected = GuardContents(5, 0, 0, 600);
  std::vector<std::byte> actual = expected;
  actual[256] = ~actual[256];  // the first byte past the end
  EXPECT_EQ(FirstGuardChange(expected, actual, 256), 0);
  actual = expected;
  actual[599] = ~actual[599];
  EXPECT_EQ(FirstGuardChange(expected, actual, 256), 343);
  // In address order: a change before the tensor comes first.
  actual[10] = ~actual[10];
  EXPECT_EQ(FirstGuardChange(expected, actual, 256), -246);
}

TEST(DescribeGuardChangeTest, NamesTheBufferAndTheSide) {
  const std::string before = DescribeGuardChange("input 1 (float32[4])", -4);
  EXPECT_TRUE(absl::StrContains(before, "input 1 (float32[4])")) << before;
  EXPECT_TRUE(absl::StrContains(before, "byte 4 before its start")) << before;
  const std::string after = DescribeGuardChange("output 0 (float32[4])", 0);
  EXPECT_TRUE(absl::StrContains(after, "byte 0 past its end")) << after;
}

}  // namespace
}  // namespace forge::judge
