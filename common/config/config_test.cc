#include "common/config/config.h"

#include <stdlib.h>

#include <fstream>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/time/time.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/support/subprocess.h"

namespace forge {
namespace {

using ::testing::ElementsAre;
using ::testing::IsEmpty;

ConfigSchema TestSchema() {
  ConfigSchema schema;
  schema.String("redis.host", "127.0.0.1", "Host of the Redis server.")
      .Int64("redis.port", 6379, "TCP port of the Redis server.", {.min = 1, .max = 65535})
      .Double("search.exploration", 1.4, "MCTS exploration constant.")
      .Bool("worker.emulated", false, "Run the emulated backend instead of a GPU.")
      .Duration("lease.timeout", absl::Seconds(30), "How long a worker may hold a lease.")
      .Enum("log.format", {"text", "json"}, "text", "Log line format.")
      .Int64("worker.compile_threads", 2, "Size of the compile pool.", {.min = 1});
  return schema;
}

class ConfigTest : public ::testing::Test {
 protected:
  std::string WriteFile(const std::string& name, const std::string& contents) {
    const std::string path = dir_.path() + "/" + name;
    std::ofstream(path) << contents;
    return path;
  }

  // Loads TestSchema() from the given sources; the environment is empty unless given.
  absl::StatusOr<Config> Load(ConfigSources sources) {
    if (!sources.environment) sources.environment.emplace();
    return Config::Load(TestSchema(), sources);
  }

  // The error lines of a load that must fail.
  std::vector<std::string> Errors(ConfigSources sources) {
    absl::StatusOr<Config> config = Load(std::move(sources));
    EXPECT_FALSE(config.ok());
    if (config.ok()) return {};
    EXPECT_EQ(config.status().code(), absl::StatusCode::kInvalidArgument);
    return absl::StrSplit(config.status().message(), '\n');
  }

  std::vector<std::string> FlagErrors(std::vector<std::string> args) {
    return Errors({.args = std::move(args)});
  }
  // The path FileErrors writes to.
  std::string ConfPath() const { return dir_.path() + "/forge.conf"; }
  std::vector<std::string> FileErrors(const std::string& contents) {
    return Errors({.file = WriteFile("forge.conf", contents)});
  }

