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

struct Outcome {
  std::optional<Config> config;
  int exit_code = -1;
  std::string out;
  std::string err;
};

class LoadProgramConfigTest : public ::testing::Test {
 protected:
  LoadProgramConfigTest() {
    schema_.String("config", "", "Config file.")
        .Duration("shutdown.grace", absl::Seconds(5), "Grace after SIGTERM.")
        .Alias("shutdown-grace");
  }

  // Loads schema_ from `args` as a daemon named forge-test would.
  Outcome Start(std::vector<std::string> args) const {
    std::ostringstream out;
    std::ostringstream err;
    Outcome outcome;
    outcome.config = LoadProgramConfig(
        schema_, std::move(args),
        {.about = "forge-test: a daemon.", .version_text = "forge-test 1.2.3\n"}, out, err,
        &outcome.exit_code);
    outcome.out = out.str();
    outcome.err = err.str();
    return outcome;
  }

  ConfigSchema schema_;
};

TEST_F(LoadProgramConfigTest, HelpAndVersionPrintAndEndTheProgram) {
  for (const std::string help : {"--help", "-h"}) {
    Outcome outcome = Start({"--shutdown.grace=1s", help});
    EXPECT_FALSE(outcome.config.has_value());
    EXPECT_EQ(outcome.exit_code, 0);
    EXPECT_EQ(outcome.out, "forge-test: a daemon.\n\n" + schema_.HelpText());
  }
  Outcome version = Start({"--version", "--no-such-flag"});
  EXPECT_FALSE(version.config.has_value());
  EXPECT_EQ(version.exit_code, 0);
  EXPECT_EQ(version.out, "forge-test 1.2.3\n");
  EXPECT_THAT(version.err, IsEmpty());
}

TEST_F(LoadProgramConfigTest, ABadConfigIsExitCodeTwoAndDeprecatedNamesAreWarnedOf) {
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
