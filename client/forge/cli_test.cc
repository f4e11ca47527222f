#include "client/forge/cli.h"

#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "client/forge/exit_code.h"
#include "common/version/version.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace forge::client {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;
using ::testing::Not;
using ::testing::StartsWith;

struct Outcome {
  int exit_code;
  std::string out;
  std::string err;
};

Outcome Forge(const std::vector<std::string>& args) {
  std::ostringstream out;
  std::ostringstream err;
  const int exit_code = RunForge(args, out, err);
  return {exit_code, out.str(), err.str()};
}

// Parses with an empty environment, so that the machine's FORGE_* variables do not count.
ParsedCommandLine Parse(const std::vector<std::string>& args) {
  return ParseCommandLine(args, std::vector<std::string>{});
}

TEST(CliTest, VersionInEveryForm) {
  const std::string first_line =
      absl::StrCat("forge ", ProjectVersion(), " (commit ",
                   GitCommit().empty() ? "unknown" : std::string(GitCommit()), ")\n");
  for (const std::vector<std::string> args :
       {std::vector<std::string>{"--version"}, std::vector<std::string>{"version"}}) {
    const Outcome run = Forge(args);
    EXPECT_EQ(run.exit_code, kExitOk);
    EXPECT_THAT(run.out, StartsWith(first_line));
    EXPECT_THAT(run.out, HasSubstr("\ngenerators: pointwise-"));
    EXPECT_THAT(run.err, IsEmpty());
  }
  const Outcome json = Forge({"--version", "--json"});
  EXPECT_EQ(json.exit_code, kExitOk);
  EXPECT_THAT(json.out, StartsWith(absl::StrCat("{\"program\": \"forge\", \"version\": \"",
                                                FullVersion(), "\"")));
  EXPECT_EQ(Forge({"version", "--json"}).out, json.out);
  EXPECT_EQ(Forge({"version", "extra"}).exit_code, kExitUsage);
}

TEST(CliTest, HelpCommandIsTheSameAsTheHelpFlag) {
  const Outcome help = Forge({"help", "submit"});
  EXPECT_EQ(help.exit_code, kExitOk);
  EXPECT_THAT(help.out, StartsWith("usage: forge submit MODEL..."));
  EXPECT_THAT(help.out, HasSubstr("--label K=V"));
  EXPECT_THAT(help.out, HasSubstr("--server VALUE"));
  EXPECT_THAT(help.out, HasSubstr("(env FORGE_SERVER)"));
  EXPECT_EQ(Forge({"submit", "--help"}).out, help.out);
  EXPECT_EQ(Forge({"submit", "model.pt2", "-h"}).out, help.out);

  const Outcome overview = Forge({"help"});
  EXPECT_EQ(overview.exit_code, kExitOk);
  EXPECT_EQ(Forge({"--help"}).out, overview.out);
  for (const std::string& name : CommandNames()) {
    EXPECT_THAT(overview.out, HasSubstr(absl::StrCat("\n  ", name, " "))) << name;
  }
  const Outcome none = Forge({});
  EXPECT_EQ(none.exit_code, kExitUsage);
  EXPECT_EQ(none.err, overview.out);
}

TEST(CliTest, MistypedCommandsGetASuggestionAndExitCodeTwo) {
  const Outcome typo = Forge({"sumbit", "model.pt2"});
  EXPECT_EQ(typo.exit_code, kExitUsage);
  EXPECT_THAT(typo.err, StartsWith("forge: unknown command 'sumbit' (did you mean 'submit'?)\n"));
  EXPECT_THAT(typo.out, IsEmpty());

  EXPECT_THAT(Forge({"reslts"}).err, HasSubstr("(did you mean 'results'?)"));
  EXPECT_THAT(Forge({"help", "wacth"}).err, HasSubstr("(did you mean 'watch'?)"));
  EXPECT_EQ(Forge({"help", "wacth"}).exit_code, kExitUsage);
  const Outcome far = Forge({"deploy"});
  EXPECT_EQ(far.exit_code, kExitUsage);
  EXPECT_THAT(far.err, Not(HasSubstr("did you mean")));
}

TEST(CliTest, MistypedFlagsGetASuggestionAndTheCommandsHelp) {
  const Outcome typo = Forge({"results", "job-1", "--ouptut", "dir"});
  EXPECT_EQ(typo.exit_code, kExitUsage);
  EXPECT_THAT(typo.err, StartsWith("forge results: config: unknown flag --ouptut (did you mean "
                                   "--output?)\n\nusage: forge results JOB"));
  // Connection flags belong to the remote commands only.
  EXPECT_THAT(Forge({"inspect", "model.pt2", "--server=h:1"}).err,
              HasSubstr("unknown flag --server"));
}

TEST(CliTest, FlagsAreTypedAndCheckedBeforeAnythingRuns) {
  const Outcome budget = Forge({"submit", "model.pt2", "--max-seconds", "soon"});
  EXPECT_EQ(budget.exit_code, kExitUsage);
  EXPECT_THAT(budget.err, HasSubstr("config: max-seconds = \"soon\" (from flag --max-seconds): "
                                    "not an integer"));
  const Outcome priority = Forge({"submit", "model.pt2", "--priority=9999999999"});
  EXPECT_EQ(priority.exit_code, kExitUsage);
  EXPECT_THAT(priority.err, HasSubstr("above the maximum 2147483647"));
  EXPECT_EQ(Forge({"status"}).exit_code, kExitUsage);
  EXPECT_THAT(Forge({"status"}).err, HasSubstr("missing arguments"));
  EXPECT_THAT(Forge({"status", "job-1", "job-2"}).err, HasSubstr("unexpected argument 'job-2'"));
}

