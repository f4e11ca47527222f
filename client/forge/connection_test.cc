#include "client/forge/connection.h"

#include <chrono>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "client/forge/exit_code.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/support/subprocess.h"

namespace forge::client {
namespace {

using ::testing::HasSubstr;

class ConnectionSettingsTest : public ::testing::Test {
 protected:
  // An environment whose default config file is this test's (XDG_CONFIG_HOME), plus `extra`.
  std::vector<std::string> Environment(std::vector<std::string> extra = {}) const {
    extra.push_back(absl::StrCat("XDG_CONFIG_HOME=", directory_.path()));
    return extra;
  }

  void WriteDefaultConfig(const std::string& text) const {
    std::filesystem::create_directories(absl::StrCat(directory_.path(), "/forge"));
    std::ofstream(absl::StrCat(directory_.path(), "/forge/config")) << text;
  }

  testing::TempDir directory_;
};

TEST_F(ConnectionSettingsTest, FlagsBeatEnvironmentBeatsTheDefaultConfigFile) {
  WriteDefaultConfig("server = \"file-host:1\"\ntimeout = 7s\n");
  absl::StatusOr<ConnectionSettings> from_file = LoadConnectionSettings({}, Environment());
  ASSERT_TRUE(from_file.ok()) << from_file.status();
  EXPECT_EQ(from_file->server, "file-host:1");
  EXPECT_THAT(from_file->server_origin, HasSubstr("config"));
  EXPECT_EQ(from_file->call_timeout, absl::Seconds(7));
  EXPECT_EQ(from_file->connect_timeout, absl::Seconds(5));

  absl::StatusOr<ConnectionSettings> from_env =
      LoadConnectionSettings({}, Environment({"FORGE_SERVER=env-host:2"}));
  ASSERT_TRUE(from_env.ok()) << from_env.status();
  EXPECT_EQ(from_env->server, "env-host:2");
  EXPECT_EQ(from_env->server_origin, "env FORGE_SERVER");
  EXPECT_EQ(from_env->call_timeout, absl::Seconds(7));  // still from the file

  absl::StatusOr<ConnectionSettings> from_flag =
      LoadConnectionSettings({"--server", "flag-host:3", "--connect-timeout=250ms"},
                             Environment({"FORGE_SERVER=env-host:2"}));
  ASSERT_TRUE(from_flag.ok()) << from_flag.status();
  EXPECT_EQ(from_flag->server, "flag-host:3");
  EXPECT_EQ(from_flag->server_origin, "flag --server");
  EXPECT_EQ(from_flag->connect_timeout, absl::Milliseconds(250));
}

TEST_F(ConnectionSettingsTest, ConfigFlagNamesAnotherFile) {
  const std::string path = absl::StrCat(directory_.path(), "/team.conf");
  std::ofstream(path) << "server = \"team-host:9\"\ntls = true\ntls-ca = \"/etc/ca.pem\"\n";
  absl::StatusOr<ConnectionSettings> settings =
      LoadConnectionSettings({"--config", path}, Environment());
  ASSERT_TRUE(settings.ok()) << settings.status();
  EXPECT_EQ(settings->server, "team-host:9");
  EXPECT_TRUE(settings->tls);
  EXPECT_EQ(settings->tls_ca_file, "/etc/ca.pem");

  EXPECT_FALSE(LoadConnectionSettings({"--config", path + ".missing"}, Environment()).ok());
}

TEST_F(ConnectionSettingsTest, MistakesAreExplained) {
  absl::StatusOr<ConnectionSettings> none = LoadConnectionSettings({}, Environment());
  EXPECT_EQ(none.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(none.status().message(), HasSubstr("FORGE_SERVER"));
  EXPECT_THAT(none.status().message(), HasSubstr(directory_.path()));

  absl::StatusOr<ConnectionSettings> bad_duration =
      LoadConnectionSettings({"--server=h:1", "--timeout=soon"}, Environment());
  EXPECT_EQ(bad_duration.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(bad_duration.status().message(), HasSubstr("timeout"));

  absl::StatusOr<ConnectionSettings> plaintext_token =
      LoadConnectionSettings({"--server=h:1"}, Environment({"FORGE_TOKEN=secret"}));
  EXPECT_EQ(plaintext_token.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(plaintext_token.status().message(), HasSubstr("tls"));
}

TEST_F(ConnectionSettingsTest, ACommandsLineHasItsOwnFlagsAndArgumentsBesideTheConnection) {
  WriteDefaultConfig("timeout = 7s\n");
  ConfigSchema schema;
  schema.Bool("json", false, "Print JSON.").FlagOnly();
  AddConnectionKeys(schema);
  absl::StatusOr<ConnectionSettings> settings = LoadCommandConnectionSettings(
      schema, {"job-1", "--json", "--server=h:1"}, Environment());
  ASSERT_TRUE(settings.ok()) << settings.status();
  EXPECT_EQ(settings->server, "h:1");
  EXPECT_EQ(settings->call_timeout, absl::Seconds(7));  // the default config file still counts

  WriteDefaultConfig("json = true\n");
  absl::StatusOr<ConnectionSettings> flag_in_file =
      LoadCommandConnectionSettings(schema, {"--server=h:1"}, Environment());
  EXPECT_EQ(flag_in_file.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(flag_in_file.status().message(), HasSubstr("can only be given as a flag (--json)"));
}

TEST(JobClientTest, UnreachableCoordinatorIsUnavailableNamingTheAddress) {
  const std::string address = absl::StrCat("127.0.0.1:", testing::PickFreePort());
  const absl::Time start = absl::Now();
  absl::StatusOr<std::unique_ptr<JobClient>> client = JobClient::Connect(
      {.server = address, .server_origin = "flag --server", .connect_timeout = absl::Seconds(3)});
  EXPECT_LT(absl::Now() - start, absl::Seconds(4));
  ASSERT_FALSE(client.ok());
  EXPECT_EQ(client.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_THAT(client.status().message(), HasSubstr(address));
  EXPECT_THAT(client.status().message(), HasSubstr("UNAVAILABLE"));
  EXPECT_EQ(ExitCodeFor(client.status()), kExitUnreachable);
}

}  // namespace
}  // namespace forge::client
