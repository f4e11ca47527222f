#include "common/version/version.h"

#include <string>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace forge {
namespace {

TEST(VersionTest, ProjectVersionIsCMakesAndTheCommitIsHexOrUnknown) {
  EXPECT_EQ(ProjectVersion(), FORGE_TEST_PROJECT_VERSION);
  if (!GitCommit().empty()) {
    EXPECT_EQ(GitCommit().size(), 12u);
    EXPECT_EQ(GitCommit().find_first_not_of("0123456789abcdef"), absl::string_view::npos)
        << GitCommit();
    EXPECT_EQ(FullVersion(), absl::StrCat(FORGE_TEST_PROJECT_VERSION, "+", GitCommit()));
  } else {
    EXPECT_EQ(FullVersion(), FORGE_TEST_PROJECT_VERSION);
  }
}

TEST(VersionTest, TextNamesProgramVersionCommitAndGenerators) {
  const std::string commit = GitCommit().empty() ? "unknown" : std::string(GitCommit());
  EXPECT_EQ(VersionText({.program = "forge"}),
            absl::StrCat("forge ", FORGE_TEST_PROJECT_VERSION, " (commit ", commit, ")\n"));
  EXPECT_EQ(VersionText({.program = "forge-worker", .generators = "pointwise-1+reduction-4"}),
            absl::StrCat("forge-worker ", FORGE_TEST_PROJECT_VERSION, " (commit ", commit,
                         ")\ngenerators: pointwise-1+reduction-4\n"));
}

TEST(VersionTest, JsonIsOneLineWithEveryField) {
  const std::string json = VersionJson({.program = "forge", .generators = "pointwise-1"});
  EXPECT_EQ(json, absl::StrCat("{\"program\": \"forge\", \"version\": \"", FullVersion(),
                               "\", \"project_version\": \"", FORGE_TEST_PROJECT_VERSION,
                               "\", \"commit\": \"", GitCommit(),
                               "\", \"generators\": \"pointwise-1\"}\n"));
}

}  // namespace
}  // namespace forge
