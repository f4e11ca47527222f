#include "common/config/program.h"

#include <sstream>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace forge {
namespace {

using ::testing::HasSubstr;
using ::testing::IsEmpty;

ConfigSchema DaemonSchema() {
  ConfigSchema schema;
  schema.String("config", "", "Config file.")
      .Duration("shutdown.grace", absl::Seconds(5), "Grace after SIGTERM.")
      .Alias("shutdown-grace");
  return schema;
}

const ProgramInfo kInfo{.about = "forge-test: a daemon.", .version_text = "forge-test 1.2.3\n"};

struct Outcome {
  std::optional<Config> config;
  int exit_code = -1;
  std::string out;
  std::string err;
};

Outcome Start(std::vector<std::string> args) {
  std::ostringstream out;
  std::ostringstream err;
  Outcome outcome;
  outcome.config =
      LoadProgramConfig(DaemonSchema(), std::move(args), kInfo, out, err, &outcome.exit_code);
  outcome.out = out.str();
  outcome.err = err.str();
  return outcome;
}

TEST(LoadProgramConfigTest, HelpAndVersionPrintAndEndTheProgram) {
  for (const std::string help : {"--help", "-h"}) {
    Outcome outcome = Start({"--shutdown.grace=1s", help});
    EXPECT_FALSE(outcome.config.has_value());
    EXPECT_EQ(outcome.exit_code, 0);
    EXPECT_EQ(outcome.out, "forge-test: a daemon.\n\n" + DaemonSchema().HelpText());
  }
  Outcome version = Start({"--version", "--no-such-flag"});
  EXPECT_FALSE(version.config.has_value());
  EXPECT_EQ(version.exit_code, 0);
  EXPECT_EQ(version.out, "forge-test 1.2.3\n");
  EXPECT_THAT(version.err, IsEmpty());
}

TEST(LoadProgramConfigTest, ABadConfigIsExitCodeTwoAndDeprecatedNamesAreWarnedOf) {
  Outcome bad = Start({"--shutdown.grase=1s"});
  EXPECT_FALSE(bad.config.has_value());
  EXPECT_EQ(bad.exit_code, 2);
  EXPECT_EQ(bad.err, "config: unknown flag --shutdown.grase (did you mean --shutdown.grace?)\n");

  Outcome old = Start({"--shutdown-grace=2s"});
  ASSERT_TRUE(old.config.has_value()) << old.err;
  EXPECT_EQ(old.config->GetDuration("shutdown.grace"), absl::Seconds(2));
  EXPECT_THAT(old.err, HasSubstr("--shutdown-grace is deprecated, write --shutdown.grace"));
  EXPECT_THAT(old.out, IsEmpty());
}

}  // namespace
}  // namespace forge