  testing::TempDir dir_;
};

TEST_F(ConfigTest, LoadWithConfigFileReadsTheFileTheFlagsName) {
  ConfigSchema schema = TestSchema();
  schema.String("config", "", "Path of a config file.");
  const std::string path = WriteFile("forge.conf", "redis.port = 7000\nredis.host = filehost\n");
  absl::StatusOr<Config> config =
      Config::LoadWithConfigFile(schema, {"--config=" + path, "--redis.host=flaghost"});
  ASSERT_TRUE(config.ok()) << config.status();
  EXPECT_EQ(config->GetInt64("redis.port"), 7000);               // from the file
  EXPECT_EQ(config->GetString("redis.host"), "flaghost");        // flags sit above the file
  EXPECT_THAT(config->Origin("redis.port"), ::testing::HasSubstr("forge.conf"));
  EXPECT_FALSE(Config::LoadWithConfigFile(schema, {"--config=" + dir_.path() + "/none.conf"})
                   .ok());
}

TEST_F(ConfigTest, DefaultsApplyWhenNoSourceSetsAKey) {
  absl::StatusOr<Config> config = Load({});
  ASSERT_TRUE(config.ok()) << config.status();
  EXPECT_EQ(config->GetString("redis.host"), "127.0.0.1");
  EXPECT_EQ(config->GetInt64("redis.port"), 6379);
  EXPECT_EQ(config->GetDouble("search.exploration"), 1.4);
  EXPECT_FALSE(config->GetBool("worker.emulated"));
  EXPECT_EQ(config->GetDuration("lease.timeout"), absl::Seconds(30));
  EXPECT_EQ(config->GetString("log.format"), "text");
  EXPECT_EQ(config->Origin("redis.port"), "default");
  EXPECT_THAT(config->positional_args(), IsEmpty());
}

TEST_F(ConfigTest, FileSetsValuesWithSectionsQuotesAndComments) {
  const std::string path = WriteFile("forge.conf", R"(# Forge test configuration
log.format = json   # keys before any section are used as written

[redis]
host = "10.0.0.7 # inside quotes, not a comment"
  port=6380

[ lease ]  # spaces around the name are allowed
timeout = 1m30s
[worker]
emulated = yes
[search]
exploration = 0.5
)");
  absl::StatusOr<Config> config = Load({.file = path});
  ASSERT_TRUE(config.ok()) << config.status();
  EXPECT_EQ(config->GetString("log.format"), "json");
  EXPECT_EQ(config->GetString("redis.host"), "10.0.0.7 # inside quotes, not a comment");
  EXPECT_EQ(config->GetInt64("redis.port"), 6380);
  EXPECT_EQ(config->Origin("redis.port"), "file " + path + ":6");
  EXPECT_EQ(config->GetDuration("lease.timeout"), absl::Seconds(90));
  EXPECT_TRUE(config->GetBool("worker.emulated"));
  EXPECT_EQ(config->GetDouble("search.exploration"), 0.5);
  EXPECT_EQ(config->Origin("worker.compile_threads"), "default");
}

TEST_F(ConfigTest, FileQuotedValuesUnderstandEscapes) {
  const std::string path = WriteFile("forge.conf", R"(redis.host = "a\"b\\c\td\ne" # comment)");
  absl::StatusOr<Config> config = Load({.file = path});
  ASSERT_TRUE(config.ok()) << config.status();
  EXPECT_EQ(config->GetString("redis.host"), "a\"b\\c\td\ne");
}

TEST_F(ConfigTest, EnvironmentSetsKnownKeysAndIgnoresTheRest) {
  absl::StatusOr<Config> config = Load(
      {.environment = std::vector<std::string>{
           "PATH=/usr/bin", "FORGE_REDIS_PORT=6390", "FORGE_LOG_FORMAT=json",
           "FORGE_WORKER_COMPILE_THREADS=8", "FORGE_REDIS_PROT=not checked", "FORGE_NOVALUE"}});
  ASSERT_TRUE(config.ok()) << config.status();
  EXPECT_EQ(config->GetInt64("redis.port"), 6390);
  EXPECT_EQ(config->Origin("redis.port"), "env FORGE_REDIS_PORT");
  EXPECT_EQ(config->GetString("log.format"), "json");
  EXPECT_EQ(config->GetInt64("worker.compile_threads"), 8);
}

TEST_F(ConfigTest, ProcessEnvironmentIsReadWhenNoneIsGiven) {
  setenv("FORGE_WORKER_COMPILE_THREADS", "7", 1);
  absl::StatusOr<Config> config = Config::Load(TestSchema(), {});
  unsetenv("FORGE_WORKER_COMPILE_THREADS");
  ASSERT_TRUE(config.ok()) << config.status();
  EXPECT_EQ(config->GetInt64("worker.compile_threads"), 7);
  EXPECT_EQ(config->Origin("worker.compile_threads"), "env FORGE_WORKER_COMPILE_THREADS");
}

TEST_F(ConfigTest, FlagsInBothFormsAndPositionalArguments) {
  absl::StatusOr<Config> config =
      Load({.args = {"--redis.port=6381", "--redis.host", "redis.internal", "model.pt2",
                     "--lease.timeout=250ms", "--search.exploration", "-0.5", "-", "--",
                     "--redis.port=1"}});
  ASSERT_TRUE(config.ok()) << config.status();
  EXPECT_EQ(config->GetInt64("redis.port"), 6381);
  EXPECT_EQ(config->Origin("redis.port"), "flag --redis.port");
  EXPECT_EQ(config->GetString("redis.host"), "redis.internal");
  EXPECT_EQ(config->GetDuration("lease.timeout"), absl::Milliseconds(250));
  EXPECT_EQ(config->GetDouble("search.exploration"), -0.5);
  EXPECT_THAT(config->positional_args(), ElementsAre("model.pt2", "-", "--redis.port=1"));
}

TEST_F(ConfigTest, BoolFlagAloneIsTrueAndTakesOnlyABoolAfterIt) {
  absl::StatusOr<Config> alone = Load({.args = {"--worker.emulated", "job.json"}});
  ASSERT_TRUE(alone.ok()) << alone.status();
  EXPECT_TRUE(alone->GetBool("worker.emulated"));
  EXPECT_THAT(alone->positional_args(), ElementsAre("job.json"));

  absl::StatusOr<Config> with_value = Load({.args = {"--worker.emulated", "false", "job.json"}});
  ASSERT_TRUE(with_value.ok()) << with_value.status();
  EXPECT_FALSE(with_value->GetBool("worker.emulated"));
  EXPECT_THAT(with_value->positional_args(), ElementsAre("job.json"));

  absl::StatusOr<Config> last = Load({.args = {"--worker.emulated=on"}});
  ASSERT_TRUE(last.ok()) << last.status();
  EXPECT_TRUE(last->GetBool("worker.emulated"));
}

TEST_F(ConfigTest, RepeatedFlagLastOneWins) {
  absl::StatusOr<Config> config = Load({.args = {"--redis.port=1000", "--redis.port", "2000"}});
  ASSERT_TRUE(config.ok()) << config.status();
  EXPECT_EQ(config->GetInt64("redis.port"), 2000);
}

TEST_F(ConfigTest, PrecedenceIsFlagsThenEnvironmentThenFileThenDefault) {
  const std::string path = WriteFile("forge.conf",
                                     "[redis]\nport = 1\nhost = file-host\n"
                                     "[log]\nformat = json\n");
  absl::StatusOr<Config> config = Load(
      {.file = path,
       .environment = std::vector<std::string>{"FORGE_REDIS_PORT=2", "FORGE_REDIS_HOST=env-host"},
       .args = {"--redis.port=3"}});
  ASSERT_TRUE(config.ok()) << config.status();
  EXPECT_EQ(config->GetInt64("redis.port"), 3);
  EXPECT_EQ(config->Origin("redis.port"), "flag --redis.port");
  EXPECT_EQ(config->GetString("redis.host"), "env-host");
  EXPECT_EQ(config->Origin("redis.host"), "env FORGE_REDIS_HOST");
  EXPECT_EQ(config->GetString("log.format"), "json");
  EXPECT_EQ(config->Origin("log.format"), "file " + path + ":5");
  EXPECT_EQ(config->GetDuration("lease.timeout"), absl::Seconds(30));
  EXPECT_EQ(config->Origin("lease.timeout"), "default");
}

TEST_F(ConfigTest, BadValueNamesKeyValueAndSource) {
  EXPECT_THAT(
      Errors({.environment = std::vector<std::string>{"FORGE_REDIS_PORT=abc"}}),
      ElementsAre("config: redis.port = \"abc\" (from env FORGE_REDIS_PORT): not an integer"));
  const std::string path = ConfPath();
  EXPECT_THAT(
      FileErrors("# comment\n[redis]\nport = abc\n"),
      ElementsAre("config: redis.port = \"abc\" (from file " + path + ":3): not an integer"));
  EXPECT_THAT(FlagErrors({"--redis.port", "abc"}),
              ElementsAre("config: redis.port = \"abc\" (from flag --redis.port): not an integer"));
}

TEST_F(ConfigTest, EveryValueErrorKind) {
  EXPECT_THAT(
      FlagErrors({"--redis.port=70000", "--worker.compile_threads=0"}),
      ElementsAre(
          "config: redis.port = \"70000\" (from flag --redis.port): above the maximum 65535",
          "config: worker.compile_threads = \"0\" (from flag --worker.compile_threads): "
          "below the minimum 1"));
  EXPECT_THAT(FlagErrors({"--redis.port=99999999999999999999"}),
              ElementsAre("config: redis.port = \"99999999999999999999\" (from flag --redis.port): "
                          "not an integer"));
  EXPECT_THAT(FlagErrors({"--search.exploration=high", "--search.exploration=nan"}),
              ElementsAre("config: search.exploration = \"high\" (from flag --search.exploration): "
                          "not a number",
                          "config: search.exploration = \"nan\" (from flag --search.exploration): "
                          "not a finite number"));
  EXPECT_THAT(FlagErrors({"--worker.emulated=maybe"}),
              ElementsAre("config: worker.emulated = \"maybe\" (from flag --worker.emulated): "
                          "not a bool (true/false, yes/no, on/off, 1/0)"));
  EXPECT_THAT(
      FlagErrors({"--lease.timeout=30", "--lease.timeout=-2s", "--lease.timeout=inf"}),
      ElementsAre(
          "config: lease.timeout = \"30\" (from flag --lease.timeout): "
          "not a duration (a number with a unit: 500ms, 2s, 1m, 1h30m)",
          "config: lease.timeout = \"-2s\" (from flag --lease.timeout): a negative duration",
          "config: lease.timeout = \"inf\" (from flag --lease.timeout): not a finite duration"));
  EXPECT_THAT(
      FlagErrors({"--log.format=xml"}),
      ElementsAre("config: log.format = \"xml\" (from flag --log.format): not one of: text, json"));
}

TEST_F(ConfigTest, ValuesInErrorsAreEscaped) {
  EXPECT_THAT(
      FlagErrors({"--redis.port=6\"3\n"}),
      ElementsAre("config: redis.port = \"6\\\"3\\n\" (from flag --redis.port): not an integer"));
}

TEST_F(ConfigTest, UnknownFileKeySuggestsTheClosestKey) {
  const std::string path = ConfPath();
  EXPECT_THAT(FileErrors("[redis]\nhost = x\nprot = 6380\n[nothing.like]\nthis = 1\n"),
              ElementsAre("config: unknown key \"redis.prot\" in " + path +
                              ":3 (did you mean \"redis.port\"?)",
                          "config: unknown key \"nothing.like.this\" in " + path + ":5"));
}

TEST_F(ConfigTest, UnknownFlagsAreErrors) {
  EXPECT_THAT(FlagErrors({"--redis.prot=6380", "--bogus", "-p", "--=3"}),
              ElementsAre("config: unknown flag --redis.prot (did you mean --redis.port?)",
                          "config: unknown flag --bogus",
                          "config: unknown flag -p (flags are written --key=value or --key value)",
                          "config: unknown flag --"));
}

TEST_F(ConfigTest, FlagWithoutValueIsAnError) {
  EXPECT_THAT(FlagErrors({"--redis.port", "--redis.host=x", "--lease.timeout"}),
              ElementsAre("config: flag --redis.port needs a value",
                          "config: flag --lease.timeout needs a value"));
}

TEST_F(ConfigTest, MissingFileIsAnError) {
  const std::string path = dir_.path() + "/absent.conf";
  EXPECT_THAT(Errors({.file = path}), ElementsAre("config: cannot read config file \"" + path +
                                                  "\": No such file or directory"));
}

TEST_F(ConfigTest, FileSyntaxErrorsNameTheLine) {
  const std::string path = ConfPath();
  const std::vector<std::string> errors = FileErrors(
      "just words\n"              // 1
      "bad key = 1\n"             // 2
      "redis.host = \"open\n"     // 3
      "redis.host = \"a\\qb\"\n"  // 4
      "redis.host = \"a\" b\n"    // 5
      "[redis\n"                  // 6
      "port = 1\n"                // 7: skipped, its section is broken
      "[a..b]\n"                  // 8
      "[redis] port = 2\n");      // 9
  const std::string at = "config: " + path;
  EXPECT_THAT(errors,
              ElementsAre(at + ":1: expected key = value, got \"just words\"",
                          at + ":2: invalid key \"bad key\"", at + ":3: unterminated quoted value",
                          at + ":4: unknown escape \\q in a quoted value",
                          at + ":5: unexpected text after the closing quote: \"b\"",
                          at + ":6: invalid section header \"[redis\"",
                          at + ":8: invalid section header \"[a..b]\"",
                          at + ":9: invalid section header \"[redis] port = 2\""));
}

TEST_F(ConfigTest, DuplicateFileKeyNamesBothLines) {
  const std::string path = ConfPath();
  EXPECT_THAT(FileErrors("redis.port = 1\n[redis]\nport = 2\n"),
              ElementsAre("config: duplicate key \"redis.port\" in " + path + ":3 (first set in " +
                          path + ":1)"));
}

TEST_F(ConfigTest, AllProblemsAreReportedTogetherEvenWhereOverridden) {
  const std::string path = WriteFile("forge.conf", "redis.port = abc\n");
  EXPECT_THAT(
      Errors({.file = path,
              .environment = std::vector<std::string>{"FORGE_LOG_FORMAT=xml"},
              .args = {"--redis.port=6380", "--log.format=json", "--bogus=1"}}),
      ElementsAre(
          "config: redis.port = \"abc\" (from file " + path + ":1): not an integer",
          "config: log.format = \"xml\" (from env FORGE_LOG_FORMAT): not one of: text, json",
          "config: unknown flag --bogus"));
}

// A schema like a program's after a release renamed two keys and kept the old names as aliases.
ConfigSchema RenamedSchema() {
  ConfigSchema schema;
  schema.Int64("lease.max-candidates", 32, "Most candidates per lease.")
      .Alias("lease.max_candidates")
      .Duration("shutdown.grace", absl::Seconds(5), "Grace after SIGTERM.")
      .Alias("shutdown-grace")
      .Alias("grace_period");
  return schema;
}

TEST(ConfigAliasTest, OldNamesWorkInFlagsFilesAndTheEnvironmentWithAWarning) {
  absl::StatusOr<Config> flags = Config::Load(
      RenamedSchema(), {.environment = std::vector<std::string>{},
                        .args = {"--lease.max_candidates=7", "--shutdown-grace", "2s"}});
  ASSERT_TRUE(flags.ok()) << flags.status();
  EXPECT_EQ(flags->GetInt64("lease.max-candidates"), 7);
  EXPECT_EQ(flags->GetDuration("shutdown.grace"), absl::Seconds(2));
  EXPECT_EQ(flags->Origin("lease.max-candidates"), "flag --lease.max_candidates");
  EXPECT_THAT(flags->warnings(),
              ElementsAre("config: --lease.max_candidates is deprecated, write "
                          "--lease.max-candidates (the old name goes in the next release)",
                          "config: --shutdown-grace is deprecated, write --shutdown.grace (the "
                          "old name goes in the next release)"));

  testing::TempDir dir;
  const std::string path = dir.path() + "/old.conf";
  std::ofstream(path) << "[lease]\nmax_candidates = 9\n";
  absl::StatusOr<Config> file = Config::Load(
      RenamedSchema(),
      {.file = path, .environment = std::vector<std::string>{"FORGE_GRACE_PERIOD=3s"}});
  ASSERT_TRUE(file.ok()) << file.status();
  EXPECT_EQ(file->GetInt64("lease.max-candidates"), 9);
  EXPECT_EQ(file->GetDuration("shutdown.grace"), absl::Seconds(3));
  EXPECT_THAT(file->warnings(),
              ElementsAre(absl::StrCat("config: lease.max_candidates in ", path,
                                       ":2 is deprecated, write lease.max-candidates (the old "
                                       "name goes in the next release)"),
                          "config: FORGE_GRACE_PERIOD is deprecated, write FORGE_SHUTDOWN_GRACE "
                          "(the old name goes in the next release)"));
}

TEST(ConfigAliasTest, TheNewNameWinsOverTheOldInTheEnvironmentAndNewNamesWarnOfNothing) {
  absl::StatusOr<Config> config = Config::Load(
      RenamedSchema(),
      {.environment = std::vector<std::string>{"FORGE_SHUTDOWN_GRACE=4s", "FORGE_GRACE_PERIOD=3s"},
       .args = {"--lease.max-candidates=5"}});
  ASSERT_TRUE(config.ok()) << config.status();
  EXPECT_EQ(config->GetDuration("shutdown.grace"), absl::Seconds(4));
  EXPECT_EQ(config->GetInt64("lease.max-candidates"), 5);
  EXPECT_THAT(config->warnings(), ElementsAre(::testing::HasSubstr("FORGE_GRACE_PERIOD")));

  absl::StatusOr<Config> clean =
      Config::Load(RenamedSchema(), {.environment = std::vector<std::string>{},
                                     .args = {"--shutdown.grace=1s"}});
  ASSERT_TRUE(clean.ok()) << clean.status();
  EXPECT_THAT(clean->warnings(), IsEmpty());
}

TEST(ConfigAliasTest, MisspeltFlagsAreMatchedAgainstTheNewNames) {
  absl::StatusOr<Config> config =
      Config::Load(RenamedSchema(),
                   {.environment = std::vector<std::string>{}, .args = {"--shutdown.grase=1s"}});
  ASSERT_FALSE(config.ok());
  EXPECT_EQ(config.status().message(),
            "config: unknown flag --shutdown.grase (did you mean --shutdown.grace?)");
}

// The flags of one command of a CLI: repeatable, short and flag-only ones beside a setting.
ConfigSchema CommandSchema() {
  ConfigSchema schema;
  schema.String("server", "", "Coordinator address.")
      .StringList("label", "Label K=V.")
      .FlagOnly()
      .String("output", "", "Output directory.")
      .ShortFlag('o')
      .FlagOnly()
      .Bool("json", false, "Print JSON.")
      .FlagOnly();
  return schema;
}

TEST(ConfigCommandTest, RepeatedListFlagsCollectEveryValueInOrder) {
  absl::StatusOr<Config> config =
      Config::Load(CommandSchema(), {.environment = std::vector<std::string>{},
                                     .args = {"--label", "a=1", "job-1", "--label=b=2,c=3"}});
  ASSERT_TRUE(config.ok()) << config.status();
  EXPECT_THAT(config->GetStringList("label"), ElementsAre("a=1", "b=2,c=3"));
  EXPECT_THAT(config->positional_args(), ElementsAre("job-1"));
  EXPECT_TRUE(config->IsSet("label"));
  EXPECT_FALSE(config->IsSet("output"));

  absl::StatusOr<Config> none =
      Config::Load(CommandSchema(), {.environment = std::vector<std::string>{}});
  ASSERT_TRUE(none.ok()) << none.status();
  EXPECT_THAT(none->GetStringList("label"), IsEmpty());
}

TEST(ConfigCommandTest, ListsFromTheEnvironmentAreCommaSeparatedAndFlagsReplaceThem) {
  ConfigSchema schema;
  schema.StringList("hosts", "Hosts.");
  absl::StatusOr<Config> env = Config::Load(
      schema, {.environment = std::vector<std::string>{"FORGE_HOSTS=a,b,,c"}});
  ASSERT_TRUE(env.ok()) << env.status();
  EXPECT_THAT(env->GetStringList("hosts"), ElementsAre("a", "b", "c"));
  absl::StatusOr<Config> flags = Config::Load(
      schema, {.environment = std::vector<std::string>{"FORGE_HOSTS=a,b"}, .args = {"--hosts=z"}});
  ASSERT_TRUE(flags.ok()) << flags.status();
  EXPECT_THAT(flags->GetStringList("hosts"), ElementsAre("z"));
}

TEST(ConfigCommandTest, ShortFlagsTakeTheirValueLikeLongOnes) {
  absl::StatusOr<Config> config = Config::Load(
      CommandSchema(), {.environment = std::vector<std::string>{}, .args = {"job-1", "-o", "out"}});
  ASSERT_TRUE(config.ok()) << config.status();
  EXPECT_EQ(config->GetString("output"), "out");
  EXPECT_EQ(config->Origin("output"), "flag -o");
  EXPECT_THAT(config->positional_args(), ElementsAre("job-1"));

  absl::StatusOr<Config> unknown = Config::Load(
      CommandSchema(), {.environment = std::vector<std::string>{}, .args = {"-x", "-o"}});
  ASSERT_FALSE(unknown.ok());
  EXPECT_THAT(absl::StrSplit(unknown.status().message(), '\n'),
              ElementsAre("config: unknown flag -x (flags are written --key=value or --key value)",
                          "config: flag -o needs a value"));
}

TEST(ConfigCommandTest, FlagOnlyKeysIgnoreTheEnvironmentAndAreErrorsInAFile) {
  testing::TempDir dir;
  const std::string path = dir.path() + "/client.conf";
  std::ofstream(path) << "server = \"h:1\"\njson = true\n";
  absl::StatusOr<Config> config = Config::Load(
      CommandSchema(),
      {.file = path, .environment = std::vector<std::string>{"FORGE_JSON=1", "FORGE_SERVER=e:2"}});
  ASSERT_FALSE(config.ok());
  EXPECT_EQ(config.status().message(),
            absl::StrCat("config: \"json\" in ", path,
                         ":2 can only be given as a flag (--json)"));

  absl::StatusOr<Config> env = Config::Load(
      CommandSchema(), {.environment = std::vector<std::string>{"FORGE_JSON=1", "FORGE_LABEL=x"}});
  ASSERT_TRUE(env.ok()) << env.status();
  EXPECT_FALSE(env->GetBool("json"));
  EXPECT_THAT(env->GetStringList("label"), IsEmpty());
}

TEST(ConfigClosestNameTest, SuggestsOnlyNamesWithinAThirdOfTheLength) {
  const std::vector<std::string> commands = {"submit", "status", "results", "cancel"};
  EXPECT_EQ(ClosestName("sumbit", commands), "submit");  // a swap is one edit
  EXPECT_EQ(ClosestName("stats", commands), "status");
  EXPECT_EQ(ClosestName("resluts", commands), "results");
  EXPECT_EQ(ClosestName("list", commands), std::nullopt);
  EXPECT_EQ(ClosestName("x", commands), std::nullopt);
}

TEST(ConfigDurationTest, AcceptsNumbersWithUnits) {
  const std::pair<std::string, absl::Duration> cases[] = {
      {"500ms", absl::Milliseconds(500)}, {"2s", absl::Seconds(2)},
      {"1m", absl::Minutes(1)},           {"1h30m", absl::Minutes(90)},
      {"1.5s", absl::Milliseconds(1500)}, {"250us", absl::Microseconds(250)},
      {"10ns", absl::Nanoseconds(10)},    {"0", absl::ZeroDuration()},
      {"1m30s", absl::Seconds(90)},
  };
  ConfigSchema schema;
  schema.Duration("timeout", absl::Seconds(1), "A timeout.");
  for (const auto& [text, expected] : cases) {
    absl::StatusOr<Config> config = Config::Load(
        schema, {.environment = std::vector<std::string>{}, .args = {"--timeout=" + text}});
    ASSERT_TRUE(config.ok()) << text << ": " << config.status();
    EXPECT_EQ(config->GetDuration("timeout"), expected) << text;
  }
}

TEST(ConfigDurationTest, RejectsNumbersWithoutUnitsAndUnknownUnits) {
  ConfigSchema schema;
  schema.Duration("timeout", absl::Seconds(1), "A timeout.");
  for (const std::string text : {"500", "", "ms", "2 s", "1d", "fast", "1.5.5s"}) {
    absl::StatusOr<Config> config = Config::Load(
        schema, {.environment = std::vector<std::string>{}, .args = {"--timeout=" + text}});
    EXPECT_FALSE(config.ok()) << text;
  }
}

// The error lines of loading a schema with mistakes in it; none if it loads.
std::vector<std::string> SchemaErrors(const ConfigSchema& schema) {
  absl::StatusOr<Config> config = Config::Load(schema, {.environment = std::vector<std::string>{}});
  if (config.ok()) return {};
  return absl::StrSplit(config.status().message(), '\n');
}

TEST(ConfigSchemaTest, MistakesInTheSchemaAreReported) {
  ConfigSchema schema;
  schema.Int64("redis.port", 70000, "Port.", {.min = 1, .max = 65535})
      .String("redis.port", "", "Again.")
      .String("bad key", "", "Space in the name.")
      .String("a.b_c", "", "One.")
      .String("a_b.c", "", "Collides in the environment.")
      .Enum("log.format", {"text", "json"}, "xml", "Format.")
      .Int64("pool.size", 4, "Size.", {.min = 8, .max = 2})
      .Duration("lease.timeout", absl::Seconds(-1), "Lease.");
  EXPECT_THAT(
      SchemaErrors(schema),
      ElementsAre("config schema: default of redis.port (70000) is above the maximum 65535",
                  "config schema: key \"redis.port\" is declared twice",
                  "config schema: invalid key name \"bad key\"",
                  "config schema: keys \"a.b_c\" and \"a_b.c\" both read FORGE_A_B_C",
                  "config schema: default of log.format (\"xml\") is not one of: text, json",
                  "config schema: pool.size has an empty range [8, 2]",
                  "config schema: default of pool.size (4) is below the minimum 8",
                  "config schema: default of lease.timeout (-1s) is a negative duration"));
}

TEST(ConfigSchemaTest, MistakesInAliasesAndShortFlagsAreReported) {
  ConfigSchema schema;
  schema.FlagOnly()
      .String("output", "", "Out.")
      .ShortFlag('o')
      .Alias("out")
      .String("owner", "", "Owner.")
      .ShortFlag('o')
      .Alias("out")
      .Alias("bad name")
      .String("out", "", "Taken by an alias.");
  EXPECT_THAT(
      SchemaErrors(schema),
      ElementsAre("config schema: FlagOnly before any key",
                  "config schema: short flag -o of \"owner\" is already taken by \"output\"",
                  "config schema: alias \"out\" of \"owner\" is already taken by \"output\"",
                  "config schema: invalid alias \"bad name\"",
                  "config schema: key \"out\" is already an alias of \"output\""));
}

TEST(ConfigSchemaTest, HelpTextNamesListsFlagOnlyKeysAndDeprecatedSpellings) {
  EXPECT_EQ(RenamedSchema().HelpText(),
            "lease.max-candidates (int64; default 32; env FORGE_LEASE_MAX_CANDIDATES)\n"
            "    Most candidates per lease.\n"
            "    Deprecated spelling: lease.max_candidates\n"
            "shutdown.grace (duration; default 5s; env FORGE_SHUTDOWN_GRACE)\n"
            "    Grace after SIGTERM.\n"
            "    Deprecated spelling: shutdown-grace, grace_period\n");
  EXPECT_EQ(CommandSchema().HelpText(),
            "server (string; default \"\"; env FORGE_SERVER)\n"
            "    Coordinator address.\n"
            "label (string, repeatable; default []; flag only)\n"
            "    Label K=V.\n"
            "output (string; default \"\"; flag only)\n"
            "    Output directory.\n"
            "json (bool; default false; flag only)\n"
            "    Print JSON.\n");
}

TEST(ConfigSchemaTest, HelpTextListsKeysTypesDefaultsAndHelp) {
  EXPECT_EQ(TestSchema().HelpText(),
            "redis.host (string; default \"127.0.0.1\"; env FORGE_REDIS_HOST)\n"
            "    Host of the Redis server.\n"
            "redis.port (int64 in [1, 65535]; default 6379; env FORGE_REDIS_PORT)\n"
            "    TCP port of the Redis server.\n"
            "search.exploration (double; default 1.4; env FORGE_SEARCH_EXPLORATION)\n"
            "    MCTS exploration constant.\n"
            "worker.emulated (bool; default false; env FORGE_WORKER_EMULATED)\n"
            "    Run the emulated backend instead of a GPU.\n"
            "lease.timeout (duration; default 30s; env FORGE_LEASE_TIMEOUT)\n"
            "    How long a worker may hold a lease.\n"
            "log.format (one of text|json; default \"text\"; env FORGE_LOG_FORMAT)\n"
            "    Log line format.\n"
            "worker.compile_threads (int64 >= 1; default 2; env FORGE_WORKER_COMPILE_THREADS)\n"
            "    Size of the compile pool.\n");
}

TEST(ConfigDeathTest, GetterWithTheWrongTypeOrAnUndeclaredKeyAborts) {
  absl::StatusOr<Config> config =
      Config::Load(TestSchema(), {.environment = std::vector<std::string>{}});
  ASSERT_TRUE(config.ok()) << config.status();
  EXPECT_DEATH(config->GetInt64("redis.host"),
               R"(Config::GetInt64\("redis.host"\): the key is of type string)");
  EXPECT_DEATH(config->GetString("redis.hots"),
               R"(Config::GetString\("redis.hots"\): no such key in the schema)");
}

}  // namespace
}  // namespace forge