TEST(CliTest, ShortRepeatableAndPositionalArgumentsParse) {
  const ParsedCommandLine submit =
      Parse({"submit", "a.pt2", "--label", "team=x", "b/", "--label=run=2", "--budget", "7",
             "--wait", "--server", "h:1"});
  ASSERT_TRUE(submit.command_line.has_value()) << submit.err;
  const Config& config = submit.command_line->config;
  EXPECT_EQ(submit.command_line->command, "submit");
  EXPECT_THAT(config.positional_args(), ElementsAre("a.pt2", "b/"));
  EXPECT_THAT(config.GetStringList("label"), ElementsAre("team=x", "run=2"));
  EXPECT_EQ(config.GetInt64("budget"), 7);
  EXPECT_TRUE(config.GetBool("wait"));
  EXPECT_FALSE(config.GetBool("json"));
  EXPECT_EQ(config.GetString("arch"), "sm_90");
  EXPECT_EQ(config.GetString("server"), "h:1");

  const ParsedCommandLine results = Parse({"results", "-o", "out", "job-3", "--all"});
  ASSERT_TRUE(results.command_line.has_value()) << results.err;
  EXPECT_EQ(results.command_line->config.GetString("output"), "out");
  EXPECT_TRUE(results.command_line->config.GetBool("all"));
  EXPECT_THAT(results.command_line->config.positional_args(), ElementsAre("job-3"));
  // After "--" everything is positional: here a second JOB, one too many.
  const ParsedCommandLine ended = Parse({"results", "job-3", "--", "--all"});
  EXPECT_FALSE(ended.command_line.has_value());
  EXPECT_THAT(ended.err, HasSubstr("unexpected argument '--all'"));
}

TEST(CliTest, CommandFlagsIgnoreTheEnvironmentAndConnectionSettingsReadIt) {
  const ParsedCommandLine parsed = ParseCommandLine(
      {"jobs"}, std::vector<std::string>{"FORGE_JSON=1", "FORGE_SERVER=h:2", "FORGE_TIMEOUT=9s"});
  ASSERT_TRUE(parsed.command_line.has_value()) << parsed.err;
  EXPECT_FALSE(parsed.command_line->config.GetBool("json"));
  EXPECT_EQ(parsed.command_line->config.GetString("server"), "h:2");
  EXPECT_EQ(parsed.command_line->config.GetDuration("timeout"), absl::Seconds(9));

  const ParsedCommandLine bad =
      ParseCommandLine({"jobs"}, std::vector<std::string>{"FORGE_TIMEOUT=soon"});
  EXPECT_EQ(bad.exit_code, kExitUsage);
  EXPECT_THAT(bad.err, HasSubstr("(from env FORGE_TIMEOUT)"));
}

TEST(CliTest, LocalCommandsRunWithoutACoordinator) {
  const Outcome missing = Forge({"inspect", "/no/such/model.pt2"});
  EXPECT_EQ(missing.exit_code, kExitNotFound) << missing.err;
  EXPECT_THAT(missing.err, StartsWith("forge inspect: "));
}

TEST(CliTest, AdminActionsCheckTheirFlagsBeforeAnythingRuns) {
  const Outcome unknown = Forge({"admin", "purge-everything"});
  EXPECT_EQ(unknown.exit_code, kExitUsage);
  EXPECT_THAT(unknown.err, HasSubstr("unknown admin action 'purge-everything'"));
  const Outcome no_filter = Forge({"admin", "purge-results", "--server=127.0.0.1:1"});
  EXPECT_EQ(no_filter.exit_code, kExitUsage);
  EXPECT_THAT(no_filter.err, HasSubstr("needs --worker, --unattributed, --candidate or --task"));
  const Outcome mixed = Forge({"admin", "mint-token", "--worker", "gpu-a"});
  EXPECT_EQ(mixed.exit_code, kExitUsage);
  EXPECT_THAT(mixed.err, HasSubstr("--worker is not a flag of mint-token"));
  const Outcome no_owner = Forge({"admin", "mint-token", "--role", "read", "--secret-file", "s"});
  EXPECT_EQ(no_owner.exit_code, kExitUsage);
  EXPECT_THAT(no_owner.err, HasSubstr("mint-token needs --owner"));
  const Outcome bad_lifetime = Forge({"admin", "mint-token", "--owner", "a", "--role", "read",
                                      "--secret-file", "s", "--expires-in", "-1h"});
  EXPECT_EQ(bad_lifetime.exit_code, kExitUsage);
  EXPECT_THAT(bad_lifetime.err, HasSubstr("not a positive duration"));
  const Outcome no_secret = Forge({"admin", "mint-token", "--owner", "a", "--role", "read",
                                   "--secret-file", "/no/such/secret"});
  EXPECT_NE(no_secret.exit_code, kExitOk);
  EXPECT_THAT(no_secret.err, HasSubstr("cannot read token secret /no/such/secret"));
}

}  // namespace
}  // namespace forge::client
