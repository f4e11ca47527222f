#include "server/ids.h"

#include <set>
#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace forge::server {
namespace {

using ::testing::MatchesRegex;

TEST(IdsTest, TheSameNumberNeverGivesTheSameId) {
  std::set<std::string> ids;
  for (int i = 0; i < 1000; ++i) {
    const std::string id = NewId("job", 7);
    EXPECT_THAT(id, MatchesRegex("job-7-[0-9a-f]{16}"));
    ids.insert(id);
  }
  EXPECT_EQ(ids.size(), 1000u) << "a counter rolled back hands out number 7 again";
}

TEST(IdsTest, IdNumberReadsBothForms) {
  EXPECT_EQ(IdNumber(NewId("lease", 42), "lease"), 42);
  EXPECT_EQ(IdNumber("job-12", "job"), 12) << "ids stored before random suffixes";
  EXPECT_EQ(IdNumber("job-12-00ff", "job"), 12);
  EXPECT_EQ(IdNumber("job-12", "lease"), std::nullopt);
  EXPECT_EQ(IdNumber("job-", "job"), std::nullopt);
  EXPECT_EQ(IdNumber("job-x-1", "job"), std::nullopt);
  EXPECT_EQ(IdNumber("jobs-1", "job"), std::nullopt);
}

}  // namespace
}  // namespace forge::server
